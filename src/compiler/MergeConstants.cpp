// Merging equal constants (Note [Constant identity] in MergeConstants.h).
#include "MergeConstants.h"

#include <symjax/ir/Node.h>

#include "../ops/OpDef.h"

#include <unordered_map>

namespace sj::compiler {

std::vector<NodePtr> merge_constants(const std::vector<NodePtr>& roots, RewriteStats* stats) {
    std::unordered_map<const Node*, NodePtr> map; // only the nodes that change
    std::vector<const Node*> rs;
    for (const auto& r : roots)
        rs.push_back(r.get());
    int64_t merged = 0;
    for (const Node* n : topo_order(rs)) {
        if (n->is(Op::Constant)) {
            if (n->attr<ConstantAttrs>().id == 0)
                continue;
            NodePtr c = detail::shared_constant(*n);
            map[n] = std::move(c);
            ++merged;
            continue;
        }
        bool changed = false;
        std::vector<NodePtr> ins;
        ins.reserve(n->num_inputs());
        for (const auto& i : n->inputs()) {
            auto it = map.find(i.get());
            changed |= it != map.end();
            ins.push_back(it != map.end() ? it->second : i);
        }
        if (!changed)
            continue;
        NodePtr m = Node::rebuild(*n, std::move(ins));
        map[n] = std::move(m);
    }
    if (stats && merged)
        stats->hits["merge_constants"] += merged;
    std::vector<NodePtr> out;
    out.reserve(roots.size());
    for (const auto& r : roots) {
        auto it = map.find(r.get());
        out.push_back(it == map.end() ? r : it->second);
    }
    return out;
}

} // namespace sj::compiler
