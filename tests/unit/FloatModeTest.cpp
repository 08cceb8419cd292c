// FunctionOptions::flush_denormals (Note [Flushing denormals] in src/backend/FloatMode.h): while
// a function runs, results and inputs below the normal range count as zero on every thread that
// computes them, generated kernels and oneDNN alike; each thread has its own arithmetic back
// after the call. Expected values: IEEE products computed here, on the test's thread, and zero.
#include "backend/FloatMode.h"
#include "backend/cpu/ThreadPool.h"

#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

using namespace sj;

namespace {

// 2^22 elements: more work than the cpu backend's threshold for splitting a kernel across the
// team (parallel_work(), 2^20), so both halves run on different threads when there are two
constexpr int64_t kMany = int64_t(1) << 22;

FunctionOptions options(const std::string& backend, bool flush) {
    FunctionOptions o;
    o.backend = backend;
    o.flush_denormals = flush;
    return o;
}

/// Counts the elements of a that are exactly 0 and exactly v.
std::pair<int64_t, int64_t> count_zero_and(const Array& a, float v) {
    const std::vector<float> d = a.to_vector<float>();
    int64_t zeros = 0, vs = 0;
    for (float x : d) {
        zeros += x == 0.0f;
        vs += x == v;
    }
    return {zeros, vs};
}

/// Whether any thread of the cpu backend's team flushes denormals now.
bool some_team_thread_flushes() {
    std::mutex mu;
    bool any = false;
    cpu::ThreadPool::get().run(64, [&](int) {
        const bool f = detail::flushing_denormals();
        std::lock_guard<std::mutex> lock(mu);
        any = any || f;
    });
    return any;
}

/// y(x) over kMany copies of x, on `backend`: every element is `ieee` without the option and 0
/// with it.
void expect_ieee_then_zero(const std::string& backend, const Placeholder& x, const Tensor& y,
                           float xvalue, float ieee) {
    const Array xv = Array::full(f32, {kMany}, double(xvalue));
    const auto [zeros_ieee, exact] =
        count_zero_and(function({x}, {y}, {}, options(backend, false))(xv)[0], ieee);
    EXPECT_EQ(exact, kMany);
    EXPECT_EQ(zeros_ieee, 0);
    const auto [zeros, kept] =
        count_zero_and(function({x}, {y}, {}, options(backend, true))(xv)[0], ieee);
    EXPECT_EQ(zeros, kMany) << "every thread's share must be flushed";
    EXPECT_EQ(kept, 0);
}

} // namespace

class FlushDenormals : public ::testing::TestWithParam<std::string> {};

TEST_P(FlushDenormals, ResultsBelowTheNormalRangeAreZeroOnlyWhenAsked) {
    ASSERT_FALSE(detail::flushing_denormals()) << "the test thread must start with IEEE arithmetic";
    Placeholder x({kMany}, f32, "fd_x");
    const float ieee = 1e-20f * 1e-20f; // 1e-40: below f32's normal range (1.18e-38)
    ASSERT_NE(ieee, 0.0f);
    ASSERT_LT(ieee, std::numeric_limits<float>::min());
    expect_ieee_then_zero(GetParam(), x, x * 1e-20f, 1e-20f, ieee);
    EXPECT_FALSE(detail::flushing_denormals()) << "the calling thread keeps IEEE after the call";
    EXPECT_FALSE(some_team_thread_flushes()) << "the team keeps IEEE after the call";
}

TEST_P(FlushDenormals, InputsBelowTheNormalRangeAreReadAsZero) {
    Placeholder x({kMany}, f32, "fd_tiny");
    const float tiny = 1e-40f;                                     // denormal
    expect_ieee_then_zero(GetParam(), x, x * 1e10f, tiny, tiny * 1e10f); // 1e-30, a normal float
}

TEST_P(FlushDenormals, ConvolutionsFlushToo) {
    // on the cpu backend a oneDNN primitive on its own threads: each output sums up to 3x3x16
    // products of 1e-21 * 1e-21, and even the sums (1.44e-40 inside) are below the normal range
    Placeholder x({4, 16, 16, 16}, f32, "fd_images");
    Placeholder w({16, 16, 3, 3}, f32, "fd_filters");
    Tensor y = conv2d(x, w, {1, 1}, "SAME");
    const Array xv = Array::full(f32, {4, 16, 16, 16}, 1e-21);
    const Array wv = Array::full(f32, {16, 16, 3, 3}, 1e-21);
    const Array ieee = function({x, w}, {y}, {}, options(GetParam(), false))(xv, wv)[0];
    const float interior = ieee.to_vector<float>()[size_t(16 + 1)]; // [0, 0, 1, 1]
    // denormals keep few bits: each 1e-42 product is a multiple of 1.4e-45, 0.1% off at most
    EXPECT_NEAR(interior, 144 * 1e-42, 144 * 1e-42 * 1e-2);
    EXPECT_EQ(count_zero_and(ieee, 0.0f).first, 0);
    const Array flushed = function({x, w}, {y}, {}, options(GetParam(), true))(xv, wv)[0];
    EXPECT_EQ(count_zero_and(flushed, 0.0f).first, flushed.size());
    EXPECT_FALSE(some_team_thread_flushes());
}

TEST_P(FlushDenormals, TheCallersOwnFlushIsKept) {
    // a caller that flushes itself (torch.set_flush_denormal's way) still does after the call
    Placeholder x({4}, f32, "fd_own");
    Function f = function({x}, {x * 2.0f}, {}, options(GetParam(), true));
    {
        detail::ScopedFlushDenormals own(true);
        f(Array::full(f32, {4}, 1.0));
        EXPECT_TRUE(detail::flushing_denormals());
    }
    EXPECT_FALSE(detail::flushing_denormals());
}

INSTANTIATE_TEST_SUITE_P(Backends, FlushDenormals, ::testing::Values("cpu", "reference"));

TEST(FlushDenormalsOption, FromTheEnvironment) {
    struct Env {
        std::string old;
        bool had;
        Env() : had(std::getenv("SJ_FLUSH_DENORMALS") != nullptr) {
            if (had)
                old = std::getenv("SJ_FLUSH_DENORMALS");
        }
        ~Env() {
            had ? setenv("SJ_FLUSH_DENORMALS", old.c_str(), 1) : unsetenv("SJ_FLUSH_DENORMALS");
        }
    } restore;
    unsetenv("SJ_FLUSH_DENORMALS");
    EXPECT_FALSE(FunctionOptions{}.flush_denormals);
    setenv("SJ_FLUSH_DENORMALS", "0", 1);
    EXPECT_FALSE(FunctionOptions{}.flush_denormals);
    setenv("SJ_FLUSH_DENORMALS", "1", 1);
    EXPECT_TRUE(FunctionOptions{}.flush_denormals);
    Placeholder x({3}, f32, "fd_env");
    const Array tiny = Array::full(f32, {3}, 1e-40);
    EXPECT_EQ(function({x}, {x * 3.0f})(tiny)[0].to_vector<float>()[0], 0.0f);
}
