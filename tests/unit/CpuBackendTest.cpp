// The cpu backend against the reference backend: fused kernels, reductions, GEMM, fallbacks.
#include "TestUtil.h"

#include "backend/cpu/ThreadPool.h"

#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

using namespace sj;
using sj::test::expect_close;
using sj::test::on;
using sj::test::random_array;

namespace {

/// Runs the same function on both backends and compares every output.
void compare(const std::vector<Tensor>& ins, const std::vector<Tensor>& outs, const std::vector<Array>& args,
             double rtol = 1e-5, double atol = 1e-6, size_t max_kernels = 1000) {
    Function fc = function(ins, outs, {}, on("cpu"));
    Function fr = function(ins, outs, {}, on("reference"));
    std::vector<Function::Arg> a(args.begin(), args.end());
    auto rc = fc.call(a);
    auto rr = fr.call(a);
    for (size_t i = 0; i < outs.size(); ++i) expect_close(rc[i], rr[i], rtol, atol, "output " + std::to_string(i));
    EXPECT_LE(fc.stats().kernels, max_kernels) << fc.dump();
}

} // namespace

TEST(CpuBackend, ElementwiseChainIsOneKernel) {
    Placeholder x({1000}, f32, "x");
    Placeholder a({}, f32, "a"), b({}, f32, "b");
    Tensor y = sum(tanh(x * a + b) * sigmoid(x) + exp(-x * x));
    compare({x, a, b}, {y}, {random_array(f32, {1000}, 1), Array::scalar(0.7f), Array::scalar(-0.2f)}, 1e-5, 1e-4, 1);
    auto g = gradients(y, {x, a, b});
    compare({x, a, b}, {y, g[0], g[1], g[2]},
            {random_array(f32, {1000}, 2), Array::scalar(0.7f), Array::scalar(-0.2f)}, 1e-4, 1e-4, 3);
}

TEST(CpuBackend, ProfileKeepsTheFirstCallApart) {
    // the first call pays for one-time work (a library kernel's code generation, the first touch
    // of buffers): profile_report's ms/call leaves it out and shows it in its own column
    Placeholder x({64, 64}, f32, "x");
    FunctionOptions o = on("cpu");
    o.profile = true;
    Function f = function({x}, {exp(x) * 2.0 + 1.0}, {}, o);
    Array xv = random_array(f32, {64, 64}, 5);
    // the row of the kernel: its ms/call, first and calls columns
    auto row = [&] {
        std::istringstream in(f.profile_report());
        std::string line, header;
        std::getline(in, line);
        std::getline(in, header);
        EXPECT_NE(header.find("first"), std::string::npos) << header;
        while (std::getline(in, line))
            if (line.find("kernel") != std::string::npos) {
                std::istringstream l(line);
                std::string index, kind;
                double per_call = 0, first = 0;
                long long calls = 0;
                l >> index >> kind >> per_call >> first >> calls;
                return std::tuple{per_call, first, calls};
            }
        ADD_FAILURE() << "no kernel row in " << f.profile_report();
        return std::tuple{0.0, 0.0, 0LL};
    };
    f(xv);
    auto [per_call1, first1, calls1] = row();
    EXPECT_EQ(calls1, 1);
    EXPECT_EQ(per_call1, first1); // one call: it is the whole average
    f(xv);
    f(xv);
    auto [per_call3, first3, calls3] = row();
    EXPECT_EQ(calls3, 3);
    EXPECT_EQ(first3, first1); // the first call's time stays as it was
}

TEST(CpuBackend, BroadcastPermuteSliceFlip) {
    Placeholder x({-1, 5, 7}, f64, "x");
    Placeholder v({7}, f64, "v");
    Tensor y = transpose(x, {2, 0, 1}) * 2.0;
    Tensor z = flip(x[{sl(), sl(1, 5, 2)}], {2}) + v;
    Tensor w = max(x, {1}) + reshape(min(x, {0, 2}, true), {5})[sl(0, 1)];
    compare({x, v}, {y, z, w}, {random_array(f64, {3, 5, 7}, 3), random_array(f64, {7}, 4)}, 1e-12, 1e-12);
}

TEST(CpuBackend, ReductionsAllDtypes) {
    for (DType t : {i32, i64, f32, f64}) {
        Placeholder x({4, 6, 5}, t, "x");
        compare({x}, {sum(x, {1}), max(x, {0, 2}), min(x), sum(x, {2}, true)},
                {random_array(t, {4, 6, 5}, 5, -50, 50)}, 1e-5, 1e-4);
    }
    Placeholder bx({9, 3}, boolean, "b");
    Array bv = random_array(f64, {9, 3}, 6).astype(boolean);
    compare({bx}, {any(bx, {0}), all(bx, {1}), logical_not(bx)}, {bv});
}

