// Convolution and pooling ops (conv, its backward data/filter ops, pool and its backward ops):
// type rules, gradient rules, Padding and the user-facing builders.
#include "ChannelBlocking.h"
#include "OpDef.h"

#include <symjax/Ops.h>
#include <symjax/ir/Layout.h>
#include <symjax/ir/Node.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <sstream>
#include <tuple>

namespace sj {
namespace detail {
namespace {

// Note [Conv and pool backward ops]
// The backward ops are primitives (not convolutions of flipped, dilated operands as in XLA) so a
// library runs them directly: oneDNN's convolution backward-data/weights and pooling backward.
// They carry the forward op's attributes, plus `result_spatial`: the spatial size of their
// result, which the forward geometry does not fix when stride > 1 (inputs of several sizes map
// to one output size). When that size is unknown at build time (-1 dims), the gradient rule
// passes the forward's input as a last, shape-only `like` input whose dims fill the -1 entries at
// call time (as reshape's `like`), so gradients build on fully dynamic shapes too.
// Every op here is linear in each input, and each backward op is the adjoint of a forward one:
//   <conv(x, w), dy> = <x, conv_backward_data(dy, w)> = <w, conv_backward_filter(x, dy)>
//   <avg_pool(x), dy> = <x, avg_pool_backward(dy)>
//   <max_pool'(x) v, dy> = <v, max_pool_backward(x, dy)>   (max_pool' is the selection at x)
// so their gradients are again ops of this family, and autodiff goes to any order.

int64_t known_or(int64_t a, int64_t b) { return a >= 0 ? a : b; }

Shape spatial(const Shape& s) { return Shape(s.begin() + std::min<size_t>(2, s.size()), s.end()); }

void check_same_dtype(const InferCtx& c, size_t i, size_t j) {
    SJ_CHECK(c.in[i].dtype == c.in[j].dtype, TypeError)
        << c.where() << ": dtypes " << dtype_name(c.in[i].dtype) << " and "
        << dtype_name(c.in[j].dtype) << " differ";
}

/// Input i has the layout [N, C, spatial...] with `nsp` spatial dims (nsp = 0: any >= 1).
void check_layout(const InferCtx& c, size_t i, size_t nsp, const char* layout) {
    const Shape& s = c.in[i].shape;
    bool ok = nsp ? s.size() == nsp + 2 : s.size() >= 3;
    if (!ok) {
        std::ostringstream os;
        os << c.where() << ": " << c.name(i) << " must have the layout " << layout;
        if (nsp) os << " with " << nsp << " spatial dims (rank " << nsp + 2 << ")";
        else os << " (rank >= 3)";
        os << ", got shape " << shape_str(s);
        shape_fail(c, os.str());
    }
}

void check_sizes(const InferCtx& c, const char* what, const Axes& v, size_t nsp, int64_t min) {
    SJ_CHECK(v.size() == nsp, ShapeError)
        << c.where() << ": " << what << " " << shape_str(v) << " must have one entry per spatial "
        << "dim (" << nsp << ")";
    for (int64_t e : v)
        SJ_CHECK(e >= min, ShapeError)
            << c.where() << ": " << what << " " << shape_str(v) << " must be >= " << min;
}

/// The like input's spatial dims fill the -1 entries of result_spatial.
Shape result_spatial(const InferCtx& c, const Shape& rs, size_t like, size_t nsp) {
    Shape out = rs;
    if (c.in.size() <= like) {
        SJ_CHECK(is_static(rs), ShapeError)
            << c.where() << ": result spatial dims " << shape_str(rs)
            << " must be known, or given at call time by a `like` input";
        return out;
    }
    const Shape& ls = c.in[like].shape;
    SJ_CHECK(ls.size() == nsp + 2, ShapeError)
        << c.where() << ": the shape source " << c.name(like) << " (shape " << shape_str(ls)
        << ") must have " << nsp << " spatial dims";
    for (size_t i = 0; i < nsp; ++i)
        if (out[i] < 0) out[i] = ls[2 + i];
    return out;
}

// ---- convolution geometry ----------------------------------------------------------------------

void check_conv_attrs(const InferCtx& c, const ConvAttrs& a, size_t nsp, bool backward) {
    check_sizes(c, "strides", a.strides, nsp, 1);
    check_sizes(c, "dilation", a.dilation, nsp, 1);
    check_sizes(c, "pads (lo)", a.pad_lo, nsp, 0);
    check_sizes(c, "pads (hi)", a.pad_hi, nsp, 0);
    SJ_CHECK(a.groups >= 1 || (a.groups == 0 && a.group_in >= 1 && a.group_out >= 1), ShapeError)
        << c.where() << ": feature_group_count (groups) must be >= 1, got " << a.groups;
    if (backward) check_sizes(c, "result spatial dims", a.result_spatial, nsp, -1);
}

/// The forward output size along spatial dim i for input size `in` and filter size `k`, or -1
/// when either is unknown. Throws when the dilated filter exceeds the padded input.
int64_t conv_out(const InferCtx& c, const ConvAttrs& a, size_t i, int64_t in, int64_t k) {
    if (in < 0 || k < 0) return -1;
    if (k == 0) {
        std::ostringstream os;
        os << c.where() << ": the filter has size 0 along spatial dim " << i;
        shape_fail(c, os.str());
    }
    int64_t padded = in + a.pad_lo[i] + a.pad_hi[i], extent = (k - 1) * a.dilation[i] + 1;
    if (padded < extent) {
        std::ostringstream os;
        os << c.where() << ": along spatial dim " << i << " the filter (size " << k
           << ", dilation " << a.dilation[i] << ": extent " << extent
           << ") is larger than the padded input (" << in << " + " << a.pad_lo[i] << " + "
           << a.pad_hi[i] << " = " << padded << ")";
        shape_fail(c, os.str());
    }
    return (padded - extent) / a.strides[i] + 1;
}

/// The channel count C of the input matches the filters' C / groups.
void check_channels(const InferCtx& c, int64_t ch, size_t ch_from, int64_t per_group,
                    size_t w_from, int64_t groups) {
    if (ch < 0 || per_group < 0 || ch == per_group * groups) return;
    std::ostringstream os;
    os << c.where() << ": " << c.name(ch_from) << " (shape " << shape_str(c.in[ch_from].shape)
       << ") has " << ch << " channels but the filters " << c.name(w_from) << " (shape "
       << shape_str(c.in[w_from].shape) << ") take " << per_group << " per group x " << groups
       << " groups = " << per_group * groups;
    shape_fail(c, os.str());
}

void check_filters_split(const InferCtx& c, int64_t o, size_t from, int64_t groups) {
    if (o < 0 || o % groups == 0) return;
    std::ostringstream os;
    os << c.where() << ": the " << o << " output channels of " << c.name(from) << " (shape "
       << shape_str(c.in[from].shape) << ") do not split into " << groups << " groups";
    shape_fail(c, os.str());
}

/// With groups that follow the channels (ConvAttrs::groups 0): `g` groups of the input's
/// channels must have group_out output channels each.
void check_group_outputs(const InferCtx& c, const ConvAttrs& a, int64_t o, size_t from, int64_t g) {
    if (a.groups > 0 || o < 0 || g < 0 || o == g * a.group_out)
        return;
    std::ostringstream os;
    os << c.where() << ": " << c.name(from) << " (shape " << shape_str(c.in[from].shape) << ") has "
       << o << " output channels but " << g << " groups of " << a.group_out << " take "
       << g * a.group_out;
    shape_fail(c, os.str());
}

/// The group count: ConvAttrs::groups, or when the count follows the channels (groups 0) `ch`,
/// the channels of operand `from`, over `per_group` (group_in or group_out); -1 when `ch` is
/// unknown. Throws when they do not split into such groups.
int64_t groups_from(const InferCtx& c, const ConvAttrs& a, int64_t ch, size_t from,
                    int64_t per_group) {
    if (a.groups > 0)
        return a.groups;
    if (ch < 0)
        return -1;
    if (ch % per_group != 0) {
        std::ostringstream os;
        os << c.where() << ": the " << ch << " channels of " << c.name(from) << " (shape "
           << shape_str(c.in[from].shape) << ") do not split into groups of " << per_group;
        shape_fail(c, os.str());
    }
    return ch / per_group;
}

/// dy's spatial dims equal the forward output computed from the input and filter sizes.
void check_dy_spatial(const InferCtx& c, size_t dy, const Shape& want, const std::string& from) {
    const Shape& s = c.in[dy].shape;
    for (size_t i = 0; i < want.size(); ++i)
        if (!dims_agree(s[2 + i], want[i])) {
            std::ostringstream os;
            os << c.where() << ": " << c.name(dy) << " has shape " << shape_str(s)
               << " but the forward op on " << from << " gives spatial dims " << shape_str(want);
            shape_fail(c, os.str());
        }
}

TensorType infer_conv(const InferCtx& c) {
    const auto& a = c.attr<ConvAttrs>();
    check_same_dtype(c, 0, 1);
    check_dtype_class(c, 0, /*name_input=*/true);
    check_layout(c, 0, 0, "[N, C, spatial...]");
    const Shape& xs = c.in[0].shape;
    size_t nsp = xs.size() - 2;
    check_layout(c, 1, nsp, "[O, C / groups, k...]");
    const Shape& ws = c.in[1].shape;
    check_conv_attrs(c, a, nsp, false);
    const int64_t g = groups_from(c, a, xs[1], 0, a.group_in);
    if (g > 0) {
        check_channels(c, xs[1], 0, ws[1], 1, g);
        check_filters_split(c, ws[0], 1, g);
        check_group_outputs(c, a, ws[0], 1, g);
    }
    Shape out{xs[0], ws[0]};
    for (size_t i = 0; i < nsp; ++i) out.push_back(conv_out(c, a, i, xs[2 + i], ws[2 + i]));
    return {c.in[0].dtype, out};
}

/// The checks both conv backward ops start with: two operands (`names`) and an optional shape
/// source, one float dtype, the layouts, the attrs. Returns the number of spatial dims.
size_t check_conv_backward(const InferCtx& c, const char* names, const char* layout0,
                           const char* layout1) {
    SJ_CHECK(c.in.size() == 2 || c.in.size() == 3, ShapeError)
        << c.where() << ": takes " << names << " and an optional shape source";
    check_same_dtype(c, 0, 1);
    check_dtype_class(c, 0, /*name_input=*/true);
    check_layout(c, 0, 0, layout0);
    size_t nsp = c.in[0].shape.size() - 2;
    check_layout(c, 1, nsp, layout1);
    check_conv_attrs(c, c.attr<ConvAttrs>(), nsp, true);
    return nsp;
}

// conv_backward_data(dy [N, O, out...], w [O, C / groups, k...][, like]) -> [N, C, src...]
TensorType infer_conv_backward_data(const InferCtx& c) {
    const auto& a = c.attr<ConvAttrs>();
    size_t nsp = check_conv_backward(c, "(dy, w)", "[N, O, spatial...]", "[O, C / groups, k...]");
    const Shape& ds = c.in[0].shape;
    const Shape& ws = c.in[1].shape;
    if (!dims_agree(ds[1], ws[0])) {
        std::ostringstream os;
        os << c.where() << ": " << c.name(0) << " (shape " << shape_str(ds) << ") has " << ds[1]
           << " channels but the filters " << c.name(1) << " (shape " << shape_str(ws)
           << ") have " << ws[0] << " outputs";
        shape_fail(c, os.str());
    }
    // (groups that follow the channels: from the output channels here)
    const int64_t o = known_or(ws[0], ds[1]);
    const int64_t g = groups_from(c, a, o, ws[0] >= 0 ? 1 : 0, a.group_out);
    if (g > 0) {
        check_filters_split(c, o, 1, g);
        check_group_outputs(c, a, o, 1, g);
    }
    if (a.groups == 0 && ws[1] >= 0 && ws[1] != a.group_in) {
        std::ostringstream os;
        os << c.where() << ": the filters " << c.name(1) << " (shape " << shape_str(ws) << ") take "
           << ws[1] << " input channels per group, not " << a.group_in;
        shape_fail(c, os.str());
    }
    Shape src = result_spatial(c, a.result_spatial, 2, nsp);
    Shape want;
    for (size_t i = 0; i < nsp; ++i) want.push_back(conv_out(c, a, i, src[i], ws[2 + i]));
    check_dy_spatial(c, 0, want, "an input of spatial dims " + shape_str(src));
    Shape out{ds[0], ws[1] >= 0 && g > 0 ? ws[1] * g : -1};
    out.insert(out.end(), src.begin(), src.end());
    return {c.in[0].dtype, out};
}

// conv_backward_filter(x [N, C, in...], dy [N, O, out...][, like]) -> [O, C / groups, k...]
TensorType infer_conv_backward_filter(const InferCtx& c) {
    const auto& a = c.attr<ConvAttrs>();
    size_t nsp = check_conv_backward(c, "(x, dy)", "[N, C, spatial...]", "[N, O, spatial...]");
    const Shape& xs = c.in[0].shape;
    const Shape& ds = c.in[1].shape;
    if (!dims_agree(xs[0], ds[0])) {
        std::ostringstream os;
        os << c.where() << ": batch sizes differ: " << c.name(0) << " has shape "
           << shape_str(xs) << ", " << c.name(1) << " has shape " << shape_str(ds);
        shape_fail(c, os.str());
    }
    if (xs[1] >= 0 && a.groups > 0 && xs[1] % a.groups != 0) {
        std::ostringstream os;
        os << c.where() << ": the " << xs[1] << " channels of " << c.name(0) << " (shape "
           << shape_str(xs) << ") do not split into " << a.groups << " groups";
        shape_fail(c, os.str());
    }
    const int64_t g = groups_from(c, a, xs[1], 0, a.group_in);
    if (g > 0) {
        check_filters_split(c, ds[1], 1, g);
        check_group_outputs(c, a, ds[1], 1, g);
    }
    Shape k = result_spatial(c, a.result_spatial, 2, nsp);
    for (size_t i = 0; i < nsp; ++i)
        SJ_CHECK(k[i] != 0, ShapeError) << c.where() << ": filter spatial dims " << shape_str(k)
                                        << " must be >= 1";
    Shape want;
    for (size_t i = 0; i < nsp; ++i) want.push_back(conv_out(c, a, i, xs[2 + i], k[i]));
    check_dy_spatial(c, 1, want, c.name(0) + " with filters of spatial dims " + shape_str(k));
    Shape out{ds[1], a.groups == 0 ? a.group_in : xs[1] >= 0 ? xs[1] / a.groups : -1};
    out.insert(out.end(), k.begin(), k.end());
    return {c.in[0].dtype, out};
}

// ---- pooling geometry --------------------------------------------------------------------------

void check_pool_attrs(const InferCtx& c, const PoolAttrs& a, size_t nsp) {
    check_sizes(c, "window", a.window, nsp, 1);
    check_sizes(c, "strides", a.strides, nsp, 1);
    check_sizes(c, "pads (lo)", a.pad_lo, nsp, 0);
    check_sizes(c, "pads (hi)", a.pad_hi, nsp, 0);
    for (size_t i = 0; i < nsp; ++i)
        SJ_CHECK(a.pad_lo[i] < a.window[i] && a.pad_hi[i] < a.window[i], ShapeError)
            << c.where() << ": pads (" << shape_str(a.pad_lo) << ", " << shape_str(a.pad_hi)
            << ") must be smaller than the window " << shape_str(a.window)
            << " (a window of padding only has no value)";
}

/// The pooled spatial dims of an input of spatial dims `in` (-1 where unknown).
Shape pool_out(const InferCtx& c, const PoolAttrs& a, const Shape& in, const std::string& from) {
    Shape out;
    for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] < 0) {
            out.push_back(-1);
            continue;
        }
        int64_t padded = in[i] + a.pad_lo[i] + a.pad_hi[i];
        if (in[i] == 0 || padded < a.window[i]) {
            std::ostringstream os;
            os << c.where() << ": along spatial dim " << i << " the window " << a.window[i]
               << " does not fit in " << from << " (size " << in[i] << " padded to " << padded
               << ")";
            shape_fail(c, os.str());
        }
        out.push_back((padded - a.window[i]) / a.strides[i] + 1);
    }
    return out;
}

