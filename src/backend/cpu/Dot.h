// dot_general on the CPU: f32 through oneDNN's matmul (tiny products through our own FMA loop), f64
// through our own AVX-512 kernel (a plain blocked loop without AVX-512).
#pragma once

#include "../../compiler/Fusion.h"

#include <symjax/Array.h>
#include <symjax/ir/Attrs.h>
#include <symjax/ir/Node.h>

namespace sj::cpu {

class KeptMemories; // Dnnl.h

/// out = dot_general(lhs, rhs) with XLA dims; `out` is allocated by the caller with the result
/// shape. Operands whose dims are not [batch, free, contract] / [batch, contract, free] (or the
/// transposed forms a GEMM accepts) are first copied into that order.
/// An f32 call applies `epilogue` (Note [Epilogue fusion] in src/compiler/Fusion.cpp; the rhs has
/// one free dim, the channels) as post-ops, `post_operands[i]` the operand of the i-th when it is
/// binary, and returns true; false when it did not (f64, an empty result, no contracted
/// elements): then `out` holds the plain product and the caller applies the epilogue.
/// `kept`: the call site's library arguments, kept between its calls (Note [Call arguments kept]
/// in Dnnl.cpp); null: made for this call.
bool dot_general(const Array& lhs, const Array& rhs, const DotAttrs& dims, Array& out,
                 const std::vector<compiler::PostOp>& epilogue = {},
                 const std::vector<const Array*>& post_operands = {}, KeptMemories* kept = nullptr);

/// Whether an f32 call computing `out` applies an accumulating post-op (Note [Accumulating
/// post-op] in src/compiler/Fusion.cpp): not when it has nothing to contract, or sums a long
/// contraction in fixed pieces (Note [Long contractions]).
bool dot_can_accumulate(const Array& lhs, const Array& rhs, const DotAttrs& dims, const Array& out);

/// How many times the call starts the team (FunctionStats::parallel_regions): 0 for small f32
/// calls, which run on the calling thread (Note [Small matmuls on one thread] in Dot.cpp), 2 for
/// a long contraction in pieces (the pieces, their sum), else 1; f64: 1 for a product of 2^19
/// multiply-adds or more in more than one panel on a CPU with AVX-512 (Note [f64 matmuls]),
/// else 0.
int dot_parallel_regions(const Shape& lhs, const Shape& rhs, const DotAttrs& dims, DType out);

/// Whether the f32 call lhs x rhs -> out with `epilogue` can read rhs, a [K, N] matrix
/// contracted along its rows, from pack_rhs's copy (Note [Packed weights] in CpuExecutable.cpp):
/// lhs a [M, K] or [K, M] matrix, one matmul over the team (not a small call on one thread, not
/// a long contraction in pieces), K a multiple of 16, N of 64, and oneDNN asks this CPU's matmul
/// for that layout.
bool dot_packs_rhs(const Shape& lhs, const Shape& rhs, const DotAttrs& dims, DType out,
                   const std::vector<compiler::PostOp>& epilogue);

/// Copies elements [begin, end) (row-major) of the [K, N] matrix `w` to their places in
/// `packed` (K * N floats): blocks of 16 rows by 64 columns, row-major inside, the blocks of a
/// 64-column panel in row order, the panels in column order (oneDNN's BA16a64b). Whole 64-float
/// runs go with non-temporal stores (the copy is for a later call, not for the caches now).
void pack_rhs(const float* w, float* packed, int64_t K, int64_t N, int64_t begin, int64_t end);

/// dot_general reading rhs (of shape `rhs`) from its packed copy, where dot_packs_rhs holds;
/// applies the epilogue.
void dot_general_packed(const Array& lhs, const float* packed_rhs, const Shape& rhs,
                        const DotAttrs& dims, Array& out,
                        const std::vector<compiler::PostOp>& epilogue = {},
                        const std::vector<const Array*>& post_operands = {},
                        KeptMemories* kept = nullptr);

/// Estimated floating-point operations of the call (2 M N K per batch).
double dot_flops(const Shape& lhs, const DotAttrs& dims, const Shape& out);

} // namespace sj::cpu
