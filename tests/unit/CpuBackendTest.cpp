// The cpu backend against the reference backend: fused kernels, reductions, GEMM, fallbacks.
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include <cmath>
#include <random>

using namespace sj;
using sj::test::on;
using sj::test::random_array;

namespace {



void expect_close(const Array& a, const Array& b, double rtol, double atol, const std::string& what) {
    ASSERT_EQ(a.dtype(), b.dtype()) << what;
    ASSERT_EQ(a.shape(), b.shape()) << what;
    for (int64_t i = 0; i < a.size(); ++i) {
        double x = a.at(i), y = b.at(i);
        if (std::isnan(x) || std::isnan(y)) {
            ASSERT_EQ(std::isnan(x), std::isnan(y)) << what << " at " << i;
            continue;
        }
        ASSERT_NEAR(x, y, atol + rtol * std::fabs(y)) << what << " at " << i;
    }
}

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
