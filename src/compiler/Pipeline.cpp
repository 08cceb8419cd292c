// The pass pipeline, as a table of contents.
#include "Pipeline.h"

#include "Canonicalize.h"
#include "Layout.h"
#include "MergeConstants.h"
#include "Specialize.h"
#include "Stabilize.h"
#include "../core/Verify.h"

#include <symjax/Graph.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace sj::compiler {

int debug_level() {
    static int level = [] {
        const char* e = std::getenv("SJ_DEBUG");
        return e ? std::atoi(e) : 0;
    }();
    return level;
}

bool blocked_layout() {
    static bool on = [] {
        const char* e = std::getenv("SJ_BLOCKED_LAYOUT");
        return !(e && std::string(e) == "0");
    }();
    return on;
}

void dump_file(const std::string& name, const std::string& text) {
    const char* dir = std::getenv("SJ_DUMP");
    if (!dir || !*dir) return;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::ofstream(std::string(dir) + "/" + name) << text;
}

namespace {
void after(const char* pass, const std::vector<NodePtr>& roots, int& step) {
    if (debug_level() < 5 && !std::getenv("SJ_DUMP")) return;
    std::vector<Tensor> ts;
    for (const auto& r : roots) ts.emplace_back(r);
    std::string text = to_text(ts);
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

Compiled compile(const std::vector<NodePtr>& input) {
    Compiled c;
    int step = 0;
    after("build", input, step);
    // autodiff and clone are done with identities
    c.roots = timed("merge_constants", [&] { return merge_constants(input, &c.rewrites); });
    c.roots = timed("canonicalize", [&] { return canonicalize(c.roots, &c.rewrites); });
    after("canonicalize", c.roots, step);
    c.roots = timed("stabilize", [&] { return stabilize(c.roots, &c.rewrites); });
    after("stabilize", c.roots, step);
    c.roots = timed("canonicalize", [&] { return canonicalize(c.roots, &c.rewrites); });
    c.roots = timed("specialize", [&] { return specialize(c.roots, &c.rewrites); });
    after("specialize", c.roots, step);
    if (blocked_layout()) {
        c.roots = timed("layout", [&] { return layout(c.roots, &c.rewrites); });
        after("layout", c.roots, step);
    }
    // the constants the rewrites made
    c.roots = timed("merge_constants", [&] { return merge_constants(c.roots, &c.rewrites); });
    auto t0 = std::chrono::steady_clock::now();
    c.plan = fuse(c.roots);
    if (debug_level() >= 2)
        std::fprintf(stderr, "[symjax] %-12s %8.1f ms, %zu groups\n", "fusion",
                     std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                     c.plan.groups.size());
    if (debug_level() >= 3 || std::getenv("SJ_DUMP")) {
        std::string plan = c.plan.str();
        if (debug_level() >= 3) std::fprintf(stderr, "[symjax] fusion:\n%s", plan.c_str());
        dump_file(std::to_string(step++) + "_fusion.txt", plan);
    }
    return c;
}

} // namespace sj::compiler