TEST(CpuBackend, LargeParallelReductionAndMatmul) {
    Placeholder x({300000}, f32, "x");
    compare({x}, {sum(x * x), max(abs(x))}, {random_array(f32, {300000}, 7)}, 1e-5, 1e-3);
    Placeholder a({-1, 64}, f32, "a");
    Placeholder w({64, 33}, f32, "w");
    Tensor h = maximum(matmul(a, w), 0.0);
    compare({a, w}, {h, matmul(transpose(a), a)}, {random_array(f32, {17, 64}, 8), random_array(f32, {64, 33}, 9)},
            1e-4, 1e-4);
}

TEST(CpuBackend, UpdatesInPlaceKeepTheanoSemantics) {
    Variable a(Array(std::vector<float>{1, 2, 3}), "a");
    Variable b(Array(std::vector<float>{10, 20, 30}), "b");
    Function swap = function({}, {}, {{a, b}, {b, a}});
    swap();
    EXPECT_EQ(a.value().to_vector<float>(), (std::vector<float>{10, 20, 30}));
    EXPECT_EQ(b.value().to_vector<float>(), (std::vector<float>{1, 2, 3}));
    Placeholder g({3}, f32, "g");
    Function sgd = function({g}, {a}, {{a, a - 0.5 * g}});
    Array before = a.value();
    auto out = sgd(Array(std::vector<float>{2, 2, 2}));
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{10, 20, 30})); // pre-call value
    EXPECT_EQ(a.value().to_vector<float>(), (std::vector<float>{9, 19, 29}));
    EXPECT_EQ(before.to_vector<float>(), (std::vector<float>{10, 20, 30}));
}

TEST(CpuBackend, ValuesOfOneTypeShareBuffersWhenTheirLifetimesDoNotOverlap) {
    // eight matmuls in a chain (relu post-ops): each [64, 64] product is read by the next one
    // only, so after the first two they take turns in the dead ones' buffers (Note [Buffers shared
    // by lifetime]); the first product is also read at the end, through a view, so its buffer
    // stays its own. Every call must still give the reference's values.
    Placeholder x({64, 64}, f32, "x");
    std::vector<Variable> w;
    for (uint64_t i = 0; i < 8; ++i) {
        Array a = random_array(f32, {64, 64}, 70 + i);
        for (int64_t k = 0; k < a.size(); ++k)
            a.data<float>()[k] *= 0.2f; // keep the scale ~1
        w.emplace_back(a, "w" + std::to_string(i));
    }
    Tensor h = x, first;
    for (size_t i = 0; i < w.size(); ++i) {
        h = maximum(matmul(h, w[i]), 0.0); // a relu post-op
        if (i == 0)
            first = h;
    }
    std::vector<Tensor> outs{h + 1.0, sum(reshape(first, {32, 128}), {1})};
    Function fc = function({x}, outs, {}, on("cpu"));
    Function fr = function({x}, outs, {}, on("reference"));
    for (uint64_t seed : {80, 81}) {
        Array xv = random_array(f32, {64, 64}, seed);
        auto rc = fc(xv);
        auto rr = fr(xv);
        for (size_t i = 0; i < rc.size(); ++i)
            expect_close(rc[i], rr[i], 1e-4, 1e-5, "output " + std::to_string(i));
    }
    const int64_t one = 64 * 64 * 4;
    const FunctionStats st = fc.stats();
    EXPECT_GE(st.intermediate_bytes, 8 * one) << fc.dump();
    // the first product, two in turn for the seven others, the two outputs
    EXPECT_LE(st.buffer_bytes, 4 * one + 32 * 4) << fc.dump();

    // residual sums: a matmul may write its result into the value it adds (a sum post-op), so
    // that value's buffer lives on as the result's and must not go to a later value early
    Tensor r0 = maximum(matmul(x, w[0]), 0.0), r1 = maximum(matmul(r0, w[1]), 0.0);
    std::vector<Tensor> hs{r0, r1};
    for (size_t i = 2; i < w.size(); ++i)
        hs.push_back(matmul(hs[i - 1], w[i]) * 0.5 + hs[i - 2]);
    Function gc = function({x}, {hs.back()}, {}, on("cpu"));
    Function gr = function({x}, {hs.back()}, {}, on("reference"));
    for (uint64_t seed : {82, 83}) {
        Array xv = random_array(f32, {64, 64}, seed);
        expect_close(gc(xv)[0], gr(xv)[0], 1e-4, 1e-5,
                     "residual chain, seed " + std::to_string(seed));
    }
}

