// Sums of partial results in a fixed order (Note [Thread-count-independent weight gradients] in
// Conv.cpp, Note [Long contractions] in Dot.cpp).
#include "Sums.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sj::cpu {

namespace {

/// Elements summed at a time: a block of double accumulators, or of sums before they are stored
/// at their places, stays in L1.
constexpr int64_t kBlock = 256;

// The sums of elements [begin, end) into out[0, end - begin).

void sum_plain(float* const* parts, int count, int64_t begin, int64_t end, float* out) {
    double acc[kBlock];
    for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t m = std::min(kBlock, end - b);
        for (int64_t i = 0; i < m; ++i)
            acc[i] = parts[0][b + i];
        for (int c = 1; c < count; ++c)
            for (int64_t i = 0; i < m; ++i)
                acc[i] += parts[c][b + i];
        for (int64_t i = 0; i < m; ++i)
            out[b - begin + i] = float(acc[i]);
    }
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void sum_avx512(float* const* parts, int count, int64_t begin,
                                                   int64_t end, float* out) {
    int64_t i = begin;
    for (; i + 16 <= end; i += 16) {
        __m512d lo = _mm512_cvtps_pd(_mm256_loadu_ps(parts[0] + i));
        __m512d hi = _mm512_cvtps_pd(_mm256_loadu_ps(parts[0] + i + 8));
        for (int c = 1; c < count; ++c) {
            lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm256_loadu_ps(parts[c] + i)));
            hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_loadu_ps(parts[c] + i + 8)));
        }
        _mm256_storeu_ps(out + (i - begin), _mm512_cvtpd_ps(lo));
        _mm256_storeu_ps(out + (i - begin) + 8, _mm512_cvtpd_ps(hi));
    }
    sum_plain(parts, count, i, end, out + (i - begin));
}
#endif

void sum(float* const* parts, int count, int64_t begin, int64_t end, float* out) {
#if defined(__x86_64__)
    static const bool avx512 = __builtin_cpu_supports("avx512f");
    if (avx512)
        return sum_avx512(parts, count, begin, end, out);
#endif
    sum_plain(parts, count, begin, end, out);
}

} // namespace

void add_in_double(float* const* parts, int count, int64_t begin, int64_t end, float* sum_out) {
    sum(parts, count, begin, end, sum_out + begin);
}

void add_in_double_to(float* const* parts, int count, int64_t begin, int64_t end, const int32_t* to,
                      float* sum_out) {
    alignas(64) float block[kBlock];
    for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t m = std::min(kBlock, end - b);
        sum(parts, count, b, b + m, block);
        for (int64_t i = 0; i < m; ++i)
            if (to[b + i] >= 0)
                sum_out[to[b + i]] = block[i];
    }
}

} // namespace sj::cpu
