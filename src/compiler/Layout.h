// Pass: layout (cpu backend). Keeps conv chains in oneDNN's channel-blocked layout: window ops
// take and give [N, C / 16, spatial..., 16] operands, and the elementwise ops and reductions
// between them run on those tensors, so the reorders sit only at the chain's boundaries
// (Note [Channel-blocked layout] in src/ops/ChannelBlocking.h). Precondition: specialized graph.
#pragma once

#include "Rewrite.h"

namespace sj::compiler {

const std::vector<Pattern>& layout_patterns();
std::vector<NodePtr> layout(const std::vector<NodePtr>& roots, RewriteStats* stats = nullptr);

} // namespace sj::compiler
