// Convolution and pooling: padding resolution, output shapes, adjoint identities, gradients on
// dynamic shapes, and the cpu backend's oneDNN path (library calls, primitive cache, threads).
#include "backend/cpu/Conv.h"
#include "backend/cpu/CpuTarget.h"
#include "backend/cpu/ThreadPool.h"
#include "ops/OpHarness.h"

#include "TestUtil.h"

#include <gtest/gtest.h>
#include <omp.h>
#include <symjax/ir/Node.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace sj;
using sj::test::on;
using sj::test::random_array;

namespace {

/// Random values in [0.5, 1.5) (variances).
Array positive_array(Shape s, uint64_t seed) {
    return random_array(f32, std::move(s), seed, 0.5, 1.5);
}

const ConvAttrs& conv_attrs(const Tensor& t) { return t.node()->attr<ConvAttrs>(); }
const PoolAttrs& pool_attrs(const Tensor& t) { return t.node()->attr<PoolAttrs>(); }

double dot(const Array& a, const Array& b) {
    double s = 0;
    for (int64_t i = 0; i < a.size(); ++i) s += a.at(i) * b.at(i);
    return s;
}

} // namespace

// ---- padding and shapes ---------------------------------------------------------------------

TEST(Conv, SamePaddingFollowsTensorFlow) {
    // out = ceil(in / s); total = max((out - 1) s + (k - 1) d + 1 - in, 0), lo = total / 2
    Placeholder x({2, 3, 5, 6}, f32, "x");
    Tensor y = conv2d(x, zeros({4, 3, 3, 3}), {2, 2}, "SAME");
    EXPECT_EQ(y.shape(), (Shape{2, 4, 3, 3}));
    EXPECT_EQ(conv_attrs(y).pad_lo, (Axes{1, 0})); // 5: total 2 -> (1, 1); 6: total 1 -> (0, 1)
    EXPECT_EQ(conv_attrs(y).pad_hi, (Axes{1, 1}));
    // dilation 2, stride 1: total (k - 1) d = 4
    Tensor z = conv1d(Placeholder({1, 1, 7}, f32, "x"), zeros({1, 1, 3}), {}, "same", {2});
    EXPECT_EQ(z.shape(), (Shape{1, 1, 7}));
    EXPECT_EQ(conv_attrs(z).pad_lo, (Axes{2}));
    EXPECT_EQ(conv_attrs(z).pad_hi, (Axes{2}));
    // stride larger than the window: no padding needed
    Tensor p = max_pool1d(Placeholder({1, 1, 9}, f32, "x"), {2}, {3}, "SAME");
    EXPECT_EQ(p.shape(), (Shape{1, 1, 3}));
    EXPECT_EQ(pool_attrs(p).pad_lo, (Axes{0}));
    EXPECT_EQ(pool_attrs(p).pad_hi, (Axes{0}));
}

TEST(Conv, ExplicitPaddingForms) {
    Placeholder x({1, 2, 6, 6}, f32, "x");
    Tensor w = zeros({3, 2, 3, 3});
    EXPECT_EQ(conv_attrs(conv2d(x, w, {}, 1)).pad_lo, (Axes{1, 1}));
    EXPECT_EQ(conv_attrs(conv2d(x, w, {}, 0)).pad_hi, (Axes{0, 0}));
    Tensor a = conv2d(x, w, {}, {{1, 2}, {0, 3}});
    EXPECT_EQ(conv_attrs(a).pad_lo, (Axes{1, 0}));
    EXPECT_EQ(conv_attrs(a).pad_hi, (Axes{2, 3}));
    EXPECT_EQ(a.shape(), (Shape{1, 3, 7, 7}));
    Tensor b = conv2d(x, w, {}, {{2, 1}}); // one pair for every spatial dim
    EXPECT_EQ(conv_attrs(b).pad_lo, (Axes{2, 2}));
    EXPECT_EQ(conv_attrs(b).pad_hi, (Axes{1, 1}));
    EXPECT_EQ(Padding({{1, 2}, {0, 3}}).str(), "[(1, 2), (0, 3)]");
    EXPECT_EQ(Padding("valid").mode(), Padding::Mode::Valid);
}

TEST(Conv, OutputShapesWithStridesDilationGroupsAndUnknownDims) {
    Placeholder x({-1, 4, 9, -1}, f32, "x");
    Tensor y = conv2d(x, zeros({6, 2, 3, 2}), {2, 1}, {{1, 0}, {0, 0}}, {2, 1}, 2);
    // h: (9 + 1 - 5) / 2 + 1 = 3; w unknown until call time
    EXPECT_EQ(y.shape(), (Shape{-1, 6, 3, -1}));
    Function f = function({x}, {y});
    EXPECT_EQ(f(Array(f32, {5, 4, 9, 7}))[0].shape(), (Shape{5, 6, 3, 6}));
    // depthwise: groups == C, one filter per channel
    Tensor d = conv2d(Placeholder({2, 3, 8, 8}, f32, "x"), zeros({3, 1, 3, 3}), {2}, "SAME", {}, 3);
    EXPECT_EQ(d.shape(), (Shape{2, 3, 4, 4}));
    // pools default their strides to the window
    EXPECT_EQ(max_pool2d(Placeholder({2, 3, 8, 7}, f32, "x"), {2, 2}).shape(), (Shape{2, 3, 4, 3}));
    EXPECT_EQ(avg_pool(Placeholder({2, 3, 8, 8, 8}, f32, "x"), {2}).shape(),
              (Shape{2, 3, 4, 4, 4}));
}

TEST(Conv, ConvTransposeOutputSizes) {
    Placeholder x({2, 4, 5, 5}, f32, "x");
    Tensor w = zeros({4, 3, 3, 3}); // [C_in, C_out / groups, k...], PyTorch's layout
    // (in - 1) s - 2 p + (k - 1) d + 1 + output_padding
    EXPECT_EQ(conv_transpose(x, w, {2}, 1).shape(), (Shape{2, 3, 9, 9}));
    EXPECT_EQ(conv_transpose(x, w, {2}, 1, {}, 1, {1}).shape(), (Shape{2, 3, 10, 10}));
    EXPECT_EQ(conv_transpose(x, w, {2}, "VALID").shape(), (Shape{2, 3, 11, 11}));
    EXPECT_EQ(conv_transpose(x, w, {2}, "SAME").shape(), (Shape{2, 3, 10, 10})); // in * stride
    EXPECT_EQ(conv_transpose(x, zeros({4, 2, 3, 3}), {1}, 1, {}, 2).shape(), (Shape{2, 4, 5, 5}));
}

