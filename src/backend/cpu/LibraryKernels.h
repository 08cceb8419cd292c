// The cpu backend's library implementations of ops that have no generated kernel: LAPACK and
// CBLAS for cholesky and triangular_solve (Linalg.cpp), the vectorised, multi-threaded Philox
// draw for philox_bits (Random.cpp), packed-key sorts for sort (Sort.cpp), typed loops for
// gather, scatter_add, scatter and cumsum (Indexing.cpp), row copies and scans for pad, concat,
// argmax, argmin, one_hot, dynamic_slice and dynamic_update_slice (Movement.cpp). check_index
// checks on the team and passes its input on (Indexing.h). Every other such op runs its
// reference kernel.
#pragma once

#include <symjax/Array.h>
#include <symjax/ir/Node.h>

#include <cstdint>
#include <vector>

namespace sj::cpu {

/// A library implementation of a node whose op has no generated kernel: takes the node, its
/// input values and the call's counter (the random draws'), and writes every element of `out`
/// (allocated by the caller with the node's concrete type; reused across calls, so no page
/// faults and no munmap per call).
using LibraryKernel = void (*)(const Node& node, const std::vector<Array>& in, Array& out,
                               uint64_t counter);

/// The library implementation of `op`, or null: then the reference kernel runs.
LibraryKernel library_kernel(Op op);

/// What a profile calls op's library kernel ("lapack", "random"), or null when it has none.
const char* library_kind(Op op);

} // namespace sj::cpu
