// dot_general via GEMM. Note [Why oneDNN for matmul]: Debian's OpenBLAS does not recognise this
// CPU family and falls back to a generic kernel unless OPENBLAS_CORETYPE is set, which we may
// not do for users; oneDNN dispatches its own AVX-512 JIT kernels at run time, is already our
// convolution library, and its OpenMP threads do not fight a second BLAS pool. f64 takes our
// own kernel (Note [f64 matmuls]); tiny f32 products do not call the library either (Note [Tiny
// matmuls in a loop]).
//
// Note [matmul primitives, not dnnl_sgemm]: dnnl_sgemm JIT-generates every kernel variant of its
// GEMM driver on its first call (~100 ms on our 2-core VM, a third of a cached MLP start-up); a
// matmul primitive generates only the brgemm kernels of its own shape (< 1 ms each) and runs as
// fast. Primitives are cached per (batch, M, N, K, transposes); each thread executes them on its
// own stream with its own scratchpad (oneDNN's global scratchpad is not safe for concurrent calls).
//
// Note [Long contractions]
// oneDNN 2.6's matmul splits a long contraction into a small result between its threads and adds
// the parts, so 1 and 2 threads summed in different orders: a dense layer's weight gradient at
// batch 2048 or more (the batch is the contraction) differed in the last bits between thread
// counts, and so did training. So an f32 matmul whose contraction is longer than kChunkK and
// whose result has at most kSmallResult elements is cut along K into ceil(K / kChunkK) pieces of
// equal length (to within one), a function of the shapes alone; each piece runs through a
// primitive planned for one thread into its own partial result, and the partials are added in
// piece order in double, whoever computed them (as Note [Thread-count-independent weight
// gradients] in Conv.cpp does for convolutions). Larger results are split by oneDNN over their
// rows and columns, never over K (measured: 512x512 and larger weight gradients gave the same
// bits with 1 and 2 threads at every batch tried), and keep the one call. A call with an epilogue
// is cut too, and the caller applies the epilogue to the sum (its reference kernels): a dense
// layer of 2048 inputs at batch 64 folds its bias into the matmul, and its logits differed
// between 1 and 2 threads while such calls were not cut. DeterminismTest checks batches of 2048
// and 8192, and that network. A long contraction of at most kOneThreadWork multiply-adds (a
// dense layer of 4096 inputs and 10 outputs at batch 32) is one call planned for and run on one
// thread, its epilogue inside: the pieces' two parallel regions and their sum took 0.1 ms for
// what one thread does in 0.03 (the brief network's inference).
#include "Dot.h"

#include <symjax/ir/Node.h>

#include "Dnnl.h"
#include "Sums.h"
#include "ThreadPool.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <tuple>
#include <type_traits>
#include <unordered_map>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sj::cpu {

