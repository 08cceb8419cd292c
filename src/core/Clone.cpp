// clone(): rebuilds a graph with substitutions, iteratively.
#include <symjax/Graph.h>
#include <symjax/ir/Node.h>

#include <optional>
#include <unordered_map>

namespace sj {

namespace {
/// Rethrows the error in flight (a node's type inference refusing its new inputs) as the same
/// kind, prefixed with the replacement that caused it.
[[noreturn]] void rethrow_ill_typed(const Node& n, const std::pair<Tensor, Tensor>& given) {
    const std::string where = "clone: replacing " + given.first.name() + " " +
                              given.first.type_str() + " by " + given.second.name() + " " +
                              given.second.type_str() + " makes " + n.describe() + " (" +
                              std::string(op_name(n.op())) + ") ill-typed: ";
    try {
        throw;
    } catch (const ShapeError& e) {
        throw ShapeError(where + e.what());
    } catch (const TypeError& e) {
        throw TypeError(where + e.what());
    } catch (const InputError& e) {
        throw InputError(where + e.what());
    } catch (const Error& e) {
        throw Error(where + e.what());
    }
}
} // namespace

// Note [Clone re-infers types]
// A replacement may have another shape or dtype than the tensor it replaces (SymJAX's
// clone({x: y, w: z}) with x, w of 10 elements and y, z of 3): every rebuilt node goes through
// Node::make, which infers its type again, so the new graph is typed from its new leaves. A node
// whose op refuses its new inputs is an error naming that op and the replacement that reached
// it (the first one, when several do). Replacements key on node identity: of two equal
// constants made separately, only the one given is replaced.
std::vector<Tensor> clone(const std::vector<Tensor>& ts, const Givens& givens) {
    std::unordered_map<const Node*, NodePtr> map;
    std::unordered_map<const Node*, size_t> origin; // the given a replaced node comes from
    for (size_t g = 0; g < givens.size(); ++g) {
        const auto& [from, to] = givens[g];
        SJ_CHECK(from.defined() && to.defined(), Error) << "clone: undefined tensor in givens";
        map[from.node().get()] = to.node();
        origin[from.node().get()] = g;
    }
    std::vector<const Node*> roots;
    for (const auto& t : ts)
        roots.push_back(t.node().get());
    for (const Node* n : topo_order(roots)) {
        if (map.count(n))
            continue;
        std::optional<size_t> cause;
        std::vector<NodePtr> ins;
        ins.reserve(n->num_inputs());
        for (const auto& i : n->inputs()) {
            auto it = map.find(i.get());
            if (it != map.end() && it->second != i) {
                ins.push_back(it->second);
                if (!cause)
                    cause = origin.at(i.get());
            } else {
                ins.push_back(i);
            }
        }
        if (!cause)
            continue;
        NodePtr m;
        try {
            m = Node::rebuild(*n, std::move(ins));
        } catch (const Error&) {
            rethrow_ill_typed(*n, givens[*cause]);
        }
        map[n] = m;
        origin[n] = *cause;
    }
    std::vector<Tensor> out;
    for (const auto& t : ts) {
        auto it = map.find(t.node().get());
        out.push_back(it == map.end() ? t : Tensor(it->second));
    }
    return out;
}

Tensor clone(const Tensor& t, const Givens& givens) {
    return clone(std::vector<Tensor>{t}, givens)[0];
}

size_t graph_size(const std::vector<Tensor>& outputs) {
    std::vector<const Node*> roots;
    for (const auto& t : outputs)
        roots.push_back(t.node().get());
    return topo_order(roots).size();
}

} // namespace sj
