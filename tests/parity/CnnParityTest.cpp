// CNN parity with PyTorch: outputs, loss, gradients (train mode), eval-mode outputs, and 10 SGD
// steps with batch-norm running statistics, recorded by gen_cnn_parity.py (cnn/cnn_parity.json).
//
// The network: conv 3->6 3x3 SAME - BN - ReLU - maxpool 2 - conv 6->8 3x3 VALID - BN - ReLU -
// avgpool 2 stride 1 - flatten - dense 8->5, float32, on both backends (cpu runs conv and pooling
// through oneDNN). The bound is the 1e-4 relative, measured against the largest magnitude
// of the compared tensor: elements near zero (a gradient that cancels, a logit near 0) carry the
// float32 rounding of the large terms they are sums of, so an element-wise relative bound would
// test the rounding of cancellation, not the semantics.
#include "ops/OpHarness.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

using namespace sj;
using nlohmann::json;

namespace {

json load() {
    const std::string path = std::string(SJ_TEST_DATA_DIR) + "/parity/cnn/cnn_parity.json";
    std::ifstream f(path);
    if (!f)
        throw std::runtime_error("cannot open " + path);
    return json::parse(f);
}

void flatten_cnn_json(const json& j, std::vector<double>& out) {
    if (j.is_array())
        for (const auto &e : j)
            flatten_cnn_json(e, out);
    else
        out.push_back(j.get<double>());
}

std::vector<double> values(const json &j) {
    std::vector<double> v;
    flatten_cnn_json(j, v);
    return v;
}

Array cnn_array(const json& j, const Shape& shape, DType dtype = DType::F32) {
    return Array(values(j), shape).astype(dtype);
}

void expect_close(const Array &got, const json &want, const std::string &what) {
    std::vector<double> g = got.to_vector<double>(), w = values(want);
    ASSERT_EQ(g.size(), w.size()) << what;
    double scale = 0;
    for (double x : w)
        scale = std::max(scale, std::abs(x));
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < g.size(); ++i) {
        double d = std::abs(g[i] - w[i]);
        if (d > worst)
            worst = d, at = i;
    }
    EXPECT_LE(worst, 1e-4 * std::max(scale, 1e-6))
        << what << ": element " << at << " is " << g[at] << ", PyTorch has " << w[at]
        << " (largest magnitude " << scale << ")";
}

struct Net {
    nn::Conv2D conv1{3, 6, 3, {.padding = "SAME"}};
    nn::BatchNorm bn1{6, {.momentum = 0.9, .eps = 1e-5}};
    nn::Conv2D conv2{6, 8, 3};
    nn::BatchNorm bn2{8, {.momentum = 0.9, .eps = 1e-5}};
    nn::Dense dense{8, 5};
    nn::Sequential seq{conv1, bn1, nn::ReLU(), nn::MaxPool2D({2, 2}), conv2, bn2, nn::ReLU(),
                       nn::AvgPool2D({2, 2}, {.strides = {1, 1}}), nn::Flatten(), dense};

    std::map<std::string, Variable> params() const {
        return {{"conv1/W", conv1.weights()}, {"conv1/b", conv1.bias()},
                {"bn1/gamma", bn1.gamma()},   {"bn1/beta", bn1.beta()},
                {"conv2/W", conv2.weights()}, {"conv2/b", conv2.bias()},
                {"bn2/gamma", bn2.gamma()},   {"bn2/beta", bn2.beta()},
                {"dense/W", dense.weights()}, {"dense/b", dense.bias()}};
    }
    void assign(const json &p) const {
        for (const auto &[name, v] : params())
            v.assign(cnn_array(p.at(name), v.shape()));
    }
};

class CnnParity : public ::testing::TestWithParam<std::string> {};

TEST_P(CnnParity, MatchesPyTorch) {
    const json rec = load();
    FunctionOptions fo;
    fo.backend = GetParam();
    Scope scope("cnn_parity_" + GetParam());
    Net net;
    net.assign(rec.at("params"));
    Placeholder x({-1, 3, 8, 8}, f32, "x");
    Placeholder y({-1}, i32, "y");
    Array xa = cnn_array(rec.at("x"), {6, 3, 8, 8});
    Array ya = cnn_array(rec.at("y"), {6}, DType::I32);

    // eval mode with the initial running statistics
    Function eval = function({x}, {net.seq(x, nn::Mode::Eval)}, {}, fo);
    expect_close(eval(xa)[0], rec.at("eval0"), "eval logits, initial statistics");

    // train mode: logits, loss, gradients (no updates)
    Tensor logits = net.seq(x, nn::Mode::Train);
    Tensor loss = mean(nn::losses::sparse_softmax_crossentropy_logits(y, logits));
    std::vector<Tensor> outs{logits, loss};
    std::vector<std::string> names;
    for (const auto &[name, v] : net.params()) {
        outs.push_back(gradients(loss, v));
        names.push_back(name);
    }
    std::vector<Array> r = function({x, y}, outs, {}, fo)(xa, ya);
    expect_close(r[0], rec["train"]["logits"], "train logits");
    expect_close(r[1], rec["train"]["loss"], "train loss");
    // The conv biases feed a batch norm, which subtracts them again: their exact gradient is 0
    // and PyTorch's values are float32 rounding noise (~1e-8, a few ulp of the network's largest
    // gradient). For those the check is the exact answer: ours must be 0 up to 1e-6 of the
    // largest gradient (about 8 ulp of it).
    double gmax = 0;
    for (const auto &[name, g] : rec["train"]["grads"].items())
        for (double v : values(g))
            gmax = std::max(gmax, std::abs(v));
    for (size_t i = 0; i < names.size(); ++i) {
        if (names[i] == "conv1/b" || names[i] == "conv2/b") {
            for (double v : r[i + 2].to_vector<double>())
                EXPECT_LE(std::abs(v), 1e-6 * gmax) << "gradient of " << names[i] << " must be 0";
            continue;
        }
        expect_close(r[i + 2], rec["train"]["grads"][names[i]], "gradient of " + names[i]);
    }

    // 10 SGD steps with momentum; batch norm's running statistics ride on the same function
    std::vector<Variable> trainable;
    for (const auto &[name, v] : net.params())
        trainable.push_back(v);
    nn::optim::SGD sgd(0.05, {.momentum = 0.9});
    Function step = function({x, y}, {loss},
                             sgd.minimize(loss, trainable) + state_updates(loss), fo);
    for (int t = 0; t < 10; ++t)
        expect_close(step(xa, ya)[0], rec["steps"][t], "loss before step " + std::to_string(t));
    const json &fin = rec.at("final");
    for (const auto &[name, v] : net.params())
        expect_close(v.value(), fin.at(name), name + " after 10 steps");
    expect_close(net.bn1.running_mean().value(), fin.at("bn1/running_mean"), "bn1 running mean");
    expect_close(net.bn1.running_var().value(), fin.at("bn1/running_var"), "bn1 running var");
    expect_close(net.bn2.running_mean().value(), fin.at("bn2/running_mean"), "bn2 running mean");
    expect_close(net.bn2.running_var().value(), fin.at("bn2/running_var"), "bn2 running var");
    expect_close(eval(xa)[0], rec.at("eval"), "eval logits after 10 steps");
}

// every backend that runs here: reference and cpu, and cuda on a GPU or the emulator
// (SJ_CUDA_DEVICE=emulator; docs/gpu.md)
INSTANTIATE_TEST_SUITE_P(Backends, CnnParity, ::testing::ValuesIn(sj::test::test_backends()),
                         [](const auto& info) { return info.param; });

} // namespace
