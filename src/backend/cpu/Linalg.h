// cholesky and triangular_solve on the CPU through LAPACK (potrf) and CBLAS (trsm).
#pragma once

#include <symjax/Array.h>
#include <symjax/Node.h>

#include <vector>

namespace sj::cpu {

/// A library implementation of a node whose op has no generated kernel: takes the node, its
/// input values and its concrete output type; returns the output.
using LibraryKernel = Array (*)(const Node& node, const std::vector<Array>& in, const TensorType& out);

/// The LAPACK/BLAS implementation of `op` (cholesky, triangular_solve), or null: then the
/// reference kernel runs.
LibraryKernel library_kernel(Op op);

} // namespace sj::cpu