TensorType infer_pool(const InferCtx& c) {
    const auto& a = c.attr<PoolAttrs>();
    check_dtype_class(c, 0, /*name_input=*/true);
    check_layout(c, 0, 0, "[N, C, spatial...]");
    const Shape& xs = c.in[0].shape;
    check_pool_attrs(c, a, xs.size() - 2);
    Shape out{xs[0], xs[1]};
    Shape sp = pool_out(c, a, spatial(xs), c.name(0));
    out.insert(out.end(), sp.begin(), sp.end());
    return {c.in[0].dtype, out};
}

/// dy has the shape of the pooled input: batch and channels of `src`, spatial dims `want`.
void check_pooled(const InferCtx& c, size_t dy, int64_t n, int64_t ch, const Shape& want,
                  const std::string& from) {
    const Shape& s = c.in[dy].shape;
    bool ok = dims_agree(s[0], n) && dims_agree(s[1], ch);
    for (size_t i = 0; i < want.size(); ++i) ok = ok && dims_agree(s[2 + i], want[i]);
    if (ok) return;
    std::ostringstream os;
    os << c.where() << ": " << c.name(dy) << " has shape " << shape_str(s) << " but pooling "
       << from << " gives [" << n << ", " << ch;
    for (int64_t d : want) os << ", " << d;
    os << "]";
    shape_fail(c, os.str());
}

