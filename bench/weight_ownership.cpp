// Which core last touched a weight, and what the SGD update after it pays: the MLP benchmark's
// first layer (x [128, 784] times W [784, 512]) as three calls, in a loop:
//   forward    y = x W                  (oneDNN matmul)
//   gradient   v = x^T dy + 0.9 v       (oneDNN matmul, sum post-op: momentum in place)
//   update     W = W - 0.01 v           (an AVX-512 loop over the team)
// split between the two threads in four ways (docs/performance.md, "Who last touched a weight"):
//   library     both matmuls as oneDNN splits them over the team; the update by halves of rows
//   no_forward  the same without the forward matmul
//   k_split     each thread reads only its half of W's rows: the forward as two one-thread
//               matmuls over halves of the contraction, their partial products added by rows;
//               the gradient as two one-thread matmuls, each writing its half of v's rows
//   n_split     each thread its half of W's columns: both matmuls as two one-thread calls over
//               halves of the columns; the update by columns
//   packed      as library, but the forward reads a copy of W in the layout oneDNN's matmul
//               asks for (format_tag::any: BA16a64b), which the update writes beside W, 16
//               rows at a time while they are in the core's L1, with non-temporal stores (what
//               the cpu backend does: Note [Packed weights] in src/backend/cpu/CpuExecutable.cpp)
//   packed_cached  the same with plain stores (memcpy)
// Prints one JSON line per mode and round (medians over the round's iterations, us).
//   weight_ownership [--rounds R] [--iters I]      (OMP_NUM_THREADS=2)
#include <dnnl.hpp>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using dnnl::matmul;
using dnnl::memory;
using clk = std::chrono::steady_clock;

constexpr int B = 128, K = 784, N = 512, K2 = K / 2, N2 = N / 2;

double us(clk::time_point a, clk::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
}

memory::desc md(memory::dims d, memory::dims strides) {
    return memory::desc(d, memory::data_type::f32, strides);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// W[i] -= 0.01 v[i] over rows [r0, r1) and columns [c0, c1) (multiples of 16)
void update(float* W, const float* V, int r0, int r1, int c0, int c1) {
    const __m512 lr = _mm512_set1_ps(0.01f);
    for (int r = r0; r < r1; ++r)
        for (int c = c0; c < c1; c += 16) {
            size_t i = size_t(r) * N + size_t(c);
            _mm512_storeu_ps(W + i,
                             _mm512_fnmadd_ps(lr, _mm512_loadu_ps(V + i), _mm512_loadu_ps(W + i)));
        }
}

// the update of rows [r0, r1), each 16-row piece then copied into Wp (BA16a64b: 16x64 blocks,
// the 64-column panels outermost) while it is hot; `stream`: with non-temporal stores
void update_packed(float* W, const float* V, float* Wp, int r0, int r1, bool stream) {
    for (int p0 = r0; p0 < r1; p0 += 16) {
        const int p1 = std::min(r1, p0 + 16);
        update(W, V, p0, p1, 0, N);
        for (int r = p0; r < p1; ++r)
            for (int c = 0; c < N; c += 64) {
                float* to =
                    Wp + (size_t(c / 64) * (K / 16) + size_t(r / 16)) * 1024 + size_t(r % 16) * 64;
                const float* from = W + size_t(r) * N + c;
                if (!stream)
                    std::memcpy(to, from, 64 * sizeof(float));
                else
                    for (int j = 0; j < 64; j += 16)
                        _mm512_stream_ps(to + j, _mm512_loadu_ps(from + j));
            }
    }
    _mm_sfence();
}

} // namespace

