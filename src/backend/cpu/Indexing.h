// gather, scatter_add, scatter, check_index and cumsum on the CPU: typed loops, indices checked
// in one pass before any write, the work split over the thread team where the result does not
// depend on the split (Note [Indexing kernels] in Indexing.cpp); library kernels
// (LibraryKernels.h).
#pragma once

#include <symjax/Array.h>
#include <symjax/ir/Node.h>

#include <cstdint>
#include <vector>

namespace sj::cpu {

void gather(const Node& node, const std::vector<Array>& in, Array& out, uint64_t counter);
/// scatter_add and scatter (the node's op says which).
void scatter(const Node& node, const std::vector<Array>& in, Array& out, uint64_t counter);
/// check_index's check of `idx` (its input), on the team for many values; the reference's
/// error for the first bad one. The op's result is `idx` itself, as the reference kernel's.
void check_index_values(const Node& node, const Array& idx);
void cumsum(const Node& node, const std::vector<Array>& in, Array& out, uint64_t counter);

} // namespace sj::cpu
