// cholesky and triangular_solve on the CPU through LAPACK (potrf) and CBLAS (trsm): library
// kernels (LibraryKernels.h).
#pragma once

#include <symjax/Array.h>
#include <symjax/ir/Node.h>

#include <cstdint>
#include <vector>

namespace sj::cpu {

/// cholesky(in[0]) into `out` (LAPACK ?potrf); the counter is unused.
void cholesky(const Node& node, const std::vector<Array>& in, Array& out, uint64_t counter);
/// triangular_solve(in[0], in[1]) into `out` (CBLAS ?trsm); the counter is unused.
void triangular_solve(const Node& node, const std::vector<Array>& in, Array& out, uint64_t counter);

} // namespace sj::cpu
