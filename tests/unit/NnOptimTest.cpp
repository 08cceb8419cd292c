// Tests of the optimizers, gradient clipping, learning-rate tensors and moving averages.
#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <cmath>

using namespace sj;

namespace {
/// loss = 0.5 * sum((w - target)^2): the gradient is w - target.
Tensor quadratic(const Variable &w, const std::vector<double> &target) {
    Tensor d = w - constant(Array(target));
    return 0.5 * sum(d * d);
}

std::vector<double> value(const Variable &v) {
    return v.value().to_vector<double>();
}
} // namespace

TEST(NnOptim, StateVariablesAreNamedAndNonTrainable) {
    Scope s("nnopt_names");
    Variable w(Array(std::vector<float>{1, 2}), "w");
    nn::optim::Adam adam(0.1, nn::optim::AdamOptions{.amsgrad = true});
    EXPECT_EQ(adam.scope(), "nnopt_names/adam");
    EXPECT_EQ(adam.step().full_name(), "nnopt_names/adam/step");
    Updates u = adam.minimize(sum(w * w), {w});
    std::vector<Variable> vars = adam.variables();
    ASSERT_EQ(vars.size(), 4u);
    EXPECT_EQ(vars[1].full_name(), "nnopt_names/adam/nnopt_names/w/m");
    EXPECT_EQ(vars[3].full_name(), "nnopt_names/adam/nnopt_names/w/v_max");
    for (const auto &v : vars)
        EXPECT_FALSE(v.trainable()) << v.full_name();
    EXPECT_EQ(u.size(), 1u + 3u + 1u); // w, three slots, the counter
    // a second minimize reuses the slots; a second optimizer gets its own scope
    adam.minimize(sum(w * w), {w});
    EXPECT_EQ(adam.variables().size(), 4u);
    nn::optim::Adam other(0.1);
    EXPECT_EQ(other.scope(), "nnopt_names/adam_1");
    EXPECT_THROW(adam.apply({w}, {w, w}), InputError);
    EXPECT_THROW(adam.minimize(w, {w}), TypeError);
}

TEST(NnOptim, SgdAndMomentumClosedForm) {
    Scope s("nnopt_sgd");
    Variable a(Array(std::vector<double>{1.0, -2.0}), "a");
    Variable b(Array(std::vector<double>{1.0, -2.0}), "b");
    nn::optim::SGD sgd(0.1);
    nn::optim::SGD mom(0.1, {.momentum = 0.9, .weight_decay = 0.5});
    Updates u = sgd.minimize(quadratic(a, {0, 0}), {a}) + mom.minimize(quadratic(b, {0, 0}), {b});
    Function f = function({}, {}, u);
    // plain: w <- w (1 - lr); momentum with L2: g = 1.5 w, buf = 0.9 buf + g, w <- w - lr buf
    double wa = 1.0, wb = 1.0, buf = 0.0;
    for (int i = 0; i < 5; ++i) {
        f();
        wa *= 0.9;
        buf = 0.9 * buf + 1.5 * wb;
        wb -= 0.1 * buf;
        EXPECT_NEAR(value(a)[0], wa, 1e-14);
        EXPECT_NEAR(value(a)[1], -2 * wa, 1e-14);
        EXPECT_NEAR(value(b)[0], wb, 1e-14);
        EXPECT_NEAR(value(b)[1], -2 * wb, 1e-14);
    }
    EXPECT_EQ(sgd.step().value().item<int64_t>(), 5);
}

TEST(NnOptim, AdamFirstStepIsLrTimesSign) {
    // m_hat = g and v_hat = g^2 after one step, so each coordinate moves by lr g / (|g| + eps)
    Scope s("nnopt_adam1");
    Variable w(Array(std::vector<float>{3, -0.001f, 50}), "w");
    nn::optim::Adam adam(0.01);
    Function f = function({}, {}, adam.minimize(quadratic(w, {0, 0, 0}), {w}));
    f();
    std::vector<float> v = w.value().to_vector<float>();
    EXPECT_NEAR(v[0], 3 - 0.01, 1e-6);
    EXPECT_NEAR(v[1], -0.001 + 0.01 * 0.001 / (0.001 + 1e-8), 1e-6);
    EXPECT_NEAR(v[2], 50 - 0.01, 1e-5);
}

