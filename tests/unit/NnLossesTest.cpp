// Tests of the losses: values against host formulas, per-example shapes, stability at 1e4.
#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <cmath>

using namespace sj;
namespace L = sj::nn::losses;

namespace {
std::vector<double> host_log_softmax(const std::vector<double> &row) {
    double m = *std::max_element(row.begin(), row.end()), s = 0;
    for (double v : row)
        s += std::exp(v - m);
    std::vector<double> out;
    for (double v : row)
        out.push_back(v - m - std::log(s));
    return out;
}

const std::vector<double> kLogits{1.0, -2.0, 0.5, 3.0, 0.0, -1.0, 2.0, 2.0, -0.5, 0.3, 0.1, -4.0};
const std::vector<int32_t> kLabels{2, 0, 1};
} // namespace

TEST(NnLosses, SparseSoftmaxCrossEntropy) {
    Placeholder y({-1}, i32, "y");
    Placeholder z({-1, 4}, f64, "z");
    Tensor l = L::sparse_softmax_crossentropy_logits(y, z);
    EXPECT_EQ(l.shape(), (Shape{-1}));
    Tensor g = gradients(mean(l), z);
    Function f = function({y, z}, {l, g});
    auto r = f(Array(kLabels), Array(kLogits, {3, 4}));
    std::vector<double> lv = r[0].to_vector<double>(), gv = r[1].to_vector<double>();
    for (int i = 0; i < 3; ++i) {
        std::vector<double> row(kLogits.begin() + 4 * i, kLogits.begin() + 4 * i + 4);
        std::vector<double> ls = host_log_softmax(row);
        EXPECT_NEAR(lv[i], -ls[kLabels[i]], 1e-12);
        for (int c = 0; c < 4; ++c) // d mean / dz = (softmax - onehot) / N
            EXPECT_NEAR(gv[4 * i + c], (std::exp(ls[c]) - (c == kLabels[i])) / 3.0, 1e-12);
    }
    // i64 labels work too
    Placeholder y64({-1}, i64, "y64");
    EXPECT_EQ(L::sparse_softmax_crossentropy_logits(y64, z).shape(), (Shape{-1}));
    Placeholder yf({-1}, f32, "yf");
    EXPECT_THROW(L::sparse_softmax_crossentropy_logits(yf, z), TypeError);
    Placeholder y2({-1, 2}, i32, "y2");
    EXPECT_THROW(L::sparse_softmax_crossentropy_logits(y2, z), ShapeError);
}

TEST(NnLosses, DenseSoftmaxCrossEntropyMatchesSparse) {
    Placeholder y({3}, i32, "y");
    Placeholder z({3, 4}, f64, "z");
    Tensor dense = L::softmax_crossentropy_logits(one_hot(y, 4, f64), z);
    Tensor sparse = L::sparse_softmax_crossentropy_logits(y, z);
    Function f = function({y, z}, {dense, sparse});
    auto r = f(Array(kLabels), Array(kLogits, {3, 4}));
    std::vector<double> a = r[0].to_vector<double>(), b = r[1].to_vector<double>();
    for (int i = 0; i < 3; ++i)
        EXPECT_NEAR(a[i], b[i], 1e-12);
    // soft labels
    Placeholder p({1, 2}, f64, "p");
    Placeholder q({1, 2}, f64, "q");
    Function g = function({p, q}, {L::softmax_crossentropy_logits(p, q)});
    double v = g(Array(std::vector<double>{0.25, 0.75}, {1, 2}),
                 Array(std::vector<double>{0.0, 1.0}, {1, 2}))[0]
                   .item<double>();
    double lse = std::log(1 + std::exp(1.0));
    EXPECT_NEAR(v, 0.25 * lse + 0.75 * (lse - 1.0), 1e-12);
}

TEST(NnLosses, StableForHugeLogits) {
    // logits of 1e4 in f32: finite losses and gradients equal to softmax - onehot
    Placeholder y({2}, i32, "y");
    Placeholder z({2, 3}, f32, "z");
    Tensor l = L::sparse_softmax_crossentropy_logits(y, z);
    Tensor g = gradients(sum(l), z);
    Placeholder p({2, 3}, f32, "p");
    Tensor ld = L::softmax_crossentropy_logits(p, z);
    Tensor gd = gradients(sum(ld), z);
    Function f = function({y, z, p}, {l, g, ld, gd});
    Array logits(std::vector<float>{1e4f, -1e4f, 0.f, 1e4f, 1e4f - 2.f, -1e4f}, {2, 3});
    Array labels(std::vector<int32_t>{1, 0});
    Array probs(std::vector<float>{0, 1, 0, 1, 0, 0}, {2, 3});
    auto r = f(labels, logits, probs);
    std::vector<float> lv = r[0].to_vector<float>(), gv = r[1].to_vector<float>();
    EXPECT_NEAR(lv[0], 2e4, 1.0);
    // x - logsumexp(x) at 1e4 in f32: the spacing of floats near 1e4 is 2^-10
    EXPECT_NEAR(lv[1], std::log1p(std::exp(-2.0)), 1e-3);
    std::vector<float> expect{
        1, -1, 0, float(1 / (1 + std::exp(-2.0))) - 1, float(1 / (1 + std::exp(2.0))), 0};
    for (int i = 0; i < 6; ++i)
        EXPECT_NEAR(gv[i], expect[i], 1e-5) << i;
    std::vector<float> ldv = r[2].to_vector<float>(), gdv = r[3].to_vector<float>();
    for (int i = 0; i < 2; ++i)
        EXPECT_NEAR(ldv[i], lv[i], 1e-3 * (1 + lv[i]));
    for (int i = 0; i < 6; ++i)
        EXPECT_NEAR(gdv[i], expect[i], 1e-5) << i;
}

