// plan_kernel's loop order, and the row order's kernels (Note [Row reductions]) against the
// reference backend: batch-norm statistics of channel-blocked tensors, bias gradients.
#include "compiler/KernelPlan.h"
#include "TestUtil.h"
#include "backend/cpu/CpuTarget.h"
#include "backend/cpu/Jit.h"
#include "backend/cpu/ThreadPool.h"
#include "compiler/Pipeline.h"

#include <gtest/gtest.h>
#include <symjax/ir/Node.h>
#include <symjax/symjax.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <tuple>
#include <unistd.h>

using namespace sj;
using sj::test::expect_close;
using sj::test::on;
using sj::test::random_array;

namespace {

/// The launch of the only kernel group computing `outs` (static shapes).
compiler::KernelLaunch launch_of(const std::vector<Tensor>& outs) {
    std::vector<NodePtr> roots;
    for (const auto& t : outs) roots.push_back(t.node());
    compiler::Compiled c = compiler::compile(roots, cpu::cpu_target());
    const compiler::Group* kernel = nullptr;
    for (const auto& g : c.plan.groups)
        if (g.kind == compiler::Group::Kind::Kernel) {
            EXPECT_EQ(kernel, nullptr) << c.plan.str();
            kernel = &g;
        }
    if (!kernel) {
        ADD_FAILURE() << "no kernel group:\n" << c.plan.str();
        return {};
    }
    auto shape_of = [](const Node* n) -> const Shape& { return n->shape(); };
    return compiler::plan_kernel(*kernel, c.plan, shape_of, cpu::cpu_target().vector_lanes());
}


/// Runs the same function on the cpu and reference backends and compares every output; the
/// cpu side must have at most `kernels` kernels.
void compare(const std::vector<Tensor>& ins, const std::vector<Tensor>& outs,
             const std::vector<Array>& args, const std::string& what, double rtol = 1e-5,
             double atol = 1e-5, size_t kernels = 1) {
    Function fc = function(ins, outs, {}, on("cpu"));
    Function fr = function(ins, outs, {}, on("reference"));
    std::vector<Function::Arg> a(args.begin(), args.end());
    auto rc = fc.call(a);
    auto rr = fr.call(a);
    for (size_t i = 0; i < outs.size(); ++i)
        expect_close(rc[i], rr[i], rtol, atol, what + " output " + std::to_string(i));
    EXPECT_LE(fc.stats().kernels, kernels) << what << "\n" << fc.dump();
}

std::string shape_text(const Shape& s) {
    std::string t;
    for (int64_t d : s) t += (t.empty() ? "" : "x") + std::to_string(d);
    return t;
}

/// Batch-norm statistics of a channel-blocked [N, C/16, H, W, 16] tensor and a bias gradient
/// ([B, F] over 0), with sizes that engage every way of splitting over threads when the pool
/// has two: a kept-outer loop of 2 and 3 channel blocks, a reduction loop with private outputs
/// (the bias gradient, and a single channel block), and at 32 images (2 MB, over the work
/// threshold) the batch cut into chunks with private outputs, the full output y written at each
/// chunk's images (Note [Reductions split along the batch]).
void threaded_cases() {
    // The sums of up to 8192 terms of |x| <= 2 come out near 0 (random signs): their f32 blocks
    // round like a random walk, ~1e-5 (measured against a double sum over 48 channels: mean
    // 0.9e-5, max 2.7e-5 with the row order's two accumulators, max 3.5e-5 with one), against
    // Note [f32 sums]' bound of 64 eps of the sum of |terms| (0.03 here). 1e-4 absolute is 3x
    // the largest seen; the squares and the full output keep 1e-5 relative.
    constexpr double kSumAtol = 1e-4;
    for (int64_t n : {4, 32})
        for (int64_t c16 : {1, 2, 3}) {
            Shape s{n, c16, 16, 16, 16};
            Placeholder x(s, f32, "x");
            Tensor y =
                x * 2.0 - 1.0; // a full output of the same kernel (a sibling merged by Fusion)
            compare({x}, {sum(x, {0, 2, 3}), sum(x * x, {0, 2, 3}, true), y},
                    {random_array(f32, s, 40 + c16)}, "bn " + shape_text(s), 1e-5, kSumAtol);
        }
    Placeholder dy({300, 200}, f32, "dy");
    compare({dy}, {sum(dy, {0}), max(dy, {0}), exp(dy)}, {random_array(f32, {300, 200}, 44)},
            "bias 300x200");
    // the chunks' private outputs are kept between calls (Note [Chunk partials stay
    // allocated]): each call of one function must still sum its own input, in either split
    Placeholder xb({32, 2, 16, 16, 16}, f32, "xb");
    Function fc = function({xb, dy}, {sum(xb, {0, 2, 3}), sum(xb * xb, {0, 2, 3}), sum(dy, {0})},
                           {}, on("cpu"));
    Function fr = function({xb, dy}, {sum(xb, {0, 2, 3}), sum(xb * xb, {0, 2, 3}), sum(dy, {0})},
                           {}, on("reference"));
    for (uint64_t seed : {50, 51, 52}) {
        std::vector<Function::Arg> a{random_array(f32, {32, 2, 16, 16, 16}, seed),
                                     random_array(f32, {300, 200}, seed + 10)};
        auto rc = fc.call(a);
        auto rr = fr.call(a);
        for (size_t i = 0; i < rc.size(); ++i)
            expect_close(rc[i], rr[i], 1e-5, kSumAtol,
                         "call with seed " + std::to_string(seed) + ", output " +
                             std::to_string(i));
    }
}

} // namespace

