// Tests of the convolutional layers: Conv1D/Conv2D, Conv2DTranspose, pooling layers,
// GlobalAvgPool, ResidualBlock (RandomCrop and RandomFlip: NnAugmentTest.cpp). The conv and pool
// primitives themselves are checked against PyTorch and finite differences in tests/ops; here the
// expected values come from closed forms (1x1 convs are matmuls, the transposed conv is the
// conv's adjoint).
#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <cmath>
#include <random>

using namespace sj;

namespace {

Array random_array(const Shape& shape, unsigned seed, double lo = -1, double hi = 1) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    int64_t n = 1;
    for (int64_t s : shape)
        n *= s;
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v)
        x = static_cast<float>(d(gen));
    return Array(v, shape);
}

double dot(const Array& a, const Array& b) {
    std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i)
        s += x[i] * y[i];
    return s;
}

} // namespace

TEST(NnConvLayers, Conv2DVariablesAndShapes) {
    Scope s("nnconv_shapes");
    nn::Conv2D c(3, 8, {3, 5}, {.strides = {2}, .padding = "SAME"});
    EXPECT_EQ(c.weights().shape(), (Shape{8, 3, 3, 5}));
    EXPECT_EQ(c.bias().shape(), (Shape{8}));
    EXPECT_EQ(c.weights().name(), "nnconv_shapes/conv2d/W");
    EXPECT_EQ(c.variables().size(), 2u);
    Placeholder x({-1, 3, 17, 10}, f32, "x");
    EXPECT_EQ(c(x).shape(), (Shape{-1, 8, 9, 5})); // SAME: ceil(in / stride)
    nn::Conv2D valid(3, 4, 3);
    EXPECT_EQ(valid(x).shape(), (Shape{-1, 4, 15, 8}));
    nn::Conv2D nobias(3, 4, 3, {.bias = false});
    EXPECT_EQ(nobias.variables().size(), 1u);
    nn::Conv2D grouped(4, 6, 3, {.groups = 2});
    EXPECT_EQ(grouped.weights().shape(), (Shape{6, 2, 3, 3}));
}

TEST(NnConvLayers, PointwiseConvIsAMatmulOverChannels) {
    // A 1x1 conv with bias is y[n, o, h, w] = sum_c W[o, c] x[n, c, h, w] + b[o].
    Scope s("nnconv_1x1");
    nn::Conv2D c(3, 2, 1);
    Array w = random_array({2, 3, 1, 1}, 1), b = random_array({2}, 2);
    c.weights().assign(w);
    c.bias().assign(b);
    Array xa = random_array({2, 3, 4, 5}, 3);
    Placeholder x({-1, 3, 4, 5}, f32, "x");
    for (const char* backend : {"cpu", "reference"}) {
        FunctionOptions fo;
        fo.backend = backend;
        std::vector<float> y = function({x}, {c(x)}, {}, fo)(xa)[0].to_vector<float>();
        std::vector<float> xv = xa.to_vector<float>(), wv = w.to_vector<float>(),
                           bv = b.to_vector<float>();
        for (int n = 0; n < 2; ++n)
            for (int o = 0; o < 2; ++o)
                for (int p = 0; p < 20; ++p) {
                    double want = bv[o];
                    for (int ch = 0; ch < 3; ++ch)
                        want += double(wv[o * 3 + ch]) * xv[(n * 3 + ch) * 20 + p];
                    EXPECT_NEAR(y[(n * 2 + o) * 20 + p], want, 1e-5) << backend;
                }
    }
}

TEST(NnConvLayers, Conv1DShapes) {
    Scope s("nnconv_1d");
    nn::Conv1D c(2, 5, 4, {.strides = {2}, .dilation = {2}});
    EXPECT_EQ(c.weights().shape(), (Shape{5, 2, 4}));
    Placeholder x({3, 2, 20}, f32, "x");
    EXPECT_EQ(c(x).shape(), (Shape{3, 5, 7})); // floor((20 - 7) / 2) + 1
}

TEST(NnConvLayers, TransposedConvIsTheAdjointOfTheConv) {
    // <conv(x, W), y> == <x, conv_transpose(y, W)> for the same geometry, with W in PyTorch's
    // conv_transpose layout [in, out, k...] = the forward conv's [O, I, k...] read as [C, O, ...].
    Scope s("nnconv_adjoint");
    nn::Conv2DTranspose t(4, 3, {3, 3}, {.strides = {2}, .padding = {{1, 1}}, .bias = false});
    EXPECT_EQ(t.weights().shape(), (Shape{4, 3, 3, 3}));
    Array w = random_array({4, 3, 3, 3}, 4);
    t.weights().assign(w);
    Placeholder xs({2, 3, 9, 9}, f32, "x"), ys({2, 4, 5, 5}, f32, "y");
    Tensor fwd = conv2d(xs, t.weights(), {2}, {{1, 1}});
    ASSERT_EQ(fwd.shape(), (Shape{2, 4, 5, 5}));
    Tensor back = t(ys);
    ASSERT_EQ(back.shape(), (Shape{2, 3, 9, 9})); // (5 - 1) * 2 - 2 + 3 = 9
    Array xa = random_array({2, 3, 9, 9}, 5), ya = random_array({2, 4, 5, 5}, 6);
    for (const char* backend : {"cpu", "reference"}) {
        FunctionOptions fo;
        fo.backend = backend;
        std::vector<Array> r = function({xs, ys}, {fwd, back}, {}, fo)(xa, ya);
        const double lhs = dot(r[0], ya), rhs = dot(xa, r[1]);
        EXPECT_NEAR(lhs, rhs, 1e-4 * std::abs(lhs) + 1e-4) << backend;
    }
}

