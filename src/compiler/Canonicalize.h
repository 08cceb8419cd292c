// Pass: canonicalize (constant folding, algebraic identities, movement-chain collapse,
// broadcast sinking). Precondition: none. Postcondition: no stop_gradient nodes remain.
#pragma once

#include "Rewrite.h"

#include <symjax/ir/Node.h>

namespace sj::compiler {

/// The canonicalisation patterns, in the order the driver tries them.
const std::vector<Pattern>& canonicalize_patterns();
/// Runs canonicalize_patterns() to a fixpoint over the graph under roots.
std::vector<NodePtr> canonicalize(const std::vector<NodePtr>& roots, RewriteStats* stats = nullptr);

/// Largest constant (in elements) that constant folding materialises.
inline constexpr int64_t kMaxFoldElements = 1 << 16;

} // namespace sj::compiler
