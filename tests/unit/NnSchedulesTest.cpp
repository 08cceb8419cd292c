// Tests of the learning-rate schedules against closed forms.
#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <cmath>

using namespace sj;

namespace {
/// The schedule's value at each step 0..n-1.
std::vector<double> trace(const std::function<Tensor(const Tensor &)> &schedule, int n) {
    Placeholder step({}, i64, "step");
    Function f = function({step}, {schedule(step)});
    std::vector<double> out;
    for (int i = 0; i < n; ++i)
        out.push_back(f(int64_t(i))[0].at(0));
    return out;
}
} // namespace

TEST(NnSchedules, PiecewiseConstantFollowsACounter) {
    // ported from SymJAX's test_pc: 0 before step 4, 1 from 4, 2 from 8; driven by a counter
    // variable advanced by the same function
    Variable step(Array::scalar<int64_t>(0), "nnsched_step", false);
    Tensor lr = nn::schedules::piecewise_constant(step, {4, 8}, {0, 1, 2});
    EXPECT_EQ(lr.dtype(), f32);
    Function f = function({}, {lr}, {{step, step + 1.0}});
    for (int i = 0; i < 10; ++i) {
        float v = f()[0].item<float>();
        EXPECT_EQ(v, i < 4 ? 0.f : (i < 8 ? 1.f : 2.f)) << "call " << i;
    }
    EXPECT_THROW(nn::schedules::piecewise_constant(step, {4, 8}, {0, 1}), InputError);
    EXPECT_THROW(nn::schedules::piecewise_constant(step, {8, 4}, {0, 1, 2}), InputError);
}

TEST(NnSchedules, ExponentialDecay) {
    auto smooth = trace(
        [](const Tensor &s) { return nn::schedules::exponential_decay(s, 0.1, 10, 0.5, false, f64); },
        25);
    auto stair = trace(
        [](const Tensor &s) { return nn::schedules::exponential_decay(s, 0.1, 10, 0.5, true, f64); },
        25);
    for (int i = 0; i < 25; ++i) {
        EXPECT_NEAR(smooth[i], 0.1 * std::pow(0.5, i / 10.0), 1e-15);
        EXPECT_NEAR(stair[i], 0.1 * std::pow(0.5, std::floor(i / 10.0)), 1e-15);
    }
}

TEST(NnSchedules, CosineDecayWithWarmup) {
    const double init = 2.0, decay = 20, alpha = 0.1, warm = 5;
    auto v = trace(
        [&](const Tensor &s) { return nn::schedules::cosine_decay(s, init, decay, alpha, warm, f64); },
        40);
    for (int i = 0; i < 40; ++i) {
        double ref;
        if (i < warm) {
            ref = init * i / warm;
        } else {
            double prog = std::min(i - warm, decay) / decay;
            ref = init * (alpha + (1 - alpha) * 0.5 * (1 + std::cos(M_PI * prog)));
        }
        EXPECT_NEAR(v[i], ref, 1e-12) << "step " << i;
    }
    EXPECT_NEAR(v[5], init, 1e-12);          // the peak right after warm-up
    EXPECT_NEAR(v[39], alpha * init, 1e-12); // the floor after the decay
    auto nowarm = trace([](const Tensor &s) { return nn::schedules::cosine_decay(s, 1.0, 10); }, 12);
    EXPECT_NEAR(nowarm[0], 1.0, 1e-6);
    EXPECT_NEAR(nowarm[5], 0.5, 1e-6);
    EXPECT_NEAR(nowarm[11], 0.0, 1e-6);
}

TEST(NnSchedules, LinearWarmup) {
    auto v =
        trace([](const Tensor &s) { return nn::schedules::linear_warmup(s, 1.0, 4, 0.2, f64); }, 7);
    std::vector<double> ref{0.2, 0.4, 0.6, 0.8, 1.0, 1.0, 1.0};
    for (int i = 0; i < 7; ++i)
        EXPECT_NEAR(v[i], ref[i], 1e-12);
    Placeholder bad({2}, i64, "bad");
    EXPECT_THROW(nn::schedules::linear_warmup(bad, 1.0, 4), ShapeError);
}
