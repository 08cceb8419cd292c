// The rewrite engine: declarative patterns applied by one fixpoint driver with an iteration cap.
#pragma once

#include <symjax/ir/Node.h>

#include <map>
#include <string>
#include <vector>

namespace sj::compiler {

/// A rewrite: given a node whose inputs are already rewritten, returns its replacement or null.
/// Each pattern shows its before/after in a comment and is testable on its own.
struct Pattern {
    const char* name;
    NodePtr (*apply)(const NodePtr& n);
};

/// Hit counts per pattern name, and the number of sweeps the driver made.
struct RewriteStats {
    std::map<std::string, int64_t> hits;
    int sweeps = 0;
    void merge(const RewriteStats& o) {
        for (const auto& [k, v] : o.hits) hits[k] += v;
        sweeps += o.sweeps;
    }
};

/// Rewrites the graph under `roots` bottom-up with `patterns` until nothing fires (at most
/// `max_sweeps` sweeps over the graph; each node is rewritten at most 64 times per sweep).
/// Returns the new roots, in order. Leaves are never rewritten.
std::vector<NodePtr> rewrite(const std::vector<NodePtr>& roots, const std::vector<Pattern>& patterns,
                             RewriteStats* stats = nullptr, int max_sweeps = 8);

// Helpers for writing patterns.
using sj::splat_value; // include/symjax/ir/Node.h
inline bool is_splat(const Node& n, double v) {
    double x;
    return splat_value(n, &x) && x == v;
}

} // namespace sj::compiler
