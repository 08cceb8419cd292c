// merge_loops: a scan's nodes become those of its copy with residuals (Note [Scan residuals]).
#include "MergeLoops.h"

#include <symjax/Graph.h>
#include <symjax/ir/Attrs.h>
#include <symjax/ir/ControlFlow.h>

#include <map>

namespace sj::compiler {

std::vector<NodePtr> merge_loops(const std::vector<NodePtr>& roots, RewriteStats* stats) {
    std::vector<const Node*> rs;
    for (const auto& r : roots) rs.push_back(r.get());
    const std::vector<const Node*> order = topo_order(rs);
    // the copies present, by the region they extend and their inputs (the first one wins)
    std::map<detail::RegionKey, std::shared_ptr<const detail::Region>> copies;
    for (const Node* n : order) {
        if (!n->is(Op::Scan)) continue;
        const auto& region = n->attr<RegionAttrs>().region;
        if (!region->base) continue;
        detail::RegionKey key = detail::region_key(*n);
        key.region = region->base.get();
        copies.emplace(std::move(key), region);
    }
    if (copies.empty()) return roots;
    Givens givens;
    for (const Node* n : order) {
        if (!n->is(Op::Scan)) continue;
        auto it = copies.find(detail::region_key(*n));
        if (it == copies.end()) continue;
        const detail::Region &base = *n->attr<RegionAttrs>().region, &copy = *it->second;
        // the copy's extra step outputs come after the base's: the carry history moves along
        int64_t k = n->attr<RegionAttrs>().output;
        if (k >= base.carries + base.outputs) k += copy.outputs - base.outputs;
        NodePtr m = Node::make(Op::Scan, RegionAttrs{it->second, k}, n->inputs());
        givens.emplace_back(Tensor(n->shared_from_this()), Tensor(m));
    }
    if (stats) stats->hits["merge_loops"] += int64_t(givens.size());
    if (givens.empty()) return roots;
    std::vector<Tensor> ts(roots.begin(), roots.end());
    std::vector<NodePtr> out;
    for (const Tensor& t : clone(ts, givens)) out.push_back(t.node());
    return out;
}

} // namespace sj::compiler