namespace {

/// A strided copy of `a` with its dims reordered by `perm` (out dim i = in dim perm[i]).
Array permuted(const Array& a, const std::vector<int64_t>& perm) {
    Shape s(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) s[i] = a.shape()[perm[i]];
    Array out(a.dtype(), s);
    auto st = row_major_strides(a.shape());
    int sz = dtype_size(a.dtype());
    const auto* p = static_cast<const unsigned char*>(a.raw());
    auto* q = static_cast<unsigned char*>(out.raw());
    std::vector<int64_t> idx(s.size(), 0);
    for (int64_t flat = 0; flat < out.size(); ++flat) {
        int64_t off = 0;
        for (size_t i = 0; i < s.size(); ++i) off += idx[i] * st[perm[i]];
        std::memcpy(q + flat * sz, p + off * sz, sz);
        for (int d = int(s.size()) - 1; d >= 0; --d) {
            if (++idx[d] < s[d]) break;
            idx[d] = 0;
        }
    }
    return out;
}

int64_t prod(const Shape& s, const std::vector<int64_t>& dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= s[d];
    return n;
}

std::vector<int64_t> free_dims(size_t rank, const std::vector<int64_t>& batch, const std::vector<int64_t>& contract) {
    std::vector<int64_t> f;
    for (size_t i = 0; i < rank; ++i)
        if (std::find(batch.begin(), batch.end(), int64_t(i)) == batch.end() &&
            std::find(contract.begin(), contract.end(), int64_t(i)) == contract.end())
            f.push_back(int64_t(i));
    return f;
}

bool is_identity(const std::vector<int64_t>& p) {
    for (size_t i = 0; i < p.size(); ++i)
        if (p[i] != int64_t(i)) return false;
    return true;
}

void gemm_f64_loop(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda,
                   const double* B, int64_t ldb, double* C, int64_t ldc) {
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = 0;
    constexpr int64_t kb = 64;
    for (int64_t k0 = 0; k0 < K; k0 += kb)
        for (int64_t i = 0; i < M; ++i)
            for (int64_t k = k0; k < std::min(K, k0 + kb); ++k) {
                double a = ta ? A[k * lda + i] : A[i * lda + k];
                double* c = C + i * ldc;
                if (tb)
                    for (int64_t j = 0; j < N; ++j) c[j] += a * B[j * ldb + k];
                else
                    for (int64_t j = 0; j < N; ++j) c[j] += a * B[k * ldb + j];
            }
}

struct GemmKey {
    int64_t batch, m, n, k;
    bool ta, tb;
    std::string post; // post_ops_key of the epilogue
    /// a piece of a longer contraction (Note [Long contractions]): the operands' full K, which
    /// sets their strides (0: k), and a primitive planned for one thread
    int64_t k_full = 0;
    /// B in oneDNN's packed layout (Note [Packed weights] in CpuExecutable.cpp): one [K, N]
    /// matrix (batch 1, !tb), descriptors of rank 2
    bool packed = false;
    bool operator<(const GemmKey& o) const {
        return std::tie(batch, m, n, k, ta, tb, post, k_full, packed) <
               std::tie(o.batch, o.m, o.n, o.k, o.ta, o.tb, o.post, o.k_full, o.packed);
    }
};

constexpr int64_t kChunkK = 1024;
constexpr int64_t kSmallResult = int64_t(1) << 18;
/// At most this many multiply-adds, a long contraction runs as one call on one thread instead
/// of pieces (Note [Long contractions]).
constexpr int64_t kOneThreadWork = int64_t(1) << 22;
// Note [Small matmuls on one thread]
// oneDNN splits every matmul over the team, and for a small one the parallel region costs more
// than the split saves. Measured through a function of one matmul (2026-12-04, AMD EPYC, 2
// threads against 1, us per call): 32x32x10 7.6 / 2.6, 128x512x10 15.3 / 14.6, 128x10x512
// 16.0 / 9.4, 512x128x10 14.2 / 13.6, 64x256x256 (4.2M multiply-adds) 30.9 / 44.7. So a call of
// at most kSmallGemmWork multiply-adds is planned for one thread and runs on one, like a small
// long contraction: the paper network's dense layer (32x32x10) and its gradients took 0.13 ms
// of its step in three calls, the bound's inner products 0.014. A function of the shapes
// alone, so the bits stay the same at any thread count.
constexpr int64_t kSmallGemmWork = int64_t(1) << 20;

// Note [Tiny matmuls in a loop]
// A oneDNN matmul call costs a few microseconds however small it is, and more inside a step,
// where the library's code and data are out of the caches: the paper network's 32x32x10 dense
// layer took 0.020 ms forward and 0.007 and 0.0055 for its two gradients in the training step
// (2026-12-07, AMD EPYC, `--profile 1`), against 0.011 for all three in the bound's loop. And its
// matmul of one to four rows reads B at a fraction of the bandwidth: 1x784x512 took 46 us a call
// on one thread (the MLP's first layer at batch 1). So, on a CPU with AVX-512, a product of at
// most kTinyGemmWork multiply-adds, or of at most four rows a matrix and kSmallGemmWork, runs here
// in a loop of FMAs (tiny_rows_avx512): up to four rows by up to four 16-column blocks accumulate
// along K, each block of B loaded once for the rows; where that makes fewer than four chains (a
// row of a narrow product), K is dealt round-robin to four accumulators, added in a fixed order
// at the end. When B is stored transposed, a call of at most four rows takes dot products along
// B's rows (16 lanes, summed at the end: tiny_gemv_avx512), and others first copy B to [K, N].
// Measured against the library through a function of one matmul and a bias (us a call, the
// call's own ~0.6 included; 2026-12-07, AMD EPYC): 32x32x10 1.9 -> 1.0, 32x32x32 2.0 -> 1.2,
// 128x16x16 2.0 -> 1.3, 1x4096x10 6.4 -> 3.0, 1x784x512 45 -> 18, 3x200x300 5.0 -> 3.7. Past the
// bounds it loses: 32x16x256 3.3 -> 4.0, 256x4x256 7.8 -> 10.2, and 784x1x512 (an outer product)
// 35 -> 100. The epilogue is applied to each block as it is stored when it is a bias (Note
// [Affine prefix]) followed by leaky relus and linear maps; another one (a sum post-op, a binary
// tail) keeps the library call. Which path a call takes, and the order of its sums, are functions
// of its shapes and the CPU, so the bits do not depend on the thread count.
constexpr int64_t kTinyGemmWork = int64_t(1) << 15;

/// Whether this CPU runs AVX-512 (the tiny and f64 kernels below need it).
bool avx512() {
#if defined(__x86_64__)
    static const bool has = __builtin_cpu_supports("avx512f");
    return has;
#else
    return false;
#endif
}

/// The shift of the epilogue's first n post-ops (Note [Affine prefix]), one per channel: a
/// thread's buffer, valid until its next call.
float* affine_shift(const std::vector<compiler::PostOp>& epilogue, size_t n,
                    const std::vector<const Array*>& post_operands, int64_t channels) {
    thread_local std::vector<float> scale, shift;
    scale.resize(size_t(channels)), shift.resize(size_t(channels));
    affine_of(epilogue, n, post_operands, channels, scale.data(), shift.data());
    return shift.data();
}

/// Whether the epilogue from `first` on is made of post-ops tiny_gemm applies.
bool tiny_tail(const std::vector<compiler::PostOp>& epilogue, size_t first) {
    using K = compiler::PostOp::Kind;
    for (size_t i = first; i < epilogue.size(); ++i)
        if (epilogue[i].kind != K::Relu && epilogue[i].kind != K::Linear)
            return false;
    return true;
}

/// f(std::integral_constant<int, R>(), i) for M rows in groups of R = 4 from row i, then the
/// last one to three rows as one group: the row blocks of the AVX-512 kernels below.
template <class F> void by_row_groups(int64_t M, F&& f) {
    int64_t i = 0;
    for (; i + 4 <= M; i += 4)
        f(std::integral_constant<int, 4>(), i);
    if (M - i == 3)
        f(std::integral_constant<int, 3>(), i);
    else if (M - i == 2)
        f(std::integral_constant<int, 2>(), i);
    else if (M - i == 1)
        f(std::integral_constant<int, 1>(), i);
}

#if defined(__x86_64__)
/// A block of tiny_gemm_avx512's result with the epilogue applied: + s when there is a shift,
/// then the post-ops from `first` on.
__attribute__((target("avx512f"))) inline __m512
tiny_finish(__m512 v, const float* shift, __m512 s, const std::vector<compiler::PostOp>& epilogue,
            size_t first) {
    if (shift)
        v = _mm512_add_ps(v, s);
    for (size_t p = first; p < epilogue.size(); ++p) {
        const __m512 alpha = _mm512_set1_ps(float(epilogue[p].alpha));
        // Relu: x >= 0 ? x : alpha x (NaN: alpha NaN); Linear: alpha x + beta, rounded as the
        // two ops
        if (epilogue[p].kind == compiler::PostOp::Kind::Relu) {
            const __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NGE_UQ);
            v = _mm512_mask_mul_ps(v, neg, v, alpha);
        } else {
            v = _mm512_add_ps(_mm512_mul_ps(v, alpha), _mm512_set1_ps(float(epilogue[p].beta)));
        }
    }
    return v;
}

