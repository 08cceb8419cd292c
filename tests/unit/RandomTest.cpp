// Tests of Philox (published known answers), the bits layout, and the distributions' moments.
#include <gtest/gtest.h>

#include "backend/reference/Reference.h"

#include <symjax/Function.h>
#include <symjax/Ops.h>
#include <symjax/Random.h>
#include <symjax/Variable.h>
#include <symjax/ir/Node.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>

using namespace sj;

namespace {

std::vector<uint32_t> philox(std::vector<uint32_t> ctr, std::vector<uint32_t> key) {
    uint32_t out[4];
    ref::philox4x32_10(ctr.data(), key.data(), out);
    return {out[0], out[1], out[2], out[3]};
}

/// The Philox key a draw was built with (read from its bits node).
uint64_t key_of(const Tensor& bits) { return bits.node()->attr<PhiloxAttrs>().key; }

struct Moments {
    double mean = 0, var = 0, m4 = 0; // m4: fourth central moment
    double min = INFINITY, max = -INFINITY;
};
Moments moments(const std::vector<double>& v) {
    Moments m;
    for (double x : v) {
        m.mean += x;
        m.min = std::min(m.min, x);
        m.max = std::max(m.max, x);
    }
    m.mean /= double(v.size());
    for (double x : v) {
        double d = x - m.mean;
        m.var += d * d;
        m.m4 += d * d * d * d;
    }
    m.var /= double(v.size());
    m.m4 /= double(v.size());
    return m;
}

double phi(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); }
double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

