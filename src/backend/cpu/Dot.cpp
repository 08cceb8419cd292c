// dot_general via GEMM. Note [Why oneDNN for matmul]: Debian's OpenBLAS does not recognise this
// CPU family and falls back to a generic kernel unless OPENBLAS_CORETYPE is set, which we may
// not do for users; oneDNN dispatches its own AVX-512 JIT kernels at run time, is already our
// convolution library, and its OpenMP threads do not fight a second BLAS pool. f64 (used by
// tests and gradient checks) takes a simple cache-blocked loop.
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

void gemm_f64(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda,
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
    thread_local std::vector<float> scale, shift;
    if (g.shift) {
        scale.resize(size_t(key.n));
        shift.resize(size_t(key.n));
        affine_of(epilogue, g.shift, post_operands, key.n, scale.data(), shift.data());
        args.add(DNNL_ARG_BIAS, kept.at(DNNL_ARG_BIAS, shift.data(), [&] { return g.bias; }));
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

} // namespace

double dot_flops(const Shape& lhs, const DotAttrs& d, const Shape& out) {
    return 2.0 * double(numel(out)) * double(prod(lhs, d.lhs_contract));
}

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
    if (out != DType::F32 || g.B * g.M * g.N == 0 || g.K == 0 || g.one_thread())
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
    std::vector<int64_t> pb(d.rhs_batch), pbt(d.rhs_batch);
    pb.insert(pb.end(), d.rhs_contract.begin(), d.rhs_contract.end());
    pb.insert(pb.end(), rf.begin(), rf.end());
    pbt.insert(pbt.end(), rf.begin(), rf.end());
    pbt.insert(pbt.end(), d.rhs_contract.begin(), d.rhs_contract.end());
    bool tb = false;
    Array Bm = rhs;
    if (!is_identity(pb)) {
        if (is_identity(pbt)) tb = true;
        else Bm = permuted(rhs, pb);
    }
    if (out.dtype() == DType::F32) {
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
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    for (int64_t b = 0; b < B; ++b)
        gemm_f64(ta, tb, M, N, K, static_cast<const double*>(A.raw()) + b * M * K, lda,
                 static_cast<const double*>(Bm.raw()) + b * K * N, ldb, static_cast<double*>(out.raw()) + b * M * N,
                 N);
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