/// Columns j.. of a 16-wide block of an N-column row, none past N.
__attribute__((target("avx512f"))) inline __mmask16 column_mask(int64_t N, int64_t j) {
    return N - j >= 16 ? __mmask16(0xFFFF) : N <= j ? __mmask16(0) : __mmask16((1u << (N - j)) - 1);
}

/// One k of tiny_rows_avx512: acc[r][q] += a(r, k) b(k, block q), `a` at a(0, k), `bk` at b(k, j).
template <int R, int Q>
__attribute__((target("avx512f"), always_inline)) inline void
tiny_step(__m512 (&acc)[R][Q], const float* a, int64_t sa, const float* bk,
          const __mmask16 (&m)[Q]) {
    __m512 bq[Q];
    for (int q = 0; q < Q; ++q)
        bq[q] = _mm512_maskz_loadu_ps(m[q], bk + 16 * q);
    for (int r = 0; r < R; ++r) {
        const __m512 x = _mm512_set1_ps(a[r * sa]);
        for (int q = 0; q < Q; ++q)
            acc[r][q] = _mm512_fmadd_ps(x, bq[q], acc[r][q]);
    }
}

/// Rows i0 .. i0 + R of tiny_gemm_avx512's product, Q 16-column blocks at a time: R x Q
/// independent FMA chains, each block of B loaded once for the R rows. Fewer than four chains
/// (a row or two of a narrow product) would wait on each FMA's latency, so then K is dealt
/// round-robin to four accumulators per block, added in a fixed order at the end.
template <int R, int Q>
__attribute__((target("avx512f"))) void
tiny_rows_avx512(int64_t i0, int64_t N, int64_t K, const float* a, int64_t sa, int64_t sk,
                 const float* b, float* c, const float* shift,
                 const std::vector<compiler::PostOp>& epilogue, size_t first) {
    constexpr int U = R * Q < 4 ? 4 : 1; // accumulators per (row, block)
    a += i0 * sa;
    for (int64_t j = 0; j < N; j += 16 * Q) {
        __mmask16 m[Q];
        for (int q = 0; q < Q; ++q)
            m[q] = column_mask(N, j + 16 * q);
        __m512 acc[U][R][Q];
        for (int u = 0; u < U; ++u)
            for (int r = 0; r < R; ++r)
                for (int q = 0; q < Q; ++q)
                    acc[u][r][q] = _mm512_setzero_ps();
        int64_t k = 0;
        for (; k + U <= K; k += U)
            for (int u = 0; u < U; ++u)
                tiny_step<R, Q>(acc[u], a + (k + u) * sk, sa, b + (k + u) * N + j, m);
        for (int u = 0; k < K; ++k, ++u)
            tiny_step<R, Q>(acc[u], a + k * sk, sa, b + k * N + j, m);
        if constexpr (U == 4)
            for (int r = 0; r < R; ++r)
                for (int q = 0; q < Q; ++q)
                    acc[0][r][q] = _mm512_add_ps(_mm512_add_ps(acc[0][r][q], acc[1][r][q]),
                                                 _mm512_add_ps(acc[2][r][q], acc[3][r][q]));
#pragma GCC unroll 4
        for (int q = 0; q < Q; ++q) { // (a constant trip count: acc stays in registers)
            const __m512 s = shift ? _mm512_maskz_loadu_ps(m[q], shift + j + 16 * q) : acc[0][0][q];
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) // (a block past N: its mask stores nothing)
                _mm512_mask_storeu_ps(c + (i0 + r) * N + j + 16 * q, m[q],
                                      tiny_finish(acc[0][r][q], shift, s, epilogue, first));
        }
    }
}

/// Rows i0 .. i0 + R of the product, as many column blocks at a time as N fills, up to four.
template <int R>
__attribute__((target("avx512f"))) void
tiny_row_group(int64_t i0, int64_t N, int64_t K, const float* a, int64_t sa, int64_t sk,
               const float* b, float* c, const float* shift,
               const std::vector<compiler::PostOp>& epilogue, size_t first) {
    if (N <= 16)
        tiny_rows_avx512<R, 1>(i0, N, K, a, sa, sk, b, c, shift, epilogue, first);
    else if (N <= 32)
        tiny_rows_avx512<R, 2>(i0, N, K, a, sa, sk, b, c, shift, epilogue, first);
    else
        tiny_rows_avx512<R, 4>(i0, N, K, a, sa, sk, b, c, shift, epilogue, first);
}

/// c = a b (+ shift, then the epilogue's tail from `first`) for one batch matrix; Note [Tiny
/// matmuls in a loop]. `b` is [K, N] row-major; a(i, k) is a[i * sa + k * sk].
__attribute__((target("avx512f"))) void
tiny_gemm_avx512(int64_t M, int64_t N, int64_t K, const float* a, int64_t sa, int64_t sk,
                 const float* b, float* c, const float* shift,
                 const std::vector<compiler::PostOp>& epilogue, size_t first) {
    by_row_groups(M, [&](auto rows, int64_t i) {
        tiny_row_group<rows()>(i, N, K, a, sa, sk, b, c, shift, epilogue, first);
    });
}

