// The cpu target's lowering pass: channel blocking. Keeps conv chains in oneDNN's channel-blocked
// layout: window ops take and give [N, C / 16, spatial..., 16] operands, and the elementwise ops
// and reductions between them run on those tensors, so the reorders sit only at the chain's
// boundaries (Note [Channel-blocked layout] in src/ops/ChannelBlocking.h). Run by
// CpuTarget::lower after specialize. Precondition: specialized graph.
#pragma once

#include "../../compiler/Rewrite.h"

#include <symjax/ir/Node.h>

namespace sj::cpu {

const std::vector<compiler::Pattern>& layout_patterns();
std::vector<NodePtr> layout(const std::vector<NodePtr>& roots,
                            compiler::RewriteStats* stats = nullptr);

} // namespace sj::cpu