TEST(KernelPlan, ContiguousKeptRowGoesInnermost) {
    {
        // nChw16c batch-norm statistics: kept-outer C/16, reductions N and H*W, the row of 16
        Placeholder x({32, 2, 32, 32, 16}, f32, "x");
        auto L = launch_of({sum(x, {0, 2, 3}), sum(x * x, {0, 2, 3})});
        EXPECT_EQ(L.spec.row, 16) << L.spec.str();
        EXPECT_EQ(L.spec.rank, 4);
        EXPECT_EQ(L.spec.reduce_rank, 2);
        EXPECT_EQ(L.outer, 2);
        EXPECT_FALSE(L.split_reduce);
        // the batch: what the runner cuts into chunks (Note [Reductions split along the batch])
        EXPECT_EQ(L.first_reduce, 1);
        EXPECT_EQ(L.params[1], 32);
        EXPECT_NE(L.spec.str().find("row=16"), std::string::npos) << L.spec.str(); // the cache key
    }
    {
        // a bias gradient: loop 0 is the reduction, threads write private rows
        Placeholder dy({128, 256}, f32, "dy");
        auto L = launch_of({sum(dy, {0}, true)});
        EXPECT_EQ(L.spec.row, 256) << L.spec.str();
        EXPECT_EQ(L.spec.rank, 2);
        EXPECT_TRUE(L.split_reduce);
        EXPECT_EQ(L.first_reduce, -1);
    }
    {
        // a wider one is split into rows of 128 (Note [Long rows split]): loop 0 is the pieces
        Placeholder dy({128, 512}, f32, "dy");
        auto L = launch_of({sum(dy, {0}, true)});
        EXPECT_EQ(L.spec.row, 128) << L.spec.str();
        EXPECT_EQ(L.spec.rank, 3);
        EXPECT_EQ(L.outer, 4);
        EXPECT_FALSE(L.split_reduce);
        EXPECT_EQ(L.first_reduce, 1);
    }
    {
        // a transposed view whose kept dim is the contiguous one
        Placeholder t({512, 64}, f32, "t");
        EXPECT_EQ(launch_of({sum(transpose(t, {1, 0}), {1})}).spec.row, 64);
    }
}

TEST(KernelPlan, OtherReductionsKeepTheUsualOrder) {
    Placeholder wide({64, 1031}, f32, "wide");   // a row over kMaxRow that does not split
    Placeholder rows({64, 512}, f32, "rows");    // the reduced dim is the contiguous one
    Placeholder col({64, 1}, f32, "col");        // a row of one element is no row
    for (const Tensor& y : {sum(wide, {0}), sum(rows, {1}), sum(col, {0}), sum(rows)})
        EXPECT_EQ(launch_of({y}).spec.row, 0) << launch_of({y}).spec.str();
}

