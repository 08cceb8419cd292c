// sj-train's CNN on the cuda backend, layer by layer at its own shapes (a batch of 64 Fashion-MNIST
// images), against the cpu backend: each layer's output and the gradients of a fixed projection
// of it, then whole training steps with Adam. The op harness and the parity tests use small
// shapes; these take the convolution, pooling and GEMM calls (cuDNN, cuBLAS) through the sizes a
// real network gives them. They need "cuda" to run (a GPU, or SJ_CUDA_DEVICE=emulator) and fail
// where it cannot: the suite's own list leaves them out, and the ctest entries that set up a
// device run them (cuda_emulator_training, cuda_emulator_h200_layers, gpu_training: docs/gpu.md).
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>

using namespace sj;
using sj::test::random_array;

namespace {

/// Every element of got within tol times the largest magnitude of want (cpu) plus atol, and
/// finite where want is. f32 sums in another order (cuDNN's, cuBLAS's, our reductions') differ by
/// a few ulp of the sum's magnitude; 1e-4 of the scale is a hundred times that for these sizes
/// and far below what a wrong element gives.
void expect_near_scale(const Array& got, const Array& want, const std::string& what,
                       double tol = 1e-4, double atol = 0) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    double scale = 0;
    for (int64_t i = 0; i < want.size(); ++i)
        scale = std::max(scale, std::abs(want.at(i)));
    double worst = 0;
    int64_t at = 0, bad = 0;
    for (int64_t i = 0; i < want.size(); ++i) {
        double d = std::abs(got.at(i) - want.at(i));
        if (!(d <= tol * std::max(scale, 1e-12) + atol))
            ++bad;
        if (!(d <= worst))
            worst = d, at = i;
    }
    std::printf(
        "[ layers   ] %-40s scale %-11.4g worst |cuda - cpu| %-11.4g at %lld of %lld (%lld over)\n",
        what.c_str(), scale, worst, static_cast<long long>(at), static_cast<long long>(want.size()),
        static_cast<long long>(bad));
    EXPECT_EQ(bad, 0) << what << ": element " << at << " is " << got.at(at) << " on cuda, "
                      << want.at(at) << " on cpu (largest magnitude " << scale << ")";
}

/// y = layer(x) in train mode; outputs y and the gradients of sum(y * r) for a fixed random r
/// with respect to x and every trainable variable; compared between cpu and cuda.
void check_layer(const std::string& name, const std::function<Tensor(const Tensor&)>& layer,
                 const Shape& in_shape, const std::vector<Variable>& params, uint64_t seed) {
    Placeholder x(in_shape, f32, name + "_x");
    Tensor y = layer(x);
    Array ra = random_array(DType::F32, y.shape(), seed + 1, -1, 1);
    Tensor cost = sum(y * constant(ra));
    std::vector<Tensor> outs{y, gradients(cost, x)};
    for (const auto& v : params)
        outs.push_back(gradients(cost, v));
    Array xa = random_array(DType::F32, in_shape, seed, -1, 1);
    std::vector<Array> want = function({x}, outs, {}, sj::test::on("cpu"))(xa);
    std::vector<Array> got = function({x}, outs, {}, sj::test::on("cuda"))(xa);
    expect_near_scale(got[0], want[0], name + " output");
    expect_near_scale(got[1], want[1], name + " d/dx");
    for (size_t i = 0; i < params.size(); ++i)
        expect_near_scale(got[i + 2], want[i + 2], name + " d/d" + params[i].name());
}

constexpr int64_t B = 64;

TEST(GpuLayers, FirstConvolution) {
    Scope s("gl_conv1");
    nn::Conv2D c(1, 32, 3, {.padding = "SAME", .bias = false});
    check_layer(
        "conv 1->32 SAME", [&](const Tensor& x) { return c(x); }, {B, 1, 28, 28}, {c.weights()}, 1);
}

TEST(GpuLayers, SecondConvolution) {
    Scope s("gl_conv2");
    nn::Conv2D c(32, 64, 3, {.padding = "SAME", .bias = false});
    check_layer(
        "conv 32->64 SAME", [&](const Tensor& x) { return c(x); }, {B, 32, 14, 14}, {c.weights()},
        2);
}

