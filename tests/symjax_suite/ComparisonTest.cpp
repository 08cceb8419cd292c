// Port of SymJAX's tests/comparison_test.py, which compares symjax with TensorFlow: Adam and SGD
// trajectories, an EMA, and a conv + batch-norm + dense network trained with SGD. The TensorFlow
// numbers are recomputed by gen_expected.py (NumPy and torch, float64, TF's formulas); the large
// inputs are drawn on both sides from SuiteUtil.h's hash_uniform instead of np.random.randn.
#include "symjax_suite/SuiteUtil.h"

#include <symjax/nn.h>

#include <functional>

using namespace sj;
using namespace sj::suite;

namespace {

/// comparison_test.py's SJ(): 400 full-batch steps on mean((X W + b - Y)^2), the loss of each.
std::vector<double> sj_losses(const Array& X, const Array& Y, const Array& W0, const Array& b0,
                              nn::optim::Optimizer& opt, int steps) {
    Placeholder input(X.shape(), DType::F32, "input");
    Placeholder output(Y.shape(), DType::F32, "output");
    Variable W(W0, "W"), b(b0, "b");
    Tensor loss = mean(pow(matmul(input, W) + b - output, 2.0));
    // optimizers.SGD(sj_loss, lr): the optimizer finds the loss's trainable variables
    Function train = function({input, output}, {loss}, opt.minimize(loss));
    std::vector<double> losses;
    for (int i = 0; i < steps; ++i)
        losses.push_back(train(X, Y)[0].at(0));
    return losses;
}

} // namespace

// 400 steps of Adam and of SGD at learning rates 0.001, 0.01 and 0.1, against TensorFlow 1's
// AdamOptimizer and GradientDescentOptimizer: np.allclose(tf, sj, atol=1e-3).
//
// The expected Adam is TF's (bias-corrected from the first step). SymJAX's own Adam passed this
// test only approximately: its first step is p -= lr_t * g (the raw gradient, via
// `where(local_step == 1, grad, update)`) instead of lr_t * m / (sqrt(v) + eps), and its epsilon
// defaults to 1e-7; sj's Adam follows Kingma and Ba, which is what is asserted.
TEST(SymjaxComparison, Adam) {
    const auto& e = expected()["adam"];
    const int64_t bs = 1000, d = 500;
    Array X = unit(1, {bs, d});
    Array w_true = unit(2, {d, 1});
    // Y = X w + 2, computed in f64 and rounded to f32 as gen_expected.py does
    Array Y(DType::F32, {bs, 1});
    for (int64_t i = 0; i < bs; ++i) {
        double acc = 0;
        for (int64_t k = 0; k < d; ++k)
            acc += X.at(i * d + k) * w_true.at(k);
        Y.data<float>()[i] = float(acc + 2);
    }
    Array W0 = unit(3, {d, 1}), b0 = unit(4, {1});

    for (double lr : {0.001, 0.01, 0.1}) {
        char key[32];
        std::snprintf(key, sizeof key, "%g", lr);
        nn::optim::Adam adam(lr);
        nn::optim::SGD sgd(lr);
        for (auto [name, opt] : {std::pair<std::string, nn::optim::Optimizer*>{"Adam", &adam},
                                 std::pair<std::string, nn::optim::Optimizer*>{"SGD", &sgd}}) {
            std::vector<double> tf;
            flatten_json(e[name + "_" + key], tf);
            std::vector<double> sj = sj_losses(X, Y, W0, b0, *opt, 400);
            ASSERT_EQ(tf.size(), sj.size());
            for (size_t i = 0; i < tf.size(); ++i)
                ASSERT_TRUE(isclose(tf[i], sj[i], 1e-5, 1e-3))
                    << name << " lr " << lr << " step " << i << ": tf " << tf[i] << ", sj "
                    << sj[i];
        }
    }
}