// max_pool_backward(x [N, C, in...], dy [N, C, out...]) -> [N, C, in...]
TensorType infer_max_pool_backward(const InferCtx& c) {
    const auto& a = c.attr<PoolAttrs>();
    SJ_ASSERT(a.kind == PoolKind::Max) << c.where() << ": attrs of kind avg";
    check_same_dtype(c, 0, 1);
    check_dtype_class(c, 0, /*name_input=*/true);
    check_layout(c, 0, 0, "[N, C, spatial...]");
    const Shape& xs = c.in[0].shape;
    size_t nsp = xs.size() - 2;
    check_layout(c, 1, nsp, "[N, C, spatial...]");
    check_pool_attrs(c, a, nsp);
    check_pooled(c, 1, xs[0], xs[1], pool_out(c, a, spatial(xs), c.name(0)), c.name(0));
    const Shape& ds = c.in[1].shape;
    Shape out = xs;
    out[0] = known_or(xs[0], ds[0]);
    out[1] = known_or(xs[1], ds[1]);
    return {c.in[0].dtype, out};
}

// avg_pool_backward(dy [N, C, out...][, like]) -> [N, C, src...]
TensorType infer_avg_pool_backward(const InferCtx& c) {
    const auto& a = c.attr<PoolAttrs>();
    SJ_ASSERT(a.kind == PoolKind::Avg) << c.where() << ": attrs of kind max";
    SJ_CHECK(c.in.size() == 1 || c.in.size() == 2, ShapeError)
        << c.where() << ": takes dy and an optional shape source";
    check_dtype_class(c, 0, /*name_input=*/true);
    check_layout(c, 0, 0, "[N, C, spatial...]");
    const Shape& ds = c.in[0].shape;
    size_t nsp = ds.size() - 2;
    check_pool_attrs(c, a, nsp);
    check_sizes(c, "result spatial dims", a.result_spatial, nsp, -1);
    Shape src = result_spatial(c, a.result_spatial, 1, nsp);
    std::string from = "an input of spatial dims " + shape_str(src);
    check_pooled(c, 0, ds[0], ds[1], pool_out(c, a, src, from), from);
    Shape out{ds[0], ds[1]};
    out.insert(out.end(), src.begin(), src.end());
    return {c.in[0].dtype, out};
}

