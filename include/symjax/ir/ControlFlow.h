// Structured control flow in the IR: the bodies of scan, while_loop and cond, and how a loop's
// inputs, body parameters and results line up (Note [Structured ops] in src/ops/ControlFlow.cpp).
#pragma once

#include <symjax/ir/Node.h>

#include <memory>
#include <string>
#include <vector>

namespace sj::detail {

/// A traced body: placeholders in call order, and the results computed from them. A body reads
/// nothing else but constants: every other tensor its function used was captured, that is made
/// an input of the loop node and a parameter of the body.
struct Body {
    std::vector<NodePtr> params;
    std::vector<NodePtr> results;
};

enum class RegionKind : uint8_t { Scan, While, Cond };

/// One loop or conditional. Its nodes' inputs, the bodies' parameters and the nodes' results:
///
///   Scan   inputs  [init carries (carries), sequences (sequences), captured (captured)]
///          body    ([carries, one slice of each sequence, captured]) -> [new carries, step outputs
///          (outputs)] results [final carries, stacked step outputs [length, ...],
///                   carry history [length, ...]: the carry each step received]
///   While  inputs  [init carries, captured by the body (captured), captured by the condition
///   (captured2)]
///          body    ([carries, captured]) -> [new carries]
///          body2   ([carries, captured2]) -> [bool scalar: go on]
///          results [final carries, trip count (i64 scalar),
///                   carry history [max_iterations, ...]: the carry each iteration received]
///   Cond   inputs  [pred (bool scalar), operands (carries), captured by true (captured), by false
///   (captured2)]
///          body    ([operands, captured]) -> [results (outputs)]    taken when pred is true
///          body2   ([operands, captured2]) -> [results]             taken when pred is false
///          results [the taken branch's results]
struct Region {
    RegionKind kind = RegionKind::Scan;
    std::string name; // "scan", "while_loop", "cond", or the user's name: messages say it
    int carries = 0, sequences = 0, outputs = 0, captured = 0, captured2 = 0;
    int64_t length = -1;         // Scan: the step count when there are no sequences
    bool reverse = false;        // Scan: steps run from the last slice to the first
    int64_t max_iterations = -1; // While: stop after this many iterations (-1: no bound)
    Body body, body2;
    /// Scan: the region this one copies with more step outputs, the body values its backward
    /// pass reads instead of recomputing them (Note [Scan residuals] in src/api/ControlFlow.cpp);
    /// a pass runs the base's nodes as this region's when both loops have the same inputs.
    std::shared_ptr<const Region> base;

    /// How many results the region has (its nodes' RegionAttrs::output range over them).
    int num_results() const;
    /// Result k's role, for messages: "final carry 0", "stacked output 1", "trip count"...
    std::string result_str(int k) const;
    /// The first input index of the captured tensors of body (captured) and body2 (captured2).
    int captured_begin() const;
    int captured2_begin() const { return captured_begin() + captured; }
};

/// The types of every result of `r` for these input types (the static types when building the
/// graph, the call's concrete types at run time): the bodies are typed again from them, so a
/// clone that changes an input's shape retypes the loop, and at run time a body whose -1 dims
/// resolve differently is checked. Throws ShapeError/TypeError (InputError when `at_runtime`)
/// naming the loop, the carry and both types when a body's results do not fit.
std::vector<TensorType> region_result_types(const Region& r, const std::vector<TensorType>& in,
                                            bool at_runtime);

/// The nodes of one loop in `order` (same region, same inputs), grouped: the key a backend or
/// a pass uses to run a loop once for all of its results.
struct RegionKey {
    const Region* region = nullptr;
    std::vector<const Node*> inputs;
    bool operator<(const RegionKey& o) const {
        return region != o.region ? region < o.region : inputs < o.inputs;
    }
};
RegionKey region_key(const Node& n);

/// The graph under `roots` with every result of a scan whose region another scan over the same
/// inputs extends (Region::base) read from that other scan instead, so the loop runs once for
/// both (Note [Scan residuals] in src/api/ControlFlow.cpp). The compiler's merge_loops pass and
/// vmap (which batches one loop, not two) use it; `merged` counts the replaced nodes.
std::vector<NodePtr> merge_loop_copies(const std::vector<NodePtr>& roots,
                                       int64_t* merged = nullptr);

} // namespace sj::detail