/// c = a b^T (+ shift, then the epilogue's tail) for one batch matrix of at most four rows, a
/// [M, K] and b [N, K] row-major: each output a dot product along K in 16 lanes, summed across
/// the lanes at the end, four columns at a time.
__attribute__((target("avx512f"))) void
tiny_gemv_avx512(int64_t M, int64_t N, int64_t K, const float* a, const float* b, float* c,
                 const float* shift, const std::vector<compiler::PostOp>& epilogue, size_t first) {
    const int64_t tail = K % 16;
    const __mmask16 mk = __mmask16((1u << tail) - 1);
    alignas(64) float out[16];
    for (int64_t i = 0; i < M; ++i) {
        const float* ai = a + i * K;
        for (int64_t j0 = 0; j0 < N; j0 += 16) {
            const int64_t n = std::min<int64_t>(16, N - j0);
            for (int64_t j = 0; j < n; j += 4) {
                const int64_t q = std::min<int64_t>(4, n - j); // (columns j0 + j .. past N: row 0)
                const float* b0 = b + (j0 + j) * K;
                const float* b1 = q > 1 ? b0 + K : b0;
                const float* b2 = q > 2 ? b0 + 2 * K : b0;
                const float* b3 = q > 3 ? b0 + 3 * K : b0;
                __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
                int64_t k = 0;
                for (; k + 16 <= K; k += 16) {
                    const __m512 x = _mm512_loadu_ps(ai + k);
                    s0 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b0 + k), s0);
                    s1 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b1 + k), s1);
                    s2 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b2 + k), s2);
                    s3 = _mm512_fmadd_ps(x, _mm512_loadu_ps(b3 + k), s3);
                }
                if (tail) {
                    const __m512 x = _mm512_maskz_loadu_ps(mk, ai + k);
                    s0 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(mk, b0 + k), s0);
                    s1 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(mk, b1 + k), s1);
                    s2 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(mk, b2 + k), s2);
                    s3 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(mk, b3 + k), s3);
                }
                out[j] = _mm512_reduce_add_ps(s0);
                if (q > 1)
                    out[j + 1] = _mm512_reduce_add_ps(s1);
                if (q > 2)
                    out[j + 2] = _mm512_reduce_add_ps(s2);
                if (q > 3)
                    out[j + 3] = _mm512_reduce_add_ps(s3);
            }
            const __mmask16 m = __mmask16((1u << n) - 1);
            const __m512 v = _mm512_maskz_load_ps(m, out);
            const __m512 sv = shift ? _mm512_maskz_loadu_ps(m, shift + j0) : v;
            _mm512_mask_storeu_ps(c + i * N + j0, m, tiny_finish(v, shift, sv, epilogue, first));
        }
    }
}
#endif

// Note [f64 matmuls]
// oneDNN has no f64 matmul, and OpenBLAS's dgemm (a generic kernel on this CPU unless
// OPENBLAS_CORETYPE is set, which we may not do) splits its sums by its own thread count. f64
// products (gradient checks, per-example gradients through cholesky, users' f64 models) ran a
// scalar blocked loop at ~4 GFLOP/s on one thread. On a CPU with AVX-512 they now run in
// gemm_f64_avx512: B in 32-column panels (copied to [K, 32] when stored transposed or read by
// many rows: f64_packs), each panel against the rows of A four at a time, 4 x 4 accumulators of
// 8 doubles along K in order. Every element of C is one sum over K in order, whoever computes
// it, so the bits do not depend on the thread count; a product of kF64TeamWork multiply-adds or
// more spreads its panels (of all its batch matrices) over the thread team. A B stored
// transposed with K past kF64PackK (a dot product of two long vectors) keeps the loop, whose
// scratch would be 32 K doubles. Measured in docs/performance.md ("f64 matmuls").
constexpr int64_t kPanelF64 = 32;
/// From this many multiply-adds an f64 product spreads its panels over the team: 1x1000x1000
/// (2^20, reading 8 MB of B) took 94-169 us on one thread, 64x64x64 (2^18) 6 us.
constexpr int64_t kF64TeamWork = int64_t(1) << 19;

#if defined(__x86_64__)
/// The longest K whose panels gemm_f64_avx512 copies: 16 MB of scratch a thread. Past it a B
/// stored transposed takes gemm_f64_loop, and one stored in place is read in place.
constexpr int64_t kF64PackK = int64_t(1) << 16;

/// Whether gemm_f64_avx512 copies each panel of B first: when B is stored transposed, and when
/// the panel is read by enough rows of A to repay the copy (in place, 512x512x512 took 1.76 ms
/// against 1.45 copied; 1x1000x1000 0.094 against 0.22); never past kF64PackK.
constexpr bool f64_packs(bool tb, int64_t M, int64_t K) {
    return (tb || M >= 16) && K <= kF64PackK;
}

/// The first `left` of a block of 8 lanes (none when left <= 0).
__attribute__((target("avx512f"))) inline __mmask8 lanes8(int64_t left) {
    return left >= 8 ? __mmask8(0xFF) : left <= 0 ? __mmask8(0) : __mmask8((1u << left) - 1);
}

/// Rows i0 .. i0 + R of C's columns j0 .. j0 + n (n <= 32); `bk` points at b(0, j0), row k at
/// bk + k * ldb.
template <int R>
__attribute__((target("avx512f"))) void
f64_rows(int64_t i0, int64_t j0, int64_t n, int64_t K, const double* A, int64_t sa, int64_t sk,
         const double* bk, int64_t ldb, double* C, int64_t ldc) {
    const __mmask8 m0 = lanes8(n), m1 = lanes8(n - 8), m2 = lanes8(n - 16), m3 = lanes8(n - 24);
    __m512d acc[R][4];
    for (int r = 0; r < R; ++r)
        for (int q = 0; q < 4; ++q)
            acc[r][q] = _mm512_setzero_pd();
    const double* a = A + i0 * sa;
    for (int64_t k = 0; k < K; ++k, bk += ldb) {
        const __m512d b0 = _mm512_maskz_loadu_pd(m0, bk), b1 = _mm512_maskz_loadu_pd(m1, bk + 8),
                      b2 = _mm512_maskz_loadu_pd(m2, bk + 16),
                      b3 = _mm512_maskz_loadu_pd(m3, bk + 24);
        for (int r = 0; r < R; ++r) {
            const __m512d x = _mm512_set1_pd(a[r * sa + k * sk]);
            acc[r][0] = _mm512_fmadd_pd(x, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_pd(x, b1, acc[r][1]);
            acc[r][2] = _mm512_fmadd_pd(x, b2, acc[r][2]);
            acc[r][3] = _mm512_fmadd_pd(x, b3, acc[r][3]);
        }
    }
    const __mmask8 m[4] = {m0, m1, m2, m3};
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) // (a block past n: its mask stores nothing)
            _mm512_mask_storeu_pd(C + (i0 + r) * ldc + j0 + 8 * q, m[q], acc[r][q]);
}

