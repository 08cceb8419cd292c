// The cpu target's lowering pass: channel blocking. Keeps conv chains in oneDNN's channel-blocked
// layout: window ops take and give [N, C / B, spatial..., B] operands, and the elementwise ops
// and reductions between them run on those tensors, so the reorders sit only at the chain's
// boundaries (Note [Channel-blocked layout] in src/ops/ChannelBlocking.h). Run by
// CpuTarget::lower after specialize. Precondition: specialized graph.
#pragma once

#include "../../compiler/Rewrite.h"

#include <symjax/ir/Node.h>

namespace sj::cpu {

const std::vector<compiler::Pattern>& layout_patterns();
/// reshape(x, s) for an s with at most one -1 (inferred from the size), looking through a
/// reshape of x (both are views of one buffer); x itself when it has shape s. The layout pass's
/// and the pool kernels' rewrites build their views with it.
NodePtr reshape_to(NodePtr x, const Shape& s);
/// The pass with channel blocks of `block` (8 or 16).
std::vector<NodePtr> layout(const std::vector<NodePtr>& roots, int64_t block,
                            compiler::RewriteStats* stats = nullptr);
/// The pass with channel_block()'s width (the CPU's when the pass is off).
std::vector<NodePtr> layout(const std::vector<NodePtr>& roots,
                            compiler::RewriteStats* stats = nullptr);

} // namespace sj::cpu
