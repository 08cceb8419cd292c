// Tests of the initializers: empirical moments against the textbook scales, seeds, orthogonality.
#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <cmath>

using namespace sj;

namespace {
struct Moments {
    double mean = 0, var = 0, min = 1e300, max = -1e300;
};

Moments moments(const Array &a) {
    std::vector<double> v = a.to_vector<double>();
    Moments m;
    for (double x : v) {
        m.mean += x;
        m.min = std::min(m.min, x);
        m.max = std::max(m.max, x);
    }
    m.mean /= double(v.size());
    for (double x : v)
        m.var += (x - m.mean) * (x - m.mean);
    m.var /= double(v.size());
    return m;
}

/// Checks the sample variance against `expected`; kurtosis is mu4 / sigma^4 of the distribution
/// (9/5 uniform, 3 normal), so the standard error of the sample variance is
/// sigma^2 sqrt((kurtosis - 1) / n). Six standard errors: a false failure is ~1e-9 likely.
void expect_variance(const Array &a, double expected, double kurtosis) {
    Moments m = moments(a);
    double n = double(a.size());
    double se = expected * std::sqrt((kurtosis - 1) / n);
    EXPECT_NEAR(m.var, expected, 6 * se);
    EXPECT_NEAR(m.mean, 0.0, 6 * std::sqrt(expected / n));
}

const Shape kShape{400, 300}; // fan_in 400, fan_out 300, 120000 draws
} // namespace

TEST(NnInit, Fans) {
    auto f2 = nn::init::compute_fans({400, 300});
    EXPECT_EQ(f2.in, 400);
    EXPECT_EQ(f2.out, 300);
    auto f4 = nn::init::compute_fans({32, 16, 3, 3}); // OIHW
    EXPECT_EQ(f4.in, 16 * 9);
    EXPECT_EQ(f4.out, 32 * 9);
    auto f1 = nn::init::compute_fans({7});
    EXPECT_EQ(f1.in, 7);
    EXPECT_EQ(f1.out, 7);
}

TEST(NnInit, GlorotScales) {
    const double fi = 400, fo = 300;
    Array u = nn::init::glorot_uniform(1.0, 1).array(kShape);
    expect_variance(u, 2.0 / (fi + fo), 9.0 / 5.0);
    Moments mu = moments(u);
    double bound = std::sqrt(6.0 / (fi + fo));
    EXPECT_GE(mu.min, -bound);
    EXPECT_LT(mu.max, bound);
    EXPECT_GT(mu.max, 0.99 * bound);
    expect_variance(nn::init::glorot_normal(1.0, 2).array(kShape), 2.0 / (fi + fo), 3.0);
    // gain scales the standard deviation
    expect_variance(nn::init::glorot_normal(2.0, 3).array(kShape), 4 * 2.0 / (fi + fo), 3.0);
}

TEST(NnInit, HeAndLeCunScales) {
    const double fi = 400;
    expect_variance(nn::init::he_uniform(4).array(kShape), 2.0 / fi, 9.0 / 5.0);
    expect_variance(nn::init::he_normal(5).array(kShape), 2.0 / fi, 3.0);
    expect_variance(nn::init::lecun_normal(6).array(kShape), 1.0 / fi, 3.0);
    expect_variance(nn::init::lecun_uniform(7).array(kShape), 1.0 / fi, 9.0 / 5.0);
    // conv kernels: fan_in = in * kh * kw
    expect_variance(nn::init::he_normal(8).array({64, 32, 5, 5}), 2.0 / (32 * 25), 3.0);
    Moments hu = moments(nn::init::he_uniform(9).array(kShape));
    EXPECT_GE(hu.min, -std::sqrt(6.0 / fi));
    EXPECT_LT(hu.max, std::sqrt(6.0 / fi));
}

TEST(NnInit, PlainDistributions) {
    Array n = nn::init::normal(0.5, 0.0, 10).array(kShape, f64);
    EXPECT_EQ(n.dtype(), f64);
    expect_variance(n, 0.25, 3.0);
    Array u = nn::init::uniform(-0.3, 0.3, 11).array(kShape);
    expect_variance(u, 0.36 / 12.0, 9.0 / 5.0); // (hi - lo)^2 / 12
    // truncated to two standard deviations: variance 1 - 4 phi(2) / (2 Phi(2) - 1)
    double phi2 = std::exp(-2.0) / std::sqrt(2 * M_PI), Phi2 = 0.5 * (1 + std::erf(std::sqrt(2.0)));
    double tvar = 1 - 4 * phi2 / (2 * Phi2 - 1);
    Array t = nn::init::truncated_normal(0.1, 12).array(kShape);
    expect_variance(t, 0.01 * tvar, 3.0);
    Moments mt = moments(t);
    EXPECT_GE(mt.min, -0.2 - 1e-7);
    EXPECT_LE(mt.max, 0.2 + 1e-7);
}