TEST(NnOptim, AdamWDecouplesWeightDecay) {
    // with a zero gradient Adam's step is 0 (m = 0), so only the decay acts: w (1 - lr wd)
    Scope s("nnopt_adamw");
    Variable w(Array(std::vector<double>{2.0}), "w");
    Variable z(Array(std::vector<double>{2.0}), "z");
    nn::optim::AdamW adamw(0.1, {.weight_decay = 0.5});
    nn::optim::Adam adam_l2(0.1, {.weight_decay = 0.5});
    Function f =
        function({}, {}, adamw.apply({zeros_like(w)}, {w}) + adam_l2.apply({zeros_like(z)}, {z}));
    f();
    EXPECT_NEAR(value(w)[0], 2.0 * (1 - 0.05), 1e-14);
    // the L2 variant sees g = wd w = 1, so it takes a full Adam step of lr
    EXPECT_NEAR(value(z)[0], 2.0 - 0.1, 1e-7);
}

// Naming some options keeps PyTorch's defaults for the others (torch.optim's documentation:
// SGD momentum 0, dampening 0, nesterov False, weight_decay 0; Adam betas (0.9, 0.999), eps 1e-8,
// weight_decay 0, amsgrad False; AdamW the same but weight_decay 0.01; RMSprop alpha 0.99,
// eps 1e-8, weight_decay 0, momentum 0, centered False; Adagrad lr_decay 0, weight_decay 0,
// initial_accumulator_value 0, eps 1e-10).
TEST(NnOptim, SomeOptionsKeepTheOtherDefaults) {
    Scope s("nnopt_defaults");
    nn::optim::SGD sgd(0.1, {.dampening = 0.1, .weight_decay = 0.5});
    EXPECT_EQ(sgd.options().momentum, 0.0);
    EXPECT_FALSE(sgd.options().nesterov);
    nn::optim::SGD sgd1(0.1, {.momentum = 0.9, .nesterov = true});
    EXPECT_EQ(sgd1.options().dampening, 0.0);
    EXPECT_EQ(sgd1.options().weight_decay, 0.0);
    nn::optim::SGD sgd2(0.1, {.momentum = 0.9});
    EXPECT_FALSE(sgd2.options().nesterov);
    EXPECT_EQ(sgd2.options().weight_decay, 0.0);

    nn::optim::Adam adam(0.1, {.eps = 1e-6});
    EXPECT_EQ(adam.options().beta1, 0.9);
    EXPECT_EQ(adam.options().beta2, 0.999);
    EXPECT_EQ(adam.options().weight_decay, 0.0);
    EXPECT_FALSE(adam.options().amsgrad);
    nn::optim::Adam adam2(0.1, {.amsgrad = true});
    EXPECT_EQ(adam2.options().eps, 1e-8);

    nn::optim::AdamW adamw(0.1, {.eps = 1e-8});
    EXPECT_EQ(adamw.options().weight_decay, 0.01);
    EXPECT_EQ(adamw.options().beta1, 0.9);
    EXPECT_EQ(adamw.options().beta2, 0.999);
    nn::optim::AdamW adamw2(0.1, {.beta2 = 0.99, .amsgrad = true});
    EXPECT_EQ(adamw2.options().weight_decay, 0.01);
    EXPECT_EQ(adamw2.options().eps, 1e-8);
    nn::optim::AdamW adamw3;
    EXPECT_EQ(adamw3.options().weight_decay, 0.01);

    nn::optim::RMSprop rms(0.1, {.momentum = 0.5});
    EXPECT_EQ(rms.options().alpha, 0.99);
    EXPECT_EQ(rms.options().eps, 1e-8);
    EXPECT_FALSE(rms.options().centered);
    EXPECT_EQ(rms.options().weight_decay, 0.0);
    nn::optim::RMSprop rms2(0.1, {.centered = true});
    EXPECT_EQ(rms2.options().momentum, 0.0);

    nn::optim::Adagrad ada(0.1, {.weight_decay = 0.5});
    EXPECT_EQ(ada.options().eps, 1e-10);
    EXPECT_EQ(ada.options().lr_decay, 0.0);
    EXPECT_EQ(ada.options().initial_accumulator, 0.0);
    nn::optim::Adagrad ada2(0.1, {.eps = 1e-8});
    EXPECT_EQ(ada2.options().weight_decay, 0.0);
}

