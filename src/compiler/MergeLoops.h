// Pass: merge a loop with its copy that stores residuals. Precondition: equal inputs are one
// node (merge_constants has run). Postcondition: no scan node reads a region that another scan
// node with the same inputs extends (Note [Scan residuals] in src/api/ControlFlow.cpp).
#pragma once

#include "Rewrite.h"

#include <symjax/ir/Node.h>

#include <vector>

namespace sj::compiler {

/// Replaces each result of a scan whose region a second scan over the same inputs extends
/// (Region::base) by the same result of the second, so the loop runs once for the forward
/// values and the residuals its backward pass reads (detail::merge_loop_copies, which vmap uses
/// too). Returns the new roots, in order; counts the replaced nodes in stats
/// (hits["merge_loops"]).
std::vector<NodePtr> merge_loops(const std::vector<NodePtr>& roots, RewriteStats* stats = nullptr);

} // namespace sj::compiler