// Keras' Conv2D(2, 5) + BatchNormalization + relu + Flatten + Dense(10), trained with SGD(0.001)
// for 10 epochs next to the same symjax network, with SymJAX's checks per epoch: inference and
// training predictions agree (atol 1e-3) on more than 80% of the entries, the losses within 1e-3,
// and each parameter's gradient on at least half of its entries.
//
// To keep expected.json small, the predictions are compared on 256 fixed entries (of 1280) and
// the dense weight's gradient on 512 (of 15680); the other gradients are compared whole.
TEST(SymjaxComparison, LearnBn) {
    const auto& e = expected()["learn_bn"];
    const int64_t batch = 128;
    Placeholder input({batch, 3, 32, 32}, DType::F32, "input");
    Placeholder label({batch}, DType::I32, "label");

    nn::Conv2D conv(3, 2, {5, 5});
    conv.weights().assign(unit(10, {2, 3, 5, 5}));
    conv.bias().assign(Array::full(DType::F32, {2}, 0.0));
    nn::BatchNorm bn(2, {.momentum = 0.99, .eps = 1e-3}); // Keras' momentum and epsilon
    nn::Dense dense(2 * 28 * 28, 10);
    dense.weights().assign(unit(11, {2 * 28 * 28, 10}));
    dense.bias().assign(Array::full(DType::F32, {10}, 0.0));

    auto model = [&](nn::Mode mode) {
        Tensor h = nn::relu(bn(conv(input, mode), mode));
        // channels last before flattening, as Keras' Flatten of its NHWC tensor
        h = reshape(transpose(h, {0, 2, 3, 1}), {batch, 2 * 28 * 28});
        return dense(h, mode);
    };
    Tensor out_eval = model(nn::Mode::Eval);
    Tensor out = model(nn::Mode::Train);
    Tensor loss = mean(nn::losses::sparse_softmax_crossentropy_logits(label, out));
    std::vector<Tensor> params{conv.weights(), conv.bias(),     bn.gamma(),
                               bn.beta(),      dense.weights(), dense.bias()};

    Function f_eval = function({input}, {out_eval});
    Function f = function({input, label}, {loss, out});
    Function g = function({input, label}, gradients(loss, params));
    nn::optim::SGD sgd(0.001); // nn.optimizers.SGD(loss, 0.001): every trainable variable of loss
    Function train = function({input, label}, {loss}, sgd.minimize(loss) + state_updates(loss));

    std::vector<int64_t> pred_index = e["pred_index"].get<std::vector<int64_t>>();
    std::vector<int64_t> w2_index = e["w2_index"].get<std::vector<int64_t>>();
    auto pick = [](const Array& a, const std::vector<int64_t>& idx) {
        std::vector<double> v;
        for (int64_t i : idx)
            v.push_back(a.at(i));
        return v;
    };
    const char* grad_names[] = {"grad_W",    "grad_b",  "grad_gamma",
                                "grad_beta", "grad_W2", "grad_b2"};

    for (int epoch = 0; epoch < 10; ++epoch) {
        SCOPED_TRACE("epoch " + std::to_string(epoch));
        const auto& ee = e["epochs"][size_t(epoch)];
        Array x = unit(100 + uint64_t(epoch), {batch, 3, 32, 32});
        Array y(DType::I32, {batch});
        Array yu = hash_uniform(200 + uint64_t(epoch), {batch}, 0, 10, DType::F64);
        for (int64_t i = 0; i < batch; ++i)
            y.data<int32_t>()[i] = int32_t(std::floor(yu.at(i)));

        std::vector<double> tf;
        flatten_json(ee["preds_eval"], tf);
        double nb = fraction_close(tf, pick(f_eval(x)[0], pred_index), 1e-5, 1e-3);
        EXPECT_GT(nb, 0.8) << "preds not training";

        std::vector<Array> sj_train = f(x, y);
        tf.clear();
        flatten_json(ee["preds_train"], tf);
        nb = fraction_close(tf, pick(sj_train[1], pred_index), 1e-5, 1e-3);
        EXPECT_GT(nb, 0.8) << "preds training";

        EXPECT_LT(std::fabs(sj_train[0].at(0) - ee["loss"].get<double>()), 1e-3) << "losses";

        std::vector<Array> sj_grads = g(x, y);
        for (size_t k = 0; k < params.size(); ++k) {
            tf.clear();
            flatten_json(ee[grad_names[k]], tf);
            std::vector<double> sjg = k == 4 ? pick(sj_grads[k], w2_index) : values(sj_grads[k]);
            EXPECT_GE(fraction_close(sjg, tf, 1e-5, 1e-3), 0.5) << grad_names[k];
        }
        train(x, y);
    }
}

// The inputs above are only the generator's if SuiteUtil.h's hash_uniform is gen_expected.py's.
TEST(SymjaxComparison, HashUniformMatchesGenerator) {
    std::vector<double> py;
    flatten_json(expected()["hash_uniform_check"], py);
    Array cc = hash_uniform(7, {5}, -1, 1, DType::F64);
    for (size_t i = 0; i < py.size(); ++i)
        EXPECT_NEAR(cc.at(int64_t(i)), py[i], 1e-9) << i;
}

// An EMA (decay 0.9) of 100 draws against tf.train.ExponentialMovingAverage: the debiased one
// agrees within 1e-3 on at least 45% of the steps, the plain one everywhere (atol 1e-7).
//
// TF's average starts at the first value. SymJAX's current EMA starts at zero, so its own
// `allclose(TF_EMA, SJ_EMA(debias=False))` fails (the test was written when its EMA started at
// the first value, the `first_step` variable its schedules doctest still prints). The port
// asserts the intended equality, with sj's EMA that starts at the first value.
TEST(SymjaxComparison, Ema) {
    const auto& e = expected()["ema_comparison"];
    std::vector<double> sample, tf, debiased;
    flatten_json(e["sample"], sample);
    flatten_json(e["tf"], tf);
    flatten_json(e["debiased"], debiased);

    auto sj_ema = [&](const nn::EmaOptions& options) {
        Placeholder x({}, DType::F32, "x");
        nn::Averaged ema = nn::exponential_moving_average(x, 0.9, options);
        Function train = function({x}, {ema.value}, ema.updates);
        std::vector<double> outputs;
        for (double v : sample)
            outputs.push_back(train(float(v))[0].at(0));
        return outputs;
    };
    std::vector<double> sj_debiased = sj_ema({.debias = true});
    // SymJAX asserts that its debiased EMA agrees with TF's (first-value start) on >= 45% of the
    // 100 draws (atol 1e-3). That held for an older SymJAX whose EMA started at the first value;
    // the current SymJAX starts at zero and debiases, and fails its own assertion: on this
    // sample the two agree on 29% (gen_expected.py's `debiased` against `tf`, both computed by
    // NumPy). We assert the correct behaviour instead: the debiased EMA is exactly
    // (zero-started EMA) / (1 - 0.9^t), and the first-value EMA is exactly TF's (below).
    EXPECT_LT(fraction_close(tf, debiased, 1e-5, 1e-3), 0.45); // the expected numbers disagree
    EXPECT_GE(fraction_close(sj_debiased, debiased, 1e-5, 1e-6), 1.0);

    std::vector<double> sj_plain = sj_ema({.debias = false, .start_at_first = true});
    EXPECT_GE(fraction_close(tf, sj_plain, 1e-5, 1e-7), 1.0);
}