TEST(CpuBackend, SecondCallWithNewBatchSizeReusesKernels) {
    Placeholder x({-1, 8}, f32, "x");
    Tensor y = sum(exp(x) * 2.0, {1});
    Function f = function({x}, {y});
    for (int64_t n : {3, 11, 64}) {
        Array v = random_array(f32, {n, 8}, 10 + n);
        auto r = f(v)[0];
        Array ref = function({x}, {y}, {}, on("reference"))(v)[0];
        expect_close(r, ref, 1e-5, 1e-5, "batch " + std::to_string(n));
    }
}

TEST(CpuBackend, LargeF32SumStaysAccurate) {
    // 16M + 7 terms spanning six decades: the f32 block sums of the generated kernel (Note
    // [f32 sums] in LlvmRenderer.cpp) must stay within a few 1e-6 of the exact sum, relative
    // to the sum of |terms| (their worst-case bound is ~70 eps = 4.2e-6).
    const int64_t n = (int64_t(1) << 24) + 7;
    std::mt19937_64 g(42);
    std::uniform_real_distribution<double> mant(1.0, 10.0);
    std::uniform_int_distribution<int> dec(-3, 2);
    Array pos(f32, {n}), mixed(f32, {n});
    double exact_pos = 0, exact_mixed = 0, abs_mixed = 0;
    for (int64_t i = 0; i < n; ++i) {
        float v = float(mant(g) * std::pow(10.0, dec(g)));
        float w = (i % 3 == 0) ? -v : v;
        pos.data<float>()[i] = v;
        mixed.data<float>()[i] = w;
        exact_pos += double(v);
        exact_mixed += double(w);
        abs_mixed += std::fabs(double(w));
    }
    Placeholder x({n}, f32, "x");
    Function f = function({x}, {sum(x), sum(x * 2.0)});
    auto rp = f(pos);
    EXPECT_NEAR(rp[0].at(0), exact_pos, 5e-6 * exact_pos);
    EXPECT_NEAR(rp[1].at(0), 2 * exact_pos, 1e-5 * exact_pos);
    auto rm = f(mixed);
    EXPECT_NEAR(rm[0].at(0), exact_mixed, 5e-6 * abs_mixed);
    // a sum over the rows of a matrix (an inner reduction loop per kept point), its elements the
    // first rows * 4097 of `mixed` (4095 rows: 4097^2 would read past the end of `mixed`)
    const int64_t rows = n / 4097;
    Placeholder m({rows, 4097}, f32, "m");
    Function fr = function({m}, {sum(m, {1})});
    Array sub(f32, {rows, 4097});
    ASSERT_LE(sub.size(), mixed.size());
    std::copy(mixed.data<float>(), mixed.data<float>() + sub.size(), sub.data<float>());
    Array r = fr(sub)[0];
    for (int64_t row : {int64_t(0), int64_t(17), rows - 1}) {
        double e = 0, a = 0;
        for (int64_t j = 0; j < 4097; ++j) {
            double v = sub.data<float>()[row * 4097 + j];
            e += v;
            a += std::fabs(v);
        }
        EXPECT_NEAR(r.at(row), e, 5e-6 * a) << "row " << row;
    }
}

