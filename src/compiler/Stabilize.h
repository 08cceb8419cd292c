// Pass: stabilize (log1p, expm1, log-softmax, logsumexp, softplus forms). Precondition:
// canonicalized graph.
#pragma once

#include "Rewrite.h"

#include <symjax/ir/Node.h>

namespace sj::compiler {

const std::vector<Pattern>& stabilize_patterns();
std::vector<NodePtr> stabilize(const std::vector<NodePtr>& roots, RewriteStats* stats = nullptr);

} // namespace sj::compiler