TEST(GpuLayers, ConvolutionWithBias) {
    Scope s("gl_conv3");
    nn::Conv2D c(32, 64, 3, {.padding = "VALID"});
    check_layer(
        "conv 32->64 VALID bias", [&](const Tensor& x) { return c(x); }, {B, 32, 14, 14},
        {c.weights(), c.bias()}, 3);
}

TEST(GpuLayers, BatchNormReluMaxPool) {
    Scope s("gl_bn");
    nn::BatchNorm bn(32, {.momentum = 0.9});
    check_layer(
        "batch norm 32", [&](const Tensor& x) { return bn(x, nn::Mode::Train); }, {B, 32, 28, 28},
        {bn.gamma(), bn.beta()}, 4);
    check_layer(
        "relu + max pool 2x2 (32 ch)",
        [&](const Tensor& x) {
            return nn::MaxPool2D({2, 2})(nn::ReLU()(x));
        },
        {B, 32, 28, 28}, {}, 5);
    check_layer(
        "max pool 2x2 (64 ch)",
        [&](const Tensor& x) {
            return nn::MaxPool2D({2, 2})(x);
        },
        {B, 64, 14, 14}, {}, 6);
}

TEST(GpuLayers, DenseLayers) {
    Scope s("gl_dense");
    nn::Dense d1(64 * 7 * 7, 128), d2(128, 10);
    check_layer(
        "dense 3136->128 relu", [&](const Tensor& x) { return nn::ReLU()(d1(x)); }, {B, 64 * 7 * 7},
        {d1.weights(), d1.bias()}, 7);
    check_layer(
        "dense 128->10", [&](const Tensor& x) { return d2(x); }, {B, 128},
        {d2.weights(), d2.bias()}, 8);
}

/// sj-train's CNN (tools/sj-train.cpp, build_model) trained with Adam for a few steps on random
/// images: the losses, then every variable (weights, Adam's moments, running statistics) agree.
TEST(GpuLayers, SjTrainCnnTrainsAsOnTheCpu) {
    Scope s("gl_net");
    nn::Sequential net{nn::Conv2D(1, 32, 3, {.padding = "SAME", .bias = false}),
                       nn::BatchNorm(32, {.momentum = 0.9}),
                       nn::ReLU(),
                       nn::MaxPool2D({2, 2}),
                       nn::Conv2D(32, 64, 3, {.padding = "SAME", .bias = false}),
                       nn::BatchNorm(64, {.momentum = 0.9}),
                       nn::ReLU(),
                       nn::MaxPool2D({2, 2}),
                       nn::Flatten(),
                       nn::Dense(64 * 7 * 7, 128),
                       nn::ReLU(),
                       nn::Dropout(0.2, {.seed = 5}),
                       nn::Dense(128, 10)};
    Placeholder x({-1, 1, 28, 28}, f32, "images");
    Placeholder y({-1}, i32, "labels");
    Tensor logits = net(x, nn::Mode::Train);
    Tensor loss = mean(nn::losses::sparse_softmax_crossentropy_logits(y, logits));
    nn::optim::Adam adam(1e-3); // (lr below)
    Updates updates = adam.minimize(loss, net.trainable_variables()) + state_updates(loss);
    std::map<std::string, Array> start;
    for (const auto& [v, _] : updates.items())
        start[v.name()] = v.value().clone();
    Array xa = random_array(DType::F32, {B, 1, 28, 28}, 11, 0, 1);
    Array ya(DType::I32, {B});
    for (int64_t i = 0; i < B; ++i)
        ya.data<int32_t>()[i] = int32_t((i * 7) % 10);
    const int steps = 4;
    auto train = [&](const char* backend, std::vector<double>& losses,
                     std::map<std::string, Array>& end) {
        for (const auto& [v, _] : updates.items())
            v.assign(start.at(v.name()).clone());
        Function step = function({x, y}, {loss}, updates, sj::test::on(backend));
        for (int t = 0; t < steps; ++t)
            losses.push_back(step(xa, ya)[0].at(0));
        for (const auto& [v, _] : updates.items())
            end[v.name()] = v.value().clone();
    };
    std::vector<double> lc, lg;
    std::map<std::string, Array> ec, eg;
    train("cpu", lc, ec);
    train("cuda", lg, eg);
    for (int t = 0; t < steps; ++t) {
        std::printf("[ layers   ] step %d loss cpu %.7g cuda %.7g\n", t, lc[size_t(t)],
                    lg[size_t(t)]);
        EXPECT_NEAR(lg[size_t(t)], lc[size_t(t)], 1e-4 * std::abs(lc[size_t(t)]))
            << "loss at step " << t;
    }
    // Adam's moments and the running statistics are smooth in the gradients: within 1e-3 of
    // their scale. A weight is not: Adam moves it by about lr times the sign of its gradient, so
    // an element whose gradient is rounding noise (a sum that cancels) may step either way on
    // the two backends. Weights are held to that bound, 2 lr a step, which catches garbage and
    // NaN; the moments catch a wrong gradient.
    const double lr = 1e-3;
    for (const auto& [name, want] : ec) {
        const bool weight = name.find("/adam/") == std::string::npos &&
                            name.find("running_") == std::string::npos;
        expect_near_scale(eg.at(name), want, name + " after " + std::to_string(steps) + " steps",
                          weight ? 0 : 1e-3, weight ? 2 * lr * steps : 0);
    }
}

