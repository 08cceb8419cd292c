// Tests of the activation functions and modules against host formulas, values and gradients.
#include <gtest/gtest.h>
#include <symjax/ir/Node.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include "TestUtil.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

using namespace sj;
using sj::test::on;

namespace {
struct Case {
    const char *name;
    std::function<Tensor(const Tensor &)> fn;
    std::function<double(double)> ref;
    std::function<double(double)> dref; // derivative
};

double sig(double x) {
    return 1.0 / (1.0 + std::exp(-x));
}
double phi(double x) {
    return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}
double Phi(double x) {
    return 0.5 * (1 + std::erf(x / std::sqrt(2.0)));
}
constexpr double kSeluA = 1.6732632423543772, kSeluS = 1.0507009873554805;

std::vector<Case> cases() {
    const double c = std::sqrt(2.0 / M_PI);
    auto gelu_tanh = [c](double x) {
        return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x)));
    };
    auto gelu_tanh_d = [c](double x) {
        double u = c * (x + 0.044715 * x * x * x), t = std::tanh(u);
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
    };
    return {
        {"relu", nn::relu, [](double x) { return std::max(x, 0.0); },
         [](double x) { return x > 0 ? 1.0 : 0.0; }},
        {"relu6", nn::relu6, [](double x) { return std::min(std::max(x, 0.0), 6.0); },
         [](double x) { return x > 0 && x < 6 ? 1.0 : 0.0; }},
        {"leaky_relu", [](const Tensor &x) { return nn::leaky_relu(x, 0.1); },
         [](double x) { return x >= 0 ? x : 0.1 * x; },
         [](double x) { return x >= 0 ? 1.0 : 0.1; }},
        {"elu", [](const Tensor &x) { return nn::elu(x, 1.5); },
         [](double x) { return x > 0 ? x : 1.5 * std::expm1(x); },
         [](double x) { return x > 0 ? 1.0 : 1.5 * std::exp(x); }},
        {"selu", nn::selu, [](double x) { return kSeluS * (x > 0 ? x : kSeluA * std::expm1(x)); },
         [](double x) { return kSeluS * (x > 0 ? 1.0 : kSeluA * std::exp(x)); }},
        {"gelu", [](const Tensor &x) { return nn::gelu(x); }, [](double x) { return x * Phi(x); },
         [](double x) { return Phi(x) + x * phi(x); }},
        {"gelu_tanh", [](const Tensor &x) { return nn::gelu(x, true); }, gelu_tanh, gelu_tanh_d},
        {"silu", nn::silu, [](double x) { return x * sig(x); },
         [](double x) { return sig(x) * (1 + x * (1 - sig(x))); }},
        {"swish", nn::swish, [](double x) { return x * sig(x); },
         [](double x) { return sig(x) * (1 + x * (1 - sig(x))); }},
        {"softplus", [](const Tensor &x) { return nn::softplus(x); },
         [](double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); }, sig},
        {"sigmoid", [](const Tensor &x) { return nn::sigmoid(x); }, sig,
         [](double x) { return sig(x) * (1 - sig(x)); }},
        {"tanh", [](const Tensor &x) { return nn::tanh(x); }, [](double x) { return std::tanh(x); },
         [](double x) { return 1 - std::tanh(x) * std::tanh(x); }},
        {"hard_tanh", [](const Tensor &x) { return nn::hard_tanh(x); },
         [](double x) { return std::min(std::max(x, -1.0), 1.0); },
         [](double x) { return x > -1 && x < 1 ? 1.0 : 0.0; }},
        {"hard_sigmoid", nn::hard_sigmoid,
         [](double x) { return std::min(std::max(x + 3, 0.0), 6.0) / 6; },
         [](double x) { return x > -3 && x < 3 ? 1.0 / 6 : 0.0; }},
    };
}

// points away from the kinks (0, +-1, +-3, 6) so one-sided derivatives do not matter
const std::vector<double> kPoints{-80.0, -7.5, -2.5, -1.3, -0.7, -0.2, 0.15,
                                  0.5,   1.2,  2.7,  4.5,  7.0,  80.0};
} // namespace

TEST(NnActivations, ValuesAndGradientsMatchFormulas) {
    Placeholder x({int64_t(kPoints.size())}, f64, "x");
    for (const auto &c : cases()) {
        SCOPED_TRACE(c.name);
        Tensor y = c.fn(x);
        Tensor g = gradients(sum(y), x);
        Function f = function({x}, {y, g});
        auto r = f(Array(kPoints));
        std::vector<double> yv = r[0].to_vector<double>(), gv = r[1].to_vector<double>();
        for (size_t i = 0; i < kPoints.size(); ++i) {
            double ry = c.ref(kPoints[i]), rg = c.dref(kPoints[i]);
            EXPECT_NEAR(yv[i], ry, 1e-12 * (1 + std::abs(ry))) << "x = " << kPoints[i];
            EXPECT_NEAR(gv[i], rg, 1e-10 * (1 + std::abs(rg))) << "x = " << kPoints[i];
        }
    }
}

TEST(NnActivations, StableInF32ForLargeInputs) {
    Placeholder x({4}, f32, "x");
    for (const auto &c : cases()) {
        SCOPED_TRACE(c.name);
        Tensor y = c.fn(x);
        Function f = function({x}, {y, gradients(sum(y), x)});
        auto r = f(Array(std::vector<float>{-1e4f, -100.f, 100.f, 1e4f}));
        for (float v : r[0].to_vector<float>())
            EXPECT_TRUE(std::isfinite(v)) << v;
        for (float v : r[1].to_vector<float>())
            EXPECT_TRUE(std::isfinite(v)) << v;
    }
}

