// Max pools as kernels (Note [Max pools as kernels], Note [Window gradients in the space of their
// windows] in src/backend/cpu/PoolKernels.cpp): the cpu backend against the reference
// interpreter, and the plans they make.
#include "backend/cpu/CpuTarget.h"

#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <cmath>
#include <limits>

using namespace sj;
using sj::test::on;
using sj::test::random_array;

namespace {

/// |got - want| <= rtol * max |want| everywhere, NaN exactly where want has one.
void expect_near(const Array& got, const Array& want, double rtol, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    double scale = 0, err = 0;
    int64_t nans = 0;
    for (int64_t k = 0; k < want.size(); ++k) {
        const double g = got.at(k), w = want.at(k);
        if (std::isnan(w) || std::isnan(g)) {
            nans += std::isnan(w) != std::isnan(g);
            continue;
        }
        scale = std::max(scale, std::fabs(w));
        err = std::max(err, std::fabs(g - w));
    }
    EXPECT_EQ(nans, 0) << what << ": NaN in one and not the other";
    EXPECT_LE(err, rtol * scale) << what << " (largest magnitude " << scale << ")";
}

/// Whole numbers in [lo, hi]: a conv of them is exact in f32 on every backend, so pooled values
/// and their ties are the same bits on both.
Array whole_numbers(const Shape& s, uint64_t seed, double lo, double hi) {
    Array a = random_array(f32, s, seed, lo, hi + 1);
    for (int64_t k = 0; k < a.size(); ++k)
        a.data<float>()[k] = std::floor(a.data<float>()[k]);
    return a;
}

/// Restores the channel block the other tests compile with.
struct BlockScope {
    int64_t old;
    explicit BlockScope(int64_t b) : old(cpu::set_channel_block(b)) {}
    ~BlockScope() { cpu::set_channel_block(old); }
};

/// Whether the compiled program has a library call of `op` (its fusion groups, Function::dump).
bool has_window_call(const Function& f, const std::string& op) {
    return f.dump().find("(window): " + op + "(") != std::string::npos;
}

/// Compiles `outs` for the cpu backend and the reference interpreter, calls both with `args` and
/// compares each output (expect_near, rtol); returns the cpu function, for its plan.
Function expect_matches_reference(const std::vector<Tensor>& ins, const std::vector<Tensor>& outs,
                                  const std::vector<Function::Arg>& args, double rtol,
                                  const std::vector<std::string>& names) {
    Function cpu = function(ins, outs, {}, on("cpu"));
    std::vector<Array> got = cpu.call(args);
    std::vector<Array> want = function(ins, outs, {}, on("reference")).call(args);
    for (size_t i = 0; i < outs.size(); ++i)
        expect_near(got[i], want[i], rtol, names[i]);
    return cpu;
}

/// y = conv2d(x, w) of x [2, 16, 8, 8] and whole-number weights: exact in f32 on every backend.
struct WholeConv {
    Placeholder x{Shape{2, 16, 8, 8}, f32, "x"};
    Variable w;
    Tensor y;
    WholeConv(uint64_t seed, const std::string& name)
        : w(whole_numbers({32, 16, 3, 3}, seed, -1, 1), name), y(conv2d(x, w, {}, "SAME")) {}
};

} // namespace

// A conv -> batch norm -> relu -> 2x2 max pool block and its gradients: on blocked channels the
// pool and its backward are kernels (no library call), and the step matches the reference.
TEST(PoolKernels, NormalisedPoolStepMatchesTheReference) {
    for (int64_t block : {16, 8}) {
        for (bool dynamic : {false, true}) {
            SCOPED_TRACE("block " + std::to_string(block) + (dynamic ? ", dynamic batch" : ""));
            BlockScope scope(block);
            Placeholder x({dynamic ? -1 : 4, 16, 12, 12}, f32, "x");
            Variable w(random_array(f32, {32, 16, 3, 3}, 70, -0.2, 0.2), "pk_w");
            Variable gamma(random_array(f32, {1, 32, 1, 1}, 71, 0.5, 1.5), "pk_gamma");
            Variable beta(random_array(f32, {1, 32, 1, 1}, 72, -0.5, 0.5), "pk_beta");
            Tensor y = conv2d(x, w, {}, "SAME");
            Tensor z = (y - mean(y, {0, 2, 3}, true)) * rsqrt(var(y, {0, 2, 3}, true) + 1e-5);
            Tensor p = max_pool2d(nn::relu(z * gamma + beta), {2, 2}, {2, 2});
            Placeholder r({dynamic ? -1 : 4, 32, 6, 6}, f32, "r");
            auto g = gradients(sum(p * r), {x, w, gamma, beta});
            // f32 sums in other orders (the windows' space, the row order's blocks): 1e-5 of
            // each output's largest magnitude
            Function cpu = expect_matches_reference(
                {x, r}, {p, g[0], g[1], g[2], g[3]},
                {random_array(f32, {4, 16, 12, 12}, 73), random_array(f32, {4, 32, 6, 6}, 74)},
                1e-5, {"pool", "dx", "dw", "dgamma", "dbeta"});
            EXPECT_FALSE(has_window_call(cpu, "pool")) << cpu.dump();
            EXPECT_FALSE(has_window_call(cpu, "max_pool_backward")) << cpu.dump();
        }
    }
}