/// The fusion fuzzer's graph seed 120 (output 1), the first graph that differed on an H200:
/// max(-floor(4 x)) + min(floor(4 x)) in i32 over 5 values, the two reductions in one kernel.
TEST(GpuLayers, TwoIntegerReductionsOfOneInput) {
    Placeholder x0({1, 5}, f32, "x0");
    Array xa(DType::F32, {1, 5});
    const float v[] = {-0.453637f, 1.85098f, -0.957396f, 1.23981f, 1.53603f};
    std::copy(v, v + 5, xa.data<float>());
    Tensor f = cast(floor(x0 * 4.0), i32);
    Tensor a = max(f * scalar(-1, i32), {0, 1});
    Tensor b = min(f, {0, 1});
    Tensor out = broadcast_to(cast(a + b, f32) * 0.25, {1});
    for (const auto& outs :
         std::vector<std::vector<Tensor>>{{a}, {b}, {a, b}, {a + b}, {out}, {a, b, out}}) {
        std::vector<Array> want = function({x0}, outs, {}, sj::test::on("reference"))(xa);
        std::vector<Array> got = function({x0}, outs, {}, sj::test::on("cuda"))(xa);
        for (size_t i = 0; i < outs.size(); ++i) {
            std::printf("[ layers   ] %zu outputs, #%zu: cuda %g reference %g\n", outs.size(), i,
                        got[i].at(0), want[i].at(0));
            EXPECT_EQ(got[i].at(0), want[i].at(0)) << outs.size() << " outputs, output " << i;
        }
    }
}

/// One reduction kernel bound at sizes that split it into different numbers of chunks, or not at
/// all (Note [Split reductions]): each launch must get the code for its own phase and chunks.
/// (The kernel caches were keyed without them: a training step's batch-norm sums ran with another
/// step's chunk count and wrote past their scratch buffer on an H200.)
TEST(GpuLayers, OneReductionAtSizesThatSplitDifferently) {
    Placeholder x({1, -1}, f32, "x");
    std::vector<Tensor> outs{sum(x * x, {1}), max(x, {1}),
                             min(cast(floor(x * 4.0), i32) * scalar(-1, i32))};
    Function ref = function({x}, outs, {}, sj::test::on("reference"));
    Function gpu = function({x}, outs, {}, sj::test::on("cuda"));
    for (int64_t n : {4096, 1024, 5, 2048, 100000, 1000}) {
        Array xa = random_array(DType::F32, {1, n}, uint64_t(n), -1, 1);
        std::vector<Array> want = ref(xa), got = gpu(xa);
        for (size_t i = 0; i < outs.size(); ++i)
            EXPECT_NEAR(got[i].at(0), want[i].at(0), 1e-5 * std::max(1.0, std::abs(want[i].at(0))))
                << "output " << i << " over " << n << " values";
    }
}

} // namespace