TEST(NnConvLayers, PoolingLayers) {
    Scope s("nnconv_pool");
    Placeholder x({2, 3, 6, 6}, f32, "x");
    EXPECT_EQ(nn::MaxPool2D({2, 2})(x).shape(), (Shape{2, 3, 3, 3}));
    EXPECT_EQ(nn::MaxPool2D({3, 3}, {.strides = {1, 1}, .padding = "SAME"})(x).shape(), (Shape{2, 3, 6, 6}));
    EXPECT_EQ(nn::AvgPool2D({2})(x).shape(), (Shape{2, 3, 3, 3}));
    EXPECT_EQ(nn::GlobalAvgPool()(x).shape(), (Shape{2, 3}));
    Placeholder x1({2, 3, 10}, f32, "x1");
    EXPECT_EQ(nn::MaxPool1D(2)(x1).shape(), (Shape{2, 3, 5}));
    EXPECT_EQ(nn::AvgPool1D(3, {.strides = {1}})(x1).shape(), (Shape{2, 3, 8}));
    EXPECT_THROW(nn::MaxPool2D({2, 2})(x1), ShapeError);

    // values: 2x2 max and mean of a known image, global mean
    Array xa = random_array({2, 3, 6, 6}, 7);
    std::vector<Array> r = function(
        {x}, {nn::MaxPool2D({2, 2})(x), nn::AvgPool2D({2, 2})(x), nn::GlobalAvgPool()(x)})(xa);
    std::vector<float> v = xa.to_vector<float>(), mx = r[0].to_vector<float>(),
                       av = r[1].to_vector<float>(), g = r[2].to_vector<float>();
    for (int nc = 0; nc < 6; ++nc) {
        double total = 0;
        for (int i = 0; i < 36; ++i)
            total += v[nc * 36 + i];
        EXPECT_NEAR(g[nc], total / 36, 1e-6);
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
                float a = v[nc * 36 + 2 * i * 6 + 2 * j], b = v[nc * 36 + 2 * i * 6 + 2 * j + 1],
                      c = v[nc * 36 + (2 * i + 1) * 6 + 2 * j],
                      d = v[nc * 36 + (2 * i + 1) * 6 + 2 * j + 1];
                EXPECT_EQ(mx[nc * 9 + i * 3 + j], std::max({a, b, c, d}));
                EXPECT_NEAR(av[nc * 9 + i * 3 + j], (double(a) + b + c + d) / 4, 1e-6);
            }
    }
}

TEST(NnConvLayers, ResidualBlock) {
    Scope s("nnconv_res");
    nn::ResidualBlock same(4, 4), down(4, 8, {.stride = 2});
    EXPECT_EQ(same.variables().size(), 1u + 4u + 1u + 4u); // 2 conv kernels (no bias), 2 BNs
    EXPECT_EQ(down.variables().size(), 10u + 1u + 4u);     // + the 1x1 projection and its BN
    Placeholder x({2, 4, 6, 6}, f32, "x");
    EXPECT_EQ(same(x).shape(), (Shape{2, 4, 6, 6}));
    EXPECT_EQ(down(x).shape(), (Shape{2, 8, 3, 3}));
    // With zero conv kernels the residual branch is BN of a constant: beta = 0, so the block is
    // relu(x) (identity shortcut) and relu(0) = 0 (projection shortcut, zero too).
    for (const Variable& v : same.variables())
        if (v.name().find("/W") != std::string::npos)
            v.assign(Array(f32, v.shape()));
    for (const Variable& v : down.variables())
        if (v.name().find("/W") != std::string::npos)
            v.assign(Array(f32, v.shape()));
    Array xa = random_array({2, 4, 6, 6}, 9);
    std::vector<Array> r = function({x}, {same(x), down(x)})(xa);
    std::vector<float> xv = xa.to_vector<float>(), y = r[0].to_vector<float>();
    for (size_t i = 0; i < xv.size(); ++i)
        EXPECT_NEAR(y[i], std::max(xv[i], 0.f), 1e-6);
    for (float v : r[1].to_vector<float>())
        EXPECT_EQ(v, 0.f);
}

TEST(NnConvLayers, ErrorsNameTheLayerAndShapes) {
    Scope s("nnconv_err");
    nn::Conv2D c(3, 4, 3);
    Placeholder x({2, 5, 8, 8}, f32, "images");
    try {
        c(x);
        FAIL() << "expected a ShapeError";
    } catch (const ShapeError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("nnconv_err/conv2d"), std::string::npos) << m;
        EXPECT_NE(m.find("images"), std::string::npos) << m;
        EXPECT_NE(m.find("[N, 3, H, W]"), std::string::npos) << m;
    }
    EXPECT_THROW(nn::Conv2D(3, 4, 3, {.groups = 2}), ShapeError);
    EXPECT_THROW(nn::Conv2D(3, 4, Axes{3, 3, 3}), ShapeError);
}