TEST(NnLosses, SigmoidCrossEntropy) {
    Placeholder z({6}, f32, "z");
    Placeholder x({6}, f32, "x");
    Tensor l = L::sigmoid_crossentropy_logits(z, x);
    Tensor g = gradients(sum(l), x);
    Function f = function({z, x}, {l, g});
    std::vector<float> xs{1e4f, -1e4f, 0.5f, -2.f, 1e4f, -1e4f}, zs{1, 0, 0.3f, 1, 0, 1};
    auto r = f(Array(zs), Array(xs));
    std::vector<float> lv = r[0].to_vector<float>(), gv = r[1].to_vector<float>();
    for (int i = 0; i < 6; ++i) {
        double xd = xs[i], zd = zs[i];
        double ref = std::max(xd, 0.0) - xd * zd + std::log1p(std::exp(-std::abs(xd)));
        double sig = 1 / (1 + std::exp(-xd));
        EXPECT_TRUE(std::isfinite(lv[i]));
        EXPECT_NEAR(lv[i], ref, 1e-5 * (1 + ref)) << i;
        EXPECT_NEAR(gv[i], sig - zd, 1e-6) << i; // d/dx = sigmoid(x) - z
    }
    // [N, K] multi-label: the mean over K per example
    Placeholder z2({2, 2}, f64, "z2"), x2({2, 2}, f64, "x2");
    Function f2 = function({z2, x2}, {L::sigmoid_crossentropy_logits(z2, x2)});
    std::vector<double> v = f2(Array(std::vector<double>{1, 0, 0, 0}, {2, 2}),
                               Array(std::vector<double>{0, 0, 1, -1}, {2, 2}))[0]
                                .to_vector<double>();
    ASSERT_EQ(v.size(), 2u);
    EXPECT_NEAR(v[0], std::log(2.0), 1e-12);
    EXPECT_NEAR(v[1], 0.5 * (std::log1p(std::exp(1.0)) + std::log1p(std::exp(-1.0))), 1e-12);
}

TEST(NnLosses, RegressionLosses) {
    Placeholder t({2, 3}, f64, "t"), p({2, 3}, f64, "p");
    Function f = function({t, p}, {L::mse(t, p), L::mae(t, p), L::huber(t, p, 1.0),
                                   gradients(sum(L::huber(t, p, 1.0)), p)});
    std::vector<double> tv{0, 1, 2, 3, 4, 5}, pv{0.5, 1, 4, 3, 1, 5.2};
    auto r = f(Array(tv, {2, 3}), Array(pv, {2, 3}));
    std::vector<double> mse = r[0].to_vector<double>(), mae = r[1].to_vector<double>(),
                        hub = r[2].to_vector<double>(), gh = r[3].to_vector<double>();
    ASSERT_EQ(mse.size(), 2u);
    for (int n = 0; n < 2; ++n) {
        double s2 = 0, s1 = 0, sh = 0;
        for (int k = 0; k < 3; ++k) {
            double d = tv[3 * n + k] - pv[3 * n + k], a = std::abs(d);
            s2 += d * d / 3;
            s1 += a / 3;
            sh += (a <= 1 ? 0.5 * d * d : a - 0.5) / 3;
            double dh = a <= 1 ? -d : (d > 0 ? -1.0 : 1.0); // d huber / d prediction
            EXPECT_NEAR(gh[3 * n + k], dh / 3, 1e-12);
        }
        EXPECT_NEAR(mse[n], s2, 1e-12);
        EXPECT_NEAR(mae[n], s1, 1e-12);
        EXPECT_NEAR(hub[n], sh, 1e-12);
    }
    EXPECT_THROW(L::huber(t, p, 0.0), InputError);
    Placeholder bad({3, 2}, f64, "bad");
    EXPECT_THROW(L::mse(t, bad), ShapeError);
}