TEST(NnOptim, AdamWDecaysWhenOtherOptionsAreGiven) {
    // zero gradient: only the default decoupled decay acts, w (1 - lr 0.01)
    Scope s("nnopt_adamw_default");
    Variable w(Array(std::vector<double>{2.0}), "w");
    nn::optim::AdamW adamw(0.1, {.eps = 1e-8});
    Function f = function({}, {}, adamw.apply({zeros_like(w)}, {w}));
    f();
    EXPECT_NEAR(value(w)[0], 2.0 * (1 - 0.1 * 0.01), 1e-14);
}

TEST(NnOptim, ClipByGlobalNorm) {
    Scope s("nnopt_clip");
    Variable a(Array(std::vector<double>{3.0}), "a");
    Variable b(Array(std::vector<double>{4.0}), "b");
    nn::optim::SGD sgd(1.0);
    sgd.clip_by_global_norm(1.0);
    // gradients (3, 4) have norm 5: scaled to (0.6, 0.8)
    Function f = function({}, {}, sgd.minimize(quadratic(a, {0}) + quadratic(b, {0}), {a, b}));
    f();
    EXPECT_NEAR(value(a)[0], 3.0 - 0.6, 1e-14);
    EXPECT_NEAR(value(b)[0], 4.0 - 0.8, 1e-14);
    // small gradients pass unchanged
    std::vector<Tensor> g =
        nn::optim::clip_by_global_norm({constant(Array(std::vector<double>{0.3, 0.4}))}, 1.0);
    EXPECT_EQ(g[0].eval().to_vector<double>(), (std::vector<double>{0.3, 0.4}));
    EXPECT_NEAR(nn::optim::global_norm({constant(Array(std::vector<float>{3})),
                                    constant(Array(std::vector<double>{4}))})
                    .eval()
                    .item<double>(),
                5.0, 1e-12);
}

TEST(NnOptim, ClipByValue) {
    Scope s("nnopt_clipv");
    Variable w(Array(std::vector<double>{5.0, 0.2, -7.0}), "w");
    nn::optim::SGD sgd(1.0);
    sgd.clip_by_value(0.5);
    Function f = function({}, {}, sgd.minimize(quadratic(w, {0, 0, 0}), {w}));
    f();
    std::vector<double> v = value(w);
    EXPECT_NEAR(v[0], 4.5, 1e-14);
    EXPECT_NEAR(v[1], 0.0, 1e-14);
    EXPECT_NEAR(v[2], -6.5, 1e-14);
}

TEST(NnOptim, LearningRateAsTensorAndSchedule) {
    Scope s("nnopt_lr");
    Variable a(Array(std::vector<double>{1.0}), "a");
    Variable b(Array(std::vector<double>{1.0}), "b");
    Placeholder lr({}, f32, "lr");
    nn::optim::SGD by_input(lr);
    nn::optim::SGD scheduled([](const Tensor &step) {
        return nn::schedules::piecewise_constant(step, {2}, {0.5, 0.1}, f64);
    });
    Function f = function({lr}, {by_input.learning_rate(), scheduled.learning_rate(f64)},
                          by_input.minimize(quadratic(a, {0}), {a}) +
                              scheduled.minimize(quadratic(b, {0}), {b}));
    double wa = 1, wb = 1;
    std::vector<float> lrs{0.5f, 0.25f, 0.125f, 0.5f};
    for (int i = 0; i < 4; ++i) {
        auto r = f(Array::scalar(lrs[i]));
        EXPECT_FLOAT_EQ(r[0].item<float>(), lrs[i]);
        double sl = i < 2 ? 0.5 : 0.1; // steps 0, 1 before the boundary
        EXPECT_DOUBLE_EQ(r[1].item<double>(), sl);
        wa *= 1 - double(lrs[i]);
        wb *= 1 - sl;
        EXPECT_NEAR(value(a)[0], wa, 1e-7);
        EXPECT_NEAR(value(b)[0], wb, 1e-14);
    }
}

