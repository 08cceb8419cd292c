// The pass pipeline, as a table of contents.
#include "Pipeline.h"

#include "Canonicalize.h"
#include "MergeConstants.h"
#include "MergeLoops.h"
#include "Specialize.h"
#include "Stabilize.h"

#include "../core/IrText.h"
#include "../core/Verify.h"

#include <symjax/Graph.h>
#include <symjax/ir/Node.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace sj::compiler {

namespace {
void after(const char* pass, const std::vector<NodePtr>& roots, int& step) {
    if (debug_level() < 5 && !detail::dumping()) return;
    std::string text = detail::print_ir(roots);
    if (debug_level() >= 5) std::fprintf(stderr, "[symjax] graph after %s:\n%s", pass, text.c_str());
    dump_file(std::to_string(step++) + "_" + pass + ".txt", text);
}
} // namespace

/// Runs one pass and verifies its result (src/core/Verify.h: at SJ_DEBUG >= 1 and in tests); at
/// SJ_DEBUG >= 2 prints its time and the graph size after it.
template <class F> std::vector<NodePtr> timed(const char* pass, F&& run) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<NodePtr> out = run();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (detail::verify_ir_enabled()) detail::verify(out, pass);
    if (debug_level() < 2) return out;
    std::vector<Tensor> ts(out.begin(), out.end());
    std::fprintf(stderr, "[symjax] %-12s %8.1f ms, %zu nodes after\n", pass, ms, graph_size(ts));
    return out;
}

Compiled compile(const std::vector<NodePtr>& input, const Target& target) {
    Compiled c;
    int step = 0;
    after("build", input, step);
    // autodiff and clone are done with identities
    c.roots = timed("merge_constants", [&] { return merge_constants(input, &c.rewrites); });
    // a scan and its copy with residuals run as one loop (Note [Scan residuals])
    c.roots = timed("merge_loops", [&] { return merge_loops(c.roots, &c.rewrites); });
    c.roots = timed("canonicalize", [&] { return canonicalize(c.roots, &c.rewrites); });
    after("canonicalize", c.roots, step);
    c.roots = timed("stabilize", [&] { return stabilize(c.roots, &c.rewrites); });
    after("stabilize", c.roots, step);
    c.roots = timed("canonicalize", [&] { return canonicalize(c.roots, &c.rewrites); });
    c.roots = timed("specialize", [&] { return specialize(c.roots, &c.rewrites); });
    after("specialize", c.roots, step);
    // the target's own rewrites (the cpu target: channel-blocked conv chains)
    c.roots = timed("lower", [&] { return target.lower(c.roots, &c.rewrites); });
    after("lower", c.roots, step);
    // the constants the rewrites made
    c.roots = timed("merge_constants", [&] { return merge_constants(c.roots, &c.rewrites); });
    auto t0 = std::chrono::steady_clock::now();
    c.plan = fuse(c.roots, target);
    if (debug_level() >= 2)
        std::fprintf(stderr, "[symjax] %-12s %8.1f ms, %zu groups\n", "fusion",
                     std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                     c.plan.groups.size());
    if (debug_level() >= 3 || detail::dumping()) {
        std::string plan = c.plan.str();
        if (debug_level() >= 3) std::fprintf(stderr, "[symjax] fusion:\n%s", plan.c_str());
        dump_file(std::to_string(step++) + "_fusion.txt", plan);
    }
    return c;
}

} // namespace sj::compiler
