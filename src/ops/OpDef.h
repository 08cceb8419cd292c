// OpDef: the per-op rules table (type rule, gradient rule) built from Ops.def.
#pragma once

#include <optional>

#include <symjax/ir/Node.h>
#include <symjax/Tensor.h>

#include <string>
#include <vector>

namespace sj::detail {

/// What a type rule sees: the op, its attributes, the input types, and (when known) the input
/// nodes, used to name the user's tensors in messages. At call time the reference backend runs
/// the same rule on concrete shapes (`at_runtime`), which binds -1 dims and checks them.
struct InferCtx {
    Op op;
    const Attrs& attrs;
    const std::vector<TensorType>& in;
    const std::vector<NodePtr>* nodes = nullptr;
    bool at_runtime = false;
    /// The node's target layout mask (Note [Target layouts] in src/core/Node.cpp).
    int64_t layout = 0;

    template <class A> const A& attr() const { return std::get<A>(attrs); }
    /// The user's name for input i (or a short description).
    std::string name(size_t i) const;
    /// "add(x, W)": the op applied to its inputs' names, for the start of a message.
    std::string where() const;
    /// The static (build-time) shape of input i; equals in[i].shape unless at_runtime.
    const Shape& static_shape(size_t i) const;
};

using InferFn = TensorType (*)(const InferCtx&);
/// Adds to `din[i]` the gradient for input i given the gradient `g` of the node's output.
/// Entries left undefined mean "no gradient" (zero).
using GradFn = void (*)(const Node& n, const Tensor& g, std::vector<Tensor>& din);

/// What a batching rule sees (vmap, Note [Batching rules] in src/api/Vmap.cpp): the node, its
/// inputs in the batched program (`in[i]` carries the batch as its dim 0 when `batched[i]`, else
/// it is the node's own input i, unchanged), and the batch size (-1: bound at call time).
struct BatchArgs {
    const Node& n;
    std::vector<Tensor> in;
    std::vector<bool> batched;
    int64_t size = -1;
    /// A batched tensor (dim 0 is the batch), for rules that need the batch size at call time.
    Tensor ref;
};
/// The node's value for every batch element, stacked along a new dim 0; or an undefined Tensor
/// when this case has no rule (vmap then loops over the batch with `map`, which is always right).
/// Called only when some input is batched (and for random draws traced inside the function).
using BatchFn = Tensor (*)(const BatchArgs& b);

/// The dtypes an op computes on (the `dtypes` column of Ops.def). Inputs with a fixed role
/// (where's condition, gather's indices) are checked by the op's rule on their own.
enum class DTypeClass : uint8_t {
    Any,     // every dtype, bool included
    Numeric, // every dtype but bool
    Float,   // f32, f64
    Bool,
    Int, // signed or unsigned integers
};

/// How the fusion pass treats an op (the `fusion` column of Ops.def; Fusion.cpp's classify()).
enum class FusionClass : uint8_t {
    Leaf,        // a function input, variable, constant or counter: a buffer that exists
    Elementwise, // fused into kernels, recomputed where cheap
    Movement,    // an index map: free inside a kernel (address arithmetic)
    Reduce,      // a kernel's reduction, absorbing its elementwise producers
    View,        // a reshape: a new view of its input's buffer
    Dot,         // a GEMM library call (float dtypes), else Fallback
    Window,      // a conv/pool library call (the dtypes and ranks the library takes), else Fallback
    Fallback,    // the op's reference kernel, alone
};

struct OpDef {
    const char* name = nullptr;
    int arity = 0;
    uint32_t traits = 0;
    DTypeClass dtypes = DTypeClass::Any;
    uint32_t shape_only = 0; // bit i: input i only gives a shape
    FusionClass fusion = FusionClass::Fallback;
    InferFn infer = nullptr;
    GradFn grad = nullptr; // nullptr: the op is not differentiable (gradient is zero)
    BatchFn batch = nullptr; // nullptr: vmap loops over the batch (map)
};

/// The table, filled once by the family files' register functions.
const OpDef& op_def(Op op);

// Each family file fills its rows (called once, in order, by the table's initialiser).
void register_leaf_ops(OpDef* table);
void register_elementwise_ops(OpDef* table);
void register_reduce_ops(OpDef* table);
void register_sort_ops(OpDef* table);
void register_movement_ops(OpDef* table);
void register_indexing_ops(OpDef* table);
void register_linalg_ops(OpDef* table);
void register_conv_ops(OpDef* table);
void register_random_ops(OpDef* table);
void register_control_flow_ops(OpDef* table);
void register_collective_ops(OpDef* table);

/// The op's row facts (the same as op_def(op)'s, without building the rules table).
DTypeClass dtype_class(Op op);
FusionClass fusion_class(Op op);
uint32_t shape_only_mask(Op op);

/// Checks that input i's dtype is in the op's DTypeClass, or throws TypeError naming the op (and
/// input i when `name_input`).
void check_dtype_class(const InferCtx& c, size_t i, bool name_input = false);

/// Throws ShapeError at build time and InputError at call time (the shapes were bound by the
/// caller's values then, so the mistake is in the values passed).
[[noreturn]] void shape_fail(const InferCtx& c, const std::string& msg);
/// Two dims that may be equal: equal, or either unknown (-1).
inline bool dims_agree(int64_t a, int64_t b) { return a == b || a == -1 || b == -1; }

/// The gradients of a region's inputs given the cotangents of its results (one per result
/// index, undefined: none), as one backward region (Note [Gradients of regions] in
/// src/api/ControlFlow.cpp). vjp calls it once per region, with every sibling's cotangent.
std::vector<Tensor> region_vjp(const Node& n, const std::vector<Tensor>& cotangents);

// Helpers for batching rules (src/api/Vmap.cpp).
/// x (batched along dim 0) with dim 0 moved to `axis` of the result.
Tensor move_batch_axis(const Tensor& x, int64_t axis);
/// x with its dim `axis` moved to dim 0 (the other dims in order).
Tensor move_batch_axis_to_front(const Tensor& x, int64_t axis);
/// The unbatched x repeated along a new dim 0 of the batch's size.
Tensor broadcast_batch(const BatchArgs& b, const Tensor& x);
/// Input i of the rule batched along dim 0 (repeated when it is not batched).
Tensor batched_input(const BatchArgs& b, size_t i);
/// The batched x [B, N, rest...] as [B * N, rest...], for ops that map over their own first dim
/// (conv, pool); undefined when the reshape cannot be written (more than one dim unknown).
Tensor fold_batch(const Tensor& x);
/// The inverse of fold_batch for the node's result: y [B * N, rest...] as [B, N, rest...], where
/// [N, rest...] is the node's own shape; undefined when it cannot be written.
Tensor unfold_batch(const BatchArgs& b, const Tensor& y);
/// The rule of ops that treat a leading batch dim like any other (one_hot, check_index,
/// all_reduce, broadcast_from): the op on the batched input, attributes unchanged.
Tensor batch_as_is(const BatchArgs& b);
/// The rule of ops that act on each element independently: the batched inputs get size-1 dims
/// after the batch, so that broadcasting lines them up with the unbatched ones.
Tensor batch_elementwise(const BatchArgs& b);

/// A mark in node creation order: the nodes made after it have larger ids (what a trace made).
uint64_t trace_mark();
struct Body;
/// The body's results with its parameters replaced by `args`: a copy of the body in the caller's
/// graph (src/api/ControlFlow.cpp).
std::vector<Tensor> instantiate_body(const Body& b, const std::vector<Tensor>& args);

/// Shorthand for rules: the node's input i as a Tensor.
inline Tensor in(const Node& n, size_t i) { return Tensor(n.input(i)); }
/// Accumulates g into slot (sum when already set).
void accumulate(Tensor& slot, const Tensor& g);

} // namespace sj::detail

