// Specialisation patterns: cheaper forms for pow by constants, transposes folded into dots,
// factors that do not vary along a sum's axes moved out of it, relu masks of a normalisation
// computed from its input, reductions of a few terms written as their combination.
#include "Specialize.h"

#include "../ops/OpDef.h"

#include <symjax/Ops.h>
#include <symjax/ir/Attrs.h>
#include <symjax/ir/Node.h>

#include <algorithm>
#include <cstdint>
#include <unordered_map>

namespace sj::compiler {
namespace {

Tensor T(const NodePtr& n) { return Tensor(n); }
const NodePtr& in0(const NodePtr& n) { return n->input(0); }
const NodePtr& in1(const NodePtr& n) { return n->input(1); }

/// pow(x, c) -> x*x, x*x*x, sqrt(x), rsqrt(x), 1/x or x for c in {2, 3, 0.5, -0.5, -1, 1}
NodePtr pow_small(const NodePtr& n) {
    if (!n->is(Op::Pow) || in0(n)->shape() != n->shape()) return nullptr;
    double c;
    if (!splat_value(*in1(n), &c)) return nullptr;
    Tensor x = T(in0(n));
    if (c == 1.0) return x.node();
    if (c == 2.0) return (x * x).node();
    if (c == 3.0) return (x * x * x).node();
    if (c == 0.5) return sqrt(x).node();
    if (c == -0.5) return rsqrt(x).node();
    if (c == -1.0) return reciprocal(x).node();
    return nullptr;
}

/// Maps dot dims through a permutation p of the operand; false when the permutation reorders
/// free dims (the result's dim order would change).
bool fold_perm(const std::vector<int64_t>& p, std::vector<int64_t>& batch, std::vector<int64_t>& contract) {
    std::vector<bool> used(p.size(), false);
    for (int64_t d : batch) used[d] = true;
    for (int64_t d : contract) used[d] = true;
    int64_t last = -1;
    for (size_t i = 0; i < p.size(); ++i) {
        if (used[i]) continue;
        if (p[i] < last) return false;
        last = p[i];
    }
    for (auto& d : batch) d = p[d];
    for (auto& d : contract) d = p[d];
    return true;
}

/// dot_general(transpose(a), b) -> dot_general(a, b) with remapped dims (no transpose copy)
NodePtr fold_transpose_into_dot(const NodePtr& n) {
    if (!n->is(Op::DotGeneral)) return nullptr;
    DotAttrs a = n->attr<DotAttrs>();
    NodePtr l = in0(n), r = in1(n);
    bool changed = false;
    if (l->is(Op::Permute) && fold_perm(l->attr<AxesAttrs>().axes, a.lhs_batch, a.lhs_contract)) {
        l = in0(l);
        changed = true;
    }
    if (r->is(Op::Permute) && fold_perm(r->attr<AxesAttrs>().axes, a.rhs_batch, a.rhs_contract)) {
        r = in0(r);
        changed = true;
    }
    if (!changed) return nullptr;
    return Node::make(Op::DotGeneral, a, {l, r});
}

// Note [Masks of a normalised relu]
// The gradient of a relu reads its mask from the output, out <= 0 (Note [Relu masks] in
// src/ops/Elementwise.cpp), so that the pre-activation x need not be kept. When x normalises a
// value y (x = (y - mean(y)) * rstd * gamma + beta: batch norm, layer norm in training), the
// backward reads y anyway, for d = y - mean(y) in the sums and in dx, and x is a few per-channel
// operations on it. There the mask read from the output is one more activation-sized load in
// each of the backward's two kernels, next to the y they load already: batch norm + relu's
// backward read y, the output and its gradient, three streams where two suffice. So
// le(where(x <= 0, x * s, x), 0) becomes x <= 0 again (the same set of points, NaN included;
// it is the forward's own compare) when x has a term y - m with m computed from y itself, at most
// 64 nodes away. Elsewhere (a dense layer's bias and relu inside its matmul) nothing reads the
// pre-activation's inputs in the backward, and the mask stays on the output.

/// Whether some path from `from` reaches `target` within 64 nodes; each node visited spends one
/// of `budget`.
bool reaches(const Node* from, const Node* target, size_t& budget) {
    std::vector<const Node*> stack{from}, seen;
    while (!stack.empty() && seen.size() < 64 && budget > 0) {
        --budget;
        const Node* n = stack.back();
        stack.pop_back();
        if (n == target)
            return true;
        if (std::find(seen.begin(), seen.end(), n) != seen.end())
            continue;
        seen.push_back(n);
        for (const auto& i : n->inputs())
            stack.push_back(i.get());
    }
    return false;
}

/// True when the elementwise tree of x (at most 64 nodes) has a term sub(y, m), y of x's shape,
/// whose m is computed from y (a statistic of y: its mean), within 64 nodes. The walks share a
/// budget of 512 nodes, so that a relu after a long elementwise chain costs no more.
bool normalises(const NodePtr& x) {
    size_t budget = 512;
    std::vector<const Node*> stack{x.get()}, seen;
    while (!stack.empty() && seen.size() < 64 && budget > 0) {
        --budget;
        const Node* n = stack.back();
        stack.pop_back();
        if (std::find(seen.begin(), seen.end(), n) != seen.end() ||
            !has_trait(n->op(), kElementwise))
            continue;
        seen.push_back(n);
        if (n->is(Op::Sub) && n->input(0)->shape() == x->shape() &&
            reaches(n->input(1).get(), n->input(0).get(), budget))
            return true;
        for (const auto& i : n->inputs())
            if (i->shape() == x->shape())
                stack.push_back(i.get());
    }
    return false;
}

/// le(where(x <= 0, x * s, x), 0) -> x <= 0 where x is a normalisation (Note [Masks of a
/// normalised relu])
NodePtr mask_of_normalised_relu(const NodePtr& n) {
    double k;
    if (!n->is(Op::Le) || !splat_value(*in1(n), &k) || k != 0)
        return nullptr;
    const NodePtr& w = in0(n);
    if (!w->is(Op::Where) || !detail::output_mask(*w) || !normalises(w->input(2)))
        return nullptr;
    const NodePtr& cond = w->input(0); // x <= 0, the forward's own compare
    return cond->shape() == n->shape() ? cond : nullptr;
}

// Note [Factoring reductions]
// Autodiff of a normalisation, y = (x - mean(x)) * rsqrt(var(x) + eps) * gamma, writes its
// backward as a chain of sums that each wait for the one before:
//
//   dvar  = -0.5 * rstd^3 * sum(dy * gamma * d)              d = x - mean(x), a [C] result
//   dd    = dy * gamma * rstd + broadcast(dvar * 2 / n) * d
//   dmean = sum(-dd)                                          needs dvar: a second pass
//   dx    = dd + broadcast(dmean / n)                         needs dmean: a third pass
//
// The factors that make each sum wait (dvar, rstd, gamma: per-channel values broadcast over the
// summed axes) are constant along those axes, so they can leave the sum:
//
//   sum(-(a * broadcast(c) + b * r))  ->  -(sum(a) * c + sum(b) * r)     c, r constant along
//                                                                          the summed axes
// After this rewrite every sum of the backward reads only dy and forward values: sum(dy * g * d),
// sum(dy * g), sum(d). They have one depth, so fusion merges them into one multi-output kernel,
// and the gradient takes two passes over the activations (the sums, then dx), as the closed-form
// batch-norm gradient does, with the relu backward recomputed inside both (PassesTest
// Specialize.NormalisationBackwardTakesTwoPasses). Layer norm gets the same, and so does any
// user formula of this shape; nothing here knows about batch norm.
//
// The walk expands sums, differences, negations, products with an invariant factor and divisions
// by one into terms (sign, varying factors, invariant factors); it never distributes a product
// over a sum, so it cannot blow up, and it stops at 32 terms, 16 levels, and 32 factors a term
// (a product chain of 10^5 steps once overflowed the stack here, and repeated squaring took
// 2^steps calls: Specialize.FactoringLongProductChainsIsBounded). It fires only when some term has
// an invariant factor computed from a reduction, a variable or an input (a constant inside a sum
// delays nothing, and outside it would cost a multiply after the sum); the sums it builds have no
// invariant factor, so it does not fire on its own result. Parameters count because of sharing:
// sum(dy * gamma * d) is gamma * sum(dy * d), and sum(dy * d) is also batch norm's dgamma
// (autodiff sums a broadcast operand's gradient over all its axes at once: sum_to_shape in
// src/ops/OpTable.cpp), so dgamma and dbeta cost no pass of their own
// (Specialize.NormalisationParameterGradientsShareTheSums).
// Terms with the same varying product share one sum (nodes are hash-consed). Float sums only:
// the reassociation changes rounding, by no more than summation order does.
//
// Running sums. The backward of a chain that subtracts a statistic at every step (h - max(h),
// h - logsumexp(h), a stack of layer norms on a residual stream) reads
//   g_k = g_{k+1} + w * broadcast(sum(-g_{k+1}))
// and sums g_k. Expanding g_{k+1} again went 16 levels down the chain: each step's sum became a
// dozen, 200 steps grew the graph 5x, and 1,000 steps took 3.6 s to compile. An operand a of
// a ± b whose sum over the same axes b already reads (as an invariant factor: the graph computes
// it) stays one term, and its sum is that one: sum(g_k) = s - s * sum(w) with s = sum(g_{k+1}),
// no new pass over g. After this pass rewrote a sum, the node in its place is a combination of
// other sums; `built_sums` remembers what it sums, so the next step still recognises it.
namespace factor_sum {

struct Term {
    bool negative = false;
    std::vector<NodePtr> varying;
    std::vector<std::pair<NodePtr, bool>> invariant; // (factor, is a divisor)
    /// The sum of the varying value when the graph has it already (a running sum), keepdims
    /// shaped; known_negated: it is the sum of minus the value.
    NodePtr known;
    bool known_negated = false;
};

/// A sum over `axes` (sorted) of `summed`, kept-dims shaped, that the graph computes.
struct KnownSum {
    NodePtr sum;
    NodePtr summed;
    std::vector<int64_t> axes;
    NodePtr key; // the node the graph uses (keeps its address from being reused)
};
/// The sums factor_sum built, by the node that replaced each (specialize() clears it): after
/// the rewrite a sum is a combination of other sums, and only this says what it sums.
thread_local std::unordered_map<const Node*, KnownSum> built_sums;

std::vector<int64_t> normalised_axes(const std::vector<int64_t>& axes, int rank) {
    std::vector<int64_t> out;
    for (int64_t a : axes)
        out.push_back(a < 0 ? a + rank : a);
    std::sort(out.begin(), out.end());
    return out;
}

struct Walk {
    const Shape& full;                 // the summed tensor's shape
    const std::vector<int64_t>& axes;  // the summed axes, normalised and sorted
    std::vector<Term> terms;
    bool overflow = false;

