// Tests of include/symjax/Interpolation.h beyond the op harness (tests/ops, which checks values
// against NumPy/torch goldens and gradients by finite differences): SymJAX's interp_test for
// data::resample_images, the corner conventions, dynamic shapes, and the error messages.
#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include "TestUtil.h"

#include <random>

using namespace sj;
using sj::test::message_of;
namespace ip = sj::interpolation;

namespace {

Array random_f64(const Shape& shape, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> d(0, 1);
    int64_t n = 1;
    for (int64_t s : shape)
        n *= s;
    std::vector<double> v(static_cast<size_t>(n));
    for (auto& x : v)
        x = d(gen);
    return Array(v, shape);
}

} // namespace

// SymJAX's tests/interp_test.py: a 2x2 image resampled to 4x4 keeps its pixels at the corners
// (images[0][:, ::3, ::3] == im1: the align_corners convention), a 4x4 one is unchanged.
TEST(Interpolation, ResampleImagesIsSymjaxInterpTest) {
    Array im1 = random_f64({3, 2, 2}, 1), im2 = random_f64({3, 4, 4}, 2);
    for (auto method : {ip::Method::Linear, ip::Method::Nearest}) {
        Array images = data::resample_images({im1, im2}, {4, 4}, method);
        ASSERT_EQ(images.shape(), (Shape{2, 3, 4, 4}));
        ASSERT_EQ(images.dtype(), DType::F64);
        std::vector<double> v = images.to_vector<double>(), a = im1.to_vector<double>(),
                            b = im2.to_vector<double>();
        for (int c = 0; c < 3; ++c)
            for (int i = 0; i < 2; ++i)
                for (int j = 0; j < 2; ++j)
                    EXPECT_EQ(v[((0 * 3 + c) * 4 + 3 * i) * 4 + 3 * j], a[(c * 2 + i) * 2 + j]);
        for (int k = 0; k < 48; ++k)
            EXPECT_EQ(v[48 + k], b[k]);
        // the samples in between: linear thirds, or the nearest corner (1/3 -> 0, 2/3 -> 1)
        const double p00 = a[0], p01 = a[1];
        EXPECT_NEAR(v[1], method == ip::Method::Linear ? p00 + (p01 - p00) / 3 : p00, 1e-15);
        EXPECT_NEAR(v[2], method == ip::Method::Linear ? p00 + 2 * (p01 - p00) / 3 : p01, 1e-15);
    }
}

TEST(Interpolation, ResampleImagesKeepsTheAspectRatioAndCentres) {
    // a 2 x 4 image into 4 x 4: scale min(2, 1) = 1, so it stays 2 x 4, at rows 1..2
    std::vector<uint8_t> px = {10, 20, 30, 40, 50, 60, 70, 80};
    Array im(px, Shape{1, 2, 4});
    Array out = data::resample_images({im}, {4, 4});
    ASSERT_EQ(out.dtype(), DType::U8);
    std::vector<uint8_t> v = out.to_vector<uint8_t>();
    for (int j = 0; j < 4; ++j) {
        EXPECT_EQ(v[j], 0);
        EXPECT_EQ(v[4 + j], px[j]);
        EXPECT_EQ(v[8 + j], px[4 + j]);
        EXPECT_EQ(v[12 + j], 0);
    }
    // stretched: rows at 0, 1/3, 2/3, 1 of the way: 10, 23.3 -> 23, 36.7 -> 37, 50 in column 0
    std::vector<uint8_t> s =
        data::resample_images({im}, {4, 4}, ip::Method::Linear, false).to_vector<uint8_t>();
    EXPECT_EQ(s[0], 10);
    EXPECT_EQ(s[4], 23);
    EXPECT_EQ(s[8], 37);
    EXPECT_EQ(s[12], 50);
    EXPECT_NE(message_of<ShapeError>([&] {
                  data::resample_images({im, random_f64({3, 2, 2}, 3)}, {4, 4});
              }).find("image 1"),
              std::string::npos);
    EXPECT_THROW(data::resample_images({}, {4, 4}), InputError);
    EXPECT_THROW(data::resample_images({im}, {4}), ShapeError);
}

