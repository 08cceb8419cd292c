// The compiler pipeline: the passes of DESIGN.md section 7, in order.
#pragma once

#include "Fusion.h"
#include "Rewrite.h"

#include <string>
#include <vector>

namespace sj::compiler {

struct Compiled {
    std::vector<NodePtr> roots; // the rewritten roots, in the order given
    FusionPlan plan;
    RewriteStats rewrites;
};

/// Runs canonicalize, stabilize, canonicalize, specialize, layout and fusion over `roots`. With
/// SJ_DUMP=dir set, writes the graph after each pass and the fusion plan there; SJ_DEBUG >= 5
/// prints the graphs, >= 3 the fusion decisions.
Compiled compile(const std::vector<NodePtr>& roots);

/// Whether the layout pass runs: yes unless SJ_BLOCKED_LAYOUT=0 (for measuring what it gains).
bool blocked_layout();
/// The SJ_DEBUG level (0 when unset).
int debug_level();
/// Writes `text` to $SJ_DUMP/name when SJ_DUMP is set.
void dump_file(const std::string& name, const std::string& text);

} // namespace sj::compiler