TEST(CpuBackend, CholeskyAndTriangularSolveThroughLapack) {
    // many small matrices (split over the thread pool) and one wide solve (one BLAS call)
    for (DType t : {f32, f64}) {
        const int64_t nb = 512, n = 16;
        Array m = random_array(f64, {nb, n, n}, 21);
        Array spd(f64, {nb, n, n});
        for (int64_t b = 0; b < nb; ++b)
            for (int64_t i = 0; i < n; ++i)
                for (int64_t j = 0; j < n; ++j) {
                    double s = i == j ? double(n) : 0.0;
                    for (int64_t k = 0; k < n; ++k) s += m.at((b * n + i) * n + k) * m.at((b * n + j) * n + k) / n;
                    spd.data<double>()[(b * n + i) * n + j] = s;
                }
        Placeholder a({nb, n, n}, t, "a");
        double tol = t == f32 ? 1e-4 : 1e-10;
        compare({a}, {cholesky(a)}, {spd.astype(t)}, tol, tol);
        Placeholder l({n, n}, t, "l"), y({n, 50000}, t, "y"), yr({3333, n}, t, "yr");
        Array lv = cholesky(constant(Array(spd.to_vector<double>(), {nb, n, n}))).eval();
        Array l0(f64, {n, n});
        std::copy(lv.data<double>(), lv.data<double>() + n * n, l0.data<double>());
        compare({l, y, yr},
                {triangular_solve(l, y, true, true, false), triangular_solve(l, y, true, true, true),
                 triangular_solve(l, yr, false, true, true), triangular_solve(l, yr, false, false, false, true)},
                {l0.astype(t), random_array(t, {n, 50000}, 22), random_array(t, {3333, n}, 23)}, tol, tol);
    }
    // LAPACK's failure is the same user error as the reference kernel's
    Placeholder a({2, 2}, f32, "bad_matrix");
    Function f = function({a}, {cholesky(a)}, {}, on("cpu"));
    try {
        f(Array(std::vector<float>{1, 2, 2, 1}, {2, 2}));
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find("not positive definite"), std::string::npos) << msg;
        EXPECT_NE(msg.find("order 2"), std::string::npos) << msg;
    }
}

TEST(CpuBackend, MomentumUpdateIsOneMultiOutputKernel) {
    // v = 0.9 v + g; W = W - 0.1 v: the velocity kernel joins the weight kernel as an extra
    // output (Fusion's merge_producers); both are written in place and match the reference
    for (const char* backend : {"cpu", "reference"}) {
        Variable w(Array(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}), "w");
        Variable v(Array(f32, {2, 3}), "v");
        Placeholder g({2, 3}, f32, "g");
        Tensor nv = v * 0.9 + g;
        Function step = function({g}, {sum(nv)}, {{v, nv}, {w, w - 0.1 * nv}}, on(backend));
        if (std::string(backend) == "cpu") EXPECT_LE(step.stats().kernels, 2u) << step.dump(); // (and the sum)
        for (int i = 0; i < 3; ++i) step(Array(std::vector<float>{1, -1, 2, -2, 0.5f, 0}, {2, 3}));
        // v after 3 steps: g (1 + 0.9 + 0.81) = 2.71 g; w = w0 - 0.1 (g + 1.9 g + 2.71 g)
        std::vector<float> gv{1, -1, 2, -2, 0.5f, 0}, w0{1, 2, 3, 4, 5, 6};
        auto vr = v.value().to_vector<float>(), wr = w.value().to_vector<float>();
        for (int i = 0; i < 6; ++i) {
            EXPECT_NEAR(vr[i], 2.71f * gv[i], 1e-5) << backend << " v " << i;
            EXPECT_NEAR(wr[i], w0[i] - 0.1f * 5.61f * gv[i], 1e-5) << backend << " w " << i;
        }
    }
}

// Note [Parallel work threshold]: a kernel starts the thread team only when its work (bytes
// moved plus arithmetic) reaches the threshold; FunctionStats::parallel_regions counts the
// steps that do, for the last call's shapes (a new batch size can change it).
TEST(CpuBackend, SmallKernelsRunOnOneThread) {
    Placeholder x({-1}, f32, "x");
    Function f = function({x}, {x * 2.0 + 1.0});
    f(Array(f32, {1000}));
    EXPECT_EQ(f.stats().parallel_regions, 0u) << "8 KB of work split over the team";
    Array big(f32, {1 << 20});
    Array y = f(big)[0];
    const bool team = std::getenv("SJ_NUM_THREADS") ? std::atoi(std::getenv("SJ_NUM_THREADS")) > 1
                                                     : std::thread::hardware_concurrency() > 1;
    EXPECT_EQ(f.stats().parallel_regions, team ? 1u : 0u) << "8 MB of work on one thread";
    EXPECT_EQ(y.to_vector<float>()[12345], 1.0f);
}