TEST(Conv, DocsExampleBuildsAndRuns) {
    // the example of docs/ops.md, "Convolution and pooling"
    Placeholder x({-1, 3, 32, 32}, f32, "images");
    Variable w1(nn::init::he_normal()({32, 3, 3, 3}), "w1");
    Variable dw(nn::init::he_normal()({32, 1, 3, 3}), "dw");
    Variable wt(nn::init::he_normal()({32, 8, 3, 3}), "wt");
    Tensor h = max_pool2d(maximum(conv2d(x, w1, {}, "SAME"), 0.0), {2, 2});
    Tensor d = conv2d(h, dw, {2}, 1, {}, 32);
    Tensor u = conv_transpose(d, wt, {2}, "SAME");
    EXPECT_EQ(h.shape(), (Shape{-1, 32, 16, 16}));
    EXPECT_EQ(d.shape(), (Shape{-1, 32, 8, 8}));
    EXPECT_EQ(u.shape(), (Shape{-1, 8, 16, 16}));
    std::vector<Tensor> g = gradients(mean(u * u), {w1, dw, wt});
    std::vector<Array> r = function({x}, g)(random_array(f32, {2, 3, 32, 32}, 99));
    EXPECT_EQ(r[2].shape(), (Shape{32, 8, 3, 3}));
}

// ---- the defining identities, on the reference backend -----------------------------------------

TEST(Conv, BackwardOpsAreAdjointsOfTheForwardOps) {
    // <conv(x, w), dy> = <x, conv_backward_data(dy, w)> = <w, conv_backward_filter(x, dy)>
    Array xv = random_array(f64, {2, 4, 7, 6}, 1), wv = random_array(f64, {6, 2, 3, 2}, 2);
    Tensor y = conv2d(constant(xv), constant(wv), {2, 1}, {{1, 0}, {0, 1}}, {1, 2}, 2);
    Array dyv = random_array(f64, y.shape(), 3);
    double lhs = dot(y.eval(), dyv);
    Tensor dx = conv_backward_data(constant(dyv), constant(wv), {7, 6}, {2, 1}, {{1, 0}, {0, 1}},
                                   {1, 2}, 2);
    Tensor dw = conv_backward_filter(constant(xv), constant(dyv), {3, 2}, {2, 1}, {{1, 0}, {0, 1}},
                                     {1, 2}, 2);
    // sums of ~100 products of size ~4 in different orders: 1e-12 relative
    EXPECT_NEAR(dot(xv, dx.eval()), lhs, 1e-12 * std::fabs(lhs) + 1e-12);
    EXPECT_NEAR(dot(wv, dw.eval()), lhs, 1e-12 * std::fabs(lhs) + 1e-12);
    // conv_transpose(., w) is the adjoint of conv(., w) with the same geometry
    Array zv = random_array(f64, {2, 6, 4, 6}, 4), tv = random_array(f64, {2, 4, 8, 6}, 5);
    Array wt = random_array(f64, {6, 2, 3, 3}, 6);
    Tensor ct = conv_transpose(constant(zv), constant(wt), {2, 1}, 1, {}, 2, {1, 0});
    ASSERT_EQ(ct.shape(), (Shape{2, 4, 8, 6}));
    Tensor c = conv2d(constant(tv), constant(wt), {2, 1}, 1, {}, 2);
    double a = dot(ct.eval(), tv), b = dot(zv, c.eval());
    EXPECT_NEAR(a, b, 1e-12 * std::fabs(b) + 1e-12);
    // avg_pool_backward is the adjoint of avg_pool
    Array pv = random_array(f64, {2, 3, 5, 4}, 7);
    for (bool include : {true, false}) {
        Tensor p = avg_pool2d(constant(pv), {3, 2}, {2, 1}, 1, include);
        Array gv = random_array(f64, p.shape(), 8);
        Tensor pb = avg_pool_backward(constant(gv), {5, 4}, {3, 2}, {2, 1}, 1, include);
        EXPECT_NEAR(dot(p.eval(), gv), dot(pv, pb.eval()), 1e-12);
    }
}

TEST(Conv, MaxPoolRoutesTheGradientToTheFirstMaximum) {
    // windows of 2 with stride 1 overlap: the middle 3 is the maximum of both windows
    Array xv(std::vector<double>{1, 3, 2, 3}, {1, 1, 4});
    Placeholder x({1, 1, 4}, f64, "x");
    Tensor y = max_pool1d(x, {2}, {1});
    Tensor g =
        gradients(sum(y * constant(Array(std::vector<double>{1, 10, 100}, {1, 1, 3}))), {x})[0];
    for (const char* b : {"reference", "cpu"}) {
        std::vector<Array> r = function({x}, {y, g}, {}, on(b))(xv);
        EXPECT_EQ(r[0].at(0), 3);
        EXPECT_EQ(r[0].at(2), 3);
        // windows [1, 3], [3, 2], [2, 3]: the first two pick index 1, the last index 3
        EXPECT_EQ(r[1].at(1), 11) << b;
        EXPECT_EQ(r[1].at(3), 100) << b;
        EXPECT_EQ(r[1].at(0), 0) << b;
    }
}

// ---- gradients on unknown spatial dims ----------------------------------------------------------

TEST(Conv, GradientsBuildOnUnknownSpatialDims) {
    // the backward ops take the forward input as a shape-only `like` input when the graph does
    // not know its spatial dims (Note [Conv and pool backward ops])
    Placeholder x({-1, 2, -1, -1}, f64, "x");
    Placeholder w({3, 2, -1, -1}, f64, "w");
    Tensor y = avg_pool2d(tanh(conv2d(x, w, {2, 1}, {{1, 1}, {0, 1}})), {2, 2}, {1, 1}, 1, false);
    Tensor m = max_pool2d(y, {2, 2}, {1, 1});
    std::vector<Tensor> g = gradients(sum(m * m), {x, w});
    Array xv = random_array(f64, {2, 2, 7, 6}, 11), wv = random_array(f64, {3, 2, 3, 2}, 12);
    // the same graph on static placeholders
    Placeholder xs({2, 2, 7, 6}, f64, "xs");
    Placeholder ws({3, 2, 3, 2}, f64, "ws");
    Tensor ys =
        avg_pool2d(tanh(conv2d(xs, ws, {2, 1}, {{1, 1}, {0, 1}})), {2, 2}, {1, 1}, 1, false);
    Tensor ms = max_pool2d(ys, {2, 2}, {1, 1});
    std::vector<Tensor> gs = gradients(sum(ms * ms), {xs, ws});
    for (const char* b : {"reference", "cpu"}) {
        std::vector<Array> dyn = function({x, w}, g, {}, on(b))(xv, wv);
        std::vector<Array> st = function({xs, ws}, gs, {}, on(b))(xv, wv);
        for (size_t k = 0; k < 2; ++k) {
            ASSERT_EQ(dyn[k].shape(), st[k].shape());
            for (int64_t i = 0; i < st[k].size(); ++i) EXPECT_EQ(dyn[k].at(i), st[k].at(i)) << b;
        }
    }
}