// ---- the channel-blocked layout (Note [Channel-blocked layout]) ---------------------------------

/// The type rule of a window op whose `blocked` mask may be set: the op's own rule on the
/// operands' [N, C, spatial...] shapes, and the result blocked when its bit is set.
template <InferFn Logical> TensorType infer_window(const InferCtx& c) {
    const int64_t mask = c.layout;
    if (mask == 0) return Logical(c);
    const int64_t block = block_width(mask);
    std::vector<TensorType> in = c.in;
    for (size_t i = 0; i < in.size(); ++i) {
        if (!(mask & (int64_t(1) << i))) continue;
        const Shape& s = in[i].shape;
        if (s.size() < 4 || s.back() != block) {
            std::ostringstream os;
            os << c.where() << ": " << c.name(i) << " must be channel-blocked [N, C / " << block
               << ", spatial..., " << block << "], got shape " << shape_str(s);
            shape_fail(c, os.str());
        }
        in[i].shape = unblocked_shape(s);
    }
    InferCtx logical{c.op, c.attrs, in, c.nodes, c.at_runtime};
    TensorType t = Logical(logical);
    if (mask & kBlockedResult) {
        SJ_CHECK(whole_blocks(t.shape, block, channels_per_group(c.op, c.attrs, -1)), ShapeError)
            << c.where() << ": a blocked result needs a multiple of " << block
            << " channels, got shape " << shape_str(t.shape);
        t.shape = blocked_shape(t.shape, block);
    }
    return t;
}

// block_channels(x [N, C, spatial...]) -> [N, C / B, spatial..., B], B from the layout mask
TensorType infer_block_channels(const InferCtx& c) {
    const Shape& s = c.in[0].shape;
    const int64_t block = block_width(c.layout);
    SJ_CHECK(valid_block(block), ShapeError)
        << c.where() << ": a channel block of " << block << " (8 or 16 are the widths)";
    if (!blockable(s, block)) {
        std::ostringstream os;
        os << c.where() << ": " << c.name(0) << " must be [N, C, spatial...] with C a known "
           << "multiple of " << block << ", got shape " << shape_str(s);
        shape_fail(c, os.str());
    }
    return {c.in[0].dtype, blocked_shape(s, block)};
}

// unblock_channels(b [N, C / B, spatial..., B]) -> [N, C, spatial...]
TensorType infer_unblock_channels(const InferCtx& c) {
    const Shape& s = c.in[0].shape;
    if (!blocked_form(s)) {
        std::ostringstream os;
        os << c.where() << ": " << c.name(0) << " must be [N, C / B, spatial..., B] with B = 8 "
           << "or 16, got shape " << shape_str(s);
        shape_fail(c, os.str());
    }
    return {c.in[0].dtype, unblocked_shape(s)};
}

// ---- gradients ---------------------------------------------------------------------------------

/// A backward op whose result has the spatial dims of `src`: static dims go in the attrs, and
/// when some are unknown `src` rides along as the shape-only `like` input (Note [Conv and pool
/// backward ops]).
template <class A>
Tensor backward_op(Op op, std::vector<Tensor> inputs, A attrs, const Tensor& src) {
    attrs.result_spatial = spatial(src.shape());
    if (!is_static(attrs.result_spatial)) inputs.push_back(src);
    return make(op, inputs, std::move(attrs));
}

/// max_pool'(x) v: for each window of x, the value of v at the window's first maximum (as
/// max_pool_backward routes dy there). Composite: the window offsets become a leading stack axis
/// of strided slices of the padded x (pads -inf: never selected) and v, argmax picks the offset.
/// Needs the spatial dims of x at build time (the slices' bounds).
Tensor max_pool_select(const Tensor& x, const Tensor& v, const PoolAttrs& a) {
    Shape sp = spatial(x.shape());
    SJ_CHECK(is_static(sp), ShapeError)
        << "second-order gradient of max_pool: the spatial dims of " << x.name() << " "
        << x.type_str() << " must be known when the graph is built";
    size_t nsp = sp.size();
    Axes lo{0, 0}, hi{0, 0};
    lo.insert(lo.end(), a.pad_lo.begin(), a.pad_lo.end());
    hi.insert(hi.end(), a.pad_hi.begin(), a.pad_hi.end());
    Tensor xp = pad(x, lo, hi, -std::numeric_limits<double>::infinity());
    Tensor vp = pad(v, lo, hi, 0.0);
    Shape out;
    for (size_t i = 0; i < nsp; ++i)
        out.push_back((sp[i] + a.pad_lo[i] + a.pad_hi[i] - a.window[i]) / a.strides[i] + 1);
    std::vector<Tensor> xs, vs;
    Axes k(nsp, 0); // window offset, row-major odometer (argmax's first maximum follows it)
    for (;;) {
        Axes start{0, 0}, stop{Index::kEnd, Index::kEnd}, step{1, 1};
        for (size_t i = 0; i < nsp; ++i) {
            start.push_back(k[i]);
            stop.push_back(k[i] + (out[i] - 1) * a.strides[i] + 1);
            step.push_back(a.strides[i]);
        }
        xs.push_back(slice(xp, start, stop, step));
        vs.push_back(slice(vp, start, stop, step));
        size_t d = nsp;
        while (d > 0 && ++k[d - 1] == a.window[d - 1]) k[--d] = 0;
        if (d == 0) break;
    }
    int64_t r = x.rank();
    Tensor pick = one_hot(argmax(stack(xs, r), r), int64_t(xs.size()), v.dtype());
    return sum(pick * stack(vs, r), {r});
}

