// Tests of the moving averages of tensors (EMA with debiasing, first-value start, decay_min; SMA)
// against averages computed here with plain loops, over several calls of compiled functions.
#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <algorithm>
#include <cmath>

using namespace sj;

namespace {
class NnMovingAverage : public ::testing::TestWithParam<std::string> {
protected:
    FunctionOptions opts() const {
        FunctionOptions o;
        o.backend = GetParam();
        return o;
    }
};

/// Deterministic data in [-2, 2): a linear congruential sequence.
std::vector<std::vector<double>> rows_of(int rows, int cols, uint64_t seed) {
    std::vector<std::vector<double>> out(rows, std::vector<double>(cols));
    for (auto& r : out)
        for (auto& x : r) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            x = double(seed >> 11) / double(1ULL << 53) * 4.0 - 2.0;
        }
    return out;
}

void expect_near(const Array& got, const std::vector<double>& want, double tol, int step) {
    std::vector<double> g = got.to_vector<double>();
    ASSERT_EQ(g.size(), want.size());
    for (size_t i = 0; i < g.size(); ++i)
        EXPECT_NEAR(g[i], want[i], tol) << "step " << step << " element " << i;
}
} // namespace

// SymJAX tests/base_test.py, test_ema: debias off, a constant input.
TEST_P(NnMovingAverage, SymjaxEma) {
    Placeholder a({}, DType::F32, "ma_a");
    nn::Averaged ema = nn::exponential_moving_average(a, 0.9, {.debias = false});
    Function f = function({a}, {ema.value, ema.average}, ema.updates, opts());
    double current = 0;
    for (int i = 0; i < 10; ++i) {
        std::vector<Array> out = f(1.0);
        EXPECT_NEAR(out[1].item<float>(), current, 1e-6);
        current = 0.9 * current + 0.1 * 1;
        EXPECT_NEAR(out[0].item<float>(), current, 1e-6);
    }
}

TEST_P(NnMovingAverage, DebiasedEmaWithInit) {
    const int steps = 7, n = 3;
    const double alpha = 0.8, init = 0.5;
    auto xs = rows_of(steps, n, 11);
    Placeholder x({n}, DType::F64, "ma_x");
    nn::Averaged ema = nn::exponential_moving_average(x, alpha, {.init = scalar(init, DType::F64)});
    for (const auto& v : ema.variables)
        EXPECT_FALSE(v.trainable()) << v.full_name();
    Function f = function({x}, {ema.value, ema.average}, ema.updates, opts());
    std::vector<double> e(n, init), prev(n, init);
    double product = 1;
    for (int t = 0; t < steps; ++t) {
        product *= alpha;
        std::vector<double> want(n);
        for (int i = 0; i < n; ++i) {
            e[i] = alpha * e[i] + (1 - alpha) * xs[t][i];
            want[i] = (e[i] - init * product) / (1 - product);
        }
        std::vector<Array> out = f(Array(xs[t]));
        expect_near(out[0], want, 1e-12, t);
        expect_near(out[1], prev, 1e-12, t); // the average of the previous call
        if (t == 0)
            expect_near(out[0], xs[0], 1e-12, t); // debiased: the first value itself
        prev = want;
    }
    expect_near(ema.average.value(), prev, 1e-12, steps);
}

TEST_P(NnMovingAverage, StartAtFirstAndDecayMin) {
    const int steps = 6, n = 2;
    const double alpha = 0.95;
    auto xs = rows_of(steps, n, 5);
    Placeholder x({n}, DType::F64, "ma_xf");
    nn::Averaged a =
        nn::exponential_moving_average(x, alpha, {.debias = false, .start_at_first = true});
    nn::Averaged b = nn::exponential_moving_average(x, alpha, {.decay_min = true});
    Function f = function({x}, {a.value, b.value}, a.updates + b.updates, opts());
    std::vector<double> ea(n), eb(n, 0.0);
    double product = 1;
    for (int t = 0; t < steps; ++t) {
        double d = std::min(alpha, (1.0 + t) / (10.0 + t));
        product *= d;
        std::vector<double> want_b(n);
        for (int i = 0; i < n; ++i) {
            ea[i] = t == 0 ? xs[t][i] : alpha * ea[i] + (1 - alpha) * xs[t][i];
            eb[i] = d * eb[i] + (1 - d) * xs[t][i];
            want_b[i] = eb[i] / (1 - product); // init 0
        }
        std::vector<Array> out = f(Array(xs[t]));
        expect_near(out[0], ea, 1e-12, t);
        expect_near(out[1], want_b, 1e-12, t);
    }
}

