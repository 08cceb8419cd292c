// Specialisation patterns: cheaper forms for pow by constants, transposes folded into dots.
#include "Specialize.h"

#include <symjax/Ops.h>
#include <symjax/ir/Node.h>

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

} // namespace

const std::vector<Pattern>& specialize_patterns() {
    static const std::vector<Pattern> p = {
        {"pow_small", pow_small},
        {"fold_transpose_into_dot", fold_transpose_into_dot},
    };
    return p;
}

std::vector<NodePtr> specialize(const std::vector<NodePtr>& roots, RewriteStats* stats) {
    return rewrite(roots, specialize_patterns(), stats);
}

} // namespace sj::compiler