    bool summed(int64_t a) const { return std::find(axes.begin(), axes.end(), a) != axes.end(); }

    /// Whether the factor is constant along every summed axis: an implicitly broadcast operand
    /// (size-1 dims there, or a lower rank), or an explicit broadcast that maps nothing but
    /// size-1 dims onto them.
    bool invariant(const NodePtr& f) const {
        const int r = int(full.size());
        if (f->rank() > r) return false;
        const int lead = r - f->rank();
        bool implicit = true;
        for (int a = lead; a < r && implicit; ++a)
            implicit = !summed(a) || f->shape()[a - lead] == 1;
        if (implicit) return true;
        if (!f->is(Op::Broadcast)) return false;
        const auto& b = f->attr<BroadcastAttrs>();
        const NodePtr& c = f->input(0);
        if (b.dims.size() != size_t(c->rank()) || b.shape.size() != full.size()) return false;
        for (size_t i = 0; i < b.dims.size(); ++i)
            if (summed(b.dims[i]) && c->shape()[i] != 1) return false;
        return true;
    }

    /// The invariant factor's value shaped to broadcast against `sum`, the keepdims sum it
    /// multiplies: itself when implicit; an explicit broadcast becomes one to the kept shape,
    /// whose dynamic dims take sum's at call time.
    NodePtr shrink(const NodePtr& f, const NodePtr& sum) const {
        if (!f->is(Op::Broadcast) || f->shape() != full) return f;
        const auto& b = f->attr<BroadcastAttrs>();
        const NodePtr& c = f->input(0);
        Shape kept = b.shape;
        for (int64_t a : axes) kept[size_t(a)] = 1;
        if (c->shape() == kept) return c;
        if (is_static(kept)) return Node::make(Op::Broadcast, BroadcastAttrs{kept, b.dims}, {c});
        return Node::make(Op::Broadcast, BroadcastAttrs{kept, b.dims}, {c, sum});
    }