/// C = op(A) op(B) for one matrix, panels p0 .. p1 of 32 columns; `bp`: K x 32 doubles of
/// scratch for the panels' copies where f64_packs holds (B stored transposed needs them).
__attribute__((target("avx512f"))) void gemm_f64_avx512(bool ta, bool tb, int64_t M, int64_t N,
                                                        int64_t K, const double* A, int64_t lda,
                                                        const double* B, int64_t ldb, double* C,
                                                        int64_t ldc, int64_t p0, int64_t p1,
                                                        double* bp) {
    const int64_t sa = ta ? 1 : lda, sk = ta ? lda : 1; // a(i, k) = A[i * sa + k * sk]
    for (int64_t p = p0; p < p1; ++p) {
        const int64_t j0 = p * kPanelF64, n = std::min(kPanelF64, N - j0);
        const double* bk = B + j0; // B's rows in place
        int64_t stride = ldb;
        if (f64_packs(tb, M, K)) { // the panel as [K, 32], contiguous
            for (int64_t k = 0; k < K && !tb; ++k)
                std::memcpy(bp + k * kPanelF64, B + k * ldb + j0, size_t(n) * sizeof(double));
            for (int64_t j = 0; j < n && tb; ++j)
                for (int64_t k = 0; k < K; ++k)
                    bp[k * kPanelF64 + j] = B[(j0 + j) * ldb + k];
            bk = bp, stride = kPanelF64;
        }
        by_row_groups(M, [&](auto rows, int64_t i) {
            f64_rows<rows()>(i, j0, n, K, A, sa, sk, bk, stride, C, ldc);
        });
    }
}
#endif

/// Whether an f64 product runs in gemm_f64_avx512 (Note [f64 matmuls]).
bool f64_in_kernel(bool tb, int64_t K) {
    return avx512() && (!tb || K <= kF64PackK);
}

/// Whether an f64 product runs on the thread team (Note [f64 matmuls]).
bool f64_on_team(bool tb, int64_t batch, int64_t M, int64_t N, int64_t K) {
    const int64_t tasks = batch * ((N + kPanelF64 - 1) / kPanelF64);
    return f64_in_kernel(tb, K) && batch * M * N * K >= kF64TeamWork && tasks > 1 &&
           ThreadPool::get().threads() > 1;
}

/// Note [f64 matmuls]: the B matrices [batch, M, N] = op(A) op(B), A [batch] of M x K (K x M when
/// ta), B of K x N (N x K when tb), row-major and contiguous.
void gemm_f64(bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, const double* A,
              const double* B, double* C) {
    const int64_t lda = ta ? M : K, ldb = tb ? K : N;
#if defined(__x86_64__)
    if (f64_in_kernel(tb, K)) {
        const int64_t panels = (N + kPanelF64 - 1) / kPanelF64, tasks = batch * panels;
        const ThreadPool& pool = ThreadPool::get();
        const int nt =
            f64_on_team(tb, batch, M, N, K) ? int(std::min<int64_t>(tasks, pool.threads())) : 1;
        auto work = [&](int t) { // tasks [tasks * t / nt, tasks * (t + 1) / nt)
            thread_local std::vector<double> bp;
            if (f64_packs(tb, M, K))
                bp.resize(size_t(K * kPanelF64));
            for (int64_t task = tasks * t / nt; task < tasks * (t + 1) / nt; ++task) {
                const int64_t m = task / panels, p = task % panels;
                gemm_f64_avx512(ta, tb, M, N, K, A + m * M * K, lda, B + m * K * N, ldb,
                                C + m * M * N, N, p, p + 1, bp.data());
            }
        };
        if (nt > 1)
            pool.run(nt, work);
        else
            work(0);
        return;
    }
#endif
    for (int64_t m = 0; m < batch; ++m)
        gemm_f64_loop(ta, tb, M, N, K, A + m * M * K, lda, B + m * K * N, ldb, C + m * M * N, N);
}

/// The GEMM's [batch, M, N] result (or [M, N] when packed) holds the channels along N.
ChannelDim gemm_channels(const GemmKey& key) {
    return key.packed ? ChannelDim{2, 1, key.n} : ChannelDim{3, 2, key.n};
}

/// The packed layout of a [K, N] matmul weight: 16 x 64 blocks, the 64-column panels outermost.
/// Where oneDNN asks for another one (another CPU), no weight is packed.
constexpr int64_t kPackRows = 16, kPackCols = 64;
dnnl::memory::desc packed_desc(int64_t K, int64_t N) {
    return dnnl::memory::desc({K, N}, dnnl::memory::data_type::f32,
                              dnnl::memory::format_tag::BA16a64b);
}

struct Gemm {
    dnnl::matmul prim;
    dnnl::memory::desc a, b, c;
    size_t shift = 0;       // the epilogue's leading adds, the call's bias (Note [Affine prefix])
    dnnl::memory::desc bias;
    size_t scratch_bytes = 0;
    bool usable = true; // false: a packed key for which oneDNN asks for another layout
};