TEST(Conv, SmallCnnGradientMatchesFiniteDifferences) {
    // conv -> tanh -> max pool -> conv (stride 2, SAME) -> avg pool -> sum of squares, in f64
    Placeholder x({2, 3, 8, 8}, f64, "x");
    Placeholder w1({4, 3, 3, 3}, f64, "w1");
    Placeholder w2({6, 2, 3, 3}, f64, "w2");
    auto net = [&](const Tensor& a, const Tensor& b) {
        Tensor h = max_pool2d(tanh(conv2d(x, a, {}, 1)), {2, 2});
        Tensor z = conv2d(h, b, {2}, "SAME", {}, 2);
        Tensor p = avg_pool2d(z, {2, 2});
        return sum(p * p);
    };
    Tensor cost = net(w1, w2);
    std::vector<Tensor> g = gradients(cost, {w1, w2});
    Array xv = random_array(f64, {2, 3, 8, 8}, 21);
    std::vector<Array> wv{random_array(f64, {4, 3, 3, 3}, 22, -0.5, 0.5),
                          random_array(f64, {6, 2, 3, 3}, 23, -0.5, 0.5)};
    Function fc = function({x, w1, w2}, {cost}, {}, on("reference"));
    std::vector<Array> an = function({x, w1, w2}, g, {}, on("reference"))(xv, wv[0], wv[1]);
    for (size_t k = 0; k < 2; ++k)
        for (int64_t i = 0; i < wv[k].size(); i += 7) {
            std::vector<Array> p{wv[0].clone(), wv[1].clone()}, m{wv[0].clone(), wv[1].clone()};
            const double h = 1e-6;
            p[k].data<double>()[i] += h;
            m[k].data<double>()[i] -= h;
            double fd = (fc(xv, p[0], p[1])[0].at(0) - fc(xv, m[0], m[1])[0].at(0)) / (2 * h);
            // central differences in f64: truncation ~h^2, rounding ~1e-16 |cost| / h
            EXPECT_NEAR(an[k].at(i), fd, 1e-6 * (1 + std::fabs(fd)))
                << "w" << k + 1 << "[" << i << "]";
        }
    // the cpu backend (oneDNN in f32) agrees with the reference in f32
    Placeholder xf({2, 3, 8, 8}, f32, "x");
    Placeholder w1f({4, 3, 3, 3}, f32, "w1");
    Placeholder w2f({6, 2, 3, 3}, f32, "w2");
    Tensor hf = max_pool2d(tanh(conv2d(xf, w1f, {}, 1)), {2, 2});
    Tensor pf = avg_pool2d(conv2d(hf, w2f, {2}, "SAME", {}, 2), {2, 2});
    std::vector<Tensor> gf = gradients(sum(pf * pf), {xf, w1f, w2f});
    std::vector<Array> args{xv.astype(f32), wv[0].astype(f32), wv[1].astype(f32)};
    std::vector<Array> rr =
        function({xf, w1f, w2f}, gf, {}, on("reference"))(args[0], args[1], args[2]);
    std::vector<Array> rc = function({xf, w1f, w2f}, gf, {}, on("cpu"))(args[0], args[1], args[2]);
    for (size_t k = 0; k < rr.size(); ++k)
        for (int64_t i = 0; i < rr[k].size(); ++i)
            // f32 sums of a few hundred terms through two layers: 1e-4 absolute and relative
            EXPECT_NEAR(rc[k].at(i), rr[k].at(i), 1e-4 * (1 + std::fabs(rr[k].at(i))))
                << k << " " << i;
}

// ---- the cpu backend
// ------------------------------------------------------------------------------

TEST(ConvCpu, ConvAndPoolAreLibraryCallsNotKernels) {
    Placeholder x({-1, 3, 16, 16}, f32, "x");
    Variable w(random_array(f32, {8, 3, 3, 3}, 31), "w");
    // (a pool of a conv's result: a pool of an elementwise op on blocked channels is a kernel,
    // Note [Max pools as kernels], and with SJ_BLOCKED_LAYOUT=8 these 8 channels are blocked)
    Tensor y = maximum(max_pool2d(conv2d(x, w, {}, 1), {2, 2}), 0.0);
    Tensor loss = sum(y * y);
    std::vector<Tensor> g = gradients(loss, {w});
    Function f = function({x}, {loss, g[0]});
    f(random_array(f32, {4, 3, 16, 16}, 32));
    // forward: conv, max_pool; backward: max_pool_backward, conv_backward_filter
    EXPECT_EQ(f.stats().library_calls, 4u);
    std::string plan = f.dump();
    EXPECT_NE(plan.find("(window): conv("), std::string::npos) << plan;
    EXPECT_NE(plan.find("(window): max_pool_backward("), std::string::npos) << plan;
    // f64 runs the reference kernels: no library calls
    Placeholder xd({2, 3, 8, 8}, f64, "x");
    Function fd = function({xd}, {conv2d(xd, zeros({2, 3, 3, 3}, f64))});
    fd(Array(f64, {2, 3, 8, 8}));
    EXPECT_EQ(fd.stats().library_calls, 0u);
}

