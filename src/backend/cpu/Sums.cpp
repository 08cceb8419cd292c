// Sums of partial results in a fixed order (Note [Thread-count-independent weight gradients] in
// Conv.cpp, Note [Long contractions] in Dot.cpp).
#include "Sums.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sj::cpu {

namespace {

void add_in_double_plain(float* const* parts, int count, int64_t begin, int64_t end, float* sum) {
    constexpr int64_t kBlock = 256;
    double acc[kBlock];
    for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t m = std::min(kBlock, end - b);
        for (int64_t i = 0; i < m; ++i)
            acc[i] = parts[0][b + i];
        for (int c = 1; c < count; ++c)
            for (int64_t i = 0; i < m; ++i)
                acc[i] += parts[c][b + i];
        for (int64_t i = 0; i < m; ++i)
            sum[b + i] = float(acc[i]);
    }
}

void add_in_double_to_plain(float* const* parts, int count, int64_t begin, int64_t end,
                            const int32_t* to, float* sum) {
    for (int64_t i = begin; i < end; ++i) {
        if (to[i] < 0)
            continue;
        double acc = parts[0][i];
        for (int c = 1; c < count; ++c)
            acc += parts[c][i];
        sum[to[i]] = float(acc);
    }
}

#if defined(__x86_64__)
/// out[0, 16) = the sums of elements [i, i + 16).
__attribute__((target("avx512f"))) inline void sums16(float* const* parts, int count, int64_t i,
                                                      float* out) {
    __m512d lo = _mm512_cvtps_pd(_mm256_loadu_ps(parts[0] + i));
    __m512d hi = _mm512_cvtps_pd(_mm256_loadu_ps(parts[0] + i + 8));
    for (int c = 1; c < count; ++c) {
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm256_loadu_ps(parts[c] + i)));
        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_loadu_ps(parts[c] + i + 8)));
    }
    _mm256_storeu_ps(out, _mm512_cvtpd_ps(lo));
    _mm256_storeu_ps(out + 8, _mm512_cvtpd_ps(hi));
}

__attribute__((target("avx512f"))) void
add_in_double_avx512(float* const* parts, int count, int64_t begin, int64_t end, float* sum) {
    int64_t i = begin;
    for (; i + 16 <= end; i += 16)
        sums16(parts, count, i, sum + i);
    add_in_double_plain(parts, count, i, end, sum);
}

__attribute__((target("avx512f"))) void add_in_double_to_avx512(float* const* parts, int count,
                                                                int64_t begin, int64_t end,
                                                                const int32_t* to, float* sum) {
    int64_t i = begin;
    alignas(64) float block[16];
    for (; i + 16 <= end; i += 16) {
        sums16(parts, count, i, block);
        __m512i at = _mm512_loadu_si512(to + i);
        __mmask16 kept = _mm512_cmpge_epi32_mask(at, _mm512_setzero_si512());
        _mm512_mask_i32scatter_ps(sum, kept, at, _mm512_load_ps(block), 4);
    }
    add_in_double_to_plain(parts, count, i, end, to, sum);
}
#endif

} // namespace

void add_in_double(float* const* parts, int count, int64_t begin, int64_t end, float* sum) {
#if defined(__x86_64__)
    static const bool avx512 = __builtin_cpu_supports("avx512f");
    if (avx512)
        return add_in_double_avx512(parts, count, begin, end, sum);
#endif
    add_in_double_plain(parts, count, begin, end, sum);
}

void add_in_double_to(float* const* parts, int count, int64_t begin, int64_t end, const int32_t* to,
                      float* sum) {
#if defined(__x86_64__)
    static const bool avx512 = __builtin_cpu_supports("avx512f");
    if (avx512)
        return add_in_double_to_avx512(parts, count, begin, end, to, sum);
#endif
    add_in_double_to_plain(parts, count, begin, end, to, sum);
}

} // namespace sj::cpu