TEST(KernelPlan, ChannelBlockedBatchNormStatistics) {
    for (Shape s : {Shape{2, 2, 8, 8, 16}, Shape{3, 4, 5, 7, 16}, Shape{1, 1, 32, 32, 16},
                    Shape{5, 3, 4, 4, 5}, Shape{2, 2, 3, 3, 13}, Shape{0, 2, 4, 4, 16},
                    Shape{2, 2, 0, 4, 16}}) {
        for (bool keep : {false, true}) {
            Placeholder x(s, f32, "x");
            Axes ax{0, 2, 3};
            double n = double(s[0] * s[2] * s[3]);
            Tensor m = sum(x, ax, keep) * (1.0 / std::max(n, 1.0)); // a mean, fused
            std::string what = shape_text(s) + (keep ? " keepdims" : "");
            // (the scale of the mean is a second kernel over the statistics)
            compare({x}, {sum(x, ax, keep), sum(x * x, ax, keep), m}, {random_array(f32, s, 1)},
                    what, 1e-5, 1e-5, 2);
            if (numel(s) > 0) // (max and min over an empty dim are errors)
                compare({x}, {max(x, ax, keep), min(x, ax, keep)}, {random_array(f32, s, 2)}, what);
        }
    }
    // the batch and spatial dims bound only at the call
    Placeholder x({-1, 2, -1, -1, 16}, f32, "x");
    std::vector<Tensor> stats{sum(x, {0, 2, 3}), sum((x - 0.5) * (x - 0.5), {0, 2, 3})};
    Function fc = function({x}, stats);
    Function fr = function({x}, stats, {}, on("reference"));
    for (Shape s : {Shape{2, 2, 8, 8, 16}, Shape{7, 2, 3, 5, 16}, Shape{0, 2, 3, 5, 16}}) {
        Array v = random_array(f32, s, 3);
        auto rc = fc(v), rr = fr(v);
        for (size_t i = 0; i < rc.size(); ++i)
            expect_close(rc[i], rr[i], 1e-5, 1e-5, "placeholder " + shape_text(s));
    }
}

TEST(KernelPlan, BiasGradients) {
    for (int64_t b : {1, 7, 128}) {
        for (int64_t f : {1, 10, 17, 512, 1024}) {
            for (bool keep : {false, true}) {
                Placeholder dy({b, f}, f32, "dy");
                std::string what = shape_text({b, f}) + (keep ? " keepdims" : "");
                compare({dy}, {sum(dy, {0}, keep), sum(dy * dy * 0.5, {0}, keep)},
                        {random_array(f32, {b, f}, 4)}, what);
                compare({dy},
                        {max(dy, {0}, keep), min(dy, {0}, keep), prod(dy * 0.1 + 1.0, {0}, keep)},
                        {random_array(f32, {b, f}, 5)}, what, 1e-5, 1e-6);
            }
        }
    }
    for (Shape s : {Shape{0, 16}, Shape{16, 0}}) {
        Placeholder dy(s, f32, "dy");
        compare({dy}, {sum(dy, {0}), prod(dy, {0})}, {Array(f32, s)}, "empty " + shape_text(s));
    }
    // a batch bound only at the call
    Placeholder dy({-1, 10}, f32, "dy");
    Function fc = function({dy}, {sum(dy, {0})});
    Function fr = function({dy}, {sum(dy, {0})}, {}, on("reference"));
    for (int64_t b : {1, 3, 2000}) {
        Array v = random_array(f32, {b, 10}, 6);
        expect_close(fc(v)[0], fr(v)[0], 1e-5, 1e-5, "batch " + std::to_string(b));
    }
}

TEST(KernelPlan, RowOrderIntegerAndBoolReductions) {
    for (DType t : {i32, i64, f64}) {
        Placeholder x({6, 3, 4, 5, 16}, t, "x");
        compare({x}, {sum(x, {0, 2, 3}), max(x, {0, 2, 3}), min(x, {0, 2, 3}, true)},
                {random_array(t, {6, 3, 4, 5, 16}, 7, -1000, 1000)}, dtype_name(t), 1e-12, 1e-9);
    }
    // i32 sums wrap as the reference's do
    Placeholder big({100, 24}, i32, "big");
    Array bigv = random_array(i32, {100, 24}, 8, 0, 100000);
    compare({big}, {sum(big * 50000, {0})}, {bigv}, "i32 wrap", 0, 0);
    Placeholder bx({40, 33}, boolean, "b");
    Array bv = random_array(f64, {40, 33}, 9).astype(boolean);
    compare({bx}, {any(bx, {0}), all(bx, {0})}, {bv}, "bool");
}