TEST(ConvCpu, BlockedLayoutsMatchTheReference) {
    // channel counts that are multiples of 16 run oneDNN's direct kernels on nChw16c layouts with
    // reorders (Note [Conv layouts]); the op table's small channel counts take the plain path
    struct Config {
        Shape x, w;
        Axes strides;
        Padding padding;
        Axes dilation;
        int64_t groups;
    };
    std::vector<Config> configs = {
        {{2, 32, 9, 8}, {16, 32, 3, 3}, {}, 1, {}, 1},
        {{2, 32, 11, 10}, {32, 16, 3, 2}, {2}, {{2, 1}, {1, 0}}, {2, 1}, 2},
        {{2, 32, 9, 9}, {32, 1, 3, 3}, {2}, "SAME", {}, 32}, // depthwise
        {{2, 16, 20}, {32, 16, 5}, {2}, 2, {}, 1},
        {{1, 16, 5, 6, 5}, {16, 16, 3, 3, 3}, {}, 1, {}, 1},
        {{2, 3, 12, 12}, {16, 3, 5, 5}, {2}, 2, {}, 1}, // first layer: plain source
    };
    for (size_t k = 0; k < configs.size(); ++k) {
        const Config& c = configs[k];
        Placeholder x(c.x, f32, "x");
        Placeholder w(c.w, f32, "w");
        Tensor y = conv(x, w, c.strides, c.padding, c.dilation, c.groups);
        Array r = random_array(f32, y.shape(), 50 + k);
        std::vector<Tensor> outs{y};
        for (const Tensor& g : gradients(sum(y * constant(r)), {x, w})) outs.push_back(g);
        Array xv = random_array(f32, c.x, 60 + k), wv = random_array(f32, c.w, 70 + k);
        std::vector<Array> ref = function({x, w}, outs, {}, on("reference"))(xv, wv);
        std::vector<Array> got = function({x, w}, outs, {}, on("cpu"))(xv, wv);
        for (size_t o = 0; o < outs.size(); ++o) {
            double scale = 0;
            for (int64_t i = 0; i < ref[o].size(); ++i)
                scale = std::max(scale, std::fabs(ref[o].at(i)));
            // f32 sums of up to ~1000 terms in oneDNN's order against the reference's double sum:
            // errors ~sqrt(n) 2^-24 times the partial sums, below 2e-6 of the largest output
            for (int64_t i = 0; i < ref[o].size(); ++i)
                ASSERT_NEAR(got[o].at(i), ref[o].at(i), 2e-5 * scale)
                    << "config " << k << " output " << o << " at " << i;
        }
    }
}

TEST(ConvCpu, WeightGradientsOverBatchChunksMatchTheReference) {
    // conv_backward_filter sums filter_chunk_count(N, positions) chunks of the batch (Note
    // [Thread-count-independent weight gradients]): one chunk (N = 1), one image per chunk (3
    // images of 48x48), equal chunks, chunks of two sizes (37 = 3 x 9 + 10 on 4 chunks; 37 =
    // 11 x 2 + 5 x 3 on 16), on blocked (16 channels), plain (3) and grouped layouts; the
    // partials added by every task after a barrier in the chunks' region, small ones and the
    // 64 x 64 x 3 x 3 config's alike (Note [Work after a barrier]); the sum
    // stored straight into our plain layout from the blocked one (Note [Weight gradients stored
    // in the caller's layout]); channel counts no blocked kernel takes (24 outputs, 20 inputs)
    // keep the plain layouts
    struct Config {
        Shape x, w;
        int64_t groups;
    };
    std::vector<Config> configs = {
        {{1, 16, 8, 8}, {16, 16, 3, 3}, 1},   {{5, 16, 8, 8}, {32, 16, 3, 3}, 1},
        {{32, 16, 6, 6}, {16, 16, 3, 3}, 1},  {{37, 16, 6, 7}, {32, 16, 3, 3}, 1},
        {{37, 3, 9, 9}, {16, 3, 3, 3}, 1},    {{19, 32, 6, 6}, {32, 16, 3, 3}, 2},
        {{3, 16, 48, 48}, {16, 16, 3, 3}, 1}, {{37, 3, 40, 40}, {16, 3, 3, 3}, 1},
        {{8, 64, 8, 8}, {64, 64, 3, 3}, 1},   {{6, 16, 8, 8}, {24, 16, 3, 3}, 1},
        {{6, 20, 8, 8}, {16, 20, 3, 3}, 1},
    };
    for (size_t k = 0; k < configs.size(); ++k) {
        const Config& c = configs[k];
        Placeholder x(c.x, f32, "x");
        Placeholder w(c.w, f32, "w");
        Tensor y = conv(x, w, {}, "SAME", {}, c.groups);
        Placeholder r(y.shape(), f32, "r");
        Tensor dw = gradients(sum(y * r), {w})[0];
        Array xv = random_array(f32, c.x, 120 + k), wv = random_array(f32, c.w, 130 + k);
        Array rv = random_array(f32, y.shape(), 140 + k);
        Array ref = function({x, w, r}, {dw}, {}, on("reference"))(xv, wv, rv)[0];
        Function f = function({x, w, r}, {dw}, {}, on("cpu"));
        Array got = f(xv, wv, rv)[0];
        EXPECT_GE(f.stats().library_calls, 1u) << "config " << k;
        double scale = 0;
        for (int64_t i = 0; i < ref.size(); ++i)
            scale = std::max(scale, std::fabs(ref.at(i)));
        // each entry sums N * 36..81 products in f32 within a chunk, then the chunks in double:
        // as BlockedLayoutsMatchTheReference, well below 2e-5 of the largest entry
        for (int64_t i = 0; i < ref.size(); ++i)
            ASSERT_NEAR(got.at(i), ref.at(i), 2e-5 * scale) << "config " << k << " at " << i;
        // the same call again: the same bits
        Array again = f(xv, wv, rv)[0];
        EXPECT_EQ(std::memcmp(again.raw(), got.raw(), size_t(got.nbytes())), 0) << "config " << k;
    }
}

TEST(ConvCpu, WeightGradientChunksFollowTheWork) {
    // Note [Thread-count-independent weight gradients]: at least 2048 output positions (images
    // x positions per image) a chunk, between min(N, 4) and min(N, 16) chunks
    EXPECT_EQ(cpu::filter_chunk_count(1, 64), 1);     // one image: one chunk
    EXPECT_EQ(cpu::filter_chunk_count(2, 10), 2);     // no more chunks than images
    EXPECT_EQ(cpu::filter_chunk_count(5, 64), 4);     // little work: still four
    EXPECT_EQ(cpu::filter_chunk_count(32, 16), 4);    // 4x4 maps
    EXPECT_EQ(cpu::filter_chunk_count(32, 64), 4);    // 8x8: one chunk's worth, the floor
    EXPECT_EQ(cpu::filter_chunk_count(32, 256), 4);   // 16x16: 8192 positions
    EXPECT_EQ(cpu::filter_chunk_count(64, 200), 6);   // 12800 / 2048, rounded down
    EXPECT_EQ(cpu::filter_chunk_count(32, 1024), 16); // 32x32
    EXPECT_EQ(cpu::filter_chunk_count(128, 256), 16); // capped at 16
    EXPECT_EQ(cpu::filter_chunk_count(3, 2304), 3);   // 48x48: an image a chunk, capped at N
    EXPECT_EQ(cpu::filter_chunk_count(37, 1600), 16); // 40x40
}