// The rules below see the user's graph only: the layout pass that sets `blocked` masks runs after
// autodiff, in the cpu backend's compiler.
void register_grads(OpDef* t) {
    // blocking only moves elements: each op's adjoint is the other
    t[int(Op::BlockChannels)].grad = [](const Node&, const Tensor& g, std::vector<Tensor>& d) {
        d[0] = make(Op::UnblockChannels, {g});
    };
    t[int(Op::UnblockChannels)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        d[0] = block_channels(g, n.input(0)->shape().back());
    };
    // conv is bilinear: dx = conv_backward_data(g, w), dw = conv_backward_filter(x, g)
    t[int(Op::Conv)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        const auto& a = n.attr<ConvAttrs>();
        Tensor x = in(n, 0), w = in(n, 1);
        d[0] = backward_op(Op::ConvBackwardData, {g, w}, a, x);
        d[1] = backward_op(Op::ConvBackwardFilter, {x, g}, a, w);
    };
    // dx = bwd_data(dy, w) is the adjoint of conv(., w): d/ddy = conv(g, w); and
    // <g, bwd_data(dy, w)> = <conv(g, w), dy> gives d/dw = conv_backward_filter(g, dy)
    t[int(Op::ConvBackwardData)].grad = [](const Node& n, const Tensor& g,
                                           std::vector<Tensor>& d) {
        ConvAttrs a = n.attr<ConvAttrs>();
        a.result_spatial.clear();
        Tensor dy = in(n, 0), w = in(n, 1);
        d[0] = make(Op::Conv, {g, w}, a);
        d[1] = backward_op(Op::ConvBackwardFilter, {g, dy}, a, w);
    };
    // <G, bwd_filter(x, dy)> = <conv(x, G), dy>: d/dx = conv_backward_data(dy, G),
    // d/ddy = conv(x, G)
    t[int(Op::ConvBackwardFilter)].grad = [](const Node& n, const Tensor& g,
                                             std::vector<Tensor>& d) {
        ConvAttrs a = n.attr<ConvAttrs>();
        Tensor x = in(n, 0), dy = in(n, 1);
        d[0] = backward_op(Op::ConvBackwardData, {dy, g}, a, x);
        a.result_spatial.clear();
        d[1] = make(Op::Conv, {x, g}, a);
    };
    // max: g goes to each window's first maximum; avg: g / divisor spread over the window
    t[int(Op::Pool)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        const auto& a = n.attr<PoolAttrs>();
        Tensor x = in(n, 0);
        if (a.kind == PoolKind::Max) d[0] = make(Op::MaxPoolBackward, {x, g}, a);
        else d[0] = backward_op(Op::AvgPoolBackward, {g}, a, x);
    };
    // linear in dy with adjoint max_pool'(x); piecewise constant in x (no gradient)
    t[int(Op::MaxPoolBackward)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        d[1] = max_pool_select(in(n, 0), g, n.attr<PoolAttrs>());
    };
    // the adjoint of avg_pool: d/ddy = avg_pool(g)
    t[int(Op::AvgPoolBackward)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        PoolAttrs a = n.attr<PoolAttrs>();
        a.result_spatial.clear();
        d[0] = make(Op::Pool, {g}, a);
    };
}

} // namespace

namespace {
// Batching (Note [Batching rules] in src/api/Vmap.cpp). When only the activations carry the batch,
// it folds into the op's own minibatch ([B, N, ...] -> [B * N, ...]). When the filter carries it
// too (a filter per example, or a filter gradient per example), the batch goes into the channels
// and the groups (JAX's rule): x [B, N, C, ...] becomes [N, B * C, ...] and the filter
// [B * O, C / groups, ...] with B * groups groups, so group b * groups + g of the grouped op is
// group g of example b. That needs the batch size when the graph is built; else a loop.
Tensor fold_apply(const BatchArgs& b, std::vector<Tensor> in, const std::vector<size_t>& fold) {
    for (size_t i : fold) {
        in[i] = fold_batch(batched_input(b, i));
        if (!in[i].defined()) return Tensor();
    }
    return unfold_batch(b, make(b.n.op(), in, b.n.attrs()));
}

/// The number of unknown dims of s (one may be left to reshape to infer).
int unknown_dims(const Shape& s) { return int(std::count(s.begin(), s.end(), int64_t(-1))); }

/// [B, N, C, sp...] -> [N, B * C, sp...]; undefined when a dim but B or C is unknown, or both
/// are (C is unknown inside a vmap of groups that follow the batch).
Tensor channels_from_batch(const Tensor& x) {
    const Shape& s = x.shape();
    if (s.size() < 3) return Tensor();
    Shape rest(s.begin() + 3, s.end());
    if (s[1] < 0 || (s[0] < 0 && s[2] < 0) || unknown_dims(rest) > 0)
        return Tensor();
    Axes perm{1, 0};
    for (int64_t i = 2; i < int64_t(s.size()); ++i) perm.push_back(i);
    Shape t{s[1], s[0] < 0 || s[2] < 0 ? -1 : s[0] * s[2]};
    t.insert(t.end(), rest.begin(), rest.end());
    return reshape(transpose(x, perm), t);
}

/// [N, B * C, sp...] -> [B, N, C, sp...] (C: the node's per-example channel count).
Tensor batch_from_channels(const BatchArgs& b, const Tensor& y) {
    const Shape& s = b.n.shape(); // [N, C, sp...]
    Shape t{s[0], b.size};
    t.insert(t.end(), s.begin() + 1, s.end());
    if (unknown_dims(t) > 1) return Tensor();
    Axes perm{1, 0};
    for (int64_t i = 2; i < int64_t(t.size()); ++i) perm.push_back(i);
    return transpose(reshape(y, t), perm);
}

/// A per-example filter [B, O, C / g, k...] as [B * O, C / g, k...]; undefined when a dim but B
/// or O is unknown, or both are.
Tensor filter_from_batch(const Tensor& w) {
    const Shape& s = w.shape();
    if ((s[0] < 0 && s[1] < 0) || unknown_dims(Shape(s.begin() + 2, s.end())) > 0)
        return Tensor();
    Shape t{s[0] < 0 || s[1] < 0 ? -1 : s[0] * s[1]};
    t.insert(t.end(), s.begin() + 2, s.end());
    return reshape(w, t);
}

// Note [Groups that follow the batch]
// vmap puts the examples of a convolution with a filter per example (and of a weight gradient)
// into its groups: B x groups of them. When B is unknown when the graph is built (a placeholder
// of batch -1, as users write them) the count is unknown too, so the op says instead how many
// channels each group has (ConvAttrs::groups 0, group_in and group_out: one example's per-group
// counts, the same whatever B), and the count follows the channels when the function is called
// (conv_groups(); each backend fixes it from the bound shapes with with_groups()). Batching such
// an op again (nested vmap) leaves it as it is: its groups' channels do not change. Without this
// the op looped over the examples ("What loops" in docs/vmap.md).

/// The node on operands already put in grouped form, with B * groups groups (Note [Groups that
/// follow the batch] when B is unknown); undefined when an operand could not be written that way
/// or the per-example channel counts are unknown.
Tensor make_grouped(const BatchArgs& b, const std::vector<Tensor>& in) {
    for (const Tensor& t : in)
        if (!t.defined()) return Tensor();
    ConvAttrs a = b.n.attr<ConvAttrs>();
    if (a.groups > 0 && b.size >= 0) {
        a.groups *= b.size;
    } else if (a.groups > 0) {
        // one example's channels: [C, O] of its forward input and output
        const Shape& s0 = b.n.input(0)->shape();
        const Shape& s1 = b.n.input(1)->shape();
        int64_t c = -1, o = -1;
        if (b.n.op() == Op::Conv)
            c = s0[1], o = s1[0]; // (x, w)
        else if (b.n.op() == Op::ConvBackwardData)
            c = s1[1] * a.groups, o = s1[0]; // (dy, w)
        else
            c = s0[1], o = s1[1]; // (x, dy)
        if (c < 0 || o < 0)
            return Tensor();
        a.group_in = c / a.groups, a.group_out = o / a.groups, a.groups = 0;
    }
    return make(b.n.op(), in, a);
}

Tensor batch_conv(const BatchArgs& b) {
    if (!b.batched[1] && b.n.num_inputs() == 2)
        return fold_apply(b, b.in, {0});
    // a filter per example: conv(x, w) and conv_backward_data(dy, w[, like]) in groups
    std::vector<Tensor> in{channels_from_batch(batched_input(b, 0)),
                           filter_from_batch(batched_input(b, 1))};
    if (b.n.num_inputs() == 3) in.push_back(channels_from_batch(batched_input(b, 2)));
    Tensor y = make_grouped(b, in);
    return y.defined() ? batch_from_channels(b, y) : Tensor();
}

Tensor batch_conv_backward_filter(const BatchArgs& b) {
    // the filter gradient of each example: x [B, N, C, ...] and dy [B, N, O, ...] in groups
    std::vector<Tensor> in{channels_from_batch(batched_input(b, 0)),
                           channels_from_batch(batched_input(b, 1))};
    if (b.n.num_inputs() == 3) in.push_back(filter_from_batch(batched_input(b, 2)));
    Shape t{b.size};
    t.insert(t.end(), b.n.shape().begin(), b.n.shape().end());
    if (unknown_dims(t) > 1)
        return Tensor();
    Tensor g = make_grouped(b, in);
    return g.defined() ? reshape(g, t) : Tensor();
}

Tensor batch_pool(const BatchArgs& b) {
    if (b.n.op() == Op::AvgPoolBackward && b.n.num_inputs() > 1) return Tensor();
    if (b.n.op() == Op::MaxPoolBackward) return fold_apply(b, b.in, {0, 1});
    return fold_apply(b, b.in, {0});
}

} // namespace

