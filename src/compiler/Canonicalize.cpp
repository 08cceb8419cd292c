// Canonicalisation patterns: constant folding through the reference backend and identities.
#include "Canonicalize.h"

#include "../backend/reference/Reference.h"
#include "../ops/OpDef.h"

#include <symjax/Ops.h>
#include <symjax/ir/Node.h>

#include <algorithm>
#include <cmath>

namespace sj::compiler {
namespace {

Tensor T(const NodePtr& n) { return Tensor(n); }
const NodePtr& in0(const NodePtr& n) { return n->input(0); }
const NodePtr& in1(const NodePtr& n) { return n->input(1); }

/// op(constants...) -> constant, evaluated by the reference kernels.
NodePtr fold_constants(const NodePtr& n) {
    // not kPure (check_index, the collectives): the op acts when it runs, so it stays
    if (!has_trait(n->op(), kPure) || has_trait(n->op(), kRandom) || n->is(Op::Broadcast) ||
        n->num_inputs() == 0)
        return nullptr;
    int64_t size = numel(n->shape());
    if (size < 0 || size > kMaxFoldElements) return nullptr;
    std::vector<Array> vals;
    for (const auto& i : n->inputs()) {
        if (!i->is(Op::Constant)) return nullptr;
        vals.push_back(i->attr<ConstantAttrs>().value);
    }
    try {
        return detail::shared_constant(ref::eval_node(*n, vals, 0));
    } catch (const InputError&) {
        return nullptr; // e.g. an out-of-range index: leave it to fail at call time, as written
    }
}

/// x * 1 -> x, 1 * x -> x (when the result has x's shape)
NodePtr mul_one(const NodePtr& n) {
    if (!n->is(Op::Mul)) return nullptr;
    if (is_splat(*in1(n), 1.0) && in0(n)->shape() == n->shape()) return in0(n);
    if (is_splat(*in0(n), 1.0) && in1(n)->shape() == n->shape()) return in1(n);
    return nullptr;
}

/// x + 0 -> x, 0 + x -> x, x - 0 -> x, x / 1 -> x
NodePtr add_zero(const NodePtr& n) {
    if (n->is(Op::Add)) {
        if (is_splat(*in1(n), 0.0) && in0(n)->shape() == n->shape()) return in0(n);
        if (is_splat(*in0(n), 0.0) && in1(n)->shape() == n->shape()) return in1(n);
    }
    if ((n->is(Op::Sub) && is_splat(*in1(n), 0.0)) || (n->is(Op::Div) && is_splat(*in1(n), 1.0)))
        if (in0(n)->shape() == n->shape()) return in0(n);
    return nullptr;
}

/// neg(neg(x)) -> x
NodePtr neg_neg(const NodePtr& n) {
    if (n->is(Op::Neg) && in0(n)->is(Op::Neg)) return in0(in0(n));
    return nullptr;
}

/// stop_gradient(x) -> x: after autodiff it is the identity
NodePtr drop_stop_gradient(const NodePtr& n) { return n->is(Op::StopGradient) ? in0(n) : nullptr; }

/// reshape(reshape(x)) -> reshape(x); reshape(x) to x's own static shape -> x
NodePtr reshape_chain(const NodePtr& n) {
    if (!n->is(Op::Reshape)) return nullptr;
    if (is_static(n->shape()) && n->shape() == in0(n)->shape()) return in0(n);
    if (in0(n)->is(Op::Reshape)) {
        std::vector<NodePtr> ins{in0(in0(n))};
        if (n->num_inputs() == 2) ins.push_back(n->input(1)); // keep the outer shape source
        return Node::make(Op::Reshape, n->attrs(), std::move(ins));
    }
    return nullptr;
}

/// transpose(transpose(x, p), q) -> transpose(x, p[q]); identity permutation -> x
NodePtr permute_chain(const NodePtr& n) {
    if (!n->is(Op::Permute)) return nullptr;
    const auto& q = n->attr<AxesAttrs>().axes;
    bool id = true;
    for (size_t i = 0; i < q.size(); ++i) id &= q[i] == int64_t(i);
    if (id) return in0(n);
    if (!in0(n)->is(Op::Permute)) return nullptr;
    const auto& p = in0(n)->attr<AxesAttrs>().axes;
    std::vector<int64_t> r(q.size());
    for (size_t i = 0; i < q.size(); ++i) r[i] = p[q[i]];
    return transpose(T(in0(in0(n))), r).node();
}

/// transpose(x, p) -> reshape(x) when p moves only dims of size 1 (its other dims keep their
/// order, so the row-major bytes are the same): vmap writes such transposes around grouped
/// convolutions (a batch of one moved next to the examples), and a reshape is a view. An unknown
/// dim counts as one that may not be 1; the reshape infers at most one.
NodePtr permute_units(const NodePtr& n) {
    if (!n->is(Op::Permute))
        return nullptr;
    const Shape& out = n->shape();
    if (std::count(out.begin(), out.end(), int64_t(-1)) > 1)
        return nullptr;
    const auto& p = n->attr<AxesAttrs>().axes;
    const Shape& s = in0(n)->shape();
    int64_t last = -1;
    for (int64_t a : p) {
        if (s[size_t(a)] == 1)
            continue;
        if (a < last)
            return nullptr;
        last = a;
    }
    return Node::make(Op::Reshape, ShapeAttrs{n->shape()}, {in0(n)});
}

/// broadcast(broadcast(x, s1, d1), s2, d2) -> broadcast(x, s2, d2[d1])
NodePtr broadcast_chain(const NodePtr& n) {
    if (!n->is(Op::Broadcast) || n->num_inputs() != 1) return nullptr;
    const NodePtr& a = in0(n);
    const auto& outer = n->attr<BroadcastAttrs>();
    if (a->rank() == n->rank() && a->shape() == n->shape() && is_static(n->shape())) return a;
    if (!a->is(Op::Broadcast) || a->num_inputs() != 1) return nullptr;
    const auto& inner = a->attr<BroadcastAttrs>();
    std::vector<int64_t> dims(inner.dims.size());
    for (size_t i = 0; i < dims.size(); ++i) dims[i] = outer.dims[inner.dims[i]];
    Shape s = outer.shape;
    for (size_t i = 0; i < s.size(); ++i)
        if (s[i] == -1) s[i] = n->shape()[i];
    if (!is_static(s)) return nullptr;
    return Node::make(Op::Broadcast, BroadcastAttrs{s, dims}, {in0(a)});
}

/// broadcast(x) that only inserts dims of size 1 (x's dims kept, in order, at their sizes) ->
/// reshape(x): a view where the broadcast was a copy. vmap writes these for an example's
/// expand_dims ([B, C, H, W] -> [B, 1, C, H, W] around a batched image). A valid broadcast
/// whose result has x's dims but for 1s (detail::unit_dims_map) spreads nothing.
NodePtr broadcast_units(const NodePtr& n) {
    // (a scalar's spread stays one: the patterns that look for splats read broadcasts)
    if (!n->is(Op::Broadcast) || n->num_inputs() != 1 || in0(n)->rank() == 0 ||
        !detail::unit_dims_map(in0(n)->shape(), n->shape()))
        return nullptr;
    return Node::make(Op::Reshape, ShapeAttrs{n->shape()}, {in0(n)});
}

/// An input that only gives a shape (a broadcast's or reshape's `like`, philox's, the window
/// backward ops') names the earliest value of that shape along a chain of elementwise ops:
/// broadcast(g, d * d) -> broadcast(g, x) for d = x - mean(x). The shape is the same, and
/// broadcasts of one value to one shape become one node (hash-consing) whichever value of that
/// shape each named. (A value read for its shape alone is not computed at all: Note [Values
/// read for their shape alone] in Fusion.cpp. Autodiff's gradient of sum(d * d) names d * d,
/// which a one-pass variance no longer computes: Note [Variance in one pass] in
/// Specialize.cpp.)
NodePtr earliest_shape_source(const NodePtr& n) {
    // The walk ends at a value with no elementwise step left (so the rule is at its fixpoint
    // after one rewrite) within 16 steps, or the input stays: a residual chain of 10^5 steps
    // must not be walked once per broadcast of its gradient.
    constexpr int kMaxSteps = 16;
    auto step = [](const NodePtr& l) -> const NodePtr* {
        if (!has_trait(l->op(), kElementwise))
            return nullptr;
        for (const NodePtr& x : l->inputs())
            if (x->shape() == l->shape())
                return &x;
        return nullptr;
    };
    std::vector<NodePtr> ins = n->inputs();
    bool changed = false;
    for (size_t i = 0; i < ins.size(); ++i) {
        if (!detail::shape_only_input(*n, i))
            continue;
        NodePtr l = ins[i];
        int steps = 0;
        for (const NodePtr* x = step(l); x && steps <= kMaxSteps; x = step(l), ++steps)
            l = *x;
        if (steps > 0 && steps <= kMaxSteps) {
            ins[i] = l;
            changed = true;
        }
    }
    return changed ? Node::rebuild(*n, std::move(ins)) : nullptr;
}

/// cast(cast(x, wide), type(x)) -> x when the inner cast is lossless (f32 -> f64, i32 -> i64)
NodePtr cast_roundtrip(const NodePtr& n) {
    if (!n->is(Op::Cast) || !in0(n)->is(Op::Cast)) return nullptr;
    const NodePtr& x = in0(in0(n));
    DType a = x->dtype(), b = in0(n)->dtype();
    bool lossless = (a == DType::F32 && b == DType::F64) || (a == DType::I32 && b == DType::I64) ||
                    (a == DType::U8 && (b == DType::I32 || b == DType::I64 || b == DType::U32)) ||
                    (a == DType::I32 && b == DType::F64);
    if (lossless && n->dtype() == a) return x;
    return nullptr;
}

/// unary(broadcast(x)) -> broadcast(unary(x)): do the work on the small tensor
NodePtr sink_broadcast(const NodePtr& n) {
    if (!has_trait(n->op(), kElementwise) || n->num_inputs() != 1) return nullptr;
    const NodePtr& b = in0(n);
    if (!b->is(Op::Broadcast) || b->num_inputs() != 1) return nullptr;
    NodePtr u = Node::make(n->op(), n->attrs(), {in0(b)});
    return Node::make(Op::Broadcast, b->attrs(), {u});
}

/// where(c, 0, g) * k -> where(c, 0, g * k) and where(c, g, 0) * k -> where(c, g * k, 0), k a
/// finite one-value constant (0 * k stays 0): the scaled branch of a gradient through where
NodePtr where_scale(const NodePtr& n) {
    if (!n->is(Op::Mul)) return nullptr;
    for (int i = 0; i < 2; ++i) {
        const NodePtr& w = n->input(i);
        const NodePtr& k = n->input(1 - i);
        double kv;
        if (!w->is(Op::Where) || !splat_value(*k, &kv) || !std::isfinite(kv)) continue;
        if (w->shape() != n->shape()) continue;
        for (int side = 1; side <= 2; ++side) {
            if (!is_splat(*w->input(3 - side), 0.0)) continue;
            // a relu select, where(x <= 0, 0, x), stays one (Note [Relu masks])
            if (w->input(0)->num_inputs() == 2 && w->input(0)->input(0) == w->input(size_t(side)))
                continue;
            Tensor scaled = T(w->input(size_t(side))) * T(k);
            Tensor r = side == 1 ? where(T(w->input(0)), scaled, T(w->input(2)))
                                 : where(T(w->input(0)), T(w->input(1)), scaled);
            return r.shape() == n->shape() && r.dtype() == n->dtype() ? r.node() : nullptr;
        }
    }
    return nullptr;
}

/// where(c, a, 0) + where(c, 0, b) -> where(c, a, b): the gradient of where(c, f(x), g(x))
/// reaches x through both branches (leaky relu's backward is one select, not two and an add)
NodePtr where_merge(const NodePtr& n) {
    if (!n->is(Op::Add)) return nullptr;
    const NodePtr &l = in0(n), &r = in1(n);
    if (!l->is(Op::Where) || !r->is(Op::Where) || l->input(0) != r->input(0)) return nullptr;
    NodePtr a, b;
    if (is_splat(*l->input(2), 0.0) && is_splat(*r->input(1), 0.0)) {
        a = l->input(1);
        b = r->input(2);
    } else if (is_splat(*l->input(1), 0.0) && is_splat(*r->input(2), 0.0)) {
        a = r->input(1);
        b = l->input(2);
    } else {
        return nullptr;
    }
    Tensor m = where(T(l->input(0)), T(a), T(b));
    return m.shape() == n->shape() && m.dtype() == n->dtype() ? m.node() : nullptr;
}

/// pad(x) by nothing on every dim -> x
NodePtr pad_identity(const NodePtr& n) {
    if (!n->is(Op::Pad))
        return nullptr;
    const auto& a = n->attr<PadAttrs>();
    for (size_t i = 0; i < a.lo.size(); ++i)
        if (a.lo[i] != 0 || a.hi[i] != 0 || a.interior[i] != 0)
            return nullptr;
    return in0(n);
}

// Note [Sums of pads]
// The gradient of slicing a tensor into pieces along one dim (the gates of a recurrent cell,
// split, chunk) is, per piece, the piece's cotangent zero-padded back to the whole dim, and
// autodiff adds those up: for an LSTM, four pads and three adds, each a full pass over a tensor
// that is three quarters zeros. When the pads' ranges tile part of the dim without overlapping,
// the sum is one pad of their concat (the pad vanishes when they tile the whole dim):
//
//   pad(a, lo 0, hi 3h) + pad(b, lo h, hi 2h) + pad(c, lo 2h, hi h) + pad(d, lo 3h, hi 0)
//     -> concat(a, b, c, d)
//
// which copies each piece once. The pads must be zero pads along one shared axis with no
// interior padding, of the add's own shape and type; the add tree is searched through adds
// only, and operands that are not such pads stay as addends. Every element of the result is
// one piece's element (x + 0 = x), except that -0 in a piece stays -0.
struct AxisPad {
    NodePtr x;
    int64_t lo = 0, size = 0;
};

/// n as a zero pad of its input along `*axis` only (set from the first pad seen), with the
/// input's size on that axis known.
bool axis_pad(const NodePtr& n, int64_t* axis, AxisPad* out) {
    if (!n->is(Op::Pad))
        return false;
    const auto& a = n->attr<PadAttrs>();
    if (a.value != 0.0)
        return false;
    int64_t ax = -1;
    for (size_t i = 0; i < a.lo.size(); ++i) {
        if (a.interior[i] != 0)
            return false;
        if (a.lo[i] == 0 && a.hi[i] == 0)
            continue;
        if (ax >= 0)
            return false;
        ax = int64_t(i);
    }
    if (ax < 0 || (*axis >= 0 && ax != *axis) || in0(n)->shape()[size_t(ax)] < 0)
        return false;
    *axis = ax;
    *out = {in0(n), a.lo[size_t(ax)], in0(n)->shape()[size_t(ax)]};
    return true;
}

/// pad(a) + pad(b) + ... -> pad(concat(a, b, ...)) (Note [Sums of pads])
NodePtr pad_sum(const NodePtr& n) {
    if (!n->is(Op::Add))
        return nullptr;
    constexpr size_t kMaxLeaves = 64;
    std::vector<NodePtr> todo{n}, others;
    std::vector<AxisPad> pads;
    int64_t axis = -1;
    while (!todo.empty()) {
        NodePtr m = todo.back();
        todo.pop_back();
        if (m->is(Op::Add) && m->shape() == n->shape() && m->dtype() == n->dtype() &&
            pads.size() + others.size() + todo.size() < kMaxLeaves) {
            todo.push_back(in1(m));
            todo.push_back(in0(m));
            continue;
        }
        AxisPad p;
        if (m->shape() == n->shape() && m->dtype() == n->dtype() && axis_pad(m, &axis, &p))
            pads.push_back(p);
        else
            others.push_back(m);
    }
    if (pads.size() < 2)
        return nullptr;
    std::stable_sort(pads.begin(), pads.end(),
                     [](const AxisPad& a, const AxisPad& b) { return a.lo < b.lo; });
    for (size_t k = 1; k < pads.size(); ++k)
        if (pads[k].lo != pads[k - 1].lo + pads[k - 1].size)
            return nullptr; // a gap or overlap
    std::vector<Tensor> pieces;
    for (const AxisPad& p : pads) {
        // splice a piece that is itself a concat on the axis (an earlier rewrite's result)
        if (p.x->is(Op::Concat) && p.x->attr<AxisAttrs>().axis == axis)
            for (const auto& i : p.x->inputs())
                pieces.push_back(T(i));
        else
            pieces.push_back(T(p.x));
    }
    // (the axis's size is known: a pad of a piece of known size gives one)
    std::vector<int64_t> lo(size_t(n->rank()), 0), hi(size_t(n->rank()), 0);
    lo[size_t(axis)] = pads.front().lo;
    hi[size_t(axis)] = n->shape()[size_t(axis)] - (pads.back().lo + pads.back().size);
    Tensor r = pad(concat(pieces, axis), lo, hi, 0.0);
    for (const NodePtr& o : others)
        r = r + T(o);
    return r.shape() == n->shape() && r.dtype() == n->dtype() ? r.node() : nullptr;
}

} // namespace

const std::vector<Pattern>& canonicalize_patterns() {
    static const std::vector<Pattern> p = {
        {"fold_constants", fold_constants},
        {"drop_stop_gradient", drop_stop_gradient},
        {"mul_one", mul_one},
        {"add_zero", add_zero},
        {"neg_neg", neg_neg},
        {"reshape_chain", reshape_chain},
        {"permute_chain", permute_chain},
        {"permute_units", permute_units},
        {"broadcast_chain", broadcast_chain},
        {"broadcast_units", broadcast_units},
        {"earliest_shape_source", earliest_shape_source},
        {"cast_roundtrip", cast_roundtrip},
        {"sink_broadcast", sink_broadcast},
        {"where_scale", where_scale},
        {"where_merge", where_merge},
        {"pad_identity", pad_identity},
        {"pad_sum", pad_sum},
    };
    return p;
}

std::vector<NodePtr> canonicalize(const std::vector<NodePtr>& roots, RewriteStats* stats) {
    return rewrite(roots, canonicalize_patterns(), stats);
}

} // namespace sj::compiler
