// Tests of the nn layers: Dense, Dropout, Flatten, Embedding, LayerNorm, BatchNorm.
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <cmath>
#include <memory>
#include <random>

using namespace sj;

namespace {
std::vector<double> host_normal(size_t n, double mean, double stddev, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<double> d(mean, stddev);
    std::vector<double> v(n);
    for (auto &x : v)
        x = d(gen);
    return v;
}
} // namespace

TEST(NnLayers, DenseComputesAffineMap) {
    Scope s("nnlay_dense");
    nn::Dense d(3, 2, {.bias = true, .init = nn::init::constant(0.5)});
    d.bias().assign(Array(std::vector<float>{1, -1}));
    Placeholder x({-1, 3}, f32, "x");
    Function f = function({x}, {d(x)});
    std::vector<float> out =
        f(Array(std::vector<float>{1, 2, 3, -1, 0, 1}, {2, 3}))[0].to_vector<float>();
    EXPECT_EQ(out, (std::vector<float>{4, 2, 1, -1}));
    // rank-3 inputs: [B, T, in] -> [B, T, out]
    Placeholder x3({2, 4, 3}, f32, "x3");
    EXPECT_EQ(d(x3).shape(), (Shape{2, 4, 2}));
    Placeholder bad({-1, 4}, f32, "bad");
    EXPECT_THROW(d(bad), ShapeError);
}

TEST(NnLayers, DenseDtypeF64) {
    Scope s("nnlay_dense64");
    nn::Dense d(2, 2, {.bias = true, .init = nn::init::glorot_uniform(1.0, 5), .dtype = f64});
    EXPECT_EQ(d.weights().dtype(), f64);
    EXPECT_EQ(d.bias().dtype(), f64);
}

TEST(NnLayers, DropoutEvalIsIdentity) {
    nn::Dropout drop(0.3);
    Placeholder x({-1, 4}, f32, "x");
    EXPECT_TRUE(drop(x, nn::Mode::Eval).same(x));
    EXPECT_TRUE(nn::Dropout(0.0)(x, nn::Mode::Train).same(x));
    EXPECT_THROW(nn::Dropout(1.0), InputError);
}

TEST(NnLayers, DropoutMeanAndScaling) {
    // ported from SymJAX's test_dropout: ones in, the mean stays 1 in expectation (inverted
    // scaling), two calls draw different masks
    const int64_t n = 4096, dim = 8;
    const double p = 0.2;
    nn::Dropout drop(p, {.seed = 11});
    Placeholder x({n, dim}, f32, "x");
    Function f = function({x}, {drop(x, nn::Mode::Train)});
    Array ones = Array::full(f32, {n, dim}, 1.0);
    std::vector<float> o1 = f(ones)[0].to_vector<float>();
    std::vector<float> o2 = f(ones)[0].to_vector<float>();
    double sum = 0, zeros = 0, differ = 0;
    const float kept = float(1.0 / (1.0 - p));
    for (size_t i = 0; i < o1.size(); ++i) {
        ASSERT_TRUE(o1[i] == 0.0f || std::abs(o1[i] - kept) < 1e-6f) << o1[i];
        sum += o1[i] + o2[i];
        zeros += (o1[i] == 0.0f) + (o2[i] == 0.0f);
        differ += o1[i] != o2[i];
    }
    const double m = double(o1.size()) * 2;
    // mean of a {0, 1/(1-p)} variable: 1, variance p / (1 - p); five standard errors
    EXPECT_NEAR(sum / m, 1.0, 5 * std::sqrt(p / (1 - p) / m));
    EXPECT_NEAR(zeros / m, p, 5 * std::sqrt(p * (1 - p) / m));
    EXPECT_GT(differ, 0.2 * double(o1.size())); // independent masks differ in ~2p(1-p) = 32%
}

TEST(NnLayers, DropoutSeedIsReproducible) {
    Placeholder x({64}, f32, "x");
    Array ones = Array::full(f32, {64}, 1.0);
    auto first_two = [&](uint64_t seed) {
        nn::Dropout drop(0.5, {.seed = seed});
        Function f = function({x}, {drop(x)});
        return std::make_pair(f(ones)[0].to_vector<float>(), f(ones)[0].to_vector<float>());
    };
    auto [a1, a2] = first_two(42);
    auto [b1, b2] = first_two(42);
    auto [c1, c2] = first_two(43);
    EXPECT_EQ(a1, b1);
    EXPECT_EQ(a2, b2);
    EXPECT_NE(a1, a2); // a new mask on every call
    EXPECT_NE(a1, c1);
    // the same layer called twice in one graph draws two masks
    nn::Dropout drop(0.5, {.seed = 9});
    EXPECT_FALSE(drop(x).same(drop(x)));
}

TEST(NnLayers, Flatten) {
    Placeholder x({-1, 2, 3, 4}, f32, "x");
    EXPECT_EQ(nn::Flatten()(x).shape(), (Shape{-1, 24}));
    Function f = function({x}, {nn::Flatten()(x)});
    EXPECT_EQ(f(Array(f32, {5, 2, 3, 4}))[0].shape(), (Shape{5, 24}));
}