/// The cached matmul primitive for row-major [batch, M, K] x [batch, K, N] -> [batch, M, N]
/// (A stored as [batch, K, M] when ta, B as [batch, N, K] when tb).
const Gemm& gemm_for(const GemmKey& key, const std::vector<compiler::PostOp>& epilogue) {
    static std::mutex mu;
    static auto* cache = new std::map<GemmKey, Gemm>; // never destroyed: kernels may run late
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache->find(key); it != cache->end()) return it->second;
    using dnnl::memory;
    const auto& [B, M, N, K, ta, tb, post, k_full, packed] = key;
    const int64_t KF = k_full ? k_full : K;
    memory::dims sa = ta ? memory::dims{M * KF, 1, M} : memory::dims{M * KF, KF, 1};
    memory::dims sb = tb ? memory::dims{KF * N, 1, KF} : memory::dims{KF * N, N, 1};
    Gemm g;
    if (packed) { // (batch 1, whole K, B as oneDNN likes it: checked below)
        g.a = memory::desc({M, K}, memory::data_type::f32,
                           ta ? memory::dims{1, M} : memory::dims{K, 1});
        g.b = memory::desc({K, N}, memory::data_type::f32, memory::format_tag::any);
        g.c = memory::desc({M, N}, memory::data_type::f32, memory::dims{N, 1});
    } else {
        g.a = memory::desc({B, M, K}, memory::data_type::f32, sa);
        g.b = memory::desc({B, K, N}, memory::data_type::f32, sb);
        g.c = memory::desc({B, M, N}, memory::data_type::f32, memory::dims{M * N, N, 1});
    }
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    g.shift = affine_prefix(epilogue, false);
    set_post_ops(attr, epilogue, gemm_channels(key), g.shift);
    if (g.shift)
        g.bias = key.packed
                     ? memory::desc({1, N}, memory::data_type::f32, memory::dims{N, 1})
                     : memory::desc({1, 1, N}, memory::data_type::f32, memory::dims{N, N, 1});
    try {
        std::optional<OneDnnlThread> one; // a piece runs on one thread: plan it so
        if (k_full) one.emplace();
        auto desc = g.shift ? dnnl::matmul::desc(g.a, g.b, g.bias, g.c) : dnnl::matmul::desc(g.a, g.b, g.c);
        dnnl::matmul::primitive_desc pd(desc, attr, dnnl_engine());
        if (key.packed) {
            g.usable = pd.weights_desc() == packed_desc(K, N);
            g.b = packed_desc(K, N);
        }
        g.scratch_bytes = pd.scratchpad_desc().get_size();
        if (g.usable)
            g.prim = dnnl::matmul(pd);
    } catch (const dnnl::error& e) {
        SJ_THROW(Error) << "dot_general: oneDNN matmul failed for batch=" << B << " M=" << M << " N=" << N
                        << " K=" << K << ": " << e.what();
    }
    return cache->emplace(key, std::move(g)).first->second;
}

void gemm_f32(const GemmKey& key, const float* a, const float* b, float* c,
              const std::vector<compiler::PostOp>& epilogue,
              const std::vector<const Array*>& post_operands, KeptMemories& kept) {
    const Gemm& g = gemm_for(key, epilogue);
    kept.begin(&g); // (Note [Call arguments kept] in Dnnl.cpp)
    thread_local std::vector<unsigned char> scratch;
    if (scratch.size() < g.scratch_bytes) scratch.resize(g.scratch_bytes);
    using dnnl::memory;
    ExecArgs args;
    args.add(DNNL_ARG_SRC, kept.at(DNNL_ARG_SRC, const_cast<float*>(a), [&] { return g.a; }));
    args.add(DNNL_ARG_WEIGHTS,
             kept.at(DNNL_ARG_WEIGHTS, const_cast<float*>(b), [&] { return g.b; }));
    args.add(DNNL_ARG_DST, kept.at(DNNL_ARG_DST, c, [&] { return g.c; }));
    args.add(DNNL_ARG_SCRATCHPAD, kept.at(DNNL_ARG_SCRATCHPAD, scratch.data(), [&] {
        return memory::desc({int64_t(g.scratch_bytes)}, memory::data_type::u8,
                            memory::format_tag::a);
    }));
    if (g.shift) {
        float* shift = affine_shift(epilogue, g.shift, post_operands, key.n);
        args.add(DNNL_ARG_BIAS, kept.at(DNNL_ARG_BIAS, shift, [&] { return g.bias; }));
    }
    add_post_op_args(args, kept, epilogue, post_operands, gemm_channels(key), g.shift);
    dnnl::stream& stream = thread_stream();
    args.execute(g.prim, stream);
    stream.wait();
}

/// Note [Long contractions]: the matmul in fixed pieces of K, summed in piece order.
void gemm_f32_pieces(const GemmKey& key, const float* a, const float* b, float* c,
                     KeptMemories& kept) {
    const int64_t K = key.k, count = (K + kChunkK - 1) / kChunkK;
    const size_t out = size_t(key.batch * key.m * key.n);
    thread_local std::vector<float> storage;
    storage.resize(out * size_t(count));
    float* partial = storage.data(); // the caller's: the tasks run on other threads too
    const ThreadPool& pool = ThreadPool::get();
    kept.begin(nullptr);
    KeptMemories* piece_kept = kept.tasks(size_t(count)); // (piece p's, used by one thread)
    pool.run(int(count), [&](int p) { // (a contiguous run of pieces per thread)
        OneDnnlThread one;
        const int64_t k0 = K * p / count, kc = K * (p + 1) / count - k0; // (equal pieces)
        GemmKey piece{key.batch, key.m, key.n, kc, key.ta, key.tb, key.post, K};
        const float* ap = a + (key.ta ? k0 * key.m : k0);
        const float* bp = b + (key.tb ? k0 : k0 * key.n);
        gemm_f32(piece, ap, bp, partial + size_t(p) * out, {}, {}, piece_kept[p]);
    });
    std::vector<float*> parts;
    for (int64_t p = 0; p < count; ++p)
        parts.push_back(partial + size_t(p) * out);
    const int nt = int(std::min<int64_t>(pool.threads(), int64_t(out)));
    pool.run(nt, [&](int t) {
        add_in_double(parts.data(), int(count), int64_t(out) * t / nt,
                      int64_t(out) * (t + 1) / nt, c);
    });
}