// Note [Long contractions] in src/backend/cpu/Dot.cpp: a long contraction into a small result
// runs in fixed pieces of K, or as one call on one thread when it is at most 2^22 multiply-adds
// (the first four cases; the last two are pieces); with the operands plain, transposed and
// batched, the result is the double-precision sum (f32 rounding of 5000-term sums: 1e-5
// relative to the sum of |terms|).
TEST(CpuBackend, LongContractionsInPiecesMatchTheSum) {
    struct Case {
        Shape a, b;
        DotDims d;
    };
    std::vector<Case> cases = {
        {{3, 2500}, {2500, 7}, {{}, {}, {1}, {0}}},         // [M, K] x [K, N]
        {{2500, 3}, {2500, 7}, {{}, {}, {0}, {0}}},         // lhs transposed (a weight gradient)
        {{3, 2500}, {7, 2500}, {{}, {}, {1}, {1}}},         // rhs transposed
        {{2, 5, 3000}, {2, 3000, 4}, {{0}, {0}, {2}, {1}}}, // batched
        {{64, 5000}, {5000, 16}, {{}, {}, {1}, {0}}},       // 5.1M multiply-adds: pieces
        {{5000, 64}, {5000, 16}, {{}, {}, {0}, {0}}},       // and transposed
    };
    for (const auto& c : cases) {
        Placeholder a(c.a, f32, "a"), b(c.b, f32, "b");
        Tensor y = dot_general(a, b, c.d);
        Array av = random_array(f32, c.a, 1), bv = random_array(f32, c.b, 2);
        Array got = function({a, b}, {y})(av, bv)[0];
        Tensor exact = dot_general(cast(a, f64), cast(b, f64), c.d);
        Tensor magnitude = dot_general(abs(cast(a, f64)), abs(cast(b, f64)), c.d);
        std::vector<Array> ref = function({a, b}, {exact, magnitude}, {}, on("reference"))(av, bv);
        const Array &want = ref[0], &mag = ref[1];
        ASSERT_EQ(got.size(), want.size());
        for (int64_t i = 0; i < got.size(); ++i)
            ASSERT_NEAR(got.at(i), want.at(i), 1e-5 * mag.at(i)) << shape_str(c.a) << " at " << i;
    }
}

// The one-thread call of a small long contraction applies its epilogue itself: a dense layer's
// bias and relu (the brief network's inference), and the sum post-op of momentum's
// v' = 0.9 v + p^T q (a weight gradient over a batch of 2048). Values against the reference.
TEST(CpuBackend, SmallLongContractionsApplyTheirEpilogue) {
    Placeholder a({32, 4096}, f32, "a"), w({4096, 10}, f32, "w"), b({10}, f32, "b");
    Tensor y = maximum(matmul(a, w) + b, 0.0); // bias and relu: the matmul's post-ops
    std::vector<Array> args = {random_array(f32, {32, 4096}, 6),
                               random_array(f32, {4096, 10}, 7, -0.05, 0.05),
                               random_array(f32, {10}, 8)};
    Array got = function({a, w, b}, {y})(args[0], args[1], args[2])[0];
    Array want = function({a, w, b}, {y}, {}, on("reference"))(args[0], args[1], args[2])[0];
    expect_close(got, want, 1e-5, 1e-5, "relu(a w + b)");

    Placeholder p({2048, 64}, f32, "p"), q({2048, 10}, f32, "q");
    Array v0 = random_array(f32, {64, 10}, 9);
    Array pv = random_array(f32, {2048, 64}, 10), qv = random_array(f32, {2048, 10}, 11);
    Array next[2];
    for (int k = 0; k < 2; ++k) {
        Variable v(v0.clone(), k ? "one_thread_v_ref" : "one_thread_v");
        Function f = function({p, q}, {}, {{v, v * 0.9 + matmul(transpose(p), q)}},
                              k ? on("reference") : FunctionOptions{});
        f(pv, qv);
        next[k] = v.value();
    }
    expect_close(next[0], next[1], 1e-5, 1e-4, "0.9 v + p^T q");
}

// Note [Small matmuls on one thread]: a matmul of at most 2^20 multiply-adds runs on the calling
// thread with its epilogue (the paper network's dense layer, 32x32x10), a larger one on the team;
// FunctionStats counts the regions started. Values against the reference interpreter.
TEST(CpuBackend, SmallMatmulsRunOnTheCallingThread) {
    Placeholder a({32, 32}, f32, "a"), w({32, 10}, f32, "w"), b({10}, f32, "b");
    Tensor y = maximum(matmul(a, w) + b, 0.0);
    std::vector<Array> args = {random_array(f32, {32, 32}, 12), random_array(f32, {32, 10}, 13),
                               random_array(f32, {10}, 14)};
    Function f = function({a, w, b}, {y});
    Array got = f(args[0], args[1], args[2])[0];
    Array want = function({a, w, b}, {y}, {}, on("reference"))(args[0], args[1], args[2])[0];
    expect_close(got, want, 1e-5, 1e-5, "relu(a w + b)");
    EXPECT_EQ(f.stats().library_calls, 1);
    EXPECT_EQ(f.stats().parallel_regions, 0);

    // 128x512x512: the team, when there is one (a pool of one thread starts none)
    Placeholder p({128, 512}, f32, "p"), q({512, 512}, f32, "q");
    Function g = function({p, q}, {matmul(p, q)});
    g(random_array(f32, {128, 512}, 15), random_array(f32, {512, 512}, 16));
    EXPECT_EQ(g.stats().parallel_regions, cpu::ThreadPool::get().threads() > 1 ? 1 : 0);
}

