// clone(): rebuilds a graph with substitutions, iteratively.
#include <symjax/Graph.h>
#include <symjax/ir/Node.h>

#include <unordered_map>

namespace sj {

std::vector<Tensor> clone(const std::vector<Tensor>& ts, const Givens& givens) {
    std::unordered_map<const Node*, NodePtr> map;
    for (const auto& [from, to] : givens) {
        SJ_CHECK(from.defined() && to.defined(), Error) << "clone: undefined tensor in givens";
        SJ_CHECK(from.dtype() == to.dtype(), TypeError)
            << "clone: cannot replace " << from.name() << " " << from.type_str() << " by "
            << to.name() << " " << to.type_str() << " (dtypes differ)";
        const Shape& a = from.shape();
        const Shape& b = to.shape();
        bool ok = a.size() == b.size();
        for (size_t i = 0; ok && i < a.size(); ++i) ok = a[i] == b[i] || a[i] == -1 || b[i] == -1;
        SJ_CHECK(ok, ShapeError) << "clone: cannot replace " << from.name() << " "
                                 << from.type_str() << " by " << to.name() << " " << to.type_str()
                                 << " (shapes differ)";
        map[from.node().get()] = to.node();
    }
    std::vector<const Node*> roots;
    for (const auto& t : ts) roots.push_back(t.node().get());
    for (const Node* n : topo_order(roots)) {
        if (map.count(n)) continue;
        bool changed = false;
        std::vector<NodePtr> ins;
        ins.reserve(n->num_inputs());
        for (const auto& i : n->inputs()) {
            auto it = map.find(i.get());
            if (it != map.end() && it->second != i) {
                ins.push_back(it->second);
                changed = true;
            } else {
                ins.push_back(i);
            }
        }
        if (changed) {
            NodePtr m = Node::make_named(n->op(), n->attrs(), std::move(ins), n->name());
            map[n] = m;
        }
    }
    std::vector<Tensor> out;
    for (const auto& t : ts) {
        auto it = map.find(t.node().get());
        out.push_back(it == map.end() ? t : Tensor(it->second));
    }
    return out;
}

Tensor clone(const Tensor& t, const Givens& givens) { return clone(std::vector<Tensor>{t}, givens)[0]; }

size_t graph_size(const std::vector<Tensor>& outputs) {
    std::vector<const Node*> roots;
    for (const auto& t : outputs) roots.push_back(t.node().get());
    return topo_order(roots).size();
}

} // namespace sj