// relu and leaky relu at their edges, on both backends: NaN passes through, -inf gives 0 (and
// -inf * s), the gradient at 0 is PyTorch's (0 for relu, the slope for leaky relu: its
// relu_backward and leaky_relu_backward test x > 0), and the backward reads the output, not x
// (Note [Relu masks]), so x is read only by the forward ops
TEST(NnActivations, ReluEdgesAndOutputMasks) {
    const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
    const std::vector<double> xs{0.0, -0.0, nan, -inf, inf, 2.5, -2.5, 1e-300};
    Placeholder x({int64_t(xs.size())}, f64, "x");
    for (double s : {0.0, 0.1}) {
        SCOPED_TRACE("slope " + std::to_string(s));
        Tensor y = s == 0 ? nn::relu(x) : nn::leaky_relu(x, s);
        Tensor g = gradients(sum(y * 3.0), x);
        std::vector<const Node*> fwd = topo_order({y.node().get()});
        for (const Node* n : topo_order({g.node().get()}))
            for (const NodePtr& i : n->inputs())
                if (i == x.node())
                    EXPECT_NE(std::find(fwd.begin(), fwd.end(), n), fwd.end())
                        << n->describe(1) << " in the backward reads x";
        for (const char* dev : {"cpu", "reference"}) {
            SCOPED_TRACE(dev);
            auto r = function({x}, {y, g}, {}, on(dev))(Array(xs));
            std::vector<double> yv = r[0].to_vector<double>(), gv = r[1].to_vector<double>();
            for (size_t i = 0; i < xs.size(); ++i) {
                double v = xs[i], ry = v > 0 ? v : s * v, rg = v > 0 ? 3.0 : 3.0 * s;
                if (s == 0 && v == -inf)
                    ry = 0; // relu(-inf) is 0, not 0 * -inf
                if (std::isnan(v)) {
                    EXPECT_TRUE(std::isnan(yv[i])) << "x = NaN gives " << yv[i];
                } else {
                    EXPECT_EQ(yv[i], ry) << "x = " << v;
                    EXPECT_EQ(gv[i], rg) << "x = " << v;
                }
            }
        }
    }
}

TEST(NnActivations, ModulesMatchFunctions) {
    // the same graph, node for node: each call makes its own constants (leaves of their own),
    // so the graphs are compared as text, which shows a constant by its value
    auto same_graph = [](const Tensor &a, const Tensor &b) { return to_text({a}) == to_text({b}); };
    Placeholder x({3, 4}, f32, "x");
    EXPECT_TRUE(same_graph(nn::ReLU()(x), nn::relu(x)));
    EXPECT_TRUE(same_graph(nn::ReLU6()(x), nn::relu6(x)));
    EXPECT_TRUE(same_graph(nn::LeakyReLU(0.2)(x), nn::leaky_relu(x, 0.2)));
    EXPECT_TRUE(same_graph(nn::ELU(0.5)(x), nn::elu(x, 0.5)));
    EXPECT_TRUE(same_graph(nn::SELU()(x), nn::selu(x)));
    EXPECT_TRUE(same_graph(nn::GELU()(x), nn::gelu(x)));
    EXPECT_TRUE(same_graph(nn::GELU(true)(x), nn::gelu(x, true)));
    EXPECT_TRUE(same_graph(nn::SiLU()(x), nn::silu(x)));
    EXPECT_TRUE(same_graph(nn::Swish()(x), nn::swish(x)));
    EXPECT_TRUE(same_graph(nn::Softplus()(x), softplus(x)));
    EXPECT_TRUE(same_graph(nn::Sigmoid()(x), sigmoid(x)));
    EXPECT_TRUE(same_graph(nn::Tanh()(x), tanh(x)));
    EXPECT_TRUE(same_graph(nn::Softmax(0)(x), softmax(x, 0)));
    EXPECT_TRUE(same_graph(nn::LogSoftmax()(x), log_softmax(x, -1)));
    EXPECT_TRUE(same_graph(nn::HardTanh(-2, 2)(x), nn::hard_tanh(x, -2, 2)));
    EXPECT_TRUE(same_graph(nn::HardSigmoid()(x), nn::hard_sigmoid(x)));
    EXPECT_TRUE(same_graph(nn::Lambda([](const Tensor &t) { return t * 2.0; })(x), x * 2.0));
    EXPECT_TRUE(same_graph(nn::ReLU()(x, nn::Mode::Eval), nn::relu(x)));
}

TEST(NnActivations, SoftmaxRowsSumToOne) {
    Placeholder x({2, 3}, f32, "x");
    Function f = function({x}, {nn::softmax(x), nn::Softmax()(x)});
    auto r = f(Array(std::vector<float>{1, 2, 3, 1000, 0, -1000}, {2, 3}));
    std::vector<float> p = r[0].to_vector<float>();
    EXPECT_NEAR(p[0] + p[1] + p[2], 1.0, 1e-6);
    EXPECT_NEAR(p[3], 1.0, 1e-6);
    EXPECT_NEAR(p[0], std::exp(1.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), 1e-6);
}