TEST(Interpolation, ResizeAlignCornersMapsCornersToCorners) {
    Array xa = random_f64({1, 2, 3, 2}, 4);
    Tensor x = constant(xa);
    for (auto method : {ip::Method::Nearest, ip::Method::Linear}) {
        std::vector<double> y = ip::resize(x, {5, 3}, method, true).eval().to_vector<double>();
        std::vector<double> a = xa.to_vector<double>();
        for (int c = 0; c < 2; ++c)
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 2; ++j) // output (2i, 2j) reads input (i, j)
                    EXPECT_EQ(y[(c * 5 + 2 * i) * 3 + 2 * j], a[(c * 3 + i) * 2 + j]);
    }
}

TEST(Interpolation, MapCoordinatesSamplesTheGridAndItsBoundary) {
    // input 0 1 2 3 (1-d); coordinates beyond both ends under each boundary rule
    Tensor x = constant(Array(std::vector<double>{0, 1, 2, 3}, {4}));
    Tensor c = constant(Array(std::vector<double>{-1.5, -0.25, 1.5, 3.5, 5}, {1, 5}));
    auto at = [&](int order, ip::Boundary b) {
        return ip::map_coordinates(x, c, order, b, 9).eval().to_vector<double>();
    };
    using V = std::vector<double>;
    // Constant: -1.5 blends cval 9 at -2 and -1; -0.25: 0.75 * 0 + 0.25 * 9; 3.5: (3 + 9) / 2
    EXPECT_EQ(at(1, ip::Boundary::Constant), (V{9, 2.25, 1.5, 6, 9}));
    EXPECT_EQ(at(1, ip::Boundary::Nearest), (V{0, 0, 1.5, 3, 3}));
    // Wrap: -1.5 between 2 and 3 (indices -2, -1); 3.5 between 3 and 0; 5 -> index 1
    EXPECT_EQ(at(1, ip::Boundary::Wrap), (V{2.5, 0.75, 1.5, 1.5, 1}));
    // Reflect (d c b a | a b c d | d c b a): -2 -> 1, -1 -> 0, 4 -> 3, 5 -> 2
    EXPECT_EQ(at(1, ip::Boundary::Reflect), (V{0.5, 0, 1.5, 3, 2}));
    // Mirror (c b | a b c d | c b): -2 -> 2, -1 -> 1, 4 -> 2, 5 -> 1
    EXPECT_EQ(at(1, ip::Boundary::Mirror), (V{1.5, 0.25, 1.5, 2.5, 1}));
    // order 0 rounds halves up: -1.5 -> -1, -0.25 -> 0, 1.5 -> 2, 3.5 -> 4
    EXPECT_EQ(at(0, ip::Boundary::Constant), (V{9, 0, 2, 9, 9}));
    EXPECT_EQ(at(0, ip::Boundary::Nearest), (V{0, 0, 2, 3, 3}));
}

TEST(Interpolation, MapCoordinatesGradientsAndDynamicPoints) {
    // coordinates [2, -1]: the number of points binds at call time
    Placeholder img({3, 4}, f64, "img");
    Placeholder pts({2, -1}, f64, "pts");
    Tensor y = ip::map_coordinates(img, pts, 1, ip::Boundary::Nearest);
    Tensor loss = sum(y * y);
    std::vector<Tensor> g = gradients(loss, {img, pts});
    std::vector<double> iv(12);
    for (int k = 0; k < 12; ++k)
        iv[k] = double(k * k % 7) - 2.5;
    Array ia(iv, {3, 4}), pa(std::vector<double>{0.25, 1.5, 2.75, 0.5, 3.25, 1.125}, {2, 3});
    std::vector<Array> r = function({img, pts}, {loss, g[0], g[1]})(ia, pa);
    // d loss / d pts by central differences on the function itself
    Function f = function({img, pts}, {loss});
    std::vector<double> pv = pa.to_vector<double>(), gp = r[2].to_vector<double>();
    for (size_t k = 0; k < pv.size(); ++k) {
        std::vector<double> lo = pv, hi = pv;
        lo[k] -= 1e-6, hi[k] += 1e-6;
        double fd = (f(ia, Array(hi, {2, 3}))[0].item<double>() -
                     f(ia, Array(lo, {2, 3}))[0].item<double>()) /
                    2e-6;
        EXPECT_NEAR(gp[k], fd, 1e-6 * (1 + std::abs(fd))) << "coordinate " << k;
    }
    EXPECT_EQ(r[1].shape(), (Shape{3, 4}));
}