    bool full_shaped(const NodePtr& e) const { return e->shape() == full; }

    /// Gathers the factors of a product chain into t (varying or invariant). At most 16 levels
    /// and 32 factors: past them a product stays one varying factor, which is still exact (the
    /// term is the product of its factors). Unbounded, a chain of 10^5 products overflowed the
    /// stack and a chain of squarings (h = h * h) took 2^steps calls.
    void factors(const NodePtr& e, Term& t, int depth = 0) {
        const bool room = depth < 16 && t.varying.size() + t.invariant.size() < 32;
        if (room && e->is(Op::Mul) && full_shaped(e)) {
            for (int i = 0; i < 2; ++i) {
                const NodePtr& in = e->input(i);
                if (invariant(in))
                    t.invariant.emplace_back(in, false);
                else if (full_shaped(in))
                    factors(in, t, depth + 1);
                else
                    t.varying.push_back(in); // broadcast along unsummed axes only: not expanded
            }
            return;
        }
        t.varying.push_back(e);
    }

    /// The sum of `a` (or of -a) over the summed axes, when b, a product (possibly negated or
    /// divided), has it as an invariant factor (looked for through broadcasts, reshapes,
    /// negations and products, a few levels deep): in a ± b, a's sum exists already. Null if
    /// not; `negated`: the sum found is of -a.
    NodePtr own_sum(const NodePtr& b, const NodePtr& a, bool& negated) const {
        std::vector<std::pair<const Node*, int>> stack{{b.get(), 0}};
        while (!stack.empty()) {
            auto [n, d] = stack.back();
            stack.pop_back();
            KnownSum k;
            if (auto it = built_sums.find(n); it != built_sums.end()) {
                k = it->second;
            } else if (n->is(Op::ReduceSum) && n->attr<ReduceAttrs>().keepdims) {
                k.sum = n->shared_from_this();
                k.summed = n->input(0);
                k.axes = normalised_axes(n->attr<ReduceAttrs>().axes, n->input(0)->rank());
            }
            if (k.sum && k.axes == axes) {
                const Node* v = k.summed.get();
                negated = false;
                while (v->is(Op::Neg)) {
                    v = v->input(0).get();
                    negated = !negated;
                }
                if (v == a.get())
                    return k.sum;
            }
            if (d >= 6)
                continue;
            const bool unary = n->is(Op::Broadcast) || n->is(Op::Reshape);
            if (unary || n->is(Op::Mul) || n->is(Op::Div) || n->is(Op::Neg))
                for (size_t i = 0; i < (unary ? 1 : n->num_inputs()); ++i)
                    stack.emplace_back(n->input(i).get(), d + 1);
        }
        return nullptr;
    }