TEST(NnLosses, HingeLosses) {
    Placeholder y({4}, f32, "y"), s({4}, f32, "s");
    Function f = function({y, s}, {L::hinge(y, s)});
    std::vector<float> h =
        f(Array(std::vector<float>{1, -1, 1, -1}), Array(std::vector<float>{2, 0.5f, 0.25f, -3}))[0]
            .to_vector<float>();
    EXPECT_EQ(h, (std::vector<float>{0, 1.5f, 0.75f, 0}));

    Placeholder lab({-1}, i32, "lab");
    Placeholder sc({-1, 4}, f64, "sc");
    Function g =
        function({lab, sc}, {L::multiclass_hinge(lab, sc), L::multiclass_hinge(lab, sc, 0.5)});
    auto r = g(Array(kLabels), Array(kLogits, {3, 4}));
    std::vector<double> m1 = r[0].to_vector<double>(), m2 = r[1].to_vector<double>();
    for (int i = 0; i < 3; ++i) {
        double truth = kLogits[4 * i + kLabels[i]], best = -1e300;
        for (int c = 0; c < 4; ++c)
            if (c != kLabels[i])
                best = std::max(best, kLogits[4 * i + c]);
        EXPECT_NEAR(m1[i], std::max(0.0, 1 + best - truth), 1e-12);
        EXPECT_NEAR(m2[i], std::max(0.0, 0.5 + best - truth), 1e-12);
    }
}

TEST(NnLosses, KlDivergence) {
    Placeholder p({2, 3}, f64, "p"), q({2, 3}, f64, "q");
    Tensor kl = L::kl_divergence(p, q);
    std::vector<Tensor> g = gradients(sum(kl), {p, q});
    Function f = function({p, q}, {kl, g[0], g[1]});
    std::vector<double> pv{0.2, 0.3, 0.5, 0.0, 1.0, 0.0}, qv{0.1, 0.6, 0.3, 0.0, 0.5, 0.5};
    auto r = f(Array(pv, {2, 3}), Array(qv, {2, 3}));
    std::vector<double> k = r[0].to_vector<double>();
    EXPECT_NEAR(k[0], 0.2 * std::log(2.0) + 0.3 * std::log(0.5) + 0.5 * std::log(5.0 / 3), 1e-12);
    EXPECT_NEAR(k[1], std::log(2.0), 1e-12);
    // zero-probability terms contribute nothing, and no NaN reaches the gradients
    for (double v : r[1].to_vector<double>())
        EXPECT_TRUE(std::isfinite(v));
    std::vector<double> gq = r[2].to_vector<double>();
    for (double v : gq)
        EXPECT_TRUE(std::isfinite(v));
    EXPECT_NEAR(gq[4], -1.0 / 0.5, 1e-12); // d/dq = -p / q
    EXPECT_EQ(gq[3], 0.0);
    // identical distributions: zero
    Function same = function({p}, {L::kl_divergence(p, p)});
    for (double v : same(Array(pv, {2, 3}))[0].to_vector<double>())
        EXPECT_NEAR(v, 0.0, 1e-15);
}

// PyTorch's ignore_index: an ignored example has loss 0 and zero gradient (whether the value is
// outside [0, C), as -100, or a class, as 1), the others are unchanged; on both backends.
TEST(NnLosses, SparseSoftmaxCrossEntropyIgnoreIndex) {
    Placeholder y({-1}, i32, "y");
    Placeholder z({-1, 4}, f64, "z");
    for (int64_t ignore : {-100, 1}) {
        Tensor l = L::sparse_softmax_crossentropy_logits(y, z, ignore);
        Tensor g = gradients(sum(l), z);
        for (const char* backend : {"reference", "cpu"}) {
            FunctionOptions o;
            o.backend = backend;
            Function f = function({y, z}, {l, g}, {}, o);
            std::vector<int32_t> labels{2, int32_t(ignore), 1};
            auto r = f(Array(labels), Array(kLogits, {3, 4}));
            std::vector<double> lv = r[0].to_vector<double>(), gv = r[1].to_vector<double>();
            for (int i = 0; i < 3; ++i) {
                std::vector<double> row(kLogits.begin() + 4 * i, kLogits.begin() + 4 * i + 4);
                std::vector<double> ls = host_log_softmax(row);
                bool ignored = labels[i] == ignore;
                EXPECT_NEAR(lv[i], ignored ? 0.0 : -ls[labels[i]], 1e-12) << backend << " " << i;
                for (int c = 0; c < 4; ++c) // d sum / dz = softmax - onehot, or 0 when ignored
                    EXPECT_NEAR(gv[4 * i + c], ignored ? 0.0 : std::exp(ls[c]) - (c == labels[i]),
                                1e-12)
                        << backend << " " << i << " " << c;
            }
        }
    }
}