TEST(NnOptim, TrainsASmallClassifier) {
    // end to end: a Sequential MLP on a separable problem reaches full training accuracy
    Scope s("nnopt_mlp");
    random::manual_seed(3);
    nn::Sequential net{nn::Dense(2, 16), nn::ReLU(), nn::Dense(16, 2)};
    Placeholder x({-1, 2}, f32, "x");
    Placeholder y({-1}, i32, "y");
    Tensor loss = mean(nn::losses::sparse_softmax_crossentropy_logits(y, net(x, nn::Mode::Train)));
    nn::optim::Adam adam(0.05);
    Function train = function({x, y}, {loss}, adam.minimize(loss, net.trainable_variables()));
    Function acc = function({x, y}, {nn::metrics::accuracy(y, net(x, nn::Mode::Eval))});
    std::vector<float> xs;
    std::vector<int32_t> ys;
    for (int i = 0; i < 32; ++i) {
        float u = float(i % 8) / 4 - 1, v = float(i / 8) / 2 - 0.75f;
        xs.push_back(u);
        xs.push_back(v);
        ys.push_back(u * v > 0 ? 1 : 0); // XOR-like quadrants
    }
    Array xa(xs, {32, 2}), ya(ys);
    float first = train(xa, ya)[0].item<float>(), last = first;
    for (int i = 0; i < 300; ++i)
        last = train(xa, ya)[0].item<float>();
    EXPECT_LT(last, 0.2f * first);
    EXPECT_GE(acc(xa, ya)[0].item<float>(), 0.95f);
}

TEST(NnOptim, EmaClosedForm) {
    // ported behaviour: after K updates toward a constant value p, the shadow is
    // d^K s0 + (1 - d^K) p
    Scope s("nnopt_ema");
    Variable w(Array(std::vector<double>{1.0, -1.0}), "w");
    nn::optim::ExponentialMovingAverage ema(0.9);
    Updates u = ema.apply({w});
    Variable shadow = ema.average(w);
    EXPECT_EQ(shadow.full_name(), "nnopt_ema/ema/nnopt_ema/w");
    EXPECT_FALSE(shadow.trainable());
    w.assign(Array(std::vector<double>{3.0, 5.0}));
    Function f = function({}, {}, u);
    for (int k = 1; k <= 7; ++k) {
        f();
        double dk = std::pow(0.9, k);
        EXPECT_NEAR(value(shadow)[0], dk * 1.0 + (1 - dk) * 3.0, 1e-14);
        EXPECT_NEAR(value(shadow)[1], dk * -1.0 + (1 - dk) * 5.0, 1e-14);
    }
    Variable other(Array(std::vector<double>{0.0}), "other");
    EXPECT_THROW(ema.average(other), InputError);
}

TEST(NnOptim, EmaFollowsTheUpdatedValueAndNumUpdates) {
    // with `after`, the shadow averages the value after this call's update: w goes 1, 2, 3, ...
    Scope s("nnopt_ema2");
    Variable w(Array(std::vector<double>{0.0}), "w");
    Updates step{{w, w + 1.0}};
    nn::optim::ExponentialMovingAverage ema(0.5, true);
    Function f = function({}, {}, step + ema.apply({w}, step));
    double sh = 0.0;
    for (int n = 0; n < 6; ++n) {
        f();
        double d = std::min(0.5, (1.0 + n) / (10.0 + n));
        sh = d * sh + (1 - d) * (n + 1.0);
        EXPECT_NEAR(value(ema.average(w))[0], sh, 1e-14) << "update " << n;
    }
    EXPECT_EQ(ema.variables().size(), 2u);
}