namespace sj::detail {
/// True when input i of n only provides a shape (the `like` input of broadcast, reshape, philox
/// and the conv/pool backward ops): its values are never read, so it need not be computed.
/// Read from the `shape_only` column of Ops.def.
inline bool shape_only_input(const Node& n, size_t i) {
    return i < 32 && (shape_only_mask(n.op()) >> i & 1u) != 0;
}
/// The number of elements a sum over `axes` (empty: all) adds, as a scalar of `dtype`: a
/// constant when those dims are known, else a sum of ones counted at call time (mean, var and
/// the one-pass variance, Note [Variance in one pass] in src/compiler/Specialize.cpp).
Tensor count_over(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims, DType dtype);
/// slice(), where bit i of `index_dims` marks dim i as picked by a single index `x[k]`: on a dim
/// unknown when the graph is built, k out of range is an InputError naming the index, the dim
/// and x when the function is called (SliceAttrs::index_dims).
Tensor index_slice(const Tensor& x, const std::vector<int64_t>& start,
                   const std::vector<int64_t>& stop, const std::vector<int64_t>& step,
                   uint64_t index_dims);
/// A range of negative step (start, stop, step) as the forward range of the flipped dim that
/// picks the same elements in the same order (Note [Negative steps] in Movement.cpp).
struct ForwardRange {
    int64_t start, stop, step;
};
ForwardRange forward_range(int64_t start, int64_t stop, int64_t step);
/// take_along_axis(x, idx, axis) for indices known to be in [0, size) (Note [Taking along an
/// axis] in src/ops/Indexing.cpp); idx has x's shape but along axis.
Tensor take_along_axis_unchecked(const Tensor& x, const Tensor& idx, int64_t axis);
/// The size of dim `axis` of x as an i64 scalar: a constant when known, else counted when the
/// function runs (0 when another dim of x is 0).
Tensor runtime_dim(const Tensor& x, int64_t axis);
/// x[idx] for a subscript with at least one tensor index (NumPy advanced indexing; the integers
/// of such a subscript are advanced indices too). Tensor::operator[] calls it (src/api/Indexed.cpp).
Tensor advanced_subscript(const Tensor& x, const std::vector<Index>& idx);
/// The constant of `value` interned by value (ConstantAttrs::id 0): what the compiler merges
/// equal constants into and what its rewrites make (Note [Constant identity]).
NodePtr shared_constant(const Array& value);
/// The interned twin of the constant node c (c itself when it is interned).
NodePtr shared_constant(const Node& c);
/// Builds (or finds) the node op(inputs) with attrs and returns its handle.
Tensor make(Op op, const std::vector<Tensor>& inputs, Attrs attrs = NoAttrs{});
/// True when where(c, a, b) is a relu or a leaky relu of b whose mask c can be read from the
/// output: c = b <= 0 and a is the constant 0 or b * s with s > 0 a constant (Note [Relu masks]
/// in src/ops/Elementwise.cpp).
bool output_mask(const Node& where);
/// Sums g down to `shape` (the static shape of an input that was broadcast to g's shape):
/// leading extra dims and dims that are 1 in `shape` are reduced.
Tensor sum_to_shape(const Tensor& g, const Shape& shape);
/// Broadcasts the static shapes a and b (NumPy rules, -1 matches anything), or throws.
Shape broadcast_shapes(const Shape& a, const Shape& b, const InferCtx& ctx);
/// When `to` is `from` with dims of size 1 inserted or removed (the other dims the same, in the
/// same order, at most one unknown on each side, which are then equal): for each dim of `to`,
/// the dim of `from` it is, -1 for an inserted 1. Empty otherwise. A reshape between such
/// shapes, or a broadcast, moves no element.
std::optional<std::vector<int64_t>> unit_dims_map(const Shape& from, const Shape& to);
} // namespace sj::detail