TEST(KernelPlan, RowOrderWithAFullOutput) {
    // an elementwise sibling over the same space joins the reduction (Fusion): the kernel
    // stores y at every point of the row loop and sums the rows of x
    Placeholder x({5, 2, 6, 6, 16}, f32, "x");
    Placeholder g({16}, f32, "g");
    Tensor y = x * g + 1.0;
    std::vector<Tensor> outs{y, sum(x, {0, 2, 3}), sum(x * x, {0, 2, 3})};
    auto L = launch_of(outs);
    EXPECT_EQ(L.spec.row, 16) << L.spec.str();
    EXPECT_EQ(L.spec.outputs.size(), 3u) << L.spec.str();
    compare({x, g}, outs, {random_array(f32, {5, 2, 6, 6, 16}, 10), random_array(f32, {16}, 11)},
            "full and reduced");
    Placeholder dy({64, 40}, f32, "dy");
    compare({dy}, {sum(dy, {0}), tanh(dy)}, {random_array(f32, {64, 40}, 12)}, "bias and full");
}

// Note [Long rows split]: a kept innermost dim longer than 256 under a reduction over outer dims
// is split into rows of 64-128 that take the row order (a multiple of 16 first, then the
// longest), else the longest divisor up to 1024; a length with neither keeps its one row (up to
// 1024) or the usual order. The sums match the reference interpreter either way.
TEST(KernelPlan, LongRowsSplitIntoRowsThatFit) {
    struct Case {
        Shape shape;
        std::vector<int64_t> axes;
        int64_t row;
    };
    for (const Case& c : {Case{{64, 4096}, {0}, 128}, Case{{128, 512}, {0}, 128},
                          Case{{6, 16, 3000}, {1}, 125}, Case{{3, 5, 2048}, {0, 1}, 128},
                          Case{{40, 2 * 521}, {0}, 521}, Case{{40, 521}, {0}, 521},
                          Case{{40, 1031}, {0}, 0}, Case{{40, 2 * 1031}, {0}, 0}}) {
        Placeholder x(c.shape, f32, "x");
        const compiler::KernelLaunch l = launch_of({sum(x, c.axes)});
        EXPECT_EQ(l.spec.row, c.row) << shape_text(c.shape) << "\n" << l.spec.str();
        compare({x}, {sum(x, c.axes), sum(x * x, c.axes)}, {random_array(f32, c.shape, 95)},
                shape_text(c.shape));
    }
}

TEST(KernelPlan, RowOrderLongF32SumStaysAccurate) {
    // 1e6 terms per output spanning six decades with mixed signs, over (N, H, W) of a
    // [1000, 1, 25, 40, 16] tensor (16 outputs). The row order's f32 blocks are sequential
    // sums of at most 64 terms (Note [f32 sums] in LlvmRenderer.cpp): an error of at most
    // ~64 eps = 3.8e-6 of the sum of |terms| per block, nothing beyond f64 rounding across
    // blocks, then one f32 rounding of the result. So 5e-6 of the sum of |terms| plus an ulp of
    // the result, checked against a double sum of the same f32 terms.
    const Shape s{1000, 1, 25, 40, 16};
    std::mt19937_64 gen(7);
    std::uniform_real_distribution<double> mant(1.0, 10.0);
    std::uniform_int_distribution<int> dec(-3, 2);
    Array x(f32, s);
    std::vector<double> exact(16, 0), abs_sum(16, 0);
    for (int64_t i = 0; i < x.size(); ++i) {
        float v = float(mant(gen) * std::pow(10.0, dec(gen)));
        if (i % 3 == 0) v = -v;
        x.data<float>()[i] = v;
        exact[i % 16] += double(v);
        abs_sum[i % 16] += std::fabs(double(v));
    }
    Placeholder p(s, f32, "x");
    Array r = function({p}, {sum(p, {0, 2, 3})})(x)[0];
    for (int64_t c = 0; c < 16; ++c)
        EXPECT_NEAR(r.at(c), exact[c], 5e-6 * abs_sum[c] + 1.2e-7 * std::fabs(exact[c]))
            << "channel " << c;
}