TEST(NnLayers, EmbeddingLooksUpAndAccumulatesGradients) {
    Scope s("nnlay_emb");
    nn::Embedding emb(4, 2);
    std::vector<float> table{0, 1, 10, 11, 20, 21, 30, 31};
    emb.table().assign(Array(table, {4, 2}));
    Placeholder ids({-1}, i32, "ids");
    Tensor e = emb(ids);
    EXPECT_EQ(e.shape(), (Shape{-1, 2}));
    Tensor g = gradients(sum(e), emb.table());
    Function f = function({ids}, {e, g});
    auto r = f(Array(std::vector<int32_t>{2, 0, 2}));
    EXPECT_EQ(r[0].to_vector<float>(), (std::vector<float>{20, 21, 0, 1, 20, 21}));
    EXPECT_EQ(r[1].to_vector<float>(), (std::vector<float>{1, 1, 0, 0, 2, 2, 0, 0}));
    Placeholder bad({3}, f32, "bad");
    EXPECT_THROW(emb(bad), TypeError);
}

TEST(NnLayers, LayerNormNormalisesRows) {
    Scope s("nnlay_ln");
    nn::LayerNorm ln(5);
    Placeholder x({-1, 5}, f32, "x");
    Function f = function({x}, {ln(x)});
    std::vector<double> v = host_normal(15, 3, 2, 1);
    std::vector<float> in(v.begin(), v.end());
    std::vector<float> out = f(Array(in, {3, 5}))[0].to_vector<float>();
    for (int r = 0; r < 3; ++r) {
        double m = 0, q = 0;
        for (int c = 0; c < 5; ++c)
            m += in[r * 5 + c] / 5.0;
        for (int c = 0; c < 5; ++c)
            q += (in[r * 5 + c] - m) * (in[r * 5 + c] - m) / 5.0;
        for (int c = 0; c < 5; ++c)
            EXPECT_NEAR(out[r * 5 + c], (in[r * 5 + c] - m) / std::sqrt(q + 1e-5), 1e-5);
    }
}

TEST(NnLayers, BatchNormRunningStatistics) {
    // ported from SymJAX's test_bn: 10 training calls on batches of 5; outputs are the batch
    // standardised and the running mean follows 0.99 m + 0.01 batch_mean
    Scope s("nnlay_bn");
    const int64_t batch = 5, dim = 2;
    nn::BatchNorm bn(dim, {.momentum = 0.99, .eps = 1e-4});
    Placeholder x({batch, dim}, f32, "x");
    Tensor y = bn(x, nn::Mode::Train);
    Updates u = state_updates(y);
    ASSERT_EQ(u.size(), 2u);
    Function step = function({x}, {y}, u);
    std::vector<double> data = host_normal(50 * dim, 2, 4, 0);
    std::vector<double> mean(dim, 0.0), var(dim, 1.0);
    for (int i = 0; i < 10; ++i) {
        std::vector<float> b(data.begin() + i * batch * dim, data.begin() + (i + 1) * batch * dim);
        std::vector<float> out = step(Array(b, {batch, dim}))[0].to_vector<float>();
        for (int64_t c = 0; c < dim; ++c) {
            double m = 0, q = 0;
            for (int64_t r = 0; r < batch; ++r)
                m += b[r * dim + c] / double(batch);
            for (int64_t r = 0; r < batch; ++r)
                q += (b[r * dim + c] - m) * (b[r * dim + c] - m) / double(batch);
            for (int64_t r = 0; r < batch; ++r)
                EXPECT_NEAR(out[r * dim + c], (b[r * dim + c] - m) / std::sqrt(q + 1e-4), 1e-4);
            mean[c] = 0.99 * mean[c] + 0.01 * m;
            var[c] = 0.99 * var[c] + 0.01 * q * batch / (batch - 1.0);
        }
        std::vector<float> rm = bn.running_mean().value().to_vector<float>();
        std::vector<float> rv = bn.running_var().value().to_vector<float>();
        for (int64_t c = 0; c < dim; ++c) {
            EXPECT_NEAR(rm[c], mean[c], 1e-5) << "call " << i;
            EXPECT_NEAR(rv[c], var[c], 1e-5) << "call " << i;
        }
    }
}

TEST(NnLayers, BatchNormEvalUsesRunningStatistics) {
    Scope s("nnlay_bn_eval");
    nn::BatchNorm bn(2);
    bn.running_mean().assign(Array(std::vector<float>{1, -2}));
    bn.running_var().assign(Array(std::vector<float>{4, 0.25f}));
    bn.gamma().assign(Array(std::vector<float>{2, 1}));
    bn.beta().assign(Array(std::vector<float>{0, 1}));
    Placeholder x({-1, 2}, f32, "x");
    Tensor y = bn(x, nn::Mode::Eval);
    EXPECT_EQ(state_updates(y).size(), 0u);
    Function f = function({x}, {y});
    std::vector<float> out = f(Array(std::vector<float>{3, -1}, {1, 2}))[0].to_vector<float>();
    EXPECT_NEAR(out[0], 2 * (3 - 1) / std::sqrt(4 + 1e-5), 1e-5);
    EXPECT_NEAR(out[1], 1 * (-1 + 2) / std::sqrt(0.25 + 1e-5) + 1, 1e-5);
}

