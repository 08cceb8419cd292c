// Tensor::eval: lazy evaluation through the reference interpreter.
#include "../backend/Backend.h"

#include <symjax/Graph.h>
#include <symjax/ir/Node.h>
#include <symjax/ir/VariableState.h>

namespace sj {

Array Tensor::eval(const Givens& givens) const {
    SJ_CHECK(defined(), Error) << "eval of an undefined Tensor";
    Tensor t = givens.empty() ? *this : clone(*this, givens);
    detail::Program p;
    p.outputs.push_back(t.node());
    for (const Node* n : topo_order({t.node().get()})) {
        SJ_CHECK(!n->is(Op::Placeholder), InputError)
            << "eval of " << name() << ": placeholder '" << n->name() << "' "
            << sj::type_str(n->type()) << " has no value; pass it in givens, e.g. "
            << "t.eval({{x, constant(array)}})";
        if (n->is(Op::Variable)) p.variables.push_back(n->shared_from_this());
    }
    std::vector<Array> vals;
    for (const auto& v : p.variables) {
        auto& s = *v->attr<VariableAttrs>().state;
        std::lock_guard<std::mutex> lock(s.mu);
        vals.push_back(s.value);
    }
    auto exe = detail::find_backend("reference")(p, {});
    Array out = exe->run({}, vals, 0).outputs[0];
    // a leaf's value (a constant or a variable) must not be handed out by reference
    return has_trait(t.node()->op(), kLeaf) ? out.clone() : out;
}

} // namespace sj