TEST(ConvCpu, WeightGradientsOfABatchOfOneCutTheirOutputChannels) {
    // Note [Weight gradients of a batch of one]: with a batch of one, conv_backward_filter runs
    // as chunks of whole groups, or of 16-channel blocks of its outputs, each chunk's rows of the
    // gradient stored at their places in our layout; below two chunks' worth of multiply-adds
    // (Conv.cpp's kChunkMacs) it stays whole. Configs: blocked chunks of equal and of two sizes,
    // a plain source (3 channels), a stride, grouped chunks whose units hold 16 groups (3 -> 16
    // channels a group: vmap's per-example first layer) or one (16 -> 32), depthwise chunks of 16
    // groups, groups no blocked layout cuts (5 -> 7 channels a group: plain, in chunks of 1 and 2
    // groups), and calls too small to cut
    struct Config {
        Shape x, w;
        int64_t groups, stride;
        bool cut;
    };
    std::vector<Config> configs = {
        {{1, 16, 32, 32}, {64, 16, 3, 3}, 1, 1, true},
        {{1, 16, 16, 16}, {80, 16, 3, 3}, 1, 1, true}, // 5 blocks on 2 chunks
        {{1, 3, 64, 64}, {32, 3, 3, 3}, 1, 1, true},
        {{1, 32, 64, 64}, {32, 32, 3, 3}, 1, 2, true},
        {{1, 96, 16, 16}, {512, 3, 3, 3}, 32, 1, true},
        {{1, 128, 16, 16}, {256, 16, 3, 3}, 8, 1, true},
        {{1, 64, 128, 128}, {64, 1, 3, 3}, 64, 1, true},
        {{1, 35, 48, 48}, {49, 5, 3, 3}, 7, 1, true},   // 7 groups on 4 chunks
        {{1, 3, 32, 32}, {32, 3, 3, 3}, 1, 1, false},   // 0.9M multiply-adds
        {{1, 16, 16, 16}, {24, 16, 3, 3}, 1, 1, false}, // 24 channels: no whole blocks
        {{2, 16, 32, 32}, {64, 16, 3, 3}, 1, 1, false}, // a batch of two: chunks of images
    };
    for (size_t k = 0; k < configs.size(); ++k) {
        const Config& c = configs[k];
        SCOPED_TRACE("config " + std::to_string(k));
        Placeholder x(c.x, f32, "x");
        Tensor y = conv(x, Placeholder(c.w, f32, "w"), {c.stride, c.stride}, "SAME", {}, c.groups);
        Placeholder dy(y.shape(), f32, "dy");
        Tensor dw = conv_backward_filter(x, dy, {c.w[2], c.w[3]}, {c.stride, c.stride}, "SAME", {},
                                         c.groups);
        auto p = cpu::window_primitive(*dw.node(), {{f32, c.x}, {f32, y.shape()}}, {f32, c.w});
        ASSERT_TRUE(p);
        const std::string impl = cpu::window_impl(*p);
        EXPECT_EQ(impl.find("chunks of its output channels") != std::string::npos, c.cut) << impl;
        Array xv = random_array(f32, c.x, 150 + k), dyv = random_array(f32, y.shape(), 160 + k);
        Array ref = function({x, dy}, {dw}, {}, on("reference"))(xv, dyv)[0];
        Function f = function({x, dy}, {dw}, {}, on("cpu"));
        Array got = f(xv, dyv)[0];
        double scale = 0;
        for (int64_t i = 0; i < ref.size(); ++i)
            scale = std::max(scale, std::fabs(ref.at(i)));
        // each entry sums up to 64 x 64 x 16 products in f32 in oneDNN's order: as
        // WeightGradientsOverBatchChunksMatchTheReference, well below 2e-5 of the largest entry
        for (int64_t i = 0; i < ref.size(); ++i)
            ASSERT_NEAR(got.at(i), ref.at(i), 2e-5 * scale) << "at " << i;
    }
}

// Note [Winograd convolutions]: on AVX-512 a forward 3x3 conv whose weights are a variable the
// function does not update runs as Winograd, its weight transform kept while the weights' bytes
// do not change (counted with the folded weights); a step that updates the weights keeps the
// direct kernel. Values against the reference interpreter: Winograd rounds differently, within
// 1e-5 of the largest output (measured: 2e-6 at |y| ~ 10).
TEST(ConvCpu, WinogradForWeightsTheFunctionDoesNotUpdate) {
    const bool wino = cpu::isa_channel_block() == 16; // oneDNN has Winograd kernels on AVX-512
    Placeholder x({-1, 32, 10, 10}, f32, "x");
    Variable w(random_array(f32, {32, 32, 3, 3}, 61, -0.2, 0.2), "wino_w");
    Tensor y = conv2d(x, w, {}, "SAME");
    Function infer = function({x}, {y});
    Function ref = function({x}, {y}, {}, on("reference"));
    Array xv = random_array(f32, {4, 32, 10, 10}, 62);
    auto check = [&](const char* what, size_t hits, size_t misses) {
        SCOPED_TRACE(what);
        const auto before = cpu::window_cache_stats();
        Array got = infer(xv)[0];
        const auto after = cpu::window_cache_stats();
        EXPECT_EQ(after.folded_hits - before.folded_hits, wino ? hits : 0);
        EXPECT_EQ(after.folded_misses - before.folded_misses, wino ? misses : 0);
        Array want = ref(xv)[0];
        double scale = 0, err = 0;
        for (int64_t k = 0; k < want.size(); ++k) {
            scale = std::max(scale, std::fabs(want.at(k)));
            err = std::max(err, std::fabs(got.at(k) - want.at(k)));
        }
        EXPECT_LE(err, 1e-5 * scale);
        return got;
    };
    Array first = check("first call", 0, 1);
    Array again = check("same weights", 1, 0);
    EXPECT_EQ(std::memcmp(first.raw(), again.raw(), size_t(first.nbytes())), 0);
    w.assign(random_array(f32, {32, 32, 3, 3}, 63, -0.2, 0.2));
    check("new weights", 0, 1);
    check("and again", 1, 0);
    // a training step updates w: its conv is direct, nothing kept
    Tensor loss = sum(y * y);
    Function step = function({x}, {loss}, {{w, w - gradients(loss, {w})[0] * 1e-4}});
    const auto before = cpu::window_cache_stats();
    step(xv);
    step(xv);
    const auto after = cpu::window_cache_stats();
    EXPECT_EQ(after.folded_hits + after.folded_misses, before.folded_hits + before.folded_misses);
}