TEST(NnInit, Constants) {
    EXPECT_EQ(nn::init::zeros().array({2, 2}).to_vector<float>(), std::vector<float>(4, 0.f));
    EXPECT_EQ(nn::init::ones().array({3}, f64).to_vector<double>(), std::vector<double>(3, 1.0));
    EXPECT_EQ(nn::init::constant(2.5).array({2}).to_vector<float>(), std::vector<float>(2, 2.5f));
    EXPECT_EQ(nn::init::constant(3).array({2}, i32).to_vector<int32_t>(),
              std::vector<int32_t>(2, 3));
    EXPECT_THROW(nn::init::he_normal()({2, 2}, i32), TypeError);
    EXPECT_THROW(nn::init::he_normal()({-1, 2}), ShapeError);
}

TEST(NnInit, SeedsAreReproducible) {
    auto a = nn::init::he_normal(77).array({50, 20});
    auto b = nn::init::he_normal(77).array({50, 20});
    auto c = nn::init::he_normal(78).array({50, 20});
    EXPECT_TRUE(a.equals(b));
    EXPECT_FALSE(a.equals(c));
    // without a seed: the global sequence, restarted by manual_seed
    random::manual_seed(5);
    auto d = nn::init::glorot_uniform().array({10, 10});
    auto e = nn::init::glorot_uniform().array({10, 10});
    random::manual_seed(5);
    auto f = nn::init::glorot_uniform().array({10, 10});
    EXPECT_FALSE(d.equals(e));
    EXPECT_TRUE(d.equals(f));
    // as a Variable initialiser: reset() redraws the same values
    Variable w(nn::init::he_uniform(3)({8, 4}), "nninit_w");
    Array w0 = w.value();
    w.assign(Array(f32, {8, 4}));
    w.reset();
    EXPECT_TRUE(w.value().equals(w0));
}

TEST(NnInit, Orthogonal) {
    for (Shape shape : {Shape{60, 20}, Shape{20, 60}, Shape{30, 30}, Shape{8, 3, 2, 2}}) {
        SCOPED_TRACE(shape_str(shape));
        const double gain = 1.5;
        Array a = nn::init::orthogonal(gain, 21).array(shape, f64);
        std::vector<double> w = a.to_vector<double>();
        int64_t rows = shape[0], cols = numel(shape) / rows;
        // Gram matrix of the shorter side: gain^2 I
        bool by_cols = rows >= cols;
        int64_t k = by_cols ? cols : rows, len = by_cols ? rows : cols;
        auto el = [&](int64_t vec, int64_t i) {
            return by_cols ? w[i * cols + vec] : w[vec * cols + i];
        };
        double worst = 0;
        for (int64_t p = 0; p < k; ++p)
            for (int64_t q = 0; q < k; ++q) {
                double dot = 0;
                for (int64_t i = 0; i < len; ++i)
                    dot += el(p, i) * el(q, i);
                worst = std::max(worst, std::abs(dot - (p == q ? gain * gain : 0.0)));
            }
        EXPECT_LT(worst, 1e-12);
    }
    EXPECT_TRUE(
        nn::init::orthogonal(1, 4).array({5, 5}).equals(nn::init::orthogonal(1, 4).array({5, 5})));
    EXPECT_THROW(nn::init::orthogonal()({5}), ShapeError);
}

TEST(NnInit, DenseUsesItsInitializer) {
    Scope s("nninit_dense");
    nn::Dense d(400, 300, {.bias = true, .init = nn::init::he_normal(31)});
    expect_variance(d.weights().value(), 2.0 / 400, 3.0);
    EXPECT_TRUE(d.weights().value().equals(nn::init::he_normal(31).array({400, 300})));
    for (float b : d.bias().value().to_vector<float>())
        EXPECT_EQ(b, 0.0f);
}
