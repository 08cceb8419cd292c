// The rewrite driver: post-order sweeps to a fixpoint, with per-pattern hit counters.
#include "Rewrite.h"

#include <symjax/ir/Attrs.h>
#include <symjax/ir/Node.h>

#include "../core/NodeMap.h"

namespace sj::compiler {

std::vector<NodePtr> rewrite(const std::vector<NodePtr>& roots, const std::vector<Pattern>& patterns,
                             RewriteStats* stats, int max_sweeps) {
    std::vector<NodePtr> cur = roots;
    for (int sweep = 0; sweep < max_sweeps; ++sweep) {
        if (stats) ++stats->sweeps;
        bool changed = false;
        std::vector<const Node*> rs;
        for (const auto& r : cur) rs.push_back(r.get());
        const std::vector<const Node*> order = topo_order(rs);
        detail::NodeMap<NodePtr> map(order.size()); // old -> new (Note [Flat node tables])
        for (const Node* n : order) {
            NodePtr self = n->shared_from_this();
            if (has_trait(n->op(), kLeaf)) {
                map[n] = self;
                continue;
            }
            std::vector<NodePtr> ins;
            bool in_changed = false;
            for (const auto& i : n->inputs()) {
                const NodePtr& m = *map.find(i.get()); // inputs come first in the order
                in_changed |= m != i;
                ins.push_back(m);
            }
            NodePtr v = in_changed ? Node::rebuild(*n, std::move(ins)) : self;
            for (int k = 0; k < 64; ++k) {
                NodePtr r;
                for (const auto& p : patterns) {
                    r = p.apply(v);
                    if (r) {
                        if (stats) ++stats->hits[p.name];
                        break;
                    }
                }
                if (!r || r == v) break;
                SJ_ASSERT(r->dtype() == v->dtype() && r->rank() == v->rank())
                    << "rewrite changed the type of " << op_name(v->op()) << ": "
                    << type_str(v->type()) << " -> " << type_str(r->type());
                if (!v->name().empty() && r->name().empty() && !has_trait(r->op(), kLeaf))
                    r = with_name(r, v->name());
                v = r;
                if (has_trait(v->op(), kLeaf)) break;
            }
            changed |= v.get() != n;
            map[n] = v;
        }
        std::vector<NodePtr> next;
        for (const auto& r : cur)
            next.push_back(*map.find(r.get()));
        cur = std::move(next);
        if (!changed) break;
    }
    return cur;
}

} // namespace sj::compiler