// Note [Folded weights cache]: the weights an inference conv keeps between calls (folded with a
// batch norm's scale, or in Winograd's layout) are checked by their variable's stamp, so every
// write of the variable makes them again, even one that writes the same bytes: an assignment,
// another function's update, a reset, a checkpoint load. Values against the reference
// interpreter after each write; the same bits as the first call when the first values return.
TEST(ConvCpu, KeptWeightsFollowEveryWriteOfTheirVariable) {
    const bool wino = cpu::isa_channel_block() == 16;
    // the pid: ctest runs this test in several processes at once (channel_blocks_8 and the plain
    // suite), which raced on one file name
    const std::string file =
        ::testing::TempDir() + "/kept_weights_" + std::to_string(::getpid()) + ".safetensors";
    for (bool fold : {true, false}) {
        SCOPED_TRACE(fold ? "folded with a batch norm" : "Winograd's layout");
        const int64_t ch = fold ? 8 : 32; // (32 channels, 10x10: Winograd on AVX-512)
        Placeholder x({-1, ch == 8 ? 4 : 32, 10, 10}, f32, "x");
        Variable w(random_array(f32, {ch, ch == 8 ? 4 : 32, 3, 3}, 70, -0.2, 0.2), "kept_w");
        Variable var(positive_array({ch}, 71), "kept_var");
        Tensor y = conv2d(x, w, {}, "SAME");
        if (fold) {
            auto c1 = [&](const Tensor& v) { return reshape(v, {ch, 1, 1}); };
            y = nn::relu((y - 0.1) * rsqrt(c1(var) + 1e-5));
        }
        Function infer = function({x}, {y});
        Function ref = function({x}, {y}, {}, on("reference"));
        Array xv = random_array(f32, {2, ch == 8 ? 4 : 32, 10, 10}, 72);
        const bool kept = fold || wino; // (no Winograd kernels below AVX-512: nothing kept)
        auto check = [&](const std::string& what, size_t misses) {
            SCOPED_TRACE(what);
            const auto before = cpu::window_cache_stats();
            Array got = infer(xv)[0];
            const auto after = cpu::window_cache_stats();
            EXPECT_EQ(after.folded_misses - before.folded_misses, kept ? misses : 0);
            EXPECT_EQ(after.folded_hits - before.folded_hits, kept ? 1 - misses : 0);
            Array want = ref(xv)[0];
            double scale = 0, err = 0;
            for (int64_t k = 0; k < want.size(); ++k) {
                scale = std::max(scale, std::fabs(want.at(k)));
                err = std::max(err, std::fabs(got.at(k) - want.at(k)));
            }
            EXPECT_LE(err, 1e-5 * scale); // (Winograd's rounding: see the test above)
            return got;
        };
        const Array w0 = w.value();
        Array first = check("first call", 1);
        check("again", 0);
        w.assign(w0); // the same bytes, a new stamp: made again, the same bits
        Array same = check("the same values assigned", 1);
        EXPECT_EQ(std::memcmp(first.raw(), same.raw(), size_t(first.nbytes())), 0);
        w.assign(random_array(f32, w0.shape(), 73, -0.2, 0.2));
        check("new values assigned", 1);
        check("and again", 0);
        function({}, {}, {{w, w * 0.5}})(); // another function's update
        check("after another function's update", 1);
        save_variables(file, w.full_name());
        w.reset();
        check("after reset", 1);
        load_variables(file, w.full_name());
        check("after load_variables", 1);
        if (fold) { // the scale, computed from another variable, is compared
            var.assign(positive_array({ch}, 74));
            check("a new variance", 1);
            check("and again", 0);
        }
    }
    std::remove(file.c_str());
}

TEST(ConvCpu, WinogradInTrainingOnBlockedWeights) {
    // weights the function updates: Winograd on 16x16-blocked weights, transformed inside each
    // call, for outputs of at least 16x16 (Note [Winograd convolutions]); direct at 8x8
    const bool wino = cpu::isa_channel_block() == 16; // oneDNN has Winograd kernels on AVX-512
    for (int64_t side : {16, 8}) {
        SCOPED_TRACE("side " + std::to_string(side));
        Shape xs{4, 32, side, side};
        Placeholder x(xs, f32, "x");
        Variable w(random_array(f32, {32, 32, 3, 3}, 64, -0.2, 0.2), "wino_train_w");
        Tensor y = conv2d(x, w, {}, "SAME");
        std::vector<TensorType> in{{f32, xs}, {f32, {32, 32, 3, 3}}};
        auto p = cpu::window_primitive(*y.node(), in, {f32, xs}, {}, false, false);
        ASSERT_TRUE(p);
        const bool is_wino = cpu::winograd_impl(cpu::window_impl(*p));
        EXPECT_EQ(is_wino, wino && side >= 16) << cpu::window_impl(*p);
        // a training step's values: the loss and both gradients (backward data runs as Winograd
        // too) against the reference; Winograd rounds to ~2e-6 of the largest value (Note
        // [Winograd convolutions]), so 1e-5 of each output's largest magnitude
        Tensor loss = mean(y * y);
        auto g = gradients(loss, {x, w});
        Function step = function({x}, {loss, g[0], g[1]}, {{w, w - g[1] * 1e-3}});
        Function ref = function({x}, {loss, g[0], g[1]}, {}, on("reference"));
        Array xv = random_array(f32, xs, 65);
        auto want = ref(xv); // before the step changes w
        auto got = step(xv);
        for (size_t i = 0; i < got.size(); ++i) {
            double scale = 0, err = 0;
            for (int64_t k = 0; k < want[i].size(); ++k) {
                scale = std::max(scale, std::fabs(want[i].at(k)));
                err = std::max(err, std::fabs(got[i].at(k) - want[i].at(k)));
            }
            EXPECT_LE(err, 1e-5 * scale) << "output " << i;
        }
    }
}