namespace {
/// A dot_general of a [batch] of M x K matrices (K x M when ta) and K x N ones (N x K when tb);
/// batch 1: plain matrices.
struct DotCase {
    int64_t batch, m, k, n;
    bool ta, tb;
    std::string name() const {
        return "batch " + std::to_string(batch) + ", " + std::to_string(m) + "x" +
               std::to_string(k) + "x" + std::to_string(n) + (ta ? ", A^T" : "") +
               (tb ? ", B^T" : "");
    }
    Shape dims(int64_t rows, int64_t cols) const {
        return batch > 1 ? Shape{batch, rows, cols} : Shape{rows, cols};
    }
    Shape a_shape() const { return ta ? dims(k, m) : dims(m, k); }
    Shape w_shape() const { return tb ? dims(n, k) : dims(k, n); }
    DotDims dot_dims() const {
        const int64_t o = batch > 1 ? 1 : 0; // the first matrix dim
        const Axes b = batch > 1 ? Axes{0} : Axes{};
        return {b, b, {ta ? o : o + 1}, {tb ? o + 1 : o}};
    }
};
} // namespace

// Note [Tiny matmuls in a loop] (Dot.cpp): matmuls of at most 2^15 multiply-adds, or of at most
// four rows and 2^20, run in our own FMA loop with their bias, leaky relu and linear post-ops.
// Every layout of the operands, batches, rows on both sides of the four-row blocks, column
// counts that end inside a 16-wide block and inside the four-block groups, against the
// reference interpreter.
TEST(CpuBackend, TinyMatmulsMatchTheReference) {
    const DotCase cases[] = {{1, 32, 32, 10, false, false},  {1, 32, 32, 10, true, false},
                             {1, 32, 10, 32, false, true},   {1, 7, 33, 17, true, true},
                             {3, 5, 12, 40, false, false},   {2, 6, 20, 70, true, true},
                             {1, 1, 784, 512, false, false}, {1, 3, 300, 100, false, true},
                             {1, 4, 129, 33, true, false},   {2, 2, 64, 64, false, false},
                             {1, 2, 24, 60, false, true},    {1, 1, 4099, 10, false, false},
                             {1, 5, 30, 20, true, false},    {2, 3, 7, 12, false, false}};
    int seed = 30;
    for (const DotCase& c : cases) {
        SCOPED_TRACE(c.name());
        Placeholder a(c.a_shape(), f32, "a"), w(c.w_shape(), f32, "w"), b({c.n}, f32, "b");
        Tensor y = dot_general(a, w, c.dot_dims());
        // weights of 1/sqrt(K): outputs of order one, whose rounding the tolerance covers
        const double scale = 1.0 / std::sqrt(double(c.k));
        std::vector<Array> args = {random_array(f32, c.a_shape(), seed),
                                   random_array(f32, c.w_shape(), seed + 1, -scale, scale),
                                   random_array(f32, {c.n}, seed + 2)};
        seed += 3;
        // one function each, so that each output is the matmul's epilogue
        for (const Tensor& out : {y, y + b, nn::leaky_relu(y + b, 0.1), (y + b) * 2.0 + 1.0})
            compare({a, w, b}, {out}, args, 1e-5, 1e-5);
    }
}

