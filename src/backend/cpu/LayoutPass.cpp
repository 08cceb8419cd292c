// Layout patterns: block the window ops, then sink each unblock_channels past the elementwise
// ops, reductions and broadcasts that read it, until it meets a block_channels and both vanish.
#include "LayoutPass.h"

#include "CpuTarget.h"

#include "../../ops/ChannelBlocking.h"
#include "../../ops/OpDef.h"

#include <symjax/ir/Attrs.h>
#include <symjax/ir/Layout.h>
#include <symjax/ir/Node.h>

#include <algorithm>

namespace sj::cpu {

NodePtr reshape_to(NodePtr x, const Shape& s) {
    if (x->is(Op::Reshape) && x->num_inputs() == 1)
        x = x->input(0);
    if (x->shape() == s)
        return x;
    return Node::make(Op::Reshape, ShapeAttrs{s}, {x});
}

using compiler::Pattern;
using compiler::RewriteStats;
namespace {

using detail::blockable;
using detail::blocked_shape;
using detail::channels_per_group;
using detail::kBlockedResult;
using detail::unit_dims_map;
using detail::whole_blocks;

/// The block width of the pass's run on this thread (Note [Channel-blocked layout]): the window
/// ops it blocks take it; the sinking patterns read the width of the blocked tensor they move.
thread_local int64_t t_block = detail::kChannelBlock;

NodePtr make(Op op, Attrs a, std::vector<NodePtr> in) {
    return Node::make(op, std::move(a), std::move(in));
}
NodePtr unblock(const NodePtr& b) { return make(Op::UnblockChannels, NoAttrs{}, {b}); }
/// The block width of a blocked tensor.
int64_t width(const NodePtr& b) {
    return b->shape().back();
}

/// At most one dim unknown: a reshape can infer it.
bool reshapable(const Shape& s) { return std::count(s.begin(), s.end(), -1) <= 1; }

/// No spatial extent: every dim after the channel dim is 1, so [N, C, 1...] and its blocked form
/// [N, C / B, 1..., B] hold the same bytes in the same order.
bool pointwise_channels(const Shape& s) {
    if (s.size() < 3 || !reshapable(s)) return false;
    for (size_t i = 2; i < s.size(); ++i)
        if (s[i] != 1) return false;
    return true;
}

/// A per-channel tensor: every dim but the channel dim (1) is 1, once left-padded to rank r.
bool per_channel(const Shape& s, size_t r) {
    if (s.size() > r) return false;
    size_t lead = r - s.size();
    for (size_t i = 0; i < s.size(); ++i)
        if (i + lead != 1 && s[i] != 1) return false;
    return true;
}

// Note [Reshapes of whole channel blocks]
// A blocked [N, C / B, s..., B] tensor holds channel k of image n at the block (n * C + k) / B,
// lane (n * C + k) % B, when C is a multiple of B: its bytes depend on n * C + k alone. So
// [N, C, s...] and [N', C', s...] with the same spatial dims, N * C = N' * C' and both C and C'
// multiples of B have the same blocked bytes, and a reshape between them is a reshape of the
// blocked tensors. vmap writes such reshapes: the examples of a per-example weight gradient
// become the groups of one image ([B, C, H, W] -> [1, B * C, H, W]), and an example's
// [1, C, H, W] gains a batch dim in front ([B, 1, C, H, W]) for the ops between its layers.
// Three rules use it:
// - blocked_operand: block_channels of a reshape of an unblock is a view of the blocked tensor;
// - hoist_reshape: an elementwise op whose operands are reshapes of unblocks of one shape s,
//   scalars, spreads that move to s, and elementwise ops of these runs on the blocked tensors,
//   its result reshaped after the unblock;
// - reduce_through_reshape: a reduction of a reshape that only inserts or removes dims of size 1
//   reduces the unblocked tensor, which sink_reduce then moves onto the blocked one.
// An unblock's result holds whole blocks even when its channel count is unknown, and so does
// [1, -1, s...] reshaped from it (C' = N * C): with a batch of unknown size, the grouped
// convolutions whose groups follow their channels (Note [Groups that follow the batch] in
// src/ops/Conv.cpp) take such views when their groups are whole blocks (channels_per_group in
// src/ops/ChannelBlocking.h), and block_window blocks them. Without these rules each convolution
// of a vmap'd CNN unblocked and reblocked its result around the activation (~2 ms of a 9 ms
// per-example gradient call at batch 64; docs/performance.md).

/// The unblock_channels under a chain of reshapes (at most 4), or null.
NodePtr unblock_under_reshapes(NodePtr p) {
    for (int i = 0; i < 4 && p->is(Op::Reshape); ++i)
        p = p->input(0);
    return p->is(Op::UnblockChannels) ? p : nullptr;
}

/// Whether the unblocked `from` (an unblock's result: its channels are whole blocks of B even
/// when unknown) and `to` [N', C', s...] have the same blocked bytes (Note [Reshapes of whole
/// channel blocks]): the same rank and static spatial dims, and C' a known multiple of B or
/// unknown with N' = 1 (then C' = N * C).
bool same_blocks(const Shape& from, const Shape& to, int64_t B) {
    if (from.size() != to.size() || to.size() < 3)
        return false;
    for (size_t i = 2; i < from.size(); ++i)
        if (from[i] < 0 || from[i] != to[i])
            return false;
    const bool whole = to[1] > 0 ? to[1] % B == 0 : to[1] == -1 && to[0] == 1;
    return whole && reshapable(blocked_shape(to, B));
}

/// philox_bits `n` drawn over the blocked form of its shape from `in` (the counter, and a blocked
/// `like` when it has one).
NodePtr blocked_philox(const NodePtr& n, std::vector<NodePtr> in, int64_t B) {
    PhiloxAttrs a = n->attr<PhiloxAttrs>();
    a.shape = blocked_shape(a.shape, B);
    return Node::make_laid_out(Op::PhiloxBits, a, std::move(in),
                               kBlockedResult | detail::block_bits(B));
}

/// How deep blocked_operand looks through elementwise ops of operands it can block (a static
/// spread scaled or selected, as autodiff writes an activation's gradient): a bound, so that a
/// long elementwise chain costs each rewrite a constant (Note [Compile scaling] in Fusion.cpp).
constexpr int kBlockedOperandDepth = 3;

/// The blocked form of `p`, an operand broadcast against a [N, C, spatial...] result `out`
/// (NumPy rules: right-aligned), when it comes without a reorder: the input of an unblock, a
/// scalar, a per-channel tensor (a reshape to [1, C / B, 1..., B]), a tensor without a channel
/// extent (a trailing 1 appended), a splat broadcast, a static spread of one of these, a static
/// draw of random bits, an elementwise op of such operands (at most kBlockedOperandDepth deep).
/// Null otherwise. B: the block width.
NodePtr blocked_operand(const NodePtr& p, const Shape& out, int64_t B, int depth = 0) {
    size_t r = out.size();
    // a view of a blocked tensor (its channel count may be unknown: same_blocks checks it)
    if (NodePtr u = p->is(Op::Reshape) ? unblock_under_reshapes(p) : nullptr;
        u && width(u->input(0)) == B && size_t(p->rank()) == r && p->shape() == out &&
        same_blocks(u->shape(), p->shape(), B))
        return reshape_to(u->input(0), blocked_shape(p->shape(), B));
    if (!blockable(out, B))
        return nullptr;
    if (p->rank() == 0) return p;
    if (p->is(Op::UnblockChannels))
        return width(p->input(0)) == B ? p->input(0) : nullptr;
    if (size_t(p->rank()) == r && p->shape()[1] == out[1] && pointwise_channels(p->shape()))
        return reshape_to(p, blocked_shape(p->shape(), B));
    Shape s = p->shape();
    if (s.size() > r) return nullptr;
    s.insert(s.begin(), r - s.size(), 1);
    if (!is_static(s)) {
        if (!p->is(Op::Broadcast) || p->input(0)->rank() != 0) return nullptr;
        // a scalar spread over a shape given by `like`: spread it over the blocked `like`
        if (p->num_inputs() < 2 || !p->input(1)->is(Op::UnblockChannels) || p->shape() != out ||
            width(p->input(1)->input(0)) != B)
            return nullptr;
        return make(Op::Broadcast, BroadcastAttrs{blocked_shape(out, B), {}},
                    {p->input(0), p->input(1)->input(0)});
    }
    if (s[1] == out[1] && per_channel(s, r)) {
        Shape b(r + 1, 1);
        b[1] = out[1] / B;
        b[r] = B;
        return reshape_to(p, b);
    }
    if (s[1] == 1) {
        s.push_back(1);
        return reshape_to(p, s);
    }
    if (p->is(Op::Broadcast) && p->input(0)->rank() == 0 && s == out)
        return make(Op::Broadcast, BroadcastAttrs{blocked_shape(out, B), {}}, {p->input(0)});
    // a per-channel tensor, one without a channel extent, or one without a spatial extent
    // ([N, C]: a global pool's gradient) spread over a static `out` by a broadcast without
    // `like`: autodiff's gradient of a reduction when the batch is static (with a dynamic batch
    // the broadcast takes `like`, above and in sink_broadcast). Spread its blocked form over the
    // blocked shape.
    if (p->is(Op::Broadcast) && p->num_inputs() == 1 && s == out) {
        const NodePtr& x = p->input(0);
        const auto& ba = p->attr<BroadcastAttrs>();
        Shape aligned(r, 1);
        for (size_t i = 0; i < ba.dims.size(); ++i)
            aligned[size_t(ba.dims[i])] = x->shape()[i];
        const bool spread = per_channel(aligned, r) || (pointwise_channels(aligned) &&
                                                        (aligned[0] == 1 || aligned[0] == out[0]));
        if (!is_static(aligned) || !spread || (aligned[1] != 1 && aligned[1] != out[1]))
            return nullptr;
        NodePtr xb = blocked_operand(reshape_to(x, aligned), aligned, B, depth + 1);
        if (!xb)
            return nullptr;
        std::vector<int64_t> dims(r + 1);
        for (size_t i = 0; i <= r; ++i)
            dims[i] = int64_t(i);
        return make(Op::Broadcast, BroadcastAttrs{blocked_shape(out, B), dims}, {xb});
    }
    // a static draw of random bits over `out` (dropout's mask): drawn blocked, the same bits
    // per logical element (philox_bits' reference kernel)
    if (p->is(Op::PhiloxBits) && p->num_inputs() == 1 && s == out)
        return blocked_philox(p, {p->input(0)}, B);
    // an elementwise op of `out`'s shape whose operands all have blocked forms: the same op on
    // them (with a static batch, leaky_relu's gradient where(mask, spread * 0.01, spread) of a
    // global pool's spread gradient; with a dynamic one the spread sinks as an unblock instead)
    if (has_trait(p->op(), kElementwise) && s == out && depth < kBlockedOperandDepth) {
        std::vector<NodePtr> in;
        for (const auto& i : p->inputs()) {
            NodePtr b = blocked_operand(i, out, B, depth + 1);
            if (!b)
                return nullptr;
            in.push_back(b);
        }
        return make(p->op(), p->attrs(), std::move(in));
    }
    return nullptr;
}

/// block_channels(x) by B, without a reorder where blocked_operand finds one.
NodePtr block(const NodePtr& x, int64_t B) {
    if (NodePtr b = blocked_operand(x, x->shape(), B))
        return b;
    return Node::make_laid_out(Op::BlockChannels, NoAttrs{}, {x}, detail::block_bits(B));
}

// ---- patterns -----------------------------------------------------------------------------

/// unblock(block(x)) -> x; block(unblock(b)) -> b; either on a per-channel tensor -> reshape.
NodePtr cancel(const NodePtr& n) {
    if (n->is(Op::UnblockChannels)) {
        const NodePtr& b = n->input(0);
        if (b->is(Op::BlockChannels)) return b->input(0);
        if ((is_static(n->shape()) && per_channel(n->shape(), n->rank())) ||
            pointwise_channels(n->shape()))
            return reshape_to(b, n->shape());
        return nullptr;
    }
    if (n->is(Op::BlockChannels)) {
        NodePtr b = blocked_operand(n->input(0), n->input(0)->shape(), width(n));
        return b && b != n->input(0) ? b : nullptr;
    }
    return nullptr;
}

/// Which operands of a window op are activations [N, C, spatial...] (the others are filters),
/// which only give a shape, and whether the result is one.
struct WindowRoles {
    std::vector<size_t> values, shapes;
    bool result = true;
};

WindowRoles roles(const Node& n) {
    // (the window ops of Ops.def; block/unblock_channels and every other op: no roles)
    if (n.is(Op::Conv)) return {{0}, {}, true};
    if (n.is(Op::ConvBackwardData)) return {{0}, {2}, true};
    if (n.is(Op::ConvBackwardFilter)) return {{0, 1}, {}, false}; // its `like` is the filters
    if (n.is(Op::Pool)) return {{0}, {}, true};
    if (n.is(Op::MaxPoolBackward)) return {{0, 1}, {}, true};
    if (n.is(Op::AvgPoolBackward)) return {{0}, {1}, true};
    return {{}, {}, false};
}

/// conv(x, w) -> unblock(conv'(block(x), w)), and likewise for every window op whose activations
/// have whole channel blocks. Convolutions always gain (oneDNN reorders to blocked anyway); pools
/// run plain layouts as fast, so they are blocked only inside a blocked chain.
NodePtr block_window(const NodePtr& n) {
    if (!has_trait(n->op(), kWindow) || n->is(Op::BlockChannels) || n->is(Op::UnblockChannels) ||
        detail::blocked_mask(*n) != 0 || n->dtype() != DType::F32)
        return nullptr;
    size_t nsp = n->rank() - 2;
    if (nsp < 1 || nsp > 3) return nullptr;
    WindowRoles w = roles(*n);
    bool conv = n->is(Op::Conv) || n->is(Op::ConvBackwardData) || n->is(Op::ConvBackwardFilter);
    const int64_t B = t_block;
    bool chained = false; // an activation is blocked already, or blocks without a reorder
    for (size_t i : w.values)
        chained |= blocked_operand(n->input(i), n->input(i)->shape(), B) != nullptr;
    if (!conv && !chained) return nullptr;
    int64_t mask = 0;
    std::vector<NodePtr> in = n->inputs();
    for (size_t i : w.values) {
        if (blockable(in[i]->shape(), B)) {
            in[i] = block(in[i], B);
            mask |= int64_t(1) << i;
            continue;
        }
        // channels unknown but whole blocks (groups that follow them): blocked where a view of a
        // blocked tensor has them (block_channels needs a known count)
        NodePtr b = whole_blocks(in[i]->shape(), B, channels_per_group(n->op(), n->attrs(), int(i)))
                        ? blocked_operand(in[i], in[i]->shape(), B)
                        : nullptr;
        if (b) {
            in[i] = b;
            mask |= int64_t(1) << i;
        }
    }
    for (size_t i : w.shapes)
        if (i < in.size() && in[i]->is(Op::UnblockChannels) && width(in[i]->input(0)) == B) {
            in[i] = in[i]->input(0);
            mask |= int64_t(1) << i;
        }
    bool result =
        w.result && whole_blocks(n->shape(), B, channels_per_group(n->op(), n->attrs(), -1));
    if (result) mask |= kBlockedResult;
    if (mask == 0) return nullptr;
    mask |= detail::block_bits(B);
    NodePtr b = Node::make_laid_out(n->op(), n->attrs(), std::move(in), mask);
    return result ? unblock(b) : b;
}

NodePtr sink_broadcast(const NodePtr& n);

/// The unblock under reshapes that an operand of hoist_reshape leads to: itself, or the first
/// found through its elementwise operands (kBlockedOperandDepth deep).
NodePtr frame_unblock(const NodePtr& p, int depth = 0) {
    if (p->is(Op::Reshape))
        return unblock_under_reshapes(p);
    if (!has_trait(p->op(), kElementwise) || depth >= kBlockedOperandDepth)
        return nullptr;
    for (const auto& i : p->inputs())
        if (NodePtr u = frame_unblock(i, depth + 1))
            return u;
    return nullptr;
}

/// The blocked form over the blocked `s` of `p`, an operand of e's shape `t` (a reshape of `s`
/// that only inserts or removes dims of size 1 when `map` is given): a scalar, a reshape of an
/// unblock of `s`, a broadcast of a scalar or of a tensor that blocked_operand takes once moved
/// to `s`, an elementwise op of such operands. Null otherwise.
NodePtr framed_operand(const NodePtr& p, const Shape& s, const Shape& t,
                       const std::optional<std::vector<int64_t>>& map, const NodePtr& like,
                       int depth = 0) {
    const int64_t B = width(like);
    if (p->rank() == 0)
        return p;
    // a splat of a scalar (of e's shape, or one broadcast against it): spread over the blocked s
    // (whose unknown dims `like`, a blocked tensor of that shape, gives)
    if (p->is(Op::Broadcast) && p->num_inputs() == 1 && p->input(0)->rank() == 0) {
        const BroadcastAttrs a{blocked_shape(s, B), {}};
        return is_static(s) ? make(Op::Broadcast, a, {p->input(0)})
                            : make(Op::Broadcast, a, {p->input(0), like});
    }
    if (p->shape() != t)
        return nullptr;
    if (p->is(Op::Reshape)) {
        NodePtr u = unblock_under_reshapes(p);
        return u && u->shape() == s && width(u->input(0)) == B ? u->input(0) : nullptr;
    }
    if (p->is(Op::Broadcast) && p->num_inputs() == 1 && map) {
        const NodePtr& x = p->input(0);
        // the same spread over s: x's dims on t's units dropped, the others moved to s's
        const auto& ba = p->attr<BroadcastAttrs>();
        Shape xs;
        std::vector<int64_t> dims;
        for (size_t i = 0; i < ba.dims.size(); ++i) {
            int64_t to = (*map)[size_t(ba.dims[i])];
            if (to < 0) {
                if (x->shape()[i] != 1)
                    return nullptr;
                continue;
            }
            xs.push_back(x->shape()[i]);
            dims.push_back(to);
        }
        if (!reshapable(xs))
            return nullptr;
        if (is_static(s))
            return blocked_operand(
                make(Op::Broadcast, BroadcastAttrs{s, dims}, {reshape_to(x, xs)}), s, B);
        // unknown dims: the spread of a global pool's gradient, as sink_broadcast blocks it
        NodePtr moved = sink_broadcast(
            make(Op::Broadcast, BroadcastAttrs{s, dims}, {reshape_to(x, xs), unblock(like)}));
        return moved ? moved->input(0) : nullptr;
    }
    if (has_trait(p->op(), kElementwise) && depth < kBlockedOperandDepth) {
        std::vector<NodePtr> in;
        for (const auto& i : p->inputs()) {
            NodePtr b = framed_operand(i, s, t, map, like, depth + 1);
            if (!b)
                return nullptr;
            in.push_back(b);
        }
        return make(p->op(), p->attrs(), std::move(in));
    }
    return nullptr;
}

/// e(reshape(unblock(a)), ...) -> reshape(unblock(e(a, ...))) when every operand has a blocked
/// form over the unblock's shape s (framed_operand; Note [Reshapes of whole channel blocks]).
/// f32 results only: a bool or integer result left unblocked would take the reference reorder.
NodePtr hoist_reshape(const NodePtr& n) {
    if (!has_trait(n->op(), kElementwise) || n->dtype() != DType::F32 || !reshapable(n->shape()))
        return nullptr;
    NodePtr first; // the first unblock under reshapes: its shape and width are everyone's
    for (const auto& i : n->inputs())
        if ((first = frame_unblock(i)))
            break;
    if (!first)
        return nullptr;
    const Shape& s = first->shape(); // an unblock's: whole blocks, even when C is unknown
    const int64_t B = width(first->input(0));
    if (s.size() < 3)
        return nullptr;
    const auto map = unit_dims_map(s, n->shape());
    std::vector<NodePtr> in;
    for (const auto& i : n->inputs()) {
        NodePtr b = framed_operand(i, s, n->shape(), map, first->input(0));
        if (!b)
            return nullptr;
        in.push_back(b);
    }
    return reshape_to(unblock(make(n->op(), n->attrs(), std::move(in))), n->shape());
}

/// e(unblock(a), y...) -> unblock(e(a, blocked y...)) when every other operand has a blocked
/// form without a reorder.
NodePtr sink_elementwise(const NodePtr& n) {
    if (!has_trait(n->op(), kElementwise))
        return nullptr;
    int64_t B = 0; // the width of the first unblocked operand: the others must match it
    for (const auto& i : n->inputs())
        if (!B && i->is(Op::UnblockChannels))
            B = width(i->input(0));
    if (!B)
        return nullptr;
    std::vector<NodePtr> in;
    for (const auto& i : n->inputs()) {
        NodePtr b = blocked_operand(i, n->shape(), B);
        if (!b) return nullptr;
        in.push_back(b);
    }
    return unblock(make(n->op(), n->attrs(), std::move(in)));
}

bool plain_reduction(Op op) {
    return op == Op::ReduceSum || op == Op::ReduceProd || op == Op::ReduceMax ||
           op == Op::ReduceMin || op == Op::ReduceAny || op == Op::ReduceAll;
}

/// reduce(unblock(a), axes): over the blocked tensor's matching axes, plus its trailing block
/// axis when the channels are reduced; unblocked (or reshaped) back to the result.
NodePtr sink_reduce(const NodePtr& n) {
    if (!plain_reduction(n->op()) || !n->input(0)->is(Op::UnblockChannels)) return nullptr;
    const NodePtr& a = n->input(0)->input(0);
    ReduceAttrs ra = n->attr<ReduceAttrs>();
    bool channels = std::count(ra.axes.begin(), ra.axes.end(), 1) > 0;
    if (!channels) {
        if (ra.keepdims) return unblock(make(n->op(), ra, {a}));
        // all spatial dims reduced: [N, C / B, B] holds [N, C] in order
        bool spatial = true;
        for (int64_t d = 2; d < int64_t(n->input(0)->rank()); ++d)
            spatial &= std::count(ra.axes.begin(), ra.axes.end(), d) > 0;
        if (spatial && reshapable(n->shape()))
            return reshape_to(make(n->op(), ra, {a}), n->shape());
        if (!is_static(n->shape())) return nullptr;
        return reshape_to(unblock(make(n->op(), ReduceAttrs{ra.axes, true}, {a})), n->shape());
    }
    std::vector<int64_t> axes = ra.axes;
    axes.push_back(a->rank() - 1);
    NodePtr r = make(n->op(), ReduceAttrs{axes, ra.keepdims}, {a});
    if (!ra.keepdims) return r;
    return is_static(n->shape()) ? reshape_to(r, n->shape()) : nullptr;
}

/// reduce(reshape(unblock(a)), axes) -> reshape(reduce(unblock(a), axes')) when the reshape only
/// inserts or removes dims of size 1 (vmap's [B, 1, C, H, W] of a [B, C, H, W] activation: a
/// global pool per example); sink_reduce then takes it to the blocked tensor (Note [Reshapes of
/// whole channel blocks]).
NodePtr reduce_through_reshape(const NodePtr& n) {
    if (!plain_reduction(n->op()) || !n->input(0)->is(Op::Reshape) || !reshapable(n->shape()))
        return nullptr;
    NodePtr u = unblock_under_reshapes(n->input(0));
    if (!u)
        return nullptr;
    const auto map = unit_dims_map(u->shape(), n->input(0)->shape());
    if (!map)
        return nullptr;
    const ReduceAttrs& ra = n->attr<ReduceAttrs>();
    const int r = n->input(0)->rank();
    std::vector<int64_t> axes;
    for (int64_t a : ra.axes) {
        int64_t to = (*map)[size_t(a < 0 ? a + r : a)];
        if (to >= 0)
            axes.push_back(to); // a unit dim: nothing to reduce
    }
    if (axes.empty())
        return nullptr;
    std::sort(axes.begin(), axes.end());
    return reshape_to(make(n->op(), ReduceAttrs{axes, false}, {u}), n->shape());
}

/// broadcast(x, like = unblock(a)) -> unblock(broadcast(blocked x, like = a)) for a scalar, a
/// per-channel x, or an x whose last axis is the channels, broadcast to like's shape.
NodePtr sink_broadcast(const NodePtr& n) {
    if (!n->is(Op::Broadcast) || n->num_inputs() != 2 || !n->input(1)->is(Op::UnblockChannels))
        return nullptr;
    const NodePtr& x = n->input(0);
    const NodePtr& like = n->input(1)->input(0);
    const int64_t B = width(like);
    if (!blockable(n->shape(), B))
        return nullptr;
    const auto& ba = n->attr<BroadcastAttrs>();
    size_t r = n->rank();
    Shape out = blocked_shape(ba.shape, B);
    if (x->rank() == 0) return unblock(make(Op::Broadcast, BroadcastAttrs{out, {}}, {x, like}));
    // x's last axis is the channels (a [N, C] gradient of a global pool spread over [N, C, s...]):
    // split it into [C / B, B] and spread the B over the blocked tensor's last axis
    if (!ba.dims.empty() && ba.dims.back() == 1 && x->shape().back() == n->shape()[1]) {
        Shape xs = x->shape();
        xs.back() = xs.back() / B;
        xs.push_back(B);
        if (reshapable(xs)) {
            std::vector<int64_t> dims = ba.dims;
            dims.push_back(int64_t(r));
            return unblock(make(Op::Broadcast, BroadcastAttrs{out, dims}, {reshape_to(x, xs), like}));
        }
    }
    bool identity = ba.dims.size() == r;
    for (size_t i = 0; i < ba.dims.size() && identity; ++i) identity = ba.dims[i] == int64_t(i);
    if (!identity || !is_static(x->shape()) || !per_channel(x->shape(), r)) return nullptr;
    NodePtr xb = blocked_operand(x, n->shape(), B);
    if (!xb) return nullptr;
    std::vector<int64_t> dims(r + 1);
    for (size_t i = 0; i <= r; ++i) dims[i] = int64_t(i);
    return unblock(make(Op::Broadcast, BroadcastAttrs{out, dims}, {xb, like}));
}

/// philox_bits(counter, like = unblock(a)) -> unblock(philox_bits'(counter, like = a)), drawn
/// blocked (a dropout mask after a convolution, with a dynamic batch).
NodePtr sink_philox(const NodePtr& n) {
    if (!n->is(Op::PhiloxBits) || n->num_inputs() != 2 || !n->input(1)->is(Op::UnblockChannels) ||
        n->layout() != 0)
        return nullptr;
    const NodePtr& like = n->input(1)->input(0);
    const int64_t B = width(like);
    if (!blockable(n->shape(), B))
        return nullptr;
    return unblock(blocked_philox(n, {n->input(0), like}, B));
}

} // namespace

const std::vector<Pattern>& layout_patterns() {
    static const std::vector<Pattern> p = {
        {"layout.cancel", cancel},
        {"layout.block_window", block_window},
        {"layout.sink_elementwise", sink_elementwise},
        {"layout.hoist_reshape", hoist_reshape},
        {"layout.reduce_through_reshape", reduce_through_reshape},
        {"layout.sink_reduce", sink_reduce},
        {"layout.sink_broadcast", sink_broadcast},
        {"layout.sink_philox", sink_philox},
    };
    return p;
}

std::vector<NodePtr> layout(const std::vector<NodePtr>& roots, int64_t block, RewriteStats* stats) {
    SJ_CHECK(detail::valid_block(block), Error) << "layout: a block of " << block << " channels";
    struct Width { // the patterns are plain functions: the run's width is the thread's
        int64_t saved = t_block;
        explicit Width(int64_t b) { t_block = b; }
        ~Width() { t_block = saved; }
    } width(block);
    return compiler::rewrite(roots, layout_patterns(), stats);
}

std::vector<NodePtr> layout(const std::vector<NodePtr>& roots, RewriteStats* stats) {
    int64_t b = channel_block();
    return layout(roots, b ? b : isa_channel_block(), stats);
}

} // namespace sj::cpu