TEST(ConvCpu, WinogradNeedsThirtyTwoChannelsASide) {
    // with 16 channels on either side the direct kernel is faster (Note [Winograd convolutions],
    // "Channels"): the rule asks for at least 32 a side, in inference and in training
    const bool wino = cpu::isa_channel_block() == 16; // oneDNN has Winograd kernels on AVX-512
    for (auto [ci, co] :
         {std::pair<int64_t, int64_t>{16, 32}, {32, 16}, {16, 16}, {32, 32}, {64, 32}, {32, 48}}) {
        SCOPED_TRACE(std::to_string(ci) + " -> " + std::to_string(co));
        Shape xs{4, ci, 16, 16}, ws{co, ci, 3, 3}, ys{4, co, 16, 16};
        Placeholder x(xs, f32, "x");
        Variable w(random_array(f32, ws, 66, -0.2, 0.2), "wino_channels_w");
        Tensor y = conv2d(x, w, {}, "SAME");
        std::vector<TensorType> in{{f32, xs}, {f32, ws}};
        for (bool fixed : {false, true}) {
            auto p = cpu::window_primitive(*y.node(), in, {f32, ys}, {}, false, fixed);
            ASSERT_TRUE(p);
            EXPECT_EQ(cpu::winograd_impl(cpu::window_impl(*p)), wino && ci >= 32 && co >= 32)
                << (fixed ? "kept weights: " : "weights that change: ") << cpu::window_impl(*p);
        }
    }
}

TEST(ConvCpu, WidePoolsMatchTheReference) {
    // 32 channels take oneDNN's jit pooling (the table's few channels take its simple one)
    Placeholder x({2, 32, 9, 8}, f32, "x");
    Array xv = random_array(f32, {2, 32, 9, 8}, 81); // continuous values: no ties
    std::vector<Tensor> ys{max_pool2d(x, {3, 3}, {2, 2}, 1), avg_pool2d(x, {3, 2}, {2, 1}, 1, true),
                           avg_pool2d(x, {3, 3}, {2, 2}, "SAME", false)};
    for (size_t k = 0; k < ys.size(); ++k) {
        // the cotangent is an input: a constant one would fold avg_pool_backward at compile time
        Placeholder r(ys[k].shape(), f32, "r");
        Array rv = random_array(f32, ys[k].shape(), 90 + k);
        std::vector<Tensor> outs{ys[k], gradients(sum(ys[k] * r), {x})[0]};
        std::vector<Array> ref = function({x, r}, outs, {}, on("reference"))(xv, rv);
        std::vector<Array> got = function({x, r}, outs, {}, on("cpu"))(xv, rv);
        for (size_t o = 0; o < 2; ++o)
            for (int64_t i = 0; i < ref[o].size(); ++i)
                // maxima are exact; averages and summed gradients round a few times in f32
                ASSERT_NEAR(got[o].at(i), ref[o].at(i), 1e-6 * (1 + std::fabs(ref[o].at(i))))
                    << "pool " << k << " output " << o << " at " << i;
    }
}

// A max pool and its backward in one function share the forward's workspace (Note [Max-pool
// workspace] in Conv.cpp): plain layouts (3 channels) and blocked ones (16 channels after a
// conv), with ties (small integers: the gradient goes to the first maximum of a window, as the
// reference routes it), and a second call on other values (a workspace left from the first call
// would route the gradient to the first call's maxima).
TEST(ConvCpu, MaxPoolBackwardReadsTheForwardsWorkspace) {
    for (int64_t c : {3, 16}) {
        Placeholder x({2, c, 8, 8}, f32, "x"), r({2, c, 4, 4}, f32, "r");
        Tensor h = c == 16 ? conv2d(x, ones({16, 16, 1, 1}) * 0.25, {}, "SAME") : x;
        Tensor y = max_pool2d(h, {2, 2});
        // the cotangent 2 y r needs the pool's result: the forward runs first
        std::vector<Tensor> outs{y, gradients(sum(y * y * r), {x})[0]};
        Function cpu = function({x, r}, outs, {}, on("cpu"));
        Function ref = function({x, r}, outs, {}, on("reference"));
        for (uint64_t seed : {1, 2}) {
            Array xv = random_array(f32, {2, c, 8, 8}, 100 + seed, -3, 3);
            for (int64_t i = 0; i < xv.size(); ++i) xv.data<float>()[i] = std::round(xv.data<float>()[i]);
            Array rv = random_array(f32, {2, c, 4, 4}, 200 + seed, -3, 3);
            for (int64_t i = 0; i < rv.size(); ++i) rv.data<float>()[i] = std::round(rv.data<float>()[i]);
            std::vector<Array> want = ref(xv, rv), got = cpu(xv, rv);
            for (size_t o = 0; o < 2; ++o)
                for (int64_t i = 0; i < want[o].size(); ++i)
                    // quarter-integers: the conv and the routed gradients are exact
                    ASSERT_EQ(got[o].at(i), want[o].at(i))
                        << c << " channels, call " << seed << ", output " << o << " at " << i;
        }
    }
}

// Note [Small pools on one thread]: a pool (and its backward) that moves at most 1 MB runs on
// the calling thread and starts no parallel region (FunctionStats::parallel_regions); a large one
// still runs on the team. Max pooling and its gradient route values exactly: against the
// reference interpreter, equal.
TEST(ConvCpu, SmallPoolsRunOnOneThread) {
    const bool team = cpu::ThreadPool::get().threads() > 1;
    for (int64_t n : {2, 64}) { // 16 KB in, 4 KB out; 8 MB in, 2 MB out
        SCOPED_TRACE("batch " + std::to_string(n));
        Placeholder x({n, 16, 32, 32}, f32, "x"), r({n, 16, 16, 16}, f32, "r");
        Tensor y = max_pool2d(x, {2, 2});
        Function fwd = function({x}, {y}, {}, on("cpu"));
        Function bwd = function({x, r}, {gradients(sum(y * r), {x})[0]}, {}, on("cpu"));
        Function fwd_ref = function({x}, {y}, {}, on("reference"));
        Function bwd_ref = function({x, r}, {gradients(sum(y * r), {x})[0]}, {}, on("reference"));
        Array xv = random_array(f32, {n, 16, 32, 32}, 300),
              rv = random_array(f32, {n, 16, 16, 16}, 301);
        EXPECT_TRUE(fwd(xv)[0].equals(fwd_ref(xv)[0]));
        EXPECT_TRUE(bwd(xv, rv)[0].equals(bwd_ref(xv, rv)[0]));
        const bool small = n == 2;
        EXPECT_EQ(fwd.stats().library_calls, 1u);
        EXPECT_EQ(fwd.stats().parallel_regions, team && !small ? 1u : 0u) << fwd.dump();
        EXPECT_EQ(bwd.stats().parallel_regions > 0, team && !small) << bwd.dump();
    }
}

