// dot_general on the CPU: f32 through oneDNN's sgemm, f64 through a plain blocked loop.
#pragma once

#include <symjax/Array.h>
#include <symjax/Attrs.h>

namespace sj::cpu {

/// out = dot_general(lhs, rhs) with XLA dims; `out` is allocated by the caller with the result
/// shape. Operands whose dims are not [batch, free, contract] / [batch, contract, free] (or the
/// transposed forms a GEMM accepts) are first copied into that order.
void dot_general(const Array& lhs, const Array& rhs, const DotAttrs& dims, Array& out);

/// Estimated floating-point operations of the call (2 M N K per batch).
double dot_flops(const Shape& lhs, const DotAttrs& dims, const Shape& out);

} // namespace sj::cpu