TEST(NnLayers, BatchNormImageInputsAndUnknownBatch) {
    // [N, C, H, W]: statistics per channel over N, H, W; the count is taken at call time
    Scope s("nnlay_bn4");
    nn::BatchNorm bn(2, {.momentum = 0.0});
    Placeholder x({-1, 2, 2, 2}, f32, "x");
    Tensor y = bn(x, nn::Mode::Train);
    Function f = function({x}, {y}, state_updates(y));
    std::vector<float> in(16);
    for (int i = 0; i < 16; ++i)
        in[i] = float(i);
    f(Array(in, {2, 2, 2, 2}));
    // channel 0 holds 0..3 and 8..11, channel 1 holds 4..7 and 12..15
    std::vector<float> rm = bn.running_mean().value().to_vector<float>();
    std::vector<float> rv = bn.running_var().value().to_vector<float>();
    EXPECT_NEAR(rm[0], 5.5, 1e-5);
    EXPECT_NEAR(rm[1], 9.5, 1e-5);
    double q = 0;
    for (float v : {0, 1, 2, 3, 8, 9, 10, 11})
        q += (v - 5.5) * (v - 5.5);
    EXPECT_NEAR(rv[0], q / 7.0, 1e-4); // unbiased
    EXPECT_NEAR(rv[1], q / 7.0, 1e-4);
}

TEST(NnLayers, BatchNormGradients) {
    Scope s("nnlay_bn_grad");
    // f64 and eps = 0, so the identities below are exact up to rounding
    nn::BatchNorm bn(3, {.momentum = 0.99, .eps = 0.0, .dtype = f64});
    Placeholder x({4, 3}, f64, "x");
    Tensor loss = sum(bn(x) * bn(x));
    std::vector<Tensor> g = gradients(loss, {bn.gamma(), bn.beta(), x});
    Function f = function({x}, g);
    std::vector<double> v = host_normal(12, 0, 1, 3);
    auto r = f(Array(v, {4, 3}));
    // y = gamma xhat + beta with gamma = 1, beta = 0: d/dgamma sum y^2 = 2 sum xhat^2 = 2 N,
    // d/dbeta = 2 sum xhat = 0, and d/dx vanishes since sum xhat^2 = N whatever x is
    for (double gg : r[0].to_vector<double>())
        EXPECT_NEAR(gg, 8.0, 1e-12);
    for (double gb : r[1].to_vector<double>())
        EXPECT_NEAR(gb, 0.0, 1e-12);
    for (double gx : r[2].to_vector<double>())
        EXPECT_NEAR(gx, 0.0, 1e-10);
}

// A batch of one through a batch dim declared -1 (batch-1 inference of a recurrent model): the
// final states stack one [N, H] per layer with expand_dims, whose target dim -1 the batch's 1
// must bind (it threw "declared -1 and bound to 1" before). Outputs, final states and the
// weights' gradients against the reference interpreter, for each kind of cell.
TEST(NnLayers, RecurrentLayersRunABatchOfOne) {
    for (int kind = 0; kind < 3; ++kind) {
        SCOPED_TRACE(kind == 0 ? "SimpleRNN" : kind == 1 ? "GRU" : "LSTM");
        Scope scope("batch_of_one_" + std::to_string(kind));
        std::unique_ptr<nn::Recurrent> rnn;
        if (kind == 0)
            rnn = std::make_unique<nn::SimpleRNN>(3, 4, nn::RecurrentOptions{.num_layers = 2});
        else if (kind == 1)
            rnn = std::make_unique<nn::GRU>(3, 4);
        else
            rnn = std::make_unique<nn::LSTM>(3, 4);
        Placeholder x({5, -1, 3}, f32, "x");
        nn::RecurrentOutput r = rnn->run(x);
        std::vector<Tensor> outs = {r.output, r.h};
        if (kind == 2)
            outs.push_back(r.c);
        std::vector<Variable> vars = rnn->variables();
        std::vector<Tensor> wrt(vars.begin(), vars.end());
        for (const Tensor& g : gradients(sum(r.h) + sum(r.output), wrt))
            outs.push_back(g);
        Array xv = sj::test::random_array(f32, {5, 1, 3}, 40 + kind);
        std::vector<Array> got = function({x}, outs)(xv);
        std::vector<Array> want = function({x}, outs, {}, sj::test::on("reference"))(xv);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(got[1].shape(), (Shape{kind == 0 ? 2 : 1, 1, 4}));
        for (size_t i = 0; i < got.size(); ++i)
            sj::test::expect_close(got[i], want[i], 1e-5, 1e-6, "output " + std::to_string(i));
    }
}
