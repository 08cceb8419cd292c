// Per-op attribute structs; a Node holds one of them in a variant.
#pragma once

#include <symjax/Array.h>
#include <symjax/DType.h>
#include <symjax/Dist.h> // dist::ReduceOp
#include <symjax/Shape.h>
#include <symjax/Tensor.h> // ScatterMode

#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

namespace sj {

namespace detail {
struct VariableState;
struct Region;
} // namespace detail

/// Each attribute struct lists its fields once with SJ_FIELDS; equality, hashing and printing
/// are derived from that list.
#define SJ_FIELDS(...)                                                                             \
    auto tie() const { return std::tie(__VA_ARGS__); }                                             \
    static constexpr const char* kFieldNames = #__VA_ARGS__

struct NoAttrs {
    auto tie() const { return std::tuple<>(); }
    static constexpr const char* kFieldNames = "";
};
/// Placeholder: a function input. `id` makes every placeholder distinct.
struct PlaceholderAttrs {
    uint64_t id = 0;
    DType dtype = DType::F32;
    Shape shape;
    SJ_FIELDS(id, dtype, shape);
};
/// Variable: persistent state; the node keeps the state alive.
struct VariableAttrs {
    std::shared_ptr<detail::VariableState> state;
    SJ_FIELDS(state);
};
/// Constant: the value itself (compared by content) and an identity. A constant the user makes
/// (constant(), scalar(), ones(), `x * 3.0`...) gets a unique `id`, so it is a leaf of its own:
/// gradients and clone keyed on it never touch an equal constant (Theano's semantics). The
/// compiler merges equal constants into the one with `id` 0, which is interned by value
/// (Note [Constant identity] in src/compiler/MergeConstants.h).
struct ConstantAttrs {
    Array value;
    uint64_t content_hash = 0;
    uint64_t id = 0;
    SJ_FIELDS(content_hash, id, value);
};
struct CastAttrs {
    DType to = DType::F32;
    SJ_FIELDS(to);
};
/// Reductions over `axes` (sorted, non-negative); arg-reductions use a single axis.
struct ReduceAttrs {
    std::vector<int64_t> axes;
    bool keepdims = false;
    SJ_FIELDS(axes, keepdims);
};
/// Reshape target: at most one -1, meaning "inferred from the size". With a second input
/// `like` (same rank as the target), every -1 instead takes like's dim at call time.
struct ShapeAttrs {
    Shape shape;
    SJ_FIELDS(shape);
};
/// Broadcast (XLA's broadcast_in_dim): operand dim i becomes output dim dims[i] (increasing);
/// it must be 1 or equal to that output dim. Output dims of -1 take the dim of the optional
/// second input `like` (same rank as the output) or, when mapped, of the operand, at call time.
struct BroadcastAttrs {
    Shape shape;
    std::vector<int64_t> dims;
    SJ_FIELDS(shape, dims);
};
/// Permute (a permutation) and flip (the axes to reverse).
struct AxesAttrs {
    std::vector<int64_t> axes;
    SJ_FIELDS(axes);
};
/// Slice per dim, Python style: start/stop may be negative (from the end) and stop may be
/// Index::kEnd-like INT64_MAX; step > 0. Resolved against the concrete dim by slice_bounds().
/// Bit i of `index_dims`: dim i was picked by a single index (`x[k]`, start = k, stop = k + 1, or
/// the end for k = -1), which must be in [-size, size) when the dim's size is bound at call time
/// (a slice would clamp). A negative step is a flip first (Note [Negative steps], Movement.cpp).
struct SliceAttrs {
    std::vector<int64_t> start, stop, step;
    uint64_t index_dims = 0;
    SJ_FIELDS(start, stop, step, index_dims);
};
/// Pad per dim: lo, hi (>= 0) and interior (>= 0, elements inserted between neighbours).
struct PadAttrs {
    std::vector<int64_t> lo, hi, interior;
    double value = 0.0;
    SJ_FIELDS(lo, hi, interior, value);
};
/// Concat, gather, scatter_add and cumsum act along one axis.
struct AxisAttrs {
    int64_t axis = 0;
    bool reverse = false; // cumsum only: accumulate from the end
    SJ_FIELDS(axis, reverse);
};
/// sort: along `axis`, stable; ascending puts NaN last, descending is the reverse order (NaN
/// first) with equal keys still in their original order. `k` >= 0 keeps the first k of the
/// order (top-k); -1 keeps every element. `indices` (one input only): the result is the keys'
/// positions (i64) in that order, argsort, instead of the keys.
struct SortAttrs {
    int64_t axis = 0;
    bool descending = false;
    int64_t k = -1;
    bool indices = false;
    SJ_FIELDS(axis, descending, k, indices);
};
/// scatter: the axis and the combiner (never Add: that is scatter_add).
struct ScatterAttrs {
    int64_t axis = 0;
    ScatterMode mode = ScatterMode::Set;
    SJ_FIELDS(axis, mode);
};
/// dynamic_slice: the sizes of the window.
struct DynamicSliceAttrs {
    Shape sizes;
    SJ_FIELDS(sizes);
};
struct OneHotAttrs {
    int64_t depth = 0;
    DType dtype = DType::F32;
    SJ_FIELDS(depth, dtype);
};
/// check_index: indices must lie in [0, depth), or equal `ignore` when `has_ignore`, or (with
/// `negative`, NumPy's negative indices, as subscripts take them) lie in [-depth, 0); `what`
/// starts the error message ("nn::losses::sparse_softmax_crossentropy_logits: label").
struct CheckIndexAttrs {
    int64_t depth = 0;
    bool has_ignore = false;
    int64_t ignore = 0;
    std::string what;
    bool negative = false;
    SJ_FIELDS(depth, has_ignore, ignore, what, negative);
};
/// dot_general: result dims are batch..., lhs free..., rhs free... (XLA's convention).
struct DotAttrs {
    std::vector<int64_t> lhs_batch, rhs_batch, lhs_contract, rhs_contract;
    SJ_FIELDS(lhs_batch, rhs_batch, lhs_contract, rhs_contract);
};
/// conv, conv_backward_data and conv_backward_filter: the forward convolution's geometry, one
/// entry per spatial dim (pads >= 0, strides and dilation >= 1). Per dim the forward output has
/// floor((in + pad_lo + pad_hi - (k - 1) * dilation - 1) / stride) + 1 elements. `groups` splits
/// the channels (groups == C: depthwise). `result_spatial` is the spatial size of a backward op's
/// result (backward_data: the forward's input; backward_filter: the filter), which the geometry
/// does not fix when stride > 1 (a -1 entry takes the dim of the op's `like` input at call
/// time); it is empty for conv. groups 0: the count follows the channels at call time, each
/// group `group_in` input and `group_out` output channels (vmap's per-example filters with a
/// batch of unknown size, Note [Groups that follow the batch] in src/ops/Conv.cpp);
/// conv_groups() gives the count.
struct ConvAttrs {
    std::vector<int64_t> strides, pad_lo, pad_hi, dilation;
    int64_t groups = 1;
    Shape result_spatial;
    int64_t group_in = 0, group_out = 0; // with groups 0: the channels of each group
    SJ_FIELDS(strides, pad_lo, pad_hi, dilation, groups, result_spatial, group_in, group_out);
};
/// The group count of a conv op whose forward input has `in_channels` channels (-1: unknown, and
/// then so is the count when it follows the channels).
inline int64_t conv_groups(const ConvAttrs& a, int64_t in_channels) {
    if (a.groups > 0)
        return a.groups;
    return in_channels >= 0 && a.group_in > 0 ? in_channels / a.group_in : -1;
}
/// `a` with its group count fixed for a forward input of `in_channels` (known) channels.
inline ConvAttrs with_groups(ConvAttrs a, int64_t in_channels) {
    a.groups = conv_groups(a, in_channels);
    a.group_in = a.group_out = 0;
    return a;
}
enum class PoolKind : uint8_t { Max, Avg };
/// pool, max_pool_backward and avg_pool_backward: window, strides and pads per spatial dim (pads
/// smaller than the window, so every window holds an element of the input). Average pooling
/// divides by the window size (count_include_pad) or by the number of input elements in the
/// window. `result_spatial`: avg_pool_backward's result (the forward's input; -1 entries follow
/// its `like` input at call time); else empty.
struct PoolAttrs {
    PoolKind kind = PoolKind::Max;
    std::vector<int64_t> window, strides, pad_lo, pad_hi;
    bool count_include_pad = true;
    Shape result_spatial;
    SJ_FIELDS(kind, window, strides, pad_lo, pad_hi, count_include_pad, result_spatial);
};
/// Solves op(A) X = B (left_side) or X op(A) = B, A triangular; op(A) = A or A^T.
struct TriangularSolveAttrs {
    bool left_side = true, lower = true, transpose_a = false, unit_diagonal = false;
    SJ_FIELDS(left_side, lower, transpose_a, unit_diagonal);
};
/// Philox4x32-10 bits: a per-op key (from the seed) and the output shape (-1 dims take the
/// dim of the optional second input `like`, same rank, at call time).
struct PhiloxAttrs {
    uint64_t key = 0;
    Shape shape;
    SJ_FIELDS(key, shape);
};

/// scan, while_loop and cond: the traced bodies and their wiring, shared by every node of one
/// loop (include/symjax/ir/ControlFlow.h), and which of the loop's results this node is
/// (Note [Structured ops] in src/ops/ControlFlow.cpp).
struct RegionAttrs {
    std::shared_ptr<const detail::Region> region;
    int64_t output = 0;
    SJ_FIELDS(region, output);
};

/// all_reduce, all_gather, broadcast_from, reduce_scatter: the reduction (all_reduce and
/// reduce_scatter), the root (broadcast_from) and the number of processes the node was built for
/// (it fixes all_gather's and reduce_scatter's result shapes; running in another world is an
/// error).
struct CollectiveAttrs {
    dist::ReduceOp reduce = dist::ReduceOp::Sum;
    int64_t root = 0;
    int64_t world = 1;
    SJ_FIELDS(reduce, root, world);
};

using Attrs = std::variant<NoAttrs, PlaceholderAttrs, VariableAttrs, ConstantAttrs, CastAttrs,
                           ReduceAttrs, ShapeAttrs, BroadcastAttrs, AxesAttrs, SliceAttrs, PadAttrs,
                           AxisAttrs, DynamicSliceAttrs, OneHotAttrs, CheckIndexAttrs, DotAttrs,
                           TriangularSolveAttrs, PhiloxAttrs, ConvAttrs, PoolAttrs, ScatterAttrs,
                           RegionAttrs, CollectiveAttrs, SortAttrs>;

/// "set", "add", "mul", "min", "max".
const char* scatter_mode_name(ScatterMode m);

bool attrs_equal(const Attrs& a, const Attrs& b);
uint64_t attrs_hash(const Attrs& a);
/// "axes=[0, 1], keepdims=1" (empty for NoAttrs).
std::string attrs_str(const Attrs& a);

} // namespace sj
