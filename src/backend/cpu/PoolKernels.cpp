// Max pools as kernels (Note [Max pools as kernels]).
#include "PoolKernels.h"

#include "LayoutPass.h"

#include "../../ops/ChannelBlocking.h"
#include "../../ops/OpDef.h"

#include <symjax/Ops.h>
#include <symjax/Shape.h>
#include <symjax/ir/Attrs.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <variant>

namespace sj::cpu {

// Note [Max pools as kernels]
// A CNN block ends in batch norm, relu and a 2x2 max pool of stride 2. oneDNN pools a
// materialised activation: the relu's result is written (4 MB at the SymJAX paper network's
// first layer, batch 32) only for the pool to read it back, and the pool's backward writes its
// own workspace of window maxima in the forward. On a channel-blocked [N, C/B, H, W, B] tensor
// the four positions of each window are strided slices along H and W whose innermost dim is the
// block of B channels, so the pool is an elementwise op of four contiguous vector loads, and an
// elementwise producer recomputes inline into it:
//
//   p = pool(x)                        t_k = x[:, :, a::2, b::2, :]   (k = 2a + b, window order)
//   dx = max_pool_backward(x, dp)  ->  p = the first maximum of t_0..t_3, i its k (a chain of
//                                      selects: a NaN wins and stays, as in the reference)
//                                      dx = reshape(where(i7 == [[0, 1], [2, 3]], dp7, 0))
//
// where i7 and dp7 are i and dp reshaped to [N, C/B, H/2, 1, W/2, 1, B] and the constant
// positions are [1, 1, 1, 2, 1, 2, 1]: every view is a reshape of a contiguous tensor. The
// forward kernel computes p and i together (siblings over one space reading x), i is stored (a
// reshape reads it) in the place of oneDNN's workspace, and the backward is one elementwise
// kernel over the 7-d space that reads i and dp and writes dx. The rewrite runs after the
// layout pass, on pools whose operands and result are blocked, whose input is elementwise (a
// library call's result gains nothing from it: oneDNN then pools it as fast), with a 2x2
// window, stride 2, no padding and even static H and W. A forward and its backward over the
// same x build the same (p, i) (nodes are interned), so the backward never recomputes the maxima.
// SJ_POOL_KERNELS=0 leaves every pool to oneDNN (to measure the two side by side).

namespace {

struct WindowMax {
    NodePtr value, index;
};

/// The values of the pooled activations' shape [N, C/B, H, W, B] that this run of the pass saw
/// them computed from (a conv's result under its batch norm and relu), each with the split
/// [N, C/B, H/2, 2, W/2, 2, B] (Note [Window gradients in the space of their windows]).
thread_local std::map<NodePtr, Shape>* t_pooled_sources = nullptr;

/// How deep record_sources() and source_reads() look through elementwise ops (Note [Compile
/// scaling] in src/compiler/Fusion.cpp).
constexpr int kSourceDepth = 6;

/// Records the values of x's shape that the elementwise x reads (kSourceDepth deep).
void record_sources(const NodePtr& e, const Shape& s5, const Shape& s7, int depth = 0) {
    for (const NodePtr& i : e->inputs()) {
        if (i->shape() != s5)
            continue;
        if (has_trait(i->op(), kElementwise)) {
            if (depth < kSourceDepth)
                record_sources(i, s5, s7, depth + 1);
        } else {
            t_pooled_sources->emplace(i, s7);
        }
    }
}

/// What an elementwise expression reads, for reduce_in_windows: the split space of a pooled
/// source (null: none), and whether it reads another value of more than one element.
struct SourceReads {
    const Shape* split = nullptr;
    bool others = false;
};
void source_reads(const NodePtr& e, SourceReads& r, int depth = 0) {
    for (const NodePtr& i : e->inputs()) {
        if (auto it = t_pooled_sources->find(i); it != t_pooled_sources->end()) {
            r.split = &it->second;
        } else if (has_trait(i->op(), kElementwise)) {
            if (depth < kSourceDepth)
                source_reads(i, r, depth + 1);
            else
                r.others = true;
        } else {
            r.others |= numel(i->shape()) != 1; // (-1 when dynamic: more than one)
        }
    }
}

/// Whether the laid-out pool or max-pool backward `n` runs as kernels here.
bool kernel_pool(const Node& n) {
    const bool fwd = n.is(Op::Pool);
    if (!fwd && !n.is(Op::MaxPoolBackward))
        return false;
    const auto& a = n.attr<PoolAttrs>();
    const std::vector<int64_t> two = {2, 2}, zero = {0, 0};
    if (a.kind != PoolKind::Max || a.window != two || a.strides != two || a.pad_lo != zero ||
        a.pad_hi != zero)
        return false;
    const NodePtr& x = n.input(0);
    const Shape& s = x->shape();
    if (n.dtype() != DType::F32 || x->dtype() != DType::F32 || s.size() != 5 ||
        !detail::valid_block(s[4]))
        return false;
    const int64_t want = fwd ? (1 | detail::kBlockedResult) : (1 | 2 | detail::kBlockedResult);
    if ((detail::blocked_mask(n) & want) != want)
        return false;
    if (s[2] < 2 || s[3] < 2 || s[2] % 2 != 0 || s[3] % 2 != 0)
        return false; // (unknown, or a row or column that no window covers)
    return has_trait(x->op(), kElementwise);
}

/// The values x (the input of a pool that runs as kernels) is computed from, for
/// reduce_in_windows.
void record_pool(const NodePtr& x) {
    const Shape& s = x->shape();
    if (t_pooled_sources)
        record_sources(x, s, Shape{s[0], s[1], s[2] / 2, 2, s[3] / 2, 2, s[4]});
}

/// The first maximum of each 2x2 window of the blocked x and its position (k = 2a + b, as f32).
WindowMax window_max(const NodePtr& x) {
    const Shape& s = x->shape();
    Tensor t[4];
    for (int k = 0; k < 4; ++k)
        t[k] = slice_axis(slice_axis(Tensor(x), 2, k / 2, s[2], 2), 3, k % 2, s[3], 2);
    // the reference's argmax_in_window: a later position wins when it is greater or NaN, unless
    // the maximum so far is NaN
    Tensor v = t[0], i = full_like(t[0], 0.0);
    for (int k = 1; k < 4; ++k) {
        Tensor take = logical_and(logical_not(isnan(v)), logical_or(gt(t[k], v), isnan(t[k])));
        i = where(take, double(k), i);
        v = where(take, t[k], v);
    }
    return {v.node(), i.node()};
}

/// pool(x) -> the first maximum of each window (Note [Max pools as kernels]).
NodePtr pool_as_kernel(const NodePtr& n) {
    if (!n->is(Op::Pool) || !kernel_pool(*n))
        return nullptr;
    record_pool(n->input(0));
    NodePtr p = window_max(n->input(0)).value;
    SJ_ASSERT(p->shape() == n->shape()) << "pool_as_kernel: " << shape_str(p->shape())
                                        << " for a pool of " << shape_str(n->shape());
    return p;
}

/// max_pool_backward(x, dp) -> dp at each window's first maximum, 0 elsewhere.
NodePtr pool_backward_as_kernel(const NodePtr& n) {
    if (!n->is(Op::MaxPoolBackward) || !kernel_pool(*n))
        return nullptr;
    record_pool(n->input(0));
    const Shape& s = n->input(0)->shape(); // [N, C/B, H, W, B]
    const Shape s7 = {s[0], s[1], s[2] / 2, 1, s[3] / 2, 1, s[4]};
    Array at(DType::F32, {1, 1, 1, 2, 1, 2, 1});
    for (int k = 0; k < 4; ++k)
        at.data<float>()[k] = float(k);
    const Tensor i7 = reshape(Tensor(window_max(n->input(0)).index), s7);
    const Tensor d7 = where(eq(i7, constant(at)), reshape(Tensor(n->input(1)), s7), 0.0);
    return reshape(d7, s).node();
}

// Note [Window gradients in the space of their windows]
// The backward of Note [Max pools as kernels] is an elementwise op over [N, C/B, H/2, 2, W/2, 2,
// B], reshaped to [N, C/B, H, W, B] for the batch-norm backward that reads it. A reshape is a
// view of a buffer, so that dx would be written out (4 MB at the paper network's first layer)
// and read back by the batch norm's sums and again by its dx kernel: the traffic oneDNN's pool
// backward has. Instead the reshape moves past the ops that read it, into the space of the
// windows, where every operand of [N, C/B, H, W, B] is a view too ([H, W] split into [H/2, 2,
// W/2, 2] is a reshape of a contiguous tensor):
//
//   e(reshape(d7), z, g[C])  ->  reshape(e(d7, reshape(z), reshape(g)))   (elementwise_in_windows)
//   sum(reshape(d7), {0, 2, 3})  ->  reshape(sum(d7, {0, 2, 3, 4, 5}))     (reduce_in_windows)
//
// An operand of the full size that fusion would compute inline (an elementwise op: the relu mask
// of the normalised value) is rebuilt in the split space from its own operands (lift, at most
// kLiftDepth deep), since a reshape of it would make fusion store it; one that is stored anyway
// (a conv's result, a variable, a reduction) is reshaped, and so is a small operand without
// spatial extent. Where some operand has no such form the op stays as it was and reads the
// stored dx. So the pool's backward recomputes into the batch norm's two passes, which read i and
// dp (a quarter of dx each) instead of dx, and no dx of the pool is ever stored.
//
// One sum of the batch norm's backward reads no gradient: the sum of y - mean(y) that autodiff
// writes for the variance (in f32 it is not zero, and it corrects the gradient for the mean's
// rounding: KernelPlan.OnePassBatchNormStatisticsMatchTwoPasses fails without it). Left over
// [N, C/B, H, W, B] it would be a pass of its own over y. So a reduction over H and W of an
// elementwise op that reads a value the pooled activation was computed from (y, recorded when
// the pool is rewritten) and some other value of more than one element (the mean) moves into the
// space of the windows too, where it joins the other sums. The forward statistics read y alone
// and stay, beside the element counts they share a kernel with.

/// Whether `r` reshapes [N, C, H2, a, W2, b, B] into [N, C, H2 a, W2 b, B] (what
/// pool_backward_as_kernel returns, and what the rules below move).
bool window_merge(const Node& r) {
    if (!r.is(Op::Reshape) || r.num_inputs() != 1)
        return false;
    const Shape &s7 = r.input(0)->shape(), &s5 = r.shape();
    if (s7.size() != 7 || s5.size() != 5 || s7[0] != s5[0] || s7[1] != s5[1] || s7[6] != s5[4])
        return false;
    for (size_t d = 2; d < 6; ++d)
        if (s7[d] < 1)
            return false;
    return s7[2] * s7[3] == s5[2] && s7[4] * s7[5] == s5[3];
}

/// How deep lift rebuilds elementwise operands: a bound, so that a long elementwise chain costs
/// each rewrite a constant (Note [Compile scaling] in src/compiler/Fusion.cpp).
constexpr int kLiftDepth = 6;

NodePtr lift(const NodePtr& o, const Shape& s7, int depth = 0);

/// broadcast(x[, like]) to [N, C, H, W, B] over the split space (its shape q) when x has no
/// spatial extent and is spread right-aligned; null otherwise.
NodePtr lift_broadcast(const Node& b, const Shape& q, const Shape& s7, int depth) {
    const NodePtr& x = b.input(0);
    const auto& a = b.attr<BroadcastAttrs>();
    const size_t r = x->shape().size();
    for (size_t k = 0; k < a.dims.size(); ++k)
        if (a.dims[k] != int64_t(5 - r + k))
            return nullptr;
    Shape p(5 - r, 1);
    p.insert(p.end(), x->shape().begin(), x->shape().end());
    if (p[2] != 1 || p[3] != 1)
        return nullptr;
    NodePtr lx = lift(x, s7, depth + 1);
    if (!lx)
        return nullptr;
    BroadcastAttrs la{q, {}};
    for (int64_t d = 0; d < 7; ++d)
        la.dims.push_back(d);
    std::vector<NodePtr> in = {reshape_to(lx, {p[0], p[1], 1, 1, 1, 1, p[4]})};
    if (b.num_inputs() == 2) { // (its like gives the shape only)
        NodePtr like = lift(b.input(1), s7, depth + 1);
        if (!like)
            return nullptr;
        in.push_back(std::move(like));
    }
    return Node::make(Op::Broadcast, std::move(la), std::move(in));
}

/// `o`, an operand broadcast against [N, C, H, W, B] (right-aligned), over the split space s7 =
/// [N, C, H2, a, W2, b, B]; null where that would store a tensor of the full size that fusion
/// computes inline now (Note [Window gradients in the space of their windows]).
NodePtr lift(const NodePtr& o, const Shape& s7, int depth) {
    const Shape& os = o->shape();
    if (os.empty())
        return o;
    if (os.size() > 5)
        return nullptr;
    Shape p(5 - os.size(), 1);
    p.insert(p.end(), os.begin(), os.end());
    const bool h = p[2] != 1, w = p[3] != 1;
    if (h != w || (h && (p[2] != s7[2] * s7[3] || p[3] != s7[4] * s7[5])))
        return nullptr; // (one spatial dim spread alone: none of our rules writes it)
    const Shape q = h ? Shape{p[0], p[1], s7[2], s7[3], s7[4], s7[5], p[4]}
                      : Shape{p[0], p[1], 1, 1, 1, 1, p[4]};
    if (h && window_merge(*o) && o->input(0)->shape() == q)
        return o->input(0);
    if (has_trait(o->op(), kElementwise) && depth < kLiftDepth) {
        std::vector<NodePtr> in;
        for (const NodePtr& i : o->inputs()) {
            NodePtr l = lift(i, s7, depth + 1);
            if (!l)
                return nullptr;
            in.push_back(std::move(l));
        }
        return Node::rebuild(*o, std::move(in));
    }
    if (h && o->is(Op::Broadcast) && depth < kLiftDepth) // (a per-channel term spread out)
        return lift_broadcast(*o, q, s7, depth);
    const detail::FusionClass c = detail::fusion_class(o->op());
    if (h && (c == detail::FusionClass::Elementwise || c == detail::FusionClass::Movement))
        return nullptr; // (a view of it would store it)
    return reshape_to(o, q);
}

/// e(.., reshape(d7), ..) -> reshape(e(.., d7, ..)) with every operand lifted.
NodePtr elementwise_in_windows(const NodePtr& n) {
    if (!has_trait(n->op(), kElementwise) || n->rank() != 5)
        return nullptr;
    const Node* m = nullptr;
    for (const NodePtr& i : n->inputs())
        if (window_merge(*i) && i->shape() == n->shape()) {
            m = i.get();
            break;
        }
    if (!m)
        return nullptr;
    const Shape& s7 = m->input(0)->shape();
    std::vector<NodePtr> in;
    for (const NodePtr& i : n->inputs()) {
        NodePtr l = lift(i, s7);
        if (!l)
            return nullptr;
        in.push_back(std::move(l));
    }
    return reshape_to(Node::rebuild(*n, std::move(in)), n->shape());
}

/// reduce(reshape(d7), axes) -> reshape(reduce(d7, the axes split alike)); and so for a
/// reduction over H and W of an elementwise op of a pooled space, lifted.
NodePtr reduce_in_windows(const NodePtr& n) {
    // (sums, products, max, min, any, all: argmax's index would change with the split)
    if (detail::fusion_class(n->op()) != detail::FusionClass::Reduce || n->num_inputs() != 1 ||
        !std::holds_alternative<ReduceAttrs>(n->attrs()))
        return nullptr;
    const NodePtr& x = n->input(0);
    NodePtr d7;
    if (window_merge(*x)) {
        d7 = x->input(0);
    } else if (t_pooled_sources && x->rank() == 5 && has_trait(x->op(), kElementwise)) {
        std::vector<int64_t> ax = n->attr<ReduceAttrs>().axes;
        for (int64_t& v : ax)
            v = v < 0 ? v + 5 : v;
        const auto reduced = [&](int64_t d) {
            return std::find(ax.begin(), ax.end(), d) != ax.end();
        };
        SourceReads r;
        if (reduced(2) && reduced(3))
            source_reads(x, r);
        // (the forward statistics read the source alone: they stay, beside its counts)
        if (!r.split || !r.others)
            return nullptr;
        d7 = lift(x, *r.split);
    }
    if (!d7)
        return nullptr;
    ReduceAttrs a = n->attr<ReduceAttrs>();
    static const std::vector<std::vector<int64_t>> split = {{0}, {1}, {2, 3}, {4, 5}, {6}};
    std::vector<int64_t> axes;
    for (int64_t ax : a.axes)
        for (int64_t s : split[size_t(ax < 0 ? ax + 5 : ax)])
            axes.push_back(s);
    a.axes = axes;
    return reshape_to(Node::make(n->op(), a, {d7}), n->shape());
}

} // namespace

std::vector<NodePtr> pools_as_kernels(const std::vector<NodePtr>& roots,
                                      compiler::RewriteStats* stats) {
    static const bool off = [] {
        const char* e = std::getenv("SJ_POOL_KERNELS");
        return e && std::strcmp(e, "0") == 0;
    }();
    if (off)
        return roots;
    std::map<NodePtr, Shape> sources;
    struct Hold { // the table lives for this run only, also when a pattern throws
        explicit Hold(std::map<NodePtr, Shape>* t) { t_pooled_sources = t; }
        ~Hold() { t_pooled_sources = nullptr; }
    } hold(&sources);
    static const std::vector<compiler::Pattern> patterns = {
        {"pool_as_kernel", pool_as_kernel},
        {"pool_backward_as_kernel", pool_backward_as_kernel},
        {"elementwise_in_windows", elementwise_in_windows},
        {"reduce_in_windows", reduce_in_windows},
    };
    return compiler::rewrite(roots, patterns, stats);
}

} // namespace sj::cpu