void register_conv_ops(OpDef* t) {
    t[int(Op::Conv)].batch = batch_conv;
    t[int(Op::ConvBackwardData)].batch = batch_conv;
    t[int(Op::ConvBackwardFilter)].batch = batch_conv_backward_filter;
    t[int(Op::Pool)].batch = batch_pool;
    t[int(Op::MaxPoolBackward)].batch = batch_pool;
    t[int(Op::AvgPoolBackward)].batch = batch_pool;
    t[int(Op::Conv)].infer = infer_window<infer_conv>;
    t[int(Op::ConvBackwardData)].infer = infer_window<infer_conv_backward_data>;
    t[int(Op::ConvBackwardFilter)].infer = infer_window<infer_conv_backward_filter>;
    t[int(Op::Pool)].infer = infer_window<infer_pool>;
    t[int(Op::MaxPoolBackward)].infer = infer_window<infer_max_pool_backward>;
    t[int(Op::AvgPoolBackward)].infer = infer_window<infer_avg_pool_backward>;
    t[int(Op::BlockChannels)].infer = infer_block_channels;
    t[int(Op::UnblockChannels)].infer = infer_unblock_channels;
    register_grads(t);
}

} // namespace detail

// ---- Padding ----------------------------------------------------------------------------------

Padding::Padding(const char* mode) : Padding(std::string(mode ? mode : "")) {}

Padding::Padding(const std::string& mode) {
    std::string m = mode;
    for (auto& ch : m) ch = char(std::toupper(static_cast<unsigned char>(ch)));
    if (m == "VALID") mode_ = Mode::Valid;
    else if (m == "SAME") mode_ = Mode::Same;
    else
        SJ_THROW(Error) << "padding: unknown mode \"" << mode
                        << "\" (expected \"VALID\", \"SAME\", "
                        << "explicit (lo, hi) pairs or an integer)";
}

Padding::Padding(int p) : Padding(int64_t(p)) {}
Padding::Padding(int64_t p) : mode_(Mode::Explicit), pairs_{{p, p}} {}
Padding::Padding(std::initializer_list<std::pair<int64_t, int64_t>> pads)
    : Padding(std::vector<std::pair<int64_t, int64_t>>(pads)) {}
Padding::Padding(std::vector<std::pair<int64_t, int64_t>> pads)
    : mode_(Mode::Explicit), pairs_(std::move(pads)) {}

std::string Padding::str() const {
    if (mode_ == Mode::Valid) return "VALID";
    if (mode_ == Mode::Same) return "SAME";
    std::ostringstream os;
    os << "[";
    for (size_t i = 0; i < pairs_.size(); ++i)
        os << (i ? ", " : "") << "(" << pairs_[i].first << ", " << pairs_[i].second << ")";
    os << "]";
    return os.str();
}

std::pair<Axes, Axes> Padding::resolve(const Shape& in, const Shape& window, const Axes& strides,
                                       const Axes& dilation, const std::string& where) const {
    size_t n = in.size();
    Axes lo(n, 0), hi(n, 0);
    switch (mode_) {
    case Mode::Valid: break;
    case Mode::Explicit:
        SJ_CHECK(pairs_.size() == n || pairs_.size() == 1, ShapeError)
            << where << ": padding " << str() << " has " << pairs_.size()
            << " (lo, hi) pairs for " << n << " spatial dims";
        for (size_t i = 0; i < n; ++i) {
            auto [l, h] = pairs_[pairs_.size() == 1 ? 0 : i];
            SJ_CHECK(l >= 0 && h >= 0, ShapeError)
                << where << ": padding " << str() << " has a negative pad";
            lo[i] = l;
            hi[i] = h;
        }
        break;
    case Mode::Same:
        for (size_t i = 0; i < n; ++i) {
            SJ_CHECK(in[i] >= 0 && window[i] >= 0, ShapeError)
                << where << ": SAME padding needs the input's spatial dims " << shape_str(in)
                << " and the window " << shape_str(window)
                << " known when the graph is built (pass explicit pads instead)";
            int64_t s = strides[i], out = (in[i] + s - 1) / s;
            int64_t total =
                std::max<int64_t>((out - 1) * s + (window[i] - 1) * dilation[i] + 1 - in[i], 0);
            lo[i] = total / 2;
            hi[i] = total - lo[i];
        }
        break;
    }
    return {lo, hi};
}

// ---- builders ---------------------------------------------------------------------------------

using detail::make;

