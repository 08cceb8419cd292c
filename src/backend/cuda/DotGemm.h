// dot_general on row-major operands as one column-major strided batched GEMM (cuBLAS's), when
// its dims allow it without a copy (Note [dot_general as a GEMM] in DotGemm.cpp).
#pragma once

#include "Device.h"

#include <symjax/DType.h>
#include <symjax/Shape.h>
#include <symjax/ir/Attrs.h>

#include <optional>

namespace sj::cuda {

/// The GEMM that writes dot_general(lhs, rhs, d) (row-major operands of shapes `lhs` and `rhs`
/// and element type `t`, at lhs_ptr and rhs_ptr) row-major into out_ptr: GemmArgs::a is the
/// rhs and GemmArgs::b the lhs (C^T = rhs^T lhs^T, column-major). nullopt when the dims do not
/// fit one GEMM (a group of batch, free or contracted dims that does not collapse to a single
/// stride, a stride BLAS cannot express, a size over INT_MAX) or t is not f32 or f64; the caller
/// then computes it another way. The caller computes nothing when m, n or batch is 0, and writes
/// zeros when k is 0 (BLAS leaves C alone with k = 0 and beta = 0 only in some versions).
std::optional<GemmArgs> gemm_for(const DotAttrs& d, const Shape& lhs, const Shape& rhs, DType t,
                                 DevicePtr lhs_ptr = 0, DevicePtr rhs_ptr = 0,
                                 DevicePtr out_ptr = 0);

} // namespace sj::cuda