// SymJAX tests/base_test.py, test_sma: window 3 over 4 rows of 4.
TEST_P(NnMovingAverage, SymjaxSma) {
    const int rows = 6, n = 4, window = 3;
    auto xs = rows_of(rows, n, 3);
    Placeholder a({n}, DType::F32, "ma_s");
    nn::Averaged sma = nn::simple_moving_average(a, window);
    Function f = function({a}, {sma.value, sma.average}, sma.updates, opts());
    std::vector<double> prev(n, 0.0);
    for (int t = 0; t < rows; ++t) {
        std::vector<float> row(xs[t].begin(), xs[t].end());
        std::vector<double> want(n, 0.0);
        int first = std::max(0, t - window + 1);
        for (int i = 0; i < n; ++i) {
            for (int k = first; k <= t; ++k)
                want[i] += double(float(xs[k][i]));
            want[i] /= (t - first + 1);
        }
        std::vector<Array> out = f(Array(row));
        expect_near(out[0], want, 1e-6, t);
        expect_near(out[1], prev, 1e-6, t);
        prev = want;
    }
}

TEST_P(NnMovingAverage, SmaWindowOneIsTheValue) {
    Placeholder a({2}, DType::F32, "ma_s1");
    nn::Averaged sma = nn::simple_moving_average(a, 1);
    Function f = function({a}, {sma.value}, sma.updates, opts());
    for (float v : {1.0f, -3.0f, 7.5f})
        EXPECT_EQ(f(Array(std::vector<float>{v, 2 * v}))[0].to_vector<float>(),
                  (std::vector<float>{v, 2 * v}));
}

INSTANTIATE_TEST_SUITE_P(Backends, NnMovingAverage, ::testing::Values("reference", "cpu"));

TEST(NnMovingAverageErrors, BadArguments) {
    Placeholder i({2}, DType::I32, "ma_int");
    Placeholder dyn({-1}, DType::F32, "ma_dyn");
    Placeholder x({2}, DType::F32, "ma_ok");
    EXPECT_THROW(nn::exponential_moving_average(i, 0.9), TypeError);
    EXPECT_THROW(nn::exponential_moving_average(dyn, 0.9), ShapeError);
    EXPECT_THROW(nn::exponential_moving_average(x, 1.5), InputError);
    EXPECT_THROW(nn::exponential_moving_average(x, 1.0), InputError); // 1 needs debias off
    EXPECT_NO_THROW(nn::exponential_moving_average(x, 1.0, {.debias = false}));
    EXPECT_THROW(nn::exponential_moving_average(x, 0.9, {.start_at_first = true}), InputError);
    EXPECT_THROW(nn::exponential_moving_average(x, 0.9, {.init = ones({3})}), ShapeError);
    EXPECT_THROW(nn::exponential_moving_average(Tensor(), 0.9), InputError);
    EXPECT_THROW(nn::simple_moving_average(x, 0), InputError);
    EXPECT_THROW(nn::simple_moving_average(i, 2), TypeError);
    EXPECT_THROW(nn::simple_moving_average(dyn, 2), ShapeError);
    try {
        nn::exponential_moving_average(dyn, 0.9);
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("ma_dyn"), std::string::npos) << e.what();
    }
}

TEST(NnMovingAverageErrors, StateIsScopedAndUnique) {
    Scope s("ma_scope");
    Placeholder x({2}, DType::F32, "x");
    nn::Averaged a = nn::exponential_moving_average(x, 0.9);
    nn::Averaged b = nn::exponential_moving_average(x, 0.9);
    EXPECT_EQ(a.average.full_name(), "ma_scope/ema/average");
    EXPECT_EQ(b.average.full_name(), "ma_scope/ema_1/average");
    EXPECT_EQ(a.variables.size(), 4u);
    EXPECT_EQ(a.updates.size(), 4u);
    nn::Averaged c = nn::simple_moving_average(x, 2);
    EXPECT_EQ(c.variables[0].full_name(), "ma_scope/sma/window");
    EXPECT_EQ(c.variables[0].shape(), (Shape{2, 2}));
}