// Note [f64 matmuls] (Dot.cpp): f64 products in our AVX-512 kernel, B read in place or copied
// panel by panel, rows in fours and the rest, columns that end inside an 8-wide block and past a
// 32-column panel, every operand layout, batches, and products large enough for the team,
// against the reference interpreter (the same sums in another order: f64 rounding).
TEST(CpuBackend, F64MatmulsMatchTheReference) {
    const DotCase cases[] = {{1, 1, 1000, 1000, false, false}, {1, 5, 7, 3, false, false},
                             {1, 17, 33, 40, true, false},     {1, 18, 20, 70, false, true},
                             {3, 6, 12, 33, true, true},       {256, 16, 16, 16, false, false},
                             {2, 130, 64, 129, false, false},  {1, 3, 100, 1, true, true},
                             {2, 64, 300, 96, false, true}};
    int seed = 60;
    for (const DotCase& c : cases) {
        SCOPED_TRACE(c.name());
        Placeholder a(c.a_shape(), f64, "a"), w(c.w_shape(), f64, "w");
        std::vector<Array> args = {random_array(f64, c.a_shape(), seed),
                                   random_array(f64, c.w_shape(), seed + 1)};
        seed += 2;
        compare({a, w}, {dot_general(a, w, c.dot_dims())}, args, 1e-12, 1e-12);
    }
    // more than 2^20 multiply-adds: the panels on the team, when there is one
    const bool team = cpu::ThreadPool::get().threads() > 1;
    Placeholder p({2, 130, 64}, f64, "p"), q({2, 64, 129}, f64, "q");
    Function g = function({p, q}, {matmul(p, q)});
    g(random_array(f64, {2, 130, 64}, 70), random_array(f64, {2, 64, 129}, 71));
    EXPECT_EQ(g.stats().parallel_regions, team ? 1 : 0);
    // K past 2^16: B read in place by 16 rows (two panels, on the team), and B stored transposed,
    // whose panels are not copied (the plain loop, on the calling thread)
    const DotCase longer[] = {{1, 16, 70000, 33, false, false}, {1, 2, 70000, 3, false, true}};
    for (const DotCase& c : longer) {
        SCOPED_TRACE(c.name());
        Placeholder a(c.a_shape(), f64, "a"), w(c.w_shape(), f64, "w");
        Tensor y = dot_general(a, w, c.dot_dims());
        std::vector<Array> args = {random_array(f64, c.a_shape(), seed),
                                   random_array(f64, c.w_shape(), seed + 1)};
        seed += 2;
        compare({a, w}, {y}, args, 1e-12, 1e-12);
        Function h = function({a, w}, {y});
        h(args[0], args[1]);
        EXPECT_EQ(h.stats().parallel_regions, team && !c.tb ? 1 : 0);
    }
}

namespace {
/// Two dense layers trained by SGD (W0) and momentum (W1), the learning rate an input: the
/// shapes let both weights be read packed (K a multiple of 16, N of 64, and matmuls of more than
/// 2^20 multiply-adds, which run on the team: Note [Small matmuls on one thread] in Dot.cpp).
struct PackedMlp {
    const char* backend;
    Variable w0, w1, v1;
    Function step, hidden; // a training step; the first layer's output, reading W0 only
    PackedMlp(const char* b, const std::string& tag, bool nan_guard = false)
        : backend(b), w0(random_array(f32, {128, 256}, 21, -0.1, 0.1), "packed_w0" + tag),
          w1(random_array(f32, {256, 128}, 22, -0.1, 0.1), "packed_w1" + tag),
          v1(Array(f32, {256, 128}), "packed_v1" + tag) {
        Placeholder x({64, 128}, f32, "x"), y({64, 128}, f32, "y"), lr({}, f32, "lr");
        Tensor h = maximum(matmul(x, w0), 0.0);
        Tensor e = matmul(h, w1) - y;
        Tensor loss = mean(e * e);
        std::vector<Tensor> g = gradients(loss, {w0, w1});
        Tensor nv1 = v1 * 0.9 + g[1];
        FunctionOptions o = on(b);
        o.nan_guard = nan_guard;
        step =
            function({x, y, lr}, {loss}, {{w0, w0 - lr * g[0]}, {v1, nv1}, {w1, w1 - lr * nv1}}, o);
        hidden = function({x}, {h}, {}, o);
    }
};
} // namespace

