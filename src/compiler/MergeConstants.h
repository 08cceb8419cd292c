// Pass: merge equal constants. Precondition: none. Postcondition: every constant is the one
// interned constant of its value, and nodes that became equal are one node.
#pragma once

#include "Rewrite.h"

#include <symjax/ir/Node.h>

namespace sj::compiler {

// Note [Constant identity]
// A constant the user makes is a leaf of its own (ConstantAttrs::id != 0), as in Theano and
// SymJAX: with a = ones({}), gradients(a * 3.0 + 1.0, {a}) is 3, not 4, and clone of
// a * 2.0 + 1.0 with a -> 10 is 21, not 30, because the 1.0 is not a. So graph building does
// not merge equal constants. The compiler does, first, after autodiff and clone have used those
// identities: each constant becomes its value's interned twin (id 0), and hash-consing then
// merges what is now equal above it (CSE), so the compiled graph, its kernels and their cache
// keys are what they were when constants were interned while building:
//
//     mul(x, 2.0#1)  mul(x, 2.0#2)           mul(x, 2.0)
//          \           /             ->        |     |
//              add                             add(%m, %m)
//
// Rewrites make their constants interned (shared_constant) or leave them to the last merge,
// which runs just before fusion.

/// Replaces each constant under `roots` by the interned constant of its value and rebuilds the
/// nodes above it. Returns the new roots, in order; counts merged constants in stats.
std::vector<NodePtr> merge_constants(const std::vector<NodePtr>& roots,
                                     RewriteStats* stats = nullptr);

} // namespace sj::compiler