TEST(Interpolation, UpsampleConstantModeTakesUnknownDims) {
    Placeholder x({-1, 2}, f32, "x");
    Tensor y = ip::upsample_1d(x, 2, 0, ip::UpsampleMode::Constant, 7);
    Array r = function({x}, {y})(Array(std::vector<float>{1, 2, 3, 4}, {2, 2}))[0];
    ASSERT_EQ(r.shape(), (Shape{6, 2}));
    EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{1, 2, 7, 7, 7, 7, 3, 4, 7, 7, 7, 7}));
    // upsample_2d with one repeat for both axes: nearest, each sample twice per axis
    Array n = ip::upsample_2d(constant(Array(std::vector<float>{1, 2, 3, 4}, {2, 2})), {1}, {0, 1},
                              ip::UpsampleMode::Nearest)
                  .eval();
    EXPECT_EQ(n.to_vector<float>(),
              (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(Interpolation, ErrorsNameTheOpAndTensors) {
    Placeholder img({4, 5}, f32, "img");
    Placeholder ints({4, 5}, i32, "labels");
    Placeholder c3({3, 7}, f32, "coords3");
    Placeholder c2({2, 7}, f32, "coords");
    Placeholder dyn({-1, 5}, f32, "dynimg");
    std::string m = message_of<ShapeError>([&] { ip::map_coordinates(img, c3); });
    EXPECT_NE(m.find("map_coordinates"), std::string::npos) << m;
    EXPECT_NE(m.find("coords3"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, ...]"), std::string::npos) << m;
    m = message_of<TypeError>([&] { ip::map_coordinates(ints, c2); });
    EXPECT_NE(m.find("labels"), std::string::npos) << m;
    EXPECT_NE(m.find("float"), std::string::npos) << m;
    EXPECT_NO_THROW(ip::map_coordinates(ints, c2, 0)); // nearest takes integers
    EXPECT_THROW(ip::map_coordinates(img, c2, 3), InputError);
    EXPECT_THROW(ip::map_coordinates(dyn, c2), ShapeError);
    EXPECT_THROW(ip::map_coordinates(img, scalar(1.0)), ShapeError);

    Placeholder x({2, 3, 4, 4}, f32, "batch");
    m = message_of<ShapeError>([&] { ip::resize(img, {8, 8}); });
    EXPECT_NE(m.find("img"), std::string::npos) << m;
    EXPECT_NE(m.find("[N, C, spatial...]"), std::string::npos) << m;
    EXPECT_THROW(ip::resize(x, {8}), ShapeError);
    EXPECT_THROW(ip::resize(x, {8, 0}), ShapeError);
    Placeholder xi({2, 3, 4, 4}, i32, "ibatch");
    EXPECT_THROW(ip::resize(xi, {8, 8}), TypeError);
    EXPECT_NO_THROW(ip::resize(xi, {8, 8}, ip::Method::Nearest));
    Placeholder xd({2, 3, -1, 4}, f32, "dynbatch");
    EXPECT_THROW(ip::resize(xd, {8, 8}), ShapeError);

    EXPECT_THROW(ip::upsample_1d(img, 1, 2), ShapeError);
    EXPECT_THROW(ip::upsample_1d(img, -1), InputError);
    EXPECT_THROW(ip::upsample_1d(ints, 1, -1, ip::UpsampleMode::Linear), TypeError);
    EXPECT_THROW(ip::upsample_1d(dyn, 1, 0, ip::UpsampleMode::Linear), ShapeError);
    EXPECT_THROW(ip::upsample_2d(img, {1, 1, 1}), InputError);
    EXPECT_THROW(ip::upsample_2d(img, {1}, {1, -1}), InputError);
}
