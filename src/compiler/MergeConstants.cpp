// Merging equal constants (Note [Constant identity] in MergeConstants.h).
#include "MergeConstants.h"

#include <symjax/ir/Node.h>

#include "../ops/OpDef.h"

#include "../core/NodeMap.h"

namespace sj::compiler {

std::vector<NodePtr> merge_constants(const std::vector<NodePtr>& roots, RewriteStats* stats) {
    std::vector<const Node*> rs;
    for (const auto& r : roots)
        rs.push_back(r.get());
    const std::vector<const Node*> order = topo_order(rs);
    detail::NodeMap<NodePtr> map(order.size()); // only the nodes that change
    int64_t merged = 0;
    for (const Node* n : order) {
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
            const NodePtr* m = map.find(i.get());
            changed |= m != nullptr;
            ins.push_back(m ? *m : i);
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
        const NodePtr* m = map.find(r.get());
        out.push_back(m ? *m : r);
    }
    return out;
}

} // namespace sj::compiler