/// Note [Tiny matmuls in a loop]: whether the call runs in tiny_gemm; `first`, the length of
/// the epilogue's affine prefix.
bool runs_tiny(int64_t M, int64_t work, bool ta, bool tb,
               const std::vector<compiler::PostOp>& epilogue, size_t first) {
    // (a few rows of a large product: not both operands transposed, whose B tiny_gemm copies)
    const bool rows = M <= 4 && work <= kSmallGemmWork && !(ta && tb);
    return avx512() && (work <= kTinyGemmWork || rows) && tiny_tail(epilogue, first);
}

/// The batch matrices of a product runs_tiny accepts, [B, M, K] (or [B, K, M] when ta) times
/// [B, K, N] (or [B, N, K] when tb), with the epilogue.
void tiny_gemm(int64_t B, int64_t M, int64_t N, int64_t K, bool ta, bool tb, const float* a,
               const float* b, float* c, const std::vector<compiler::PostOp>& epilogue,
               size_t first, const std::vector<const Array*>& post_operands) {
#if defined(__x86_64__)
    const float* shift = first ? affine_shift(epilogue, first, post_operands, N) : nullptr;
    thread_local std::vector<float> bt;
    for (int64_t m = 0; m < B; ++m) {
        const float* bm = b + m * K * N;
        if (tb && M <= 4 && !ta) { // rows of B along K: dot products
            tiny_gemv_avx512(M, N, K, a + m * M * K, bm, c + m * M * N, shift, epilogue, first);
            continue;
        }
        if (tb) { // [N, K] -> [K, N]
            bt.resize(size_t(K * N));
            for (int64_t k = 0; k < K; ++k)
                for (int64_t j = 0; j < N; ++j)
                    bt[size_t(k * N + j)] = bm[j * K + k];
            bm = bt.data();
        }
        tiny_gemm_avx512(M, N, K, a + m * M * K, ta ? 1 : K, ta ? M : 1, bm, c + m * M * N, shift,
                         epilogue, first);
    }
#else
    (void)B, (void)M, (void)N, (void)K, (void)ta, (void)tb, (void)a, (void)b, (void)c;
    (void)epilogue, (void)first, (void)post_operands;
#endif
}

} // namespace

double dot_flops(const Shape& lhs, const DotAttrs& d, const Shape& out) {
    return 2.0 * double(numel(out)) * double(prod(lhs, d.lhs_contract));
}

/// The orders of rhs's dims a GEMM reads in place: `plain` [batch, contract, free] and
/// `flipped` [batch, free, contract] (B transposed); another order is first copied to `plain`.
struct RhsOrder {
    std::vector<int64_t> plain, flipped;
    RhsOrder(const std::vector<int64_t>& rf, const DotAttrs& d)
        : plain(d.rhs_batch), flipped(d.rhs_batch) {
        plain.insert(plain.end(), d.rhs_contract.begin(), d.rhs_contract.end());
        plain.insert(plain.end(), rf.begin(), rf.end());
        flipped.insert(flipped.end(), rf.begin(), rf.end());
        flipped.insert(flipped.end(), d.rhs_contract.begin(), d.rhs_contract.end());
    }
    /// Whether the GEMM reads B transposed.
    bool transposed() const { return !is_identity(plain) && is_identity(flipped); }
};

/// A call's GEMM sizes: batch, rows, columns, contraction.
struct GemmDims {
    int64_t B, M, N, K;
    std::vector<int64_t> lf, rf; // the free dims of lhs and rhs
    GemmDims(const Shape& lhs, const Shape& rhs, const DotAttrs& d)
        : lf(free_dims(lhs.size(), d.lhs_batch, d.lhs_contract)),
          rf(free_dims(rhs.size(), d.rhs_batch, d.rhs_contract)) {
        B = prod(lhs, d.lhs_batch), M = prod(lhs, lf), N = prod(rhs, rf), K = prod(lhs, d.lhs_contract);
    }
    /// A long contraction into a small result (Note [Long contractions]).
    bool long_contraction() const { return K > kChunkK && B * M * N <= kSmallResult; }
    /// Whether the call is little work: one call on one thread, its epilogue included (a small
    /// long contraction, or any call of at most kSmallGemmWork multiply-adds: Note [Small
    /// matmuls on one thread]).
    bool one_thread() const {
        const int64_t work = B * M * N * K;
        return (long_contraction() && work <= kOneThreadWork) || work <= kSmallGemmWork;
    }
    /// Whether the f32 call runs as fixed pieces of K, which apply no epilogue.
    bool in_pieces() const { return long_contraction() && !one_thread(); }
    /// Whether an f32 call computing `out` applies an accumulating post-op.
    bool can_accumulate(const Array& out) const {
        return out.dtype() == DType::F32 && out.size() > 0 && K > 0 && !in_pieces();
    }
};

int dot_parallel_regions(const Shape& lhs, const Shape& rhs, const DotAttrs& d, DType out) {
    const GemmDims g(lhs, rhs, d);
    if (g.B * g.M * g.N == 0 || g.K == 0)
        return 0;
    if (out == DType::F64)
        return f64_on_team(RhsOrder(g.rf, d).transposed(), g.B, g.M, g.N, g.K) ? 1 : 0;
    if (out != DType::F32 || g.one_thread())
        return 0;
    return g.in_pieces() ? 2 : 1;
}

bool dot_can_accumulate(const Array& lhs, const Array& rhs, const DotAttrs& d, const Array& out) {
    return GemmDims(lhs.shape(), rhs.shape(), d).can_accumulate(out);
}