namespace {

Shape spatial_dims(const Tensor& t) { return detail::spatial(t.shape()); }

/// One value per spatial dim from a user's list: empty -> `fill`, one value -> repeated.
Axes per_dim(const Axes& v, size_t nsp, const Axes& fill, const char* what,
             const std::string& where) {
    if (v.empty()) return fill;
    if (v.size() == 1) return Axes(nsp, v[0]);
    SJ_CHECK(v.size() == nsp, ShapeError)
        << where << ": " << what << " " << shape_str(v) << " must have one value per spatial dim ("
        << nsp << ") or a single value";
    return v;
}

std::string where2(const char* op, const Tensor& a, const Tensor& b) {
    return std::string(op) + "(" + a.name() + ", " + b.name() + ")";
}

/// Casts a and b to their common dtype.
std::pair<Tensor, Tensor> promoted(const Tensor& a, const Tensor& b) {
    SJ_CHECK(a.defined() && b.defined(), Error) << "convolution op on an undefined Tensor";
    if (a.dtype() == b.dtype()) return {a, b};
    DType t = promote(a.dtype(), b.dtype());
    return {cast(a, t), cast(b, t)};
}

/// Checks that x has the layout [N, C, spatial...] (of `rank` when given) and returns the number
/// of spatial dims.
size_t spatial_rank(const Tensor& x, const std::string& where, const char* layout, int rank = 0) {
    SJ_CHECK(x.defined(), Error) << where << ": undefined Tensor";
    bool ok = rank ? x.rank() == rank : x.rank() >= 3;
    SJ_CHECK(ok, ShapeError) << where << ": " << x.name() << " must have the layout " << layout
                             << ", got " << x.type_str();
    return size_t(x.rank() - 2);
}

struct ConvArgs {
    Axes strides, dilation;
    int64_t groups;
};

ConvArgs conv_args(size_t nsp, const Axes& strides, const Axes& dilation, int64_t groups,
                   const std::string& where) {
    ConvArgs a{per_dim(strides, nsp, Axes(nsp, 1), "strides", where),
               per_dim(dilation, nsp, Axes(nsp, 1), "dilation", where), groups};
    for (size_t i = 0; i < nsp; ++i)
        SJ_CHECK(a.strides[i] >= 1 && a.dilation[i] >= 1, ShapeError)
            << where << ": strides " << shape_str(a.strides) << " and dilation "
            << shape_str(a.dilation) << " must be >= 1";
    SJ_CHECK(groups >= 1, ShapeError) << where << ": groups must be >= 1, got " << groups;
    return a;
}

Tensor pool_impl(PoolKind kind, const char* op, const Tensor& x, const Axes& window,
                 const Axes& strides, const Padding& padding, bool count_include_pad, int rank) {
    std::string where = std::string(op) + "(" + (x.defined() ? x.name() : "?") + ")";
    size_t nsp = spatial_rank(x, where, rank == 3   ? "[N, C, W]"
                                        : rank == 4 ? "[N, C, H, W]"
                                                    : "[N, C, spatial...]",
                              rank);
    SJ_CHECK(!window.empty(), ShapeError) << where << ": the window is empty";
    Axes win = per_dim(window, nsp, {}, "window", where);
    Axes st = per_dim(strides, nsp, win, "strides", where);
    auto [lo, hi] = padding.resolve(spatial_dims(x), win, st, Axes(nsp, 1), where);
    // the divisor choice means nothing to max pooling: one attribute value keeps one node
    bool cip = kind == PoolKind::Max || count_include_pad;
    return make(Op::Pool, {x}, PoolAttrs{kind, win, st, lo, hi, cip, {}});
}

} // namespace

Tensor conv(const Tensor& x0, const Tensor& w0, const Axes& strides, const Padding& padding,
            const Axes& dilation, int64_t groups) {
    auto [x, w] = promoted(x0, w0);
    std::string where = where2("conv", x, w);
    size_t nsp = spatial_rank(x, where, "[N, C, spatial...]");
    SJ_CHECK(w.rank() == x.rank(), ShapeError)
        << where << ": the filters " << w.name() << " " << w.type_str() << " must have the "
        << "layout [O, C / groups, k...] with " << nsp << " spatial dims, as " << x.name() << " "
        << x.type_str();
    ConvArgs a = conv_args(nsp, strides, dilation, groups, where);
    auto [lo, hi] = padding.resolve(spatial_dims(x), spatial_dims(w), a.strides, a.dilation, where);
    return make(Op::Conv, {x, w}, ConvAttrs{a.strides, lo, hi, a.dilation, groups, {}});
}

Tensor conv1d(const Tensor& x, const Tensor& w, const Axes& strides, const Padding& padding,
              const Axes& dilation, int64_t groups) {
    spatial_rank(x, "conv1d(" + x.name() + ", " + w.name() + ")", "[N, C, W]", 3);
    return conv(x, w, strides, padding, dilation, groups);
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Axes& strides, const Padding& padding,
              const Axes& dilation, int64_t groups) {
    spatial_rank(x, "conv2d(" + x.name() + ", " + w.name() + ")", "[N, C, H, W]", 4);
    return conv(x, w, strides, padding, dilation, groups);
}

Tensor conv_transpose(const Tensor& x0, const Tensor& w0, const Axes& strides,
                      const Padding& padding, const Axes& dilation, int64_t groups,
                      const Axes& output_padding) {
    auto [x, w] = promoted(x0, w0);
    std::string where = where2("conv_transpose", x, w);
    size_t nsp = spatial_rank(x, where, "[N, C, spatial...]");
    SJ_CHECK(w.rank() == x.rank(), ShapeError)
        << where << ": the filters " << w.name() << " " << w.type_str() << " must have the "
        << "layout [C, O / groups, k...] with " << nsp << " spatial dims, as " << x.name() << " "
        << x.type_str();
    ConvArgs a = conv_args(nsp, strides, dilation, groups, where);
    Axes op = per_dim(output_padding, nsp, Axes(nsp, 0), "output_padding", where);
    Shape in = spatial_dims(x), k = spatial_dims(w);
    SJ_CHECK(is_static(in) && is_static(k), ShapeError)
        << where << ": the spatial dims of " << x.name() << " " << x.type_str() << " and "
        << w.name() << " " << w.type_str()
        << " must be known when the graph is built (they fix the output size)";
    for (size_t i = 0; i < nsp; ++i)
        SJ_CHECK(op[i] >= 0 && op[i] < std::max(a.strides[i], a.dilation[i]), ShapeError)
            << where << ": output_padding " << shape_str(op)
            << " must be >= 0 and smaller than the stride or the dilation";
    Shape out(nsp);
    Axes lo, hi;
    if (padding.mode() == Padding::Mode::Same) {
        // the adjoint of a SAME conv on an input of in * stride elements
        for (size_t i = 0; i < nsp; ++i) {
            SJ_CHECK(op[i] == 0, ShapeError)
                << where << ": SAME padding fixes the output size (in * stride): output_padding "
                << shape_str(op) << " must be 0";
            out[i] = in[i] * a.strides[i];
        }
        std::tie(lo, hi) = padding.resolve(out, k, a.strides, a.dilation, where);
    } else {
        std::tie(lo, hi) = padding.resolve(in, k, a.strides, a.dilation, where);
        for (size_t i = 0; i < nsp; ++i) {
            out[i] = (in[i] - 1) * a.strides[i] - lo[i] - hi[i] + (k[i] - 1) * a.dilation[i] + 1 +
                     op[i];
            SJ_CHECK(out[i] >= 0, ShapeError)
                << where << ": padding " << padding.str() << " leaves no output along spatial dim "
                << i << " (input " << in[i] << ", filter " << k[i] << ")";
        }
    }
    return make(Op::ConvBackwardData, {x, w},
                ConvAttrs{a.strides, lo, hi, a.dilation, groups, out});
}