// Note [Sums that need no accumulator] (LlvmRenderer.cpp): a dynamic mean's count, the sum of a
// constant, is c times each block's length, in the row order (per-channel counts of a
// channel-blocked tensor) and the usual one (over a last dim bound at the call). Counts are
// integers below 2^24: exact, checked against the closed form.
TEST(KernelPlan, SumsOfAConstantAreExactCounts) {
    Placeholder x({-1, 2, -1, 5, 16}, f32, "x");
    Tensor counts = sum(ones_like(x), {0, 2, 3});
    Tensor halves = sum(full_like(x, 0.5), {0, 2, 3}, true) + sum(x, {0, 2, 3}, true) * 0.0;
    Placeholder y({-1, -1}, f32, "y");
    Tensor per_row = sum(full_like(y, 3.0), {1});
    Function f = function({x, y}, {counts, halves, per_row});
    for (auto [n, h, w] : {std::tuple{1, 1, 1}, {3, 7, 65}, {60, 100, 1029}}) {
        Shape sx{n, 2, h, 5, 16};
        auto r = f(random_array(f32, sx, 70), random_array(f32, {n, w}, 71));
        const double per_channel = double(n * h * 5);
        for (int64_t c = 0; c < 32; ++c) {
            EXPECT_EQ(r[0].at(c), per_channel) << shape_text(sx) << " channel " << c;
            EXPECT_EQ(r[1].at(c), per_channel * 0.5) << shape_text(sx) << " channel " << c;
        }
        for (int64_t i = 0; i < n; ++i)
            EXPECT_EQ(r[2].at(i), 3.0 * double(w)) << "row " << i << " of " << n << "x" << w;
    }
}

// Note [Blocks around short loops] (LlvmRenderer.cpp): when the innermost reduction loops have
// their trip counts compiled in, the f32 blocks are cut on the loop outside them, each block
// index standing for the short loops' points. A constant's sum counts those points too, and
// sums of values match the reference interpreter, in the row order (a 2x2 window's sums over
// [N, C/16, H/2, 2, W/2, 2, 16], as a max pool's backward makes them) and in the usual one.
TEST(KernelPlan, BlocksSpanShortReductionLoops) {
    // x in the space of 2x2 windows, a per-channel g, a pooled p and a window-position table:
    // p and pos keep the short loops from collapsing into their neighbours. The mean over a
    // batch bound at the call counts its points as a sum of ones in the same kernel.
    Placeholder x({-1, 2, -1, 2, -1, 2, 16}, f32, "x");
    Placeholder p({-1, 2, -1, 1, -1, 1, 16}, f32, "p");
    Placeholder g({1, 2, 1, 1, 1, 1, 16}, f32, "g");
    Placeholder pos({1, 1, 1, 2, 1, 2, 1}, f32, "pos");
    auto window_sums = [&](const Tensor& xx, const Tensor& pp) {
        Tensor v = abs(xx - g) * (pp - pos);
        return std::vector<Tensor>{sum(v, {0, 2, 3, 4, 5}), mean(v, {0, 2, 3, 4, 5})};
    };
    Placeholder y({-1, -1, 3}, f32, "y");
    Function per_row = function({y}, {sum(full_like(y, 3.0), {1, 2})});
    Array gv = random_array(f32, {1, 2, 1, 1, 1, 1, 16}, 81);
    Array posv = random_array(f32, {1, 1, 1, 2, 1, 2, 1}, 82);
    for (auto [n, h, w] : {std::tuple{1, 1, 1}, {3, 5, 7}, {9, 16, 100}}) {
        Shape sx{n, 2, h, 2, w, 2, 16}, sp{n, 2, h, 1, w, 1, 16};
        Array xv = random_array(f32, sx, 80), pv = random_array(f32, sp, 83);
        if (h > 1) { // (a single window collapses to one loop)
            Placeholder xs(sx, f32, "xs"), ps(sp, f32, "ps"); // static shapes: the kernel's key
            const std::string spec = launch_of({window_sums(xs, ps)[0]}).spec.str();
            EXPECT_NE(spec.find(",2,0,2,0"), std::string::npos) << spec;
        }
        compare({x, p, g, pos}, window_sums(x, p), {xv, pv, gv, posv}, shape_text(sx), 1e-5, 1e-5,
                2); // the sums and the count, then the division
        Array r = per_row(random_array(f32, {n, w, 3}, 84))[0];
        for (int64_t i = 0; i < n; ++i)
            EXPECT_EQ(r.at(i), 9.0 * double(w)) << "row " << i << " of " << n << "x" << w;
    }
}

