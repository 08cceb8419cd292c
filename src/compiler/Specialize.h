// Pass: specialize (pow by small constants, transposes folded into dot_general). Precondition:
// canonicalized graph.
#pragma once

#include "Rewrite.h"

#include <symjax/ir/Node.h>

namespace sj::compiler {

const std::vector<Pattern>& specialize_patterns();
std::vector<NodePtr> specialize(const std::vector<NodePtr>& roots, RewriteStats* stats = nullptr);

} // namespace sj::compiler
