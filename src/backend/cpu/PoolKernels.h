// The cpu target's max pools as kernels: a 2x2 max pool of stride 2 over a channel-blocked
// activation that an elementwise op computes, and its backward, become elementwise ops over
// strided slices, so the pool fuses with what computes its input (Note [Max pools as kernels]
// in PoolKernels.cpp). Run by CpuTarget::lower after the layout pass.
#pragma once

#include "../../compiler/Rewrite.h"

#include <symjax/ir/Node.h>

namespace sj::cpu {

/// The pass over a laid-out graph.
std::vector<NodePtr> pools_as_kernels(const std::vector<NodePtr>& roots,
                                      compiler::RewriteStats* stats = nullptr);

} // namespace sj::cpu
