// cholesky and triangular_solve on the CPU through LAPACK (potrf) and CBLAS (trsm).
#pragma once

#include <symjax/Array.h>
#include <symjax/ir/Node.h>

#include <vector>

namespace sj::cpu {

/// A library implementation of a node whose op has no generated kernel: takes the node and its
/// input values, and writes every element of `out` (allocated by the caller with the node's
/// concrete type; reused across calls, so no page faults and no munmap per call).
using LibraryKernel = void (*)(const Node& node, const std::vector<Array>& in, Array& out);

/// The LAPACK/BLAS implementation of `op` (cholesky, triangular_solve), or null: then the
/// reference kernel runs.
LibraryKernel library_kernel(Op op);

} // namespace sj::cpu