// Note [Sums that need no accumulator]: an f32 sum of x beside an f64 sum of cast(x) in one
// kernel (a one-pass variance's statistics) is the f64 accumulator rounded once, in either loop
// order, so it equals the f64 result rounded to f32 when one thread sums it (2 images: under
// the work threshold), and the reference's sum when the batch is cut into chunks.
TEST(KernelPlan, AnF32SumBesideItsF64SumReadsIt) {
    for (Shape s : {Shape{2, 2, 5, 7, 16}, Shape{64, 2, 16, 16, 16}}) {
        Placeholder x(s, f32, "x");
        std::vector<Tensor> outs{sum(x, {0, 2, 3}), sum(cast(x, f64), {0, 2, 3})};
        Array v = random_array(f32, s, 72, 99, 101); // a sum of 100s: f32 blocks would round it
        compare({x}, outs, {v}, shape_text(s), 1e-7, 0);
        if (s[0] == 2) {
            auto r = function({x}, outs)(v);
            for (int64_t c = 0; c < 32; ++c)
                EXPECT_EQ(r[0].at(c), double(float(r[1].at(c)))) << "channel " << c;
        }
    }
    Placeholder y({3, 5000}, f32, "y"); // the usual order: a row's sum over its last dim
    Array v = random_array(f32, {3, 5000}, 73, 99, 101);
    compare({y}, {sum(y, {1}), sum(cast(y, f64), {1})}, {v}, "usual order", 1e-7, 0);
    auto r = function({y}, {sum(y, {1}), sum(cast(y, f64), {1})})(v);
    for (int64_t i = 0; i < 3; ++i)
        EXPECT_EQ(r[0].at(i), double(float(r[1].at(i)))) << "row " << i;
}

// Batch norm's statistics in one pass on the cpu target (Note [Variance in one pass] in
// src/compiler/Specialize.cpp): training batch norm's forward and its gradients against the
// reference interpreter's two-pass graph, with a batch bound at the call, for activations
// centred at 0 and at 1000 times their deviation. Two kernels read x in the forward: the
// statistics (sum(x) and the f64 sums together) and the normalisation.
TEST(KernelPlan, OnePassBatchNormStatisticsMatchTwoPasses) {
    Placeholder x({-1, 32, 8, 8}, f32, "x");
    Placeholder g({1, 32, 1, 1}, f32, "g");
    Tensor m = mean(x, {0, 2, 3}, true);
    Tensor v = var(x, {0, 2, 3}, true);
    Tensor yn = (x - m) * rsqrt(v + 1e-5) * g;
    Tensor loss = sum(yn * yn * yn);
    std::vector<Tensor> grads = gradients(loss, {x, g});
    Function fc = function({x, g}, {yn, v, grads[0], grads[1]}, {}, on("cpu"));
    Function fr = function({x, g}, {yn, v, grads[0], grads[1]}, {}, on("reference"));
    Function stats_only = function({x}, {m, v}, {}, on("cpu"));
    Array gv = random_array(f32, {1, 32, 1, 1}, 74, 0.5, 1.5);
    for (double centre : {0.0, 1000.0}) {
        for (int64_t n : {3, 16}) {
            Array xv = random_array(f32, {n, 32, 8, 8}, 75 + n, centre - 1, centre + 1);
            std::vector<Function::Arg> a{xv, gv};
            auto rc = fc.call(a), rr = fr.call(a);
            std::string what = "centre " + std::to_string(centre) + ", batch " + std::to_string(n);
            // normalised values and variances: f32 rounding of the terms; the gradients also
            // sum products of normalised values (~1e-5 of their largest terms)
            expect_close(rc[0], rr[0], 2e-5, 2e-5, what + " normalised");
            expect_close(rc[1], rr[1], 2e-6, 0, what + " variance");
            expect_close(rc[2], rr[2], 1e-4, 1e-4, what + " dx");
            expect_close(rc[3], rr[3], 1e-4, 1e-4, what + " dgamma");
        }
    }
    stats_only(random_array(f32, {4, 32, 8, 8}, 76));
    EXPECT_EQ(stats_only.stats().kernels, 2u) << "the sums in one kernel, the mean and variance "
                                                 "from them in one more\n"
                                              << stats_only.dump();
}

TEST(KernelPlan, MatchesReferenceOnThePool) {
    if (std::getenv("SJ_KP_TWO_THREADS")) ASSERT_EQ(cpu::ThreadPool::get().threads(), 2);
    threaded_cases();
}

