// Pass: specialize (pow by small constants, transposes folded into dot_general). Precondition:
// canonicalized graph.
#pragma once

#include "Rewrite.h"

#include <symjax/ir/Node.h>

namespace sj::compiler {

const std::vector<Pattern>& specialize_patterns();
std::vector<NodePtr> specialize(const std::vector<NodePtr>& roots, RewriteStats* stats = nullptr);

/// reduce_sum((x - c)^2) of f32 x, c computed from x and constant along the summed axes ->
/// s2 - c * (2 * s1 - n * c) with s1, s2 the sums of x and x * x in f64 (Note [Variance in one
/// pass] in Specialize.cpp); null where it does not apply. A target's lowering runs it
/// (one_pass_variances), not specialize: it pays only where f64 sums are cheap.
NodePtr one_pass_variance(const NodePtr& n);
std::vector<NodePtr> one_pass_variances(const std::vector<NodePtr>& roots,
                                        RewriteStats* stats = nullptr);

} // namespace sj::compiler
