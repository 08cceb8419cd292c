// sort on the CPU: packed integer keys and lines on the thread team (Note [Sorting packed keys]
// in Sort.cpp); a library kernel (LibraryKernels.h).
#pragma once

#include <symjax/Array.h>
#include <symjax/ir/Node.h>

#include <cstdint>
#include <vector>

namespace sj::cpu {

/// sort(in[0][, in[1]]) (Note [Sort] in src/ops/Sort.cpp) into `out`; the counter is unused.
void sort(const Node& node, const std::vector<Array>& in, Array& out, uint64_t counter);

} // namespace sj::cpu