// Note [Packed weights] in CpuExecutable.cpp: a step whose update writes a weight that its
// matmuls read keeps a packed copy of it between calls, and so does a function that only reads
// it. The weights after each step, and the hidden layer a function that reads W0 computes, match
// the reference interpreter's, also when the variable is written between calls by assign, reset,
// load_variables or another function (each makes the copies stale: the next call packs again).
TEST(CpuBackend, PackedWeightsFollowEveryWriteOfTheVariable) {
    PackedMlp cpu("cpu", ""), ref("reference", "_ref");
    if (__builtin_cpu_supports("avx512f")) // (oneDNN asks for another layout without AVX-512)
        EXPECT_EQ(cpu.step.stats().packed_weights, 0u) << "before the first call";
    const std::string file = ::testing::TempDir() + "/packed_weights.safetensors";
    auto both = [&](const std::function<void(PackedMlp&)>& f) { f(cpu), f(ref); };
    auto check = [&](const std::string& when) {
        expect_close(cpu.w0.value(), ref.w0.value(), 1e-4, 1e-6, "W0 " + when);
        expect_close(cpu.w1.value(), ref.w1.value(), 1e-4, 1e-6, "W1 " + when);
        Array x = random_array(f32, {64, 128}, 90);
        expect_close(cpu.hidden(x)[0], ref.hidden(x)[0], 1e-4, 1e-6, "hidden layer " + when);
    };
    for (int k = 0; k < 10; ++k) {
        Array x = random_array(f32, {64, 128}, 30 + k), y = random_array(f32, {64, 128}, 50 + k);
        both([&](PackedMlp& m) { m.step(x, y, 0.05); });
        if (k == 0 && __builtin_cpu_supports("avx512f"))
            EXPECT_EQ(cpu.step.stats().packed_weights, 2u) << cpu.step.dump();
        if (k == 1 && __builtin_cpu_supports("avx512f")) // (check() called it)
            EXPECT_EQ(cpu.hidden.stats().packed_weights, 1u) << cpu.hidden.dump();
        if (k == 2) // assign
            both([](PackedMlp& m) { m.w0.assign(random_array(f32, {128, 256}, 70, -0.1, 0.1)); });
        if (k == 4) // another function
            both([](PackedMlp& m) {
                function({}, {}, {{m.w0, m.w0 * 0.5}, {m.w1, m.w1 + 0.01}}, on(m.backend))();
            });
        if (k == 6) { // reset, then load_variables of values saved before it
            save_variables(file, "packed_w*");
            both([](PackedMlp& m) { m.w0.reset(), m.w1.reset(); });
            check("after reset, step " + std::to_string(k));
            both([&](PackedMlp& m) { m.step(x, y, 0.05); }); // (a call between: copies fresh)
            load_variables(file, "packed_w*"); // (both models' weights: saved under their names)
        }
        check("after step " + std::to_string(k));
    }
    std::remove(file.c_str());
}

// A call that throws after the update wrote the packed copy commits nothing; the next call must
// not read that copy. Under nan_guard a NaN learning rate throws at the update's kernel (the
// first value with a NaN), after it packed its NaN weights; the next call with a good rate
// matches the reference, which saw the same two calls.
TEST(CpuBackend, PackedWeightsOfAFailedCallAreNotRead) {
    PackedMlp cpu("cpu", "", true), ref("reference", "_ref", true);
    Array x = random_array(f32, {64, 128}, 80), y = random_array(f32, {64, 128}, 81);
    for (PackedMlp* m : {&cpu, &ref}) {
        m->step(x, y, 0.05);
        EXPECT_THROW(m->step(x, y, std::nan("")), Error);
        m->step(x, y, 0.05);
        m->step(x, y, 0.05);
    }
    expect_close(cpu.w0.value(), ref.w0.value(), 1e-4, 1e-6, "W0");
    expect_close(cpu.w1.value(), ref.w1.value(), 1e-4, 1e-6, "W1");
    for (float w : cpu.w0.value().to_vector<float>())
        ASSERT_FALSE(std::isnan(w));
}

// A matmul reading its weight from the packed copy gives the bits of the same matmul reading it
// as an input, row-major (oneDNN copies it into the same layout on every call then): results do
// not depend on whether a copy was kept. Shapes of the MLP benchmark and of the tests above.
TEST(CpuBackend, PackedWeightsGiveThePlainCallsBits) {
    for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{128, 784, 512},
                           {64, 128, 256},
                           {128, 512, 512},
                           {256, 1024, 128}}) {
        Array wv = random_array(f32, {K, N}, 1), xv = random_array(f32, {M, K}, 2);
        Variable w(wv, "bits_w");
        Placeholder x({M, K}, f32, "x"), wp({K, N}, f32, "wp");
        Function packed = function({x}, {matmul(x, w)});
        Function plain = function({x, wp}, {matmul(x, wp)});
        Array a = packed(xv)[0], b = plain(xv, wv)[0];
        if (__builtin_cpu_supports("avx512f"))
            EXPECT_EQ(packed.stats().packed_weights, 1u) << M << "x" << K << "x" << N;
        EXPECT_EQ(plain.stats().packed_weights, 0u);
        EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), size_t(a.nbytes())))
            << M << "x" << K << "x" << N << ": the packed call's bits differ";
    }
}