Tensor conv_backward_data(const Tensor& dy, const Tensor& w, const Shape& src_spatial,
                          const Axes& strides, const Padding& padding, const Axes& dilation,
                          int64_t groups) {
    std::string where = where2("conv_backward_data", dy, w);
    size_t nsp = spatial_rank(dy, where, "[N, O, spatial...]");
    SJ_CHECK(src_spatial.size() == nsp && is_static(src_spatial), ShapeError)
        << where << ": src_spatial " << shape_str(src_spatial) << " must give the " << nsp
        << " spatial dims of the forward input";
    SJ_CHECK(w.rank() == dy.rank(), ShapeError)
        << where << ": the filters " << w.name() << " " << w.type_str() << " must have rank "
        << dy.rank();
    ConvArgs a = conv_args(nsp, strides, dilation, groups, where);
    auto [lo, hi] = padding.resolve(src_spatial, spatial_dims(w), a.strides, a.dilation, where);
    return make(Op::ConvBackwardData, {dy, w},
                ConvAttrs{a.strides, lo, hi, a.dilation, groups, src_spatial});
}

Tensor conv_backward_filter(const Tensor& x, const Tensor& dy, const Shape& kernel_spatial,
                            const Axes& strides, const Padding& padding, const Axes& dilation,
                            int64_t groups) {
    std::string where = where2("conv_backward_filter", x, dy);
    size_t nsp = spatial_rank(x, where, "[N, C, spatial...]");
    SJ_CHECK(kernel_spatial.size() == nsp && is_static(kernel_spatial), ShapeError)
        << where << ": kernel_spatial " << shape_str(kernel_spatial) << " must give the " << nsp
        << " spatial dims of the filters";
    ConvArgs a = conv_args(nsp, strides, dilation, groups, where);
    auto [lo, hi] = padding.resolve(spatial_dims(x), kernel_spatial, a.strides, a.dilation, where);
    return make(Op::ConvBackwardFilter, {x, dy},
                ConvAttrs{a.strides, lo, hi, a.dilation, groups, kernel_spatial});
}

Tensor max_pool(const Tensor& x, const Axes& window, const Axes& strides, const Padding& padding) {
    return pool_impl(PoolKind::Max, "max_pool", x, window, strides, padding, true, 0);
}
Tensor avg_pool(const Tensor& x, const Axes& window, const Axes& strides, const Padding& padding,
                bool count_include_pad) {
    return pool_impl(PoolKind::Avg, "avg_pool", x, window, strides, padding, count_include_pad, 0);
}
Tensor max_pool1d(const Tensor& x, const Axes& window, const Axes& strides,
                  const Padding& padding) {
    return pool_impl(PoolKind::Max, "max_pool1d", x, window, strides, padding, true, 3);
}
Tensor max_pool2d(const Tensor& x, const Axes& window, const Axes& strides,
                  const Padding& padding) {
    return pool_impl(PoolKind::Max, "max_pool2d", x, window, strides, padding, true, 4);
}
Tensor avg_pool1d(const Tensor& x, const Axes& window, const Axes& strides, const Padding& padding,
                  bool count_include_pad) {
    return pool_impl(PoolKind::Avg, "avg_pool1d", x, window, strides, padding, count_include_pad,
                     3);
}
Tensor avg_pool2d(const Tensor& x, const Axes& window, const Axes& strides, const Padding& padding,
                  bool count_include_pad) {
    return pool_impl(PoolKind::Avg, "avg_pool2d", x, window, strides, padding, count_include_pad,
                     4);
}

Tensor block_channels(const Tensor& x, int64_t block) {
    SJ_CHECK(x.defined(), Error) << "block_channels: undefined Tensor";
    SJ_CHECK(detail::valid_block(block), Error)
        << "block_channels: a block of " << block << " channels (8 or 16 are the widths)";
    return Tensor(
        Node::make_laid_out(Op::BlockChannels, NoAttrs{}, {x.node()}, detail::block_bits(block)));
}
Tensor unblock_channels(const Tensor& b) {
    SJ_CHECK(b.defined(), Error) << "unblock_channels: undefined Tensor";
    return make(Op::UnblockChannels, {b});
}

Tensor max_pool_backward(const Tensor& x, const Tensor& dy, const Axes& window,
                         const Axes& strides, const Padding& padding) {
    Tensor p = max_pool(x, window, strides, padding); // resolves the attrs; never computed
    return make(Op::MaxPoolBackward, {x, dy}, p.node()->attr<PoolAttrs>());
}

Tensor avg_pool_backward(const Tensor& dy, const Shape& src_spatial, const Axes& window,
                         const Axes& strides, const Padding& padding, bool count_include_pad) {
    std::string where = "avg_pool_backward(" + (dy.defined() ? dy.name() : "?") + ")";
    size_t nsp = spatial_rank(dy, where, "[N, C, spatial...]");
    SJ_CHECK(src_spatial.size() == nsp && is_static(src_spatial), ShapeError)
        << where << ": src_spatial " << shape_str(src_spatial) << " must give the " << nsp
        << " spatial dims of the forward input";
    SJ_CHECK(!window.empty(), ShapeError) << where << ": the window is empty";
    Axes win = per_dim(window, nsp, {}, "window", where);
    Axes st = per_dim(strides, nsp, win, "strides", where);
    auto [lo, hi] = padding.resolve(src_spatial, win, st, Axes(nsp, 1), where);
    return make(Op::AvgPoolBackward, {dy},
                PoolAttrs{PoolKind::Avg, win, st, lo, hi, count_include_pad, src_spatial});
}

} // namespace sj