// Library calls keep their oneDNN memory objects between calls (Note [Call arguments kept] in
// src/backend/cpu/Dnnl.cpp) and re-point them when a buffer moves. A training step's convs
// (bias and leaky relu as post-ops), pool, weight gradients (19 images: chunks of two sizes) and
// matmuls (one reading an input directly), called on two sets of inputs in turn and on another
// batch (new primitives at the same call sites), each call against the reference interpreter.
TEST(ConvCpu, KeptCallArgumentsFollowMovedBuffersAndNewShapes) {
    Variable w(random_array(f32, {16, 3, 3, 3}, 410), "w"), b(random_array(f32, {16}, 411), "b");
    Variable d(random_array(f32, {16, 10}, 412), "d"), v(random_array(f32, {12, 10}, 413), "v");
    Placeholder x({-1, 3, 8, 8}, f32, "x"), z({-1, 12}, f32, "z");
    Tensor h = nn::leaky_relu(conv2d(x, w, {}, "SAME") + reshape(b, {16, 1, 1}), 0.1);
    Tensor logits = matmul(mean(max_pool2d(h, {2, 2}), {2, 3}), d) + matmul(z, v);
    Tensor loss = sum(logits * logits);
    std::vector<Tensor> outs = gradients(loss, {w, b, d, v, x});
    outs.insert(outs.begin(), loss);
    Function cpu = function({x, z}, outs, {}, on("cpu"));
    Function ref = function({x, z}, outs, {}, on("reference"));
    auto inputs = [](int64_t n, uint64_t seed) {
        return std::vector<Array>{random_array(f32, {n, 3, 8, 8}, seed),
                                  random_array(f32, {n, 12}, seed + 1)};
    };
    const std::vector<std::vector<Array>> calls = {inputs(19, 420), inputs(19, 430), inputs(6, 440),
                                                   inputs(19, 430)};
    for (size_t c = 0; c < calls.size(); ++c) {
        SCOPED_TRACE("call " + std::to_string(c));
        std::vector<Array> got = cpu(calls[c][0], calls[c][1]),
                           want = ref(calls[c][0], calls[c][1]);
        for (size_t i = 0; i < got.size(); ++i) { // (f32 sums in other orders than the reference)
            double largest = 0;
            for (double e : test::values(want[i]))
                largest = std::max(largest, std::fabs(e));
            test::expect_close(got[i], want[i], 1e-4, 1e-5 * largest,
                               "output " + std::to_string(i));
        }
    }
}

// The primitive cache outlives the functions that fill it; it must not keep their graphs alive.
// A conv primitive kept its epilogue's graph nodes, and through them the whole graph and its
// variables' values: a network built, trained and dropped left its weights behind. After a
// training step and an inference call of a small CNN whose convs carry epilogues (bias, leaky
// relu, scale: post-ops), with every handle gone, none of its variables is alive.
TEST(ConvCpu, CachedPrimitivesKeepNoGraphAlive) {
    {
        Scope scope("cache_lifetime");
        Variable w(random_array(f32, {16, 3, 3, 3}, 400), "w"),
            b(random_array(f32, {16}, 401), "b");
        Variable d(random_array(f32, {16, 10}, 402), "dense");
        Placeholder x({-1, 3, 8, 8}, f32, "x");
        Tensor h = nn::leaky_relu(conv2d(x, w, {}, "SAME") + reshape(b, {16, 1, 1}), 0.01) * 2.0;
        Tensor logits = matmul(mean(max_pool2d(h, {2, 2}), {2, 3}), d);
        Tensor loss = sum(logits * logits);
        std::vector<Tensor> g = gradients(loss, {w, b, d});
        Function step = function(
            {x}, {loss}, {{w, w - 1e-3 * g[0]}, {b, b - 1e-3 * g[1]}, {d, d - 1e-3 * g[2]}});
        Function infer = function({x}, {logits});
        step(random_array(f32, {4, 3, 8, 8}, 403));
        infer(random_array(f32, {4, 3, 8, 8}, 404));
        ASSERT_EQ(get_variables("cache_lifetime/*").size(), 3u);
    }
    for (const Variable& v : get_variables("cache_lifetime/*"))
        ADD_FAILURE() << v.full_name() << " is still alive";
}

TEST(ConvCpu, PrimitivesAreCachedAcrossFunctions) {
    Placeholder x({2, 3, 10, 10}, f32, "x");
    Tensor y = conv2d(x, ones({5, 3, 3, 3}), {2}, "SAME");
    Array xv = random_array(f32, {2, 3, 10, 10}, 41);
    function({x}, {y})(xv);
    auto before = cpu::window_cache_stats();
    // another function, the same conv (tanh is no post-op: y * 2.0 would fold into the call and
    // make another primitive; Note [Epilogue fusion])
    Function again = function({x}, {tanh(y)});
    again(xv);
    again(xv); // calls of one plan do not look the primitive up again
    auto after = cpu::window_cache_stats();
    EXPECT_EQ(after.misses, before.misses);
    EXPECT_EQ(after.hits, before.hits + 1);
}

TEST(ConvCpu, OneDnnTakesEveryTableConfiguration) {
    // a declined configuration would silently run the reference kernel: make sure the f32 rows
    // with 1 to 3 spatial dims all reach oneDNN
    size_t checked = 0;
    for (const auto& row : test::op_table()) {
        bool window_op = false;
        for (int i = 0; i < kNumOps; ++i)
            window_op |= has_trait(Op(i), kWindow) && row.op == op_name(Op(i));
        if (!window_op) continue;
        for (const auto& c : row.cases) {
            std::vector<Tensor> phs;
            for (const auto& spec : c.inputs) phs.push_back(Placeholder(spec.shape, f32, "x"));
            Tensor out = row.build(phs);
            const Node& n = *out.node();
            ASSERT_TRUE(has_trait(n.op(), kWindow)) << row.name;
            if (n.rank() > 5 || numel(n.shape()) == 0) continue;
            std::vector<TensorType> in;
            bool empty = false;
            for (const auto& i : n.inputs()) {
                in.push_back(i->type());
                empty |= numel(i->shape()) == 0;
            }
            if (empty) continue;
            EXPECT_TRUE(cpu::window_primitive(n, in, n.type()) != nullptr)
                << row.name << " " << test::shapes_str(c);
            ++checked;
        }
    }
    EXPECT_GE(checked, 40u);
}

TEST(ConvCpu, OneDnnUsesThePoolsThreadCount) {
    // a library call sets OpenMP's count for the calling thread to the pool's
    Placeholder x({1, 2, 6, 6}, f32, "x");
    function({x}, {conv2d(x, ones({2, 2, 3, 3}))})(Array(f32, {1, 2, 6, 6}));
    EXPECT_EQ(omp_get_max_threads(), cpu::ThreadPool::get().threads());
}
