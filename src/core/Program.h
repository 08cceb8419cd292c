// Program: what function() hands to the compiler and the backends.
#pragma once

#include <symjax/ir/Node.h>

#include <utility>
#include <vector>

namespace sj::detail {

/// Placeholders in call order, outputs, the variables the graph reads, and the updates (index
/// into `variables` -> new value).
struct Program {
    std::vector<NodePtr> inputs;
    std::vector<NodePtr> outputs;
    std::vector<NodePtr> variables; // Variable nodes
    std::vector<std::pair<size_t, NodePtr>> updates;
};

} // namespace sj::detail