// The reference's rule for a window: its first maximum in row-major order takes the gradient,
// and a NaN takes it from the values after it. A conv of whole numbers is exact, and its square
// ties in many windows; a NaN pixel spreads into a 3x3 patch of every channel. (A square, not a
// relu: oneDNN applies a relu after a conv as a post-op, which turns NaN into 0.) The pooled
// values and the gradient at the pool's input are copies, not sums: they match exactly.
TEST(PoolKernels, TiesAndNaNsGoToTheFirstMaximum) {
    BlockScope scope(16);
    WholeConv c(75, "pk_ties_w");
    Tensor t = c.y * c.y - 2.0;
    Tensor p = max_pool2d(t, {2, 2}, {2, 2});
    Placeholder r({2, 32, 4, 4}, f32, "r");
    Array xv = whole_numbers({2, 16, 8, 8}, 76, -2, 2);
    const Array rv = random_array(f32, {2, 32, 4, 4}, 77);
    for (bool nan : {false, true}) {
        SCOPED_TRACE(nan ? "a NaN pixel" : "ties");
        if (nan)
            xv.data<float>()[1 * 1024 + 5 * 64 + 2 * 8 + 5] =
                std::numeric_limits<float>::quiet_NaN();
        Function cpu =
            expect_matches_reference({c.x, r}, {p, gradients(sum(p * r), {t})[0]}, {xv, rv}, 0,
                                     {"pool", "gradient at the pool's input"});
        EXPECT_FALSE(has_window_call(cpu, "max_pool_backward")) << cpu.dump();
    }
}

// Reductions of the pool's gradient: those the layout pass moves onto the blocked gradient (over
// N, H and W) run in the space of the windows (Note [Window gradients in the space of their
// windows]), the others (over H alone, an argmax) read it stored; all match the reference.
TEST(PoolKernels, ReductionsOfTheGradientMatchTheReference) {
    BlockScope scope(16);
    WholeConv c(80, "pk_reduce_w");
    Tensor t = c.y * c.y - 2.0;
    Placeholder r({2, 32, 4, 4}, f32, "r");
    Tensor dt = gradients(sum(max_pool2d(t, {2, 2}, {2, 2}) * r), {t})[0];
    // whole numbers throughout: every sum is exact in f32, in any order
    Function cpu = expect_matches_reference(
        {c.x, r},
        {sum(dt * c.y, {0, 2, 3}), max(dt, {2}), max(dt * c.y, {0, 3}, true), argmax(dt * c.y, 2)},
        {whole_numbers({2, 16, 8, 8}, 81, -2, 2), whole_numbers({2, 32, 4, 4}, 82, -3, 3)}, 0,
        {"sum over N, H, W", "max over H", "max over N and W", "argmax over H"});
    EXPECT_FALSE(has_window_call(cpu, "max_pool_backward")) << cpu.dump();
}

// Pools the rewrite leaves to oneDNN: of a library call's result (nothing to fuse), and with a
// window other than 2x2 of stride 2; their values still match the reference.
TEST(PoolKernels, OtherPoolsStayLibraryCalls) {
    BlockScope scope(16);
    WholeConv c(78, "pk_other_w");
    const Tensor& y = c.y;
    struct Row {
        const char* what;
        Tensor p;
    };
    std::vector<Row> rows = {
        {"a conv's result", max_pool2d(y, {2, 2}, {2, 2})},
        {"3x3 windows of stride 2", max_pool2d(y * y, {3, 3}, {2, 2})},
        {"2x2 windows of stride 1", max_pool2d(y * y, {2, 2}, {1, 1})},
    };
    const Array xv = whole_numbers({2, 16, 8, 8}, 79, -2, 2);
    for (const auto& row : rows) {
        SCOPED_TRACE(row.what);
        Function cpu = expect_matches_reference({c.x}, {row.p}, {xv}, 0, {"pool"});
        EXPECT_TRUE(has_window_call(cpu, "pool")) << cpu.dump();
    }
}
