// The compiler pipeline: the passes of DESIGN.md section 7, in order.
#pragma once

#include "Fusion.h"
#include "../core/Debug.h"
#include "Rewrite.h"
#include "Target.h"

#include <symjax/ir/Node.h>

#include <string>
#include <vector>

namespace sj::compiler {

struct Compiled {
    std::vector<NodePtr> roots; // the rewritten roots, in the order given
    FusionPlan plan;
    RewriteStats rewrites;
};

/// Runs merge_constants, merge_loops, canonicalize, stabilize, canonicalize, specialize, the
/// target's lowering, merge_constants and fusion for `target` over `roots`. With SJ_DUMP=dir set,
/// writes the graph after each pass and the fusion plan there; SJ_DEBUG >= 5 prints the graphs, >=
/// 3 the fusion decisions, >= 2 each pass's time.
Compiled compile(const std::vector<NodePtr>& roots, const Target& target);

using detail::debug_level;
using detail::dump_file;

} // namespace sj::compiler