int main(int argc, char** argv) {
    int rounds = 3, iters = 2000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--rounds"))
            rounds = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--iters"))
            iters = std::atoi(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: %s [--rounds R] [--iters I]\n", argv[0]);
            return 2;
        }
    }
    if (argc % 2 == 0 || rounds < 1 || iters < 4) {
        std::fprintf(stderr, "usage: %s [--rounds R >= 1] [--iters I >= 4]\n", argv[0]);
        return 2;
    }
    if (omp_get_max_threads() != 2) {
        std::fprintf(stderr, "weight_ownership: run with OMP_NUM_THREADS=2\n");
        return 2;
    }
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream s(eng);
    std::vector<float> X(size_t(B) * K), W(size_t(K) * N), Y(size_t(B) * N), DY(size_t(B) * N),
        V(size_t(K) * N, 0.f), P(size_t(2) * B * N);
    auto fill = [](std::vector<float>& a, float scale) {
        for (size_t i = 0; i < a.size(); ++i)
            a[i] = scale * float((i * 2654435761u) % 1000) / 1000.f;
    };
    fill(X, 1.f), fill(W, 0.01f), fill(DY, 0.1f);
    dnnl::post_ops po;
    po.append_sum(0.9f);
    dnnl::primitive_attr plain, momentum;
    momentum.set_post_ops(po);
    auto mm = [&](memory::desc a, memory::desc b, memory::desc c, const dnnl::primitive_attr& at) {
        return matmul(matmul::primitive_desc(matmul::desc(a, b, c), at, eng));
    };
    // the team's calls, then one-thread calls (oneDNN plans a primitive for the thread count
    // when it is made; inside a parallel region it runs on the calling thread)
    matmul fwd = mm(md({B, K}, {K, 1}), md({K, N}, {N, 1}), md({B, N}, {N, 1}), plain);
    const memory::desc wp_desc({K, N}, memory::data_type::f32, memory::format_tag::BA16a64b);
    matmul::primitive_desc fwd_p_pd(
        matmul::desc(md({B, K}, {K, 1}),
                     memory::desc({K, N}, memory::data_type::f32, memory::format_tag::any),
                     md({B, N}, {N, 1})),
        plain, eng);
    if (fwd_p_pd.weights_desc() != wp_desc) {
        std::fprintf(stderr, "weight_ownership: oneDNN asks for another packed layout\n");
        return 1;
    }
    matmul fwd_p(fwd_p_pd);
    // (64-byte aligned for the non-temporal stores)
    std::unique_ptr<float, decltype(&std::free)> wp_mem(
        static_cast<float*>(std::aligned_alloc(64, size_t(K) * N * sizeof(float))), &std::free);
    float* const Wp = wp_mem.get();
    std::fill(Wp, Wp + size_t(K) * N, 0.f);
    matmul grad = mm(md({K, B}, {1, K}), md({B, N}, {N, 1}), md({K, N}, {N, 1}), momentum);
    omp_set_num_threads(1);
    matmul fwd_k = mm(md({B, K2}, {K, 1}), md({K2, N}, {N, 1}), md({B, N}, {N, 1}), plain);
    matmul grad_m = mm(md({K2, B}, {1, K}), md({B, N}, {N, 1}), md({K2, N}, {N, 1}), momentum);
    matmul fwd_n = mm(md({B, K}, {K, 1}), md({K, N2}, {N, 1}), md({B, N2}, {N, 1}), plain);
    matmul grad_n = mm(md({K, B}, {1, K}), md({B, N2}, {N, 1}), md({K, N2}, {N, 1}), momentum);
    omp_set_num_threads(2);
    auto run = [&](const matmul& p, memory::desc a, const float* pa, memory::desc b,
                   const float* pb, memory::desc c, float* pc) {
        p.execute(s, {{DNNL_ARG_SRC, memory(a, eng, const_cast<float*>(pa))},
                      {DNNL_ARG_WEIGHTS, memory(b, eng, const_cast<float*>(pb))},
                      {DNNL_ARG_DST, memory(c, eng, pc)}});
    };
    const char* modes[] = {"library", "no_forward", "k_split",
                           "n_split", "packed",     "packed_cached"};
    for (int r = 0; r < rounds; ++r)
        for (int m = 0; m < 6; ++m) {
            std::vector<double> tf, tg, tu, tt;
            for (int it = 0; it < iters + iters / 4; ++it) {
                auto t0 = clk::now();
                if (m == 0) {
                    run(fwd, md({B, K}, {K, 1}), X.data(), md({K, N}, {N, 1}), W.data(),
                        md({B, N}, {N, 1}), Y.data());
                } else if (m == 2) {
#pragma omp parallel
                    {
                        const int t = omp_get_thread_num();
                        run(fwd_k, md({B, K2}, {K, 1}), X.data() + t * K2, md({K2, N}, {N, 1}),
                            W.data() + size_t(t) * K2 * N, md({B, N}, {N, 1}),
                            P.data() + size_t(t) * B * N);
#pragma omp barrier
                        for (int i = B * t / 2; i < B * (t + 1) / 2; ++i)
                            for (int c = 0; c < N; c += 16) {
                                size_t o = size_t(i) * N + size_t(c);
                                _mm512_storeu_ps(
                                    &Y[o], _mm512_add_ps(_mm512_loadu_ps(&P[o]),
                                                         _mm512_loadu_ps(&P[size_t(B) * N + o])));
                            }
                    }
                } else if (m >= 4) {
                    run(fwd_p, md({B, K}, {K, 1}), X.data(), wp_desc, Wp, md({B, N}, {N, 1}),
                        Y.data());
                } else if (m == 3) {
#pragma omp parallel
                    {
                        const int t = omp_get_thread_num();
                        run(fwd_n, md({B, K}, {K, 1}), X.data(), md({K, N2}, {N, 1}),
                            W.data() + t * N2, md({B, N2}, {N, 1}), Y.data() + t * N2);
                    }
                }
                auto t1 = clk::now();
                if (m <= 1 || m >= 4) {
                    run(grad, md({K, B}, {1, K}), X.data(), md({B, N}, {N, 1}), DY.data(),
                        md({K, N}, {N, 1}), V.data());
                } else {
#pragma omp parallel
                    {
                        const int t = omp_get_thread_num();
                        if (m == 2)
                            run(grad_m, md({K2, B}, {1, K}), X.data() + t * K2, md({B, N}, {N, 1}),
                                DY.data(), md({K2, N}, {N, 1}), V.data() + size_t(t) * K2 * N);
                        else
                            run(grad_n, md({K, B}, {1, K}), X.data(), md({B, N2}, {N, 1}),
                                DY.data() + t * N2, md({K, N2}, {N, 1}), V.data() + t * N2);
                    }
                }
                auto t2 = clk::now();
#pragma omp parallel
                {
                    const int t = omp_get_thread_num();
                    if (m == 3)
                        update(W.data(), V.data(), 0, K, t * N2, (t + 1) * N2);
                    else if (m >= 4)
                        update_packed(W.data(), V.data(), Wp, K * t / 2, K * (t + 1) / 2,
                                      m == 4);
                    else
                        update(W.data(), V.data(), K * t / 2, K * (t + 1) / 2, 0, N);
                }
                auto t3 = clk::now();
                if (it >= iters / 4)
                    tf.push_back(us(t0, t1)), tg.push_back(us(t1, t2)), tu.push_back(us(t2, t3)),
                        tt.push_back(us(t0, t3));
            }
            std::printf("{\"bench\": \"weight_ownership\", \"case\": \"%s\", \"round\": %d, "
                        "\"forward_us\": %.1f, "
                        "\"gradient_us\": %.1f, \"update_us\": %.1f, \"total_us\": %.1f}\n",
                        modes[m], r, median(tf), median(tg), median(tu), median(tt));
            std::fflush(stdout);
        }
    return 0;
}
