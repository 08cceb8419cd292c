// merge_loops: a scan's nodes become those of its copy with residuals (Note [Scan residuals]).
#include "MergeLoops.h"

#include <symjax/ir/ControlFlow.h>

namespace sj::compiler {

std::vector<NodePtr> merge_loops(const std::vector<NodePtr>& roots, RewriteStats* stats) {
    int64_t merged = 0;
    std::vector<NodePtr> out = detail::merge_loop_copies(roots, &merged);
    if (stats)
        stats->hits["merge_loops"] += merged;
    return out;
}

} // namespace sj::compiler
