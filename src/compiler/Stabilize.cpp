// Stabilisation patterns: rewrite numerically fragile forms into stable ones.
#include "Stabilize.h"

#include <symjax/Ops.h>
#include <symjax/ir/Node.h>

namespace sj::compiler {
namespace {

Tensor T(const NodePtr& n) { return Tensor(n); }
const NodePtr& in0(const NodePtr& n) { return n->input(0); }
const NodePtr& in1(const NodePtr& n) { return n->input(1); }

/// The non-constant operand of add(x, 1) / add(1, x) when the result has x's shape.
NodePtr plus_one_operand(const NodePtr& n) {
    if (!n->is(Op::Add)) return nullptr;
    if (is_splat(*in1(n), 1.0) && in0(n)->shape() == n->shape()) return in0(n);
    if (is_splat(*in0(n), 1.0) && in1(n)->shape() == n->shape()) return in1(n);
    return nullptr;
}

/// log(1 + x) -> log1p(x)
NodePtr log1p_form(const NodePtr& n) {
    if (!n->is(Op::Log)) return nullptr;
    NodePtr x = plus_one_operand(in0(n));
    return x ? log1p(T(x)).node() : nullptr;
}

/// exp(x) - 1 -> expm1(x)
NodePtr expm1_form(const NodePtr& n) {
    if (!n->is(Op::Sub) || !in0(n)->is(Op::Exp) || !is_splat(*in1(n), 1.0)) return nullptr;
    if (in0(n)->shape() != n->shape()) return nullptr;
    return expm1(T(in0(in0(n)))).node();
}

/// log(exp(a) / b) -> a - log(b)   (log of a softmax becomes a log-softmax)
NodePtr log_softmax_form(const NodePtr& n) {
    if (!n->is(Op::Log) || !in0(n)->is(Op::Div)) return nullptr;
    const NodePtr& d = in0(n);
    if (!in0(d)->is(Op::Exp)) return nullptr;
    return (T(in0(in0(d))) - log(T(in1(d)))).node();
}

/// True when x is already max-shifted (x - m with m a reduce_max, or our logsumexp's guard).
bool is_shifted(const NodePtr& x) {
    if (!x->is(Op::Sub)) return false;
    const Node* m = x->input(1).get();
    while (m->is(Op::Broadcast)) m = m->input(0).get();
    return m->is(Op::ReduceMax) || m->is(Op::Where);
}

/// log(sum(exp(x))) -> m + log(sum(exp(x - m))), m = max(x)
NodePtr logsumexp_form(const NodePtr& n) {
    if (!n->is(Op::Log) || !in0(n)->is(Op::ReduceSum)) return nullptr;
    const NodePtr& s = in0(n);
    if (!in0(s)->is(Op::Exp) || is_shifted(in0(in0(s)))) return nullptr;
    const auto& a = s->attr<ReduceAttrs>();
    return logsumexp(T(in0(in0(s))), a.axes, a.keepdims).node();
}

/// log1p(exp(x)) -> max(x, 0) + log1p(exp(-|x|))   (softplus without overflow)
NodePtr softplus_form(const NodePtr& n) {
    if (!n->is(Op::Log1p) || !in0(n)->is(Op::Exp)) return nullptr;
    const NodePtr& x = in0(in0(n));
    if (x->is(Op::Neg) && in0(x)->is(Op::Abs)) return nullptr; // already the stable form
    return softplus(T(x)).node();
}

} // namespace

const std::vector<Pattern>& stabilize_patterns() {
    static const std::vector<Pattern> p = {
        {"log1p_form", log1p_form},
        {"expm1_form", expm1_form},
        {"log_softmax_form", log_softmax_form},
        {"logsumexp_form", logsumexp_form},
        {"softplus_form", softplus_form},
    };
    return p;
}

std::vector<NodePtr> stabilize(const std::vector<NodePtr>& roots, RewriteStats* stats) {
    return rewrite(roots, stabilize_patterns(), stats);
}

} // namespace sj::compiler