/// erf^-1 by bisection on std::erf (slow, independent of the library's approximation).
double host_erfinv(double y) {
    double lo = -10, hi = 10;
    for (int i = 0; i < 200; ++i) {
        double mid = 0.5 * (lo + hi);
        (std::erf(mid) < y ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

} // namespace

// ---- Philox ------------------------------------------------------------------------------------

TEST(RandomTest, PhiloxKnownAnswers) {
    // kat_vectors from the Random123 distribution (philox4x32_10)
    EXPECT_EQ(philox({0, 0, 0, 0}, {0, 0}),
              (std::vector<uint32_t>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
    EXPECT_EQ(philox({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
              (std::vector<uint32_t>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
    EXPECT_EQ(philox({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
              (std::vector<uint32_t>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(RandomTest, BitsLayout) {
    Tensor b = random::bits({3, 5}, 1234);
    EXPECT_EQ(b.dtype(), DType::U32);
    EXPECT_EQ(b.shape(), (Shape{3, 5}));
    uint64_t key = key_of(b);
    std::vector<uint32_t> got = b.eval().to_vector<uint32_t>();
    ASSERT_EQ(got.size(), 15u);
    // element i: word i % 4 of the block for counter {i / 4, 0, call counter 0}
    for (uint32_t i = 0; i < 15; ++i) {
        auto block = philox({i / 4, 0, 0, 0}, {uint32_t(key), uint32_t(key >> 32)});
        EXPECT_EQ(got[i], block[i % 4]) << "element " << i;
    }
}

TEST(RandomTest, FunctionCounterAdvances) {
    Tensor b = random::bits({6}, 77);
    uint64_t key = key_of(b);
    const uint32_t k[2] = {uint32_t(key), uint32_t(key >> 32)};
    Function f = function({}, {b});
    std::vector<uint32_t> first = f()[0].to_vector<uint32_t>();
    std::vector<uint32_t> second = f()[0].to_vector<uint32_t>();
    EXPECT_NE(first, second) << "a function draws new numbers on each call";
    for (uint32_t call = 0; call < 2; ++call) {
        const auto& got = call == 0 ? first : second;
        for (uint32_t i = 0; i < 6; ++i) {
            auto block = philox({i / 4, 0, call, 0}, {k[0], k[1]});
            EXPECT_EQ(got[i], block[i % 4]) << "call " << call << " element " << i;
        }
    }
    FunctionOptions frozen;
    frozen.freeze_rng = true;
    Function g = function({}, {b}, {}, frozen);
    EXPECT_EQ(g()[0].to_vector<uint32_t>(), g()[0].to_vector<uint32_t>());
}

// ---- seeds -------------------------------------------------------------------------------------

TEST(RandomTest, SeedsReproduceAndDiffer) {
    auto u = [](std::optional<uint64_t> s) {
        return random::uniform({64}, 0, 1, f32, s).eval().to_vector<float>();
    };
    EXPECT_EQ(u(5), u(5));
    EXPECT_NE(u(5), u(6));
    EXPECT_NE(u({}), u({})) << "draws without a seed take fresh seeds";
    random::manual_seed(99);
    auto a = u({}), b = u({});
    random::manual_seed(99);
    EXPECT_EQ(u({}), a);
    EXPECT_EQ(u({}), b);
    random::manual_seed(100);
    EXPECT_NE(u({}), a);
}

TEST(RandomTest, NextSeedIsThreadSafe) {
    std::vector<std::vector<uint64_t>> got(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&got, t] {
            for (int i = 0; i < 2000; ++i) got[t].push_back(random::next_seed());
        });
    for (auto& th : threads) th.join();
    std::set<uint64_t> all;
    for (const auto& v : got) all.insert(v.begin(), v.end());
    EXPECT_EQ(all.size(), 8000u) << "every call gets a distinct seed";
}

// ---- uniform -----------------------------------------------------------------------------------

TEST(RandomTest, UniformExactFromBits) {
    std::vector<uint32_t> bits = random::bits({1000}, 31).eval().to_vector<uint32_t>();
    std::vector<float> u32 = random::uniform({1000}, 0, 1, f32, 31).eval().to_vector<float>();
    std::vector<double> u64 = random::uniform({1000}, 0, 1, f64, 31).eval().to_vector<double>();
    for (size_t i = 0; i < bits.size(); ++i) {
        EXPECT_EQ(u32[i], float(double(bits[i] >> 8) * std::ldexp(1.0, -24))) << i;
        EXPECT_EQ(u64[i], double(bits[i]) * std::ldexp(1.0, -32)) << i;
    }
}

TEST(RandomTest, UniformMoments) {
    const int64_t n = 100000;
    for (DType dt : {f32, f64}) {
        Array a = random::uniform({n}, 0, 1, dt, 2024).eval();
        EXPECT_EQ(a.dtype(), dt);
        Moments m = moments(a.to_vector<double>());
        EXPECT_GE(m.min, 0.0);
        EXPECT_LT(m.max, 1.0);
        // mean 1/2 (sd sqrt(1/12 / n)); variance 1/12 (sd sqrt((1/80 - 1/144) / n))
        EXPECT_NEAR(m.mean, 0.5, 5 * std::sqrt(1.0 / 12 / n));
        EXPECT_NEAR(m.var, 1.0 / 12, 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / n));
    }
    Array b = random::uniform({n}, -3, 5, f32, 7).eval();
    Moments m = moments(b.to_vector<double>());
    EXPECT_GE(m.min, -3.0);
    EXPECT_LT(m.max, 5.0);
    EXPECT_NEAR(m.mean, 1.0, 5 * 8 * std::sqrt(1.0 / 12 / n));
    EXPECT_NEAR(m.var, 64.0 / 12, 5 * 64 * std::sqrt((1.0 / 80 - 1.0 / 144) / n));
}

// ---- normal ------------------------------------------------------------------------------------

TEST(RandomTest, NormalMoments) {
    const int64_t n = 200000;
    for (DType dt : {f32, f64}) {
        Array a = random::normal({n}, 0, 1, dt, 11).eval();
        EXPECT_EQ(a.dtype(), dt);
        std::vector<double> v = a.to_vector<double>();
        for (double x : v) ASSERT_TRUE(std::isfinite(x));
        Moments m = moments(v);
        // mean 0 (sd 1/sqrt(n)), variance 1 (sd sqrt(2/n)), fourth moment 3 (sd sqrt(96/n))
        EXPECT_NEAR(m.mean, 0.0, 5 / std::sqrt(double(n)));
        EXPECT_NEAR(m.var, 1.0, 5 * std::sqrt(2.0 / n));
        EXPECT_NEAR(m.m4, 3.0, 5 * std::sqrt(96.0 / n));
        // P(|z| < 1) = erf(1 / sqrt 2)
        double inside = 0;
        for (double x : v) inside += std::abs(x) < 1;
        double p = std::erf(1 / std::sqrt(2.0));
        EXPECT_NEAR(inside / n, p, 5 * std::sqrt(p * (1 - p) / n));
    }
    Array b = random::normal({n}, 3, 2, f32, 12).eval();
    Moments m = moments(b.to_vector<double>());
    EXPECT_NEAR(m.mean, 3.0, 5 * 2 / std::sqrt(double(n)));
    EXPECT_NEAR(m.var, 4.0, 5 * 4 * std::sqrt(2.0 / n));
}

// ---- bernoulli ---------------------------------------------------------------------------------

TEST(RandomTest, BernoulliRate) {
    const int64_t n = 100000;
    for (double p : {0.3, 0.5, 0.01}) {
        Array a = random::bernoulli({n}, p, 5).eval();
        ASSERT_EQ(a.dtype(), DType::Bool);
        double rate = 0;
        for (double x : a.to_vector<double>()) rate += x;
        rate /= n;
        EXPECT_NEAR(rate, p, 5 * std::sqrt(p * (1 - p) / n)) << "p = " << p;
    }
    auto count = [](const Array& a) {
        int64_t c = 0;
        for (double x : a.to_vector<double>()) c += x != 0;
        return c;
    };
    EXPECT_EQ(count(random::bernoulli({1000}, 0.0, 1).eval()), 0);
    EXPECT_EQ(count(random::bernoulli({1000}, 1.0, 1).eval()), 1000);
    EXPECT_THROW(random::bernoulli({4}, 1.5), InputError);
    EXPECT_THROW(random::bernoulli({4}, -0.1), InputError);
}

// ---- truncated normal --------------------------------------------------------------------------

TEST(RandomTest, TruncatedNormalBoundsAndMoments) {
    const int64_t n = 100000;
    struct Case {
        double lo, hi;
        DType dt;
    };
    for (Case c : {Case{-2, 2, f32}, Case{-1, 3, f32}, Case{0.5, 1.5, f64}, Case{-2, 2, f64}}) {
        Array a = random::truncated_normal({n}, c.lo, c.hi, c.dt, 17).eval();
        EXPECT_EQ(a.dtype(), c.dt);
        Moments m = moments(a.to_vector<double>());
        EXPECT_GE(m.min, c.lo);
        EXPECT_LE(m.max, c.hi);
        // closed forms of the truncated standard normal on [a, b], Z = Phi(b) - Phi(a):
        // mean (phi(a) - phi(b)) / Z; variance 1 + (a phi(a) - b phi(b)) / Z - mean^2
        double z = Phi(c.hi) - Phi(c.lo);
        double mean = (phi(c.lo) - phi(c.hi)) / z;
        double var = 1 + (c.lo * phi(c.lo) - c.hi * phi(c.hi)) / z - mean * mean;
        EXPECT_NEAR(m.mean, mean, 5 * std::sqrt(var / n)) << c.lo << ", " << c.hi;
        EXPECT_NEAR(m.var, var, 0.02 * var) << c.lo << ", " << c.hi;
    }
}

TEST(RandomTest, TruncatedNormalIsTheInverseCdfOfItsBits) {
    // x = sqrt(2) erfinv(y), y uniform in (erf(lo/sqrt2), erf(hi/sqrt2)) from the midpoints of the
    // bits grid; erfinv here by bisection, so this checks the library's erfinv composite.
    const int64_t n = 2000;
    const double lo = -1.5, hi = 2.5;
    double a = std::erf(lo / std::sqrt(2.0)), b = std::erf(hi / std::sqrt(2.0));
    std::vector<uint32_t> bits = random::bits({n}, 21).eval().to_vector<uint32_t>();
    std::vector<double> x64 =
        random::truncated_normal({n}, lo, hi, f64, 21).eval().to_vector<double>();
    std::vector<double> x32 =
        random::truncated_normal({n}, lo, hi, f32, 21).eval().to_vector<double>();
    for (int64_t i = 0; i < n; ++i) {
        double v64 = (double(bits[i]) + 0.5) * std::ldexp(1.0, -32);
        double want64 = std::sqrt(2.0) * host_erfinv(a + (b - a) * v64);
        EXPECT_NEAR(x64[i], want64, 1e-12) << i;
        double v32 = (double(bits[i] >> 8) + 0.5) * std::ldexp(1.0, -24);
        double want32 = std::sqrt(2.0) * host_erfinv(a + (b - a) * v32);
        EXPECT_NEAR(x32[i], want32, 2e-5) << i;
    }
}

// ---- errors and *_like -------------------------------------------------------------------------

TEST(RandomTest, Errors) {
    EXPECT_THROW(random::uniform({3}, 0, 1, i32), TypeError);
    EXPECT_THROW(random::normal({3}, 0, 1, u32), TypeError);
    EXPECT_THROW(random::uniform({-1, 3}), ShapeError);
    EXPECT_THROW(random::normal({2}, 0, -1), InputError);
    EXPECT_THROW(random::uniform({2}, 1, 0), InputError);
    EXPECT_THROW(random::truncated_normal({2}, 1, 1), InputError);
}

TEST(RandomTest, LikeVariantsBindUnknownDims) {
    Placeholder x({-1, 3}, f64, "x");
    Tensor u = random::uniform_like(x, 0, 1, {}, 3);
    EXPECT_EQ(u.shape(), (Shape{-1, 3}));
    EXPECT_EQ(u.dtype(), DType::F64) << "the dtype follows a float tensor";
    Givens gv{{x, constant(Array(DType::F64, {5, 3}))}};
    EXPECT_EQ(u.eval(gv).shape(), (Shape{5, 3}));
    EXPECT_EQ(random::bits_like(x, 1).eval(gv).shape(), (Shape{5, 3}));
    EXPECT_EQ(random::normal_like(x, 0, 1, f32, 1).eval(gv).dtype(), DType::F32);
    EXPECT_EQ(random::bernoulli_like(x, 0.5, 1).eval(gv).shape(), (Shape{5, 3}));
    Array t = random::truncated_normal_like(x, -1, 1, {}, 1).eval(gv);
    EXPECT_EQ(t.shape(), (Shape{5, 3}));
    for (double v : t.to_vector<double>()) EXPECT_TRUE(v >= -1 && v <= 1);
    // same seed and shape: the same numbers as the static draw
    EXPECT_EQ(u.eval(gv).to_vector<double>(),
              random::uniform({5, 3}, 0, 1, f64, 3).eval().to_vector<double>());
    // a static shape source is not kept as an input
    Placeholder s({2, 2}, i32, "s");
    Tensor bs = random::bits_like(s, 4);
    EXPECT_EQ(bs.node()->num_inputs(), 1u);
    EXPECT_EQ(random::uniform_like(s, 0, 1, {}, 4).dtype(), DType::F32);
}
