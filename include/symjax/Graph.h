// Graph-level utilities: substitution (clone with givens), text printing, Graphviz export.
#pragma once

#include <symjax/Tensor.h>

#include <string>
#include <vector>

namespace sj {

/// Rebuilds `t` with each `givens[i].first` replaced by `givens[i].second` (any node: a
/// placeholder, an intermediate, a variable, a constant; matched by identity, not by value). A
/// replacement may have another shape or dtype: the rebuilt graph is typed again from it, and an
/// op that refuses its new inputs is a ShapeError/TypeError naming the op and the replacement.
Tensor clone(const Tensor& t, const Givens& givens);
std::vector<Tensor> clone(const std::vector<Tensor>& ts, const Givens& givens);

/// The text IR of the graph: one node per line in dependency order, then the outputs:
///   %3 = mul(%1, %2) : f32[-1, 10] named "xW"
///   return %3
/// Constants carry their values exactly; the text parses back to the same graph (docs/ir.md).
std::string to_text(const std::vector<Tensor>& outputs);
/// Graphviz dot source (render with `dot -Tpng`).
std::string to_dot(const std::vector<Tensor>& outputs);

/// Number of distinct nodes reachable from `outputs`.
size_t graph_size(const std::vector<Tensor>& outputs);

} // namespace sj