bool dot_general(const Array& lhs, const Array& rhs, const DotAttrs& d, Array& out,
                 const std::vector<compiler::PostOp>& epilogue,
                 const std::vector<const Array*>& post_operands, KeptMemories* kept) {
    const GemmDims g(lhs.shape(), rhs.shape(), d);
    const auto& [B, M, N, K, lf, rf] = g;
    SJ_ASSERT(g.can_accumulate(out) || !compiler::sum_post_op(epilogue))
        << "dot_general: an accumulating post-op on a call that cannot apply it";
    if (out.size() == 0) return epilogue.empty();
    if (K == 0) {
        std::memset(out.raw(), 0, size_t(out.nbytes()));
        return epilogue.empty();
    }
    // lhs as [batch, M, K] (or [batch, K, M] transposed)
    std::vector<int64_t> pa(d.lhs_batch), pat(d.lhs_batch);
    pa.insert(pa.end(), lf.begin(), lf.end());
    pa.insert(pa.end(), d.lhs_contract.begin(), d.lhs_contract.end());
    pat.insert(pat.end(), d.lhs_contract.begin(), d.lhs_contract.end());
    pat.insert(pat.end(), lf.begin(), lf.end());
    bool ta = false;
    Array A = lhs;
    if (!is_identity(pa)) {
        if (is_identity(pat)) ta = true;
        else A = permuted(lhs, pa);
    }
    const RhsOrder ro(rf, d);
    const bool tb = ro.transposed();
    Array Bm = rhs;
    if (!is_identity(ro.plain) && !tb)
        Bm = permuted(rhs, ro.plain);
    if (out.dtype() == DType::F32) {
        const size_t first = affine_prefix(epilogue, false);
        if (runs_tiny(M, B * M * N * K, ta, tb, epilogue, first)) { // (Note [Tiny matmuls...])
            tiny_gemm(B, M, N, K, ta, tb, static_cast<const float*>(A.raw()),
                      static_cast<const float*>(Bm.raw()), static_cast<float*>(out.raw()), epilogue,
                      first, post_operands);
            return true;
        }
        KeptMemories local; // (a caller that keeps none)
        KeptMemories& k = kept ? *kept : local;
        match_dnnl_threads(); // before a primitive is created: oneDNN plans its split then
        if (g.one_thread()) { // planned for one thread (k_full set) and run on one
            OneDnnlThread one;
            gemm_f32({B, M, N, K, ta, tb, post_ops_key(epilogue), K},
                     static_cast<const float*>(A.raw()), static_cast<const float*>(Bm.raw()),
                     static_cast<float*>(out.raw()), epilogue, post_operands, k);
            return true;
        }
        if (g.in_pieces()) { // the caller applies the epilogue: one split for all
            gemm_f32_pieces({B, M, N, K, ta, tb, ""}, static_cast<const float*>(A.raw()),
                            static_cast<const float*>(Bm.raw()), static_cast<float*>(out.raw()), k);
            return epilogue.empty();
        }
        gemm_f32({B, M, N, K, ta, tb, post_ops_key(epilogue)}, static_cast<const float*>(A.raw()),
                 static_cast<const float*>(Bm.raw()), static_cast<float*>(out.raw()), epilogue,
                 post_operands, k);
        return true;
    }
    gemm_f64(ta, tb, B, M, N, K, static_cast<const double*>(A.raw()),
             static_cast<const double*>(Bm.raw()), static_cast<double*>(out.raw()));
    return epilogue.empty();
}

namespace {
/// lhs read as [M, K] in place: false, or true when stored [K, M]; nullopt when neither (a
/// batch, or dims a GEMM cannot read without a copy).
std::optional<bool> lhs_in_place(const Shape& lhs, const DotAttrs& d) {
    if (!d.lhs_batch.empty() || lhs.size() != 2 || d.lhs_contract.size() != 1)
        return std::nullopt;
    return d.lhs_contract[0] == 0;
}
} // namespace

bool dot_packs_rhs(const Shape& lhs, const Shape& rhs, const DotAttrs& d, DType out,
                   const std::vector<compiler::PostOp>& epilogue) {
    if (out != DType::F32 || !lhs_in_place(lhs, d) || rhs.size() != 2 || !d.rhs_batch.empty() ||
        d.rhs_contract != std::vector<int64_t>{0})
        return false;
    const GemmDims g(lhs, rhs, d);
    if (g.M == 0 || g.K % kPackRows || g.N % kPackCols || g.one_thread() || g.in_pieces())
        return false;
    match_dnnl_threads(); // the primitive is planned for the team, as the call runs
    return gemm_for(
               {1, g.M, g.N, g.K, *lhs_in_place(lhs, d), false, post_ops_key(epilogue), 0, true},
               epilogue)
        .usable;
}

void pack_rhs(const float* w, float* packed, int64_t K, int64_t N, int64_t begin, int64_t end) {
    const int64_t panel = K * kPackCols; // one 64-column panel: K / 16 blocks of 16 x 64
    for (int64_t i = begin; i < end;) {
        const int64_t r = i / N, c = i % N;
        const int64_t n = std::min(end - i, kPackCols - c % kPackCols); // to the panel's edge
        float* to = packed + (c / kPackCols) * panel + r * kPackCols + c % kPackCols;
#if defined(__x86_64__) // (streamed: Note [Packed weights] in CpuExecutable.cpp)
        if (n == kPackCols && reinterpret_cast<uintptr_t>(to) % 16 == 0) {
            for (int64_t j = 0; j < kPackCols; j += 4)
                _mm_stream_ps(to + j, _mm_loadu_ps(w + i + j));
            i += n;
            continue;
        }
#endif
        std::memcpy(to, w + i, size_t(n) * sizeof(float));
        i += n;
    }
#if defined(__x86_64__)
    _mm_sfence(); // (the streamed stores before whoever reads the copy next)
#endif
}

void dot_general_packed(const Array& lhs, const float* packed_rhs, const Shape& rhs,
                        const DotAttrs& d, Array& out,
                        const std::vector<compiler::PostOp>& epilogue,
                        const std::vector<const Array*>& post_operands, KeptMemories* kept) {
    const GemmDims g(lhs.shape(), rhs, d);
    match_dnnl_threads();
    KeptMemories local;
    gemm_f32(
        {1, g.M, g.N, g.K, *lhs_in_place(lhs.shape(), d), false, post_ops_key(epilogue), 0, true},
        static_cast<const float*>(lhs.raw()), packed_rhs, static_cast<float*>(out.raw()), epilogue,
        post_operands, kept ? *kept : local);
}

} // namespace sj::cpu
