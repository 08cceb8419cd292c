// Sums of partial results in a fixed order, whoever computes them.
#pragma once

#include <cstdint>

namespace sj::cpu {

/// sum[i] = float(parts[0][i] + parts[1][i] + ... + parts[count - 1][i]), added in that order in
/// double, for i in [begin, end): the partial results of a split convolution weight gradient or
/// matmul contraction (Note [Thread-count-independent weight gradients] in Conv.cpp, Note [Long
/// contractions] in Dot.cpp). In AVX-512 registers where the CPU has it: the same adds in the
/// same order, so the same bits. On the AMD EPYC (Zen 5) the baseline build's SSE2 loop took
/// 15-18 us of a 32x32x3x3 layer's 67 us weight-gradient call (4 partials, then on the one thread
/// that finished last) in the SymJAX paper network's step.
void add_in_double(float* const* parts, int count, int64_t begin, int64_t end, float* sum);

/// The same sums stored elsewhere: sum[to[i]] for i in [begin, end), nothing where to[i] < 0
/// (a blocked layout's padding). A weight gradient computed in a primitive's blocked layout goes
/// straight into the caller's plain one (Note [Weight gradients stored in the caller's layout] in
/// Conv.cpp); the values and their bits are add_in_double's.
void add_in_double_to(float* const* parts, int count, int64_t begin, int64_t end, const int32_t* to,
                      float* sum);

} // namespace sj::cpu
