// pad, concat, argmax/argmin, one_hot, dynamic_slice and dynamic_update_slice on the CPU: row
// copies and typed scans into the call's kept buffer, on the thread team for large results (Note
// [Row kernels] in Movement.cpp); library kernels (LibraryKernels.h).
#pragma once

#include <symjax/Array.h>
#include <symjax/ir/Node.h>

#include <cstdint>
#include <vector>

namespace sj::cpu {

void pad(const Node& node, const std::vector<Array>& in, Array& out, uint64_t counter);
void concat(const Node& node, const std::vector<Array>& in, Array& out, uint64_t counter);
/// argmax and argmin (the node's op says which).
void arg_reduce(const Node& node, const std::vector<Array>& in, Array& out, uint64_t counter);
void one_hot(const Node& node, const std::vector<Array>& in, Array& out, uint64_t counter);
void dynamic_slice(const Node& node, const std::vector<Array>& in, Array& out, uint64_t counter);
void dynamic_update_slice(const Node& node, const std::vector<Array>& in, Array& out,
                          uint64_t counter);

} // namespace sj::cpu