TEST(KernelPlan, MatchesReferenceOnTwoThreads) {
    // the pool's size is fixed per process: run MatchesReferenceOnThePool in a child whose
    // pool has two threads (SJ_KP_TWO_THREADS makes it check that it has)
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::string name = "sj_kernel_plan_" + std::to_string(::getpid()) + ".log";
    std::string log = (std::filesystem::temp_directory_path() / name).string();
    std::string cmd = "SJ_NUM_THREADS=2 SJ_KP_TWO_THREADS=1 '" + self +
                      "' --gtest_filter=KernelPlan.MatchesReferenceOnThePool >'" + log + "' 2>&1";
    int rc = std::system(cmd.c_str());
    std::ifstream f(log);
    std::string out((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::filesystem::remove(log);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
}

// Note [Short inner loops]: a kept innermost loop of at most 64 trips has its trip count
// compiled in (a channel-blocked tensor's 16, a small feature dim); longer ones stay runtime
TEST(KernelPlan, ShortInnerLoopsHaveTheirTripCountCompiledIn) {
    Placeholder x({-1, 2, 5, 3, 16}, f32, "x");
    Placeholder s({1, 2, 1, 1, 16}, f32, "s");
    Tensor y = maximum(x * s + 1.0, 0.0);
    Placeholder xs({4, 2, 5, 3, 16}, f32, "xs");
    compiler::KernelLaunch l = launch_of({maximum(xs * s + 1.0, 0.0)});
    EXPECT_EQ(l.spec.inner, 16) << l.spec.str();
    Placeholder wide({8, 100}, f32, "wide");
    EXPECT_EQ(launch_of({exp(wide) * 2.0}).spec.inner, 0) << "100 trips: runtime";
    Placeholder odd({8, 3, 7}, f32, "odd");
    Placeholder col({3, 1}, f32, "col");
    EXPECT_EQ(launch_of({odd * col}).spec.inner, 7);
    // the compiled-in count is the innermost one only: other batch sizes reuse the kernel
    for (int64_t n : {1, 4, 7})
        compare({x, s}, {y},
                {random_array(f32, {n, 2, 5, 3, 16}, 40 + n), random_array(f32, {1, 2, 1, 1, 16}, 41)},
                "blocked affine + relu, N=" + std::to_string(n), 0, 0);
    compare({odd, col}, {odd * col},
            {random_array(f32, {8, 3, 7}, 42), random_array(f32, {3, 1}, 43)}, "odd inner", 0, 0);
}

// Note [Short loops compiled in] and Note [Zero strides compiled in]: a loop of at most 4 trips
// between longer ones has its count in the kernel's key, and so does each operand's set of loops
// along which it does not move; the values do not change, at any batch size. And a short
// contiguous reduction loop leaves the row order to a kept innermost row (Note [Row reductions]).
TEST(KernelPlan, ShortMiddleLoopsAndZeroStridesAreCompiledIn) {
    // [N, 3, 40, 16] against a [3, 1, 16] table: N and the 3 do not collapse (the table does
    // not move along N), so the 3 is a middle loop; the table's strides along N and the 40 are 0
    Placeholder t({3, 1, 16}, f32, "t");
    Placeholder xs({4, 3, 40, 16}, f32, "xs");
    compiler::KernelLaunch l = launch_of({xs * t + 1.0});
    const std::string spec = l.spec.str();
    EXPECT_NE(spec.find("trips=0,3,0,0"), std::string::npos) << spec;
    EXPECT_NE(spec.find("in1: f32 inner=1 zero=0,2\n"), std::string::npos) << spec;
    EXPECT_NE(spec.find("in0: f32 inner=1\n"), std::string::npos) << "x moves along every loop\n"
                                                                  << spec;
    Placeholder wide({4, 9, 40, 16}, f32, "wide"), tw({9, 1, 16}, f32, "tw");
    EXPECT_EQ(launch_of({wide * tw}).spec.str().find("trips="), std::string::npos)
        << "9 trips: runtime";
    // a sum over [4, 3, 10, 2] of 16 channels times a [2, 1] table: the table is contiguous along
    // the innermost reduction loop, but that loop has 2 trips, so the channels still go
    // innermost as the row (Note [Row reductions])
    Placeholder r({4, 3, 10, 2, 16}, f32, "r"), pos({2, 1}, f32, "pos");
    Tensor rs = sum(r * pos, {0, 1, 2, 3});
    EXPECT_EQ(launch_of({rs}).spec.row, 16) << launch_of({rs}).spec.str();
    compare({r, pos}, {rs},
            {random_array(f32, {4, 3, 10, 2, 16}, 47), random_array(f32, {2, 1}, 48)},
            "a row under a short table loop");
    // per-channel sums of a blocked batch of 3 or 4 images, 2-4 MB: the runner cuts the batch
    // loop (the first reduction loop, 3-4 trips) into chunks of their own trip counts, so its
    // count stays a runtime argument (Note [Reductions split along the batch])
    for (int64_t n : {3, 4}) {
        Placeholder b({n, 2, 64, 64, 16}, f32, "b");
        compiler::KernelLaunch bl = launch_of({sum(b, {0, 2, 3})});
        EXPECT_EQ(bl.spec.str().find("trips="), std::string::npos) << bl.spec.str();
        compare({b}, {sum(b, {0, 2, 3}), sum(b * b, {0, 2, 3})},
                {random_array(f32, {n, 2, 64, 64, 16}, 49 + n, 0.5, 1.5)},
                "statistics of " + std::to_string(n) + " images");
    }
    Placeholder x({-1, 3, 40, 16}, f32, "x");
    for (int64_t n : {1, 3, 6})
        compare({x, t}, {x * t + 1.0},
                {random_array(f32, {n, 3, 40, 16}, 44 + n), random_array(f32, {3, 1, 16}, 45)},
                "a table of 3 rows, N=" + std::to_string(n), 0, 0);
}

// Alias metadata grows with the loads, not with their square (Note [Alias scopes] in
// LlvmRenderer.cpp): all loads share one scope. With a scope per operand, each access listed
// every other operand, and the IR of a kernel of 350 loads was 80% metadata.
TEST(KernelPlan, AliasMetadataIsLinearInTheLoads) {
    auto ir_size = [](int n) {
        std::vector<Placeholder> xs;
        Tensor y;
        for (int i = 0; i < n; ++i) {
            xs.emplace_back(Shape{64}, f32, "x" + std::to_string(i));
            y = i == 0 ? Tensor(xs.back()) : y + xs.back();
        }
        compiler::KernelLaunch l = launch_of({y});
        EXPECT_EQ(l.spec.load_dtypes.size(), size_t(n));
        return cpu::kernel_llvm_ir(l.spec).size();
    };
    const size_t small = ir_size(60), large = ir_size(240);
    // 4x the loads: about 4x the IR (the code per load); 16x was the quadratic metadata
    EXPECT_LE(large, 6 * small) << small << " bytes of IR for 60 loads, " << large << " for 240";
}

// Note [Math libraries] in KernelExpr.cpp: a C library call whose operands do not change in the
// loop runs once, before it. Adam's bias correction 1 - beta^t, t a scalar input, used per
// element: declared as writing errno, powf was called per element inside the loop (an Adam update
// of 4M parameters 17x slower than with the call hoisted, bench optimizer_step). f32 pow is
// inline now (Note [Inline sin and cos] in LlvmMath.cpp); f64's is still the C library's pow.
TEST(KernelPlan, LibraryCallsOfLoopInvariantsLeaveTheLoop) {
    Placeholder x({4096}, f64, "x"), t({}, f64, "t");
    Tensor y = x * (1.0 - pow(constant(Array::scalar(0.9)), t)) /
               (1.0 - pow(constant(Array::scalar(0.999)), t));
    compiler::KernelLaunch l = launch_of({y});
    const std::string ir = cpu::kernel_llvm_ir(l.spec);
    // every call of pow sits in a block that is not a loop's (the renderer names its loops'
    // blocks loop<d>, block<d> and the like, LLVM's vectoriser vector.body; a preheader comes
    // before its loop), and the loop is vectorised (a call left in it would have kept it scalar)
    std::string block = "entry";
    size_t calls = 0;
    std::istringstream lines(ir);
    for (std::string line; std::getline(lines, line);) {
        if (!line.empty() && line[0] != ' ' && line.find(':') != std::string::npos &&
            line.rfind("define", 0) != 0 && line.rfind("declare", 0) != 0)
            block = line.substr(0, line.find(':'));
        if (line.find("call double @pow(") != std::string::npos) {
            ++calls;
            const bool before_loop = block.find("preheader") != std::string::npos ||
                                     block.ends_with(".ph"); // (a loop's entry block)
            for (const char* loop : {"loop", "block", "vector"})
                EXPECT_TRUE(before_loop || block.rfind(loop, 0) != 0)
                    << "pow called in block " << block << ":\n" << ir;
        }
    }
    // (the calls are still there, once each: the test sees what it means to)
    EXPECT_GE(calls, 1u) << ir;
    EXPECT_LE(calls, 2u) << ir;
    EXPECT_NE(ir.find(" x double>"), std::string::npos) << "the loop is not vectorised:\n" << ir;
    compare({x, t}, {y}, {random_array(f64, {4096}, 51), Array::scalar(7.0)}, "hoisted pow");
}