    void add(const NodePtr& e, bool negative, std::vector<std::pair<NodePtr, bool>> inv, int depth) {
        if (terms.size() >= 32 || depth > 16) {
            overflow = true;
            return;
        }
        const bool linear = depth < 16 && full_shaped(e);
        if (linear && (e->is(Op::Add) || e->is(Op::Sub)) && full_shaped(e->input(0)) &&
            full_shaped(e->input(1))) {
            for (int i = 0; i < 2; ++i) {
                const NodePtr& a = e->input(i);
                const bool neg = negative != (i == 1 && e->is(Op::Sub));
                // a ± f(sum(a)) * w: a's sum is computed already, so a stays one term whose sum
                // is that one (Note [Factoring reductions], "running sums")
                bool negated = false;
                if (NodePtr known = own_sum(e->input(1 - i), a, negated)) {
                    if (terms.size() >= 32) {
                        overflow = true;
                        return;
                    }
                    Term t{neg, {a}, inv};
                    t.known = std::move(known);
                    t.known_negated = negated;
                    terms.push_back(std::move(t));
                } else {
                    add(a, neg, inv, depth + 1);
                }
            }
            return;
        }
        if (linear && e->is(Op::Neg)) {
            add(e->input(0), !negative, inv, depth + 1);
            return;
        }
        if (linear && e->is(Op::Div) && full_shaped(e->input(0))) {
            if (invariant(e->input(1))) {
                inv.emplace_back(e->input(1), true);
                add(e->input(0), negative, inv, depth + 1);
                return;
            }
        }
        if (linear && e->is(Op::Mul)) {
            for (int i = 0; i < 2; ++i) {
                if (!full_shaped(e->input(1 - i))) continue;
                if (invariant(e->input(i))) {
                    inv.emplace_back(e->input(i), false);
                    add(e->input(1 - i), negative, inv, depth + 1);
                    return;
                }
            }
        }
        Term t{negative, {}, std::move(inv)};
        factors(e, t);
        terms.push_back(std::move(t));
    }
};

/// Whether a factor is worth moving out of a sum over a tensor of shape `full`: computed from a
/// reduction (only such a factor makes the sum wait for another pass), or broadcast from a
/// variable or an input (a batch norm's gamma: outside, sum(dy * gamma * d) is gamma times
/// sum(dy * d), the very sum of dgamma, and the graph computes it once). At most 64 nodes are
/// looked at; beyond, yes. Constants stay inside (sum(x * 0.5) gains nothing from a multiply
/// after it), and so does a full-shaped operand that is invariant only because the summed axes
/// have size 1 (sum(dy * dy) over a batch of one).
bool worth_factoring(const NodePtr& f, const Shape& full) {
    const bool broadcast = f->shape() != full || f->is(Op::Broadcast);
    std::vector<const Node*> stack{f.get()};
    std::vector<const Node*> seen;
    while (!stack.empty()) {
        const Node* n = stack.back();
        stack.pop_back();
        if (std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
        if (seen.size() >= 64 || has_trait(n->op(), kReduce)) return true;
        if (broadcast && (n->is(Op::Variable) || n->is(Op::Placeholder)))
            return true;
        seen.push_back(n);
        for (const auto& i : n->inputs()) stack.push_back(i.get());
    }
    return false;
}

/// reduce_sum(sum of terms with invariant factors) -> sum of reduce_sum(varying) * invariant
NodePtr apply(const NodePtr& n) {
    if (!n->is(Op::ReduceSum) || !is_float(n->dtype())) return nullptr;
    const NodePtr& x = n->input(0);
    const auto& ra = n->attr<ReduceAttrs>();
    const std::vector<int64_t> axes = normalised_axes(ra.axes, x->rank());
    if (axes.empty()) return nullptr;
    Walk w{x->shape(), axes, {}, false};
    w.add(x, false, {}, 0);
    if (w.overflow) return nullptr;
    bool any = false;
    for (const Term& t : w.terms) {
        if (t.varying.empty()) return nullptr; // a sum of invariants: a count we do not build
        for (const auto& f : t.invariant)
            any = any || worth_factoring(f.first, x->shape());
    }
    if (!any) return nullptr;
    // one sum per distinct varying product, times the sum of its terms' invariant products
    struct Group {
        NodePtr varying;
        Tensor sum, coefficient; // coefficient null: 1
    };
    std::vector<Group> groups;
    for (const Term& t : w.terms) {
        Tensor v(t.varying[0]);
        for (size_t i = 1; i < t.varying.size(); ++i) v = v * Tensor(t.varying[i]);
        // every summed axis must vary in full, or the sum would miss a count
        if (v.rank() != int(x->rank())) return nullptr;
        for (int64_t a : axes)
            if (v.shape()[size_t(a)] != x->shape()[size_t(a)]) return nullptr;
        auto it = std::find_if(groups.begin(), groups.end(),
                               [&](const Group& g) { return g.varying == v.node(); });
        const bool fresh = it == groups.end();
        if (fresh) {
            Tensor s = sum(v, axes, true);
            if (t.known) { // the graph's own sum of v (or of -v): no new pass
                if (t.known->shape() != s.shape() || t.known->dtype() != s.dtype())
                    return nullptr;
                s = t.known_negated ? -Tensor(t.known) : Tensor(t.known);
            }
            groups.push_back({v.node(), s, Tensor()});
            it = groups.end() - 1;
        }
        Tensor c; // null: 1
        for (const auto& [f, divisor] : t.invariant) {
            Tensor k(w.shrink(f, it->sum.node()));
            if (!c.node())
                c = divisor ? reciprocal(k) : k;
            else
                c = divisor ? c / k : c * k;
        }
        if (t.negative) c = c.node() ? -c : scalar_like(-1.0, v);
        if (fresh) {
            it->coefficient = c;
            continue;
        }
        Tensor one = scalar_like(1.0, v);
        it->coefficient = (it->coefficient.node() ? it->coefficient : one) + (c.node() ? c : one);
    }
    Tensor out;
    for (const auto& g : groups) {
        Tensor s = g.coefficient.node() ? g.sum * g.coefficient : g.sum;
        out = out.node() ? out + s : s;
    }
    Tensor kept = out;
    if (!ra.keepdims) out = squeeze(out, axes);
    if (out.shape() != n->shape() || out.dtype() != n->dtype()) return nullptr;
    built_sums[out.node().get()] = KnownSum{kept.node(), x, axes, out.node()};
    return out.node();
}

} // namespace factor_sum

// Note [Variance in one pass]
// var(x) is sum(d * d) / n with d = x - mean(x) (src/api/Composites.cpp): the sum of squares waits
// for the mean, so a batch norm or layer norm in training reads x twice before it can normalise,
// once for sum(x) and once more for sum(d * d). When the subtracted value c is constant along
// the summed axes and computed from x (that is what makes it wait), the sum becomes
//
//   sum((x - c)^2) = s2 - c * (2 * s1 - n * c)      s1 = sum(x), s2 = sum(x * x), in f64
//
// and s1, s2 (and n, where a dim is unknown) are sums of x alone: fusion puts them into the
// kernel that sums x for the mean, and the second pass is gone. It is the same value for the c
// the graph has, whatever c is (not only the exact mean). The cancellation is what makes this
// form a bad idea in f32 (an activation of mean 100 and deviation 1 keeps 3 of its digits): in
// f64, with x's f32 values exact in it, the error relative to the variance is about 1e-16 times
// mean^2 / variance, below f32's rounding of the result up to a ratio of 10^8. The result is
// clamped at 0 (maximum propagates NaN: an inf or NaN in x still gives NaN). f32 sums only: f64
// sums have nothing wider to go to, and half types sum in f32 already.
// Not a specialize pattern: it pays only where f64 sums cost about what f32 sums do, and where
// the kernel that sums x keeps its sums in independent chains. The cpu target runs it in its
// lowering (one_pass_variances; its renderer: Note [Two accumulators a row] and Note [Sums that
// need no accumulator] in src/backend/cpu/LlvmRenderer.cpp). Autodiff's gradient still reads
// d * d's shape; canonicalize's earliest_shape_source points it at x, so d * d is not computed
// for it.
// (Tests: Specialize.VarianceTakesOnePass, the FileCheck test one_pass_variance.sjir;
// KernelPlan.OnePassBatchNormStatisticsMatchTwoPasses.)
namespace one_pass {

/// Whether c is computed from x: some path from c reaches x within 64 nodes.
bool computed_from(const NodePtr& c, const NodePtr& x) {
    size_t budget = 512;
    return reaches(c.get(), x.get(), budget);
}

/// reduce_sum((x - c) * (x - c)) -> s2 - c * (2 * s1 - n * c) in f64 (Note [Variance in one pass])
NodePtr apply(const NodePtr& n) {
    if (!n->is(Op::ReduceSum) || n->dtype() != DType::F32)
        return nullptr;
    const NodePtr& sq = in0(n);
    if (!sq->is(Op::Mul) || in0(sq) != in1(sq))
        return nullptr;
    const NodePtr& d = in0(sq);
    if (!d->is(Op::Sub))
        return nullptr;
    const NodePtr& x = in0(d);
    const NodePtr& c = in1(d);
    if (x->shape() != d->shape() || x->dtype() != DType::F32)
        return nullptr;
    const auto& ra = n->attr<ReduceAttrs>();
    const std::vector<int64_t> axes = factor_sum::normalised_axes(ra.axes, x->rank());
    if (axes.empty())
        return nullptr;
    factor_sum::Walk w{x->shape(), axes, {}, false};
    if (!w.invariant(c) || !computed_from(c, x))
        return nullptr;
    const Tensor x64 = cast(T(x), DType::F64);
    const Tensor s1 = sum(x64, axes, true);
    const Tensor s2 = sum(x64 * x64, axes, true);
    // n: a constant, or a sum of ones as mean()'s, exact in f32 up to 2^24 points (a sum of a
    // constant costs its kernel no adds: Note [Sums that need no accumulator] in
    // src/backend/cpu/LlvmRenderer.cpp)
    const Tensor count = detail::count_over(T(x), axes, true, DType::F64);
    const Tensor c64 = cast(T(w.shrink(c, s1.node())), DType::F64);
    Tensor out = cast(maximum(s2 - c64 * (s1 * 2.0 - count * c64), 0.0), DType::F32);
    if (!ra.keepdims)
        out = squeeze(out, axes);
    if (out.shape() != n->shape())
        return nullptr;
    return out.node();
}

} // namespace one_pass

// Note [Small reductions unrolled]
// A sum (max, min, product) over axes of a few elements in all, such as the 2x2 windows of
// `mean(reshape(x, [N, C, H / 2, 2, W / 2, 2]), {3, 5})` (JAX's way to pool) or the classes of
// a binary classifier, made a reduction kernel whose innermost loop had 2 trips: each output
// paid a scalar loop, the input was read at 3 GB/s (4 MB in 1.4 ms on the AMD EPYC), and the
// mean's division ran as a second kernel over the result. Written as the combination of its
// terms, each term a slice of x at one position of the reduced axes (in memory order, so a sum
// is the sequential sum of its at most kMaxUnrolledTerms terms: within the f32 sums' promise,
// Note [f32 sums]), the reduction is an elementwise expression over the kept dims: one kernel
// that loads the terms through strided index maps (LLVM makes them gathers), and what follows
// (the division) fuses into it. Float dtypes only, reduced extents known at compile
// time, and at least kMinUnrolledResults results (a dynamic dim counts as many): a small result
// gains nothing, and a graph of many small reductions (the running sums of a recurrence's
// backward) would grow by a slice and an op a term.
// Measured: docs/performance.md, "Small reductions unrolled".
constexpr int64_t kMaxUnrolledTerms = 8, kMinUnrolledResults = 64;

/// The terms of a reduction of x = reshape(y) over `axes` at each of their positions (`at`,
/// one per axis), as strided slices of y in the reduction's result shape, when the reshape only
/// splits dims of y and leaves one kept dim in each split group (the 2x2 windows of a reshaped
/// image: H = (H / 2, 2) keeps H / 2): then no term needs a reshape of its own, and what
/// follows the reduction fuses with it. Empty otherwise.
std::vector<Tensor> strided_terms(const NodePtr& n, const std::vector<int64_t>& axes,
                                  const std::vector<std::vector<int64_t>>& at) {
    const NodePtr& x = in0(n);
    if (!x->is(Op::Reshape) || n->attr<ReduceAttrs>().keepdims)
        return {};
    const NodePtr& y = in0(x);
    const Shape &ys = y->shape(), &xs = x->shape();
    std::vector<int> which(xs.size(), -1); // per dim of x: its index in `axes`; -1 when kept
    for (size_t k = 0; k < axes.size(); ++k)
        which[size_t(axes[k])] = int(k);
    // per dim of y: the dim of x it keeps, that dim's step in y, and each reduced dim's
    struct Split {
        size_t kept = SIZE_MAX;
        int64_t step = 1;
        std::vector<std::pair<int, int64_t>> reduced; // (index in `axes`, step in y)
    };
    std::vector<Split> splits;
    size_t j = 0;
    for (int64_t d : ys) {
        Split s;
        if (d < 0) { // a dynamic dim: only as a dim of its own, kept
            if (j >= xs.size() || xs[j] >= 0 || which[j] >= 0)
                return {};
            s.kept = j++;
            splits.push_back(std::move(s));
            continue;
        }
        const size_t first = j;
        int64_t p = 1;
        do {
            if (j >= xs.size() || xs[j] < 1)
                return {};
            p *= xs[j++];
        } while (p < d);
        if (p != d)
            return {};
        int64_t stride = 1;
        for (size_t k = j; k-- > first; stride *= xs[k]) { // the last dim fastest
            if (which[k] >= 0)
                s.reduced.push_back({which[k], stride});
            else if (s.kept != SIZE_MAX)
                return {}; // two kept dims in one group: not one slice
            else
                s.kept = k, s.step = stride;
        }
        if (s.kept == SIZE_MAX)
            return {}; // the whole dim reduced: its term keeps a 1 there
        splits.push_back(std::move(s));
    }
    if (j != xs.size())
        return {};
    std::vector<Tensor> terms;
    for (const auto& pos : at) {
        std::vector<int64_t> start(ys.size(), 0), stop(ys.size(), INT64_MAX), step(ys.size(), 1);
        for (size_t g = 0; g < splits.size(); ++g) {
            const Split& s = splits[g];
            if (s.reduced.empty())
                continue; // a dim of y kept whole
            for (const auto& [k, st] : s.reduced)
                start[g] += st * pos[size_t(k)];
            step[g] = s.step;
            stop[g] = start[g] + (xs[s.kept] - 1) * s.step + 1;
        }
        terms.push_back(slice(T(y), start, stop, step));
        SJ_ASSERT(terms.back().shape() == n->shape())
            << "strided_terms: " << shape_str(terms.back().shape()) << " for "
            << shape_str(n->shape());
    }
    return terms;
}

NodePtr unroll_small_reduction(const NodePtr& n) {
    const Op op = n->op();
    if (op != Op::ReduceSum && op != Op::ReduceMax && op != Op::ReduceMin && op != Op::ReduceProd)
        return nullptr;
    const NodePtr& x = in0(n);
    if (!is_float(x->dtype()) || n->dtype() != x->dtype())
        return nullptr;
    const ReduceAttrs& a = n->attr<ReduceAttrs>();
    const Shape& xs = x->shape();
    // (the op checked them: in range, none repeated)
    const std::vector<int64_t> axes = factor_sum::normalised_axes(a.axes, int(xs.size()));
    if (axes.empty() || axes.size() == xs.size())
        return nullptr;
    int64_t terms = 1;
    for (int64_t ax : axes) {
        if (xs[size_t(ax)] < 1)
            return nullptr; // (unknown or empty)
        terms *= xs[size_t(ax)];
        if (terms > kMaxUnrolledTerms)
            return nullptr;
    }
    if (terms < 2)
        return nullptr;
    int64_t results = 1;
    for (int64_t d : n->shape())
        results = d < 0 ? kMinUnrolledResults : results * d;
    if (results < kMinUnrolledResults)
        return nullptr;
    // the positions of the terms, in memory order (the last axis fastest)
    std::vector<std::vector<int64_t>> at;
    for (std::vector<int64_t> p(axes.size(), 0); int64_t(at.size()) < terms;) {
        at.push_back(p);
        for (size_t k = axes.size(); k-- > 0;) {
            if (++p[k] < xs[size_t(axes[k])])
                break;
            p[k] = 0;
        }
    }
    std::vector<Tensor> ts = strided_terms(n, axes, at);
    const bool strided = !ts.empty();
    if (!strided)
        for (const auto& p : at) { // slices of x, 1 at the reduced axes
            Tensor t = T(x);
            for (size_t k = 0; k < axes.size(); ++k)
                t = slice_axis(t, axes[k], p[k], p[k] + 1);
            ts.push_back(t);
        }
    Tensor acc = ts[0];
    for (size_t t = 1; t < ts.size(); ++t)
        acc = op == Op::ReduceSum    ? acc + ts[t]
              : op == Op::ReduceProd ? acc * ts[t]
              : op == Op::ReduceMax  ? maximum(acc, ts[t])
                                     : minimum(acc, ts[t]);
    return strided || a.keepdims ? acc.node() : squeeze(acc, axes).node();
}

} // namespace

const std::vector<Pattern>& specialize_patterns() {
    static const std::vector<Pattern> p = {
        {"pow_small", pow_small},
        {"fold_transpose_into_dot", fold_transpose_into_dot},
        {"factor_sum", factor_sum::apply},
        {"mask_of_normalised_relu", mask_of_normalised_relu},
        {"unroll_small_reduction", unroll_small_reduction},
    };
    return p;
}

std::vector<NodePtr> specialize(const std::vector<NodePtr>& roots, RewriteStats* stats) {
    struct Clear { // factor_sum's table holds this run's nodes only
        Clear() { factor_sum::built_sums.clear(); }
        ~Clear() { factor_sum::built_sums.clear(); }
    } clear;
    return rewrite(roots, specialize_patterns(), stats);
}

NodePtr one_pass_variance(const NodePtr& n) {
    return one_pass::apply(n);
}

std::vector<NodePtr> one_pass_variances(const std::vector<NodePtr>& roots, RewriteStats* stats) {
    static const std::vector<Pattern> p = {{"one_pass_variance", one_pass_variance}};
    return rewrite(roots, p, stats);
}

} // namespace sj::compiler
