// Tests of function() inputs that are not placeholders: variables, intermediates and constants
// overridden by the call's arguments (Theano's givens at call time), on both backends.
#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include "TestUtil.h"

#include <cmath>

using namespace sj;
using sj::test::message_of;

namespace {
std::vector<float> vec(const Array& a) {
    return a.to_vector<float>();
}
Array arr(std::vector<float> v) {
    return Array(v);
}

class FunctionInputs : public ::testing::TestWithParam<std::string> {
protected:
    FunctionOptions opts() const {
        FunctionOptions o;
        o.backend = GetParam();
        return o;
    }
};

} // namespace

TEST_P(FunctionInputs, VariableIsOverriddenAndKeepsItsValue) {
    Variable w(arr({1, 2, 3}), "fi_w");
    Placeholder x({3}, DType::F32, "x");
    Function f = function({x, w}, {x * w}, {}, opts());
    std::vector<Array> out = f(arr({1, 1, 1}), arr({4, 5, 6}));
    EXPECT_EQ(vec(out[0]), (std::vector<float>{4, 5, 6}));
    EXPECT_EQ(vec(w.value()), (std::vector<float>{1, 2, 3})); // untouched
    // the same graph compiled without the override reads the variable
    Function g = function({x}, {x * w}, {}, opts());
    EXPECT_EQ(vec(g(arr({1, 1, 1}))[0]), (std::vector<float>{1, 2, 3}));
}

TEST_P(FunctionInputs, UpdateOfAnOverriddenVariableStillWritesIt) {
    Variable w(Array::scalar<float>(1), "fi_wu");
    Variable other(Array::scalar<float>(100), "fi_other");
    // the new values are computed from the argument, and w and other are written
    Function f = function({w}, {w * 2.0}, {{w, w + 1.0}, {other, other + w}}, opts());
    EXPECT_EQ(f(10.0)[0].item<float>(), 20.0f);
    EXPECT_EQ(w.value().item<float>(), 11.0f);
    EXPECT_EQ(other.value().item<float>(), 110.0f);
    EXPECT_EQ(f(-3.0)[0].item<float>(), -6.0f);
    EXPECT_EQ(w.value().item<float>(), -2.0f);
    EXPECT_EQ(other.value().item<float>(), 107.0f);
}

TEST_P(FunctionInputs, IntermediateInputCutsTheGraphAboveIt) {
    Placeholder x({-1, 2}, DType::F32, "fi_x");
    Tensor h = (x * 2.0).named("fi_h");
    Tensor y = h + 1.0;
    // x is not an input and need not be: nothing above h runs
    Function f = function({h}, {y}, {}, opts());
    std::vector<float> three(6, 1.0f), five(10, 2.0f);
    Array a3 = Array(three).reshape({3, 2}), a5 = Array(five).reshape({5, 2});
    EXPECT_EQ(vec(f(a3)[0]), std::vector<float>(6, 2.0f)); // -1 dims bind per call
    EXPECT_EQ(vec(f(a5)[0]), std::vector<float>(10, 3.0f));
    // an input's wrong shape names the tensor and its type
    std::string msg = message_of<Error>([&] { f(arr({1, 2, 3})); });
    EXPECT_NE(msg.find("fi_h"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[-1, 2]"), std::string::npos) << msg;
    EXPECT_THROW(f(arr({1, 2, 3})), InputError);
}

TEST_P(FunctionInputs, UpstreamOpThatWouldFailDoesNotRun) {
    Variable v(Array::scalar<float>(-1), "fi_neg");
    Tensor bad = log(v); // NaN: the nan guard throws when it runs
    FunctionOptions o = opts();
    o.nan_guard = true;
    Function control = function({}, {bad * 2.0}, {}, o);
    EXPECT_THROW(control(), Error);
    Function f = function({bad}, {bad * 2.0}, {}, o);
    EXPECT_EQ(f(3.0)[0].item<float>(), 6.0f);
}

TEST_P(FunctionInputs, AnInputStillNeededElsewhereKeepsItsDependencies) {
    Placeholder x({}, DType::F32, "fi_x2");
    Tensor h = x * 2.0;
    Function f = function({x, h}, {h + x}, {}, opts());
    EXPECT_EQ(f(1.0, 10.0)[0].item<float>(), 11.0f);
    // without x among the inputs, the output still reads it
    std::string msg = message_of<Error>([&] { function({h}, {h + x}, {}, opts()); });
    EXPECT_NE(msg.find("fi_x2"), std::string::npos) << msg;
    EXPECT_THROW(function({h}, {h + x}, {}, opts()), InputError);
}

TEST_P(FunctionInputs, ConstantInput) {
    Tensor c = ones({2});
    Function f = function({c}, {c * 3.0}, {}, opts());
    EXPECT_EQ(vec(f(arr({1, 2}))[0]), (std::vector<float>{3, 6}));
    Function g = function({}, {c * 3.0}, {}, opts());
    EXPECT_EQ(vec(g()[0]), (std::vector<float>{3, 3}));
}

TEST_P(FunctionInputs, InputChecksNameTheTensor) {
    Variable w(arr({1, 2}), "fi_checked");
    Function f = function({w}, {w + 1.0}, {}, opts());
    std::string msg = message_of<Error>([&] { f(Array(std::vector<double>{1, 2})); });
    EXPECT_NE(msg.find("fi_checked"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f32"), std::string::npos) << msg;
    EXPECT_THROW(f(Array(std::vector<double>{1, 2})), InputError);
    EXPECT_THROW(f(arr({1, 2, 3})), InputError);
    EXPECT_THROW(f(1.0), InputError); // a number for a rank-1 input
    EXPECT_THROW(f(), InputError);
    // listed twice, undefined
    EXPECT_THROW(function({w, w}, {w}, {}, opts()), Error);
    EXPECT_THROW(function({Tensor()}, {w}, {}, opts()), Error);
    msg = message_of<Error>([&] { function({w, w}, {w}, {}, opts()); });
    EXPECT_NE(msg.find("listed twice"), std::string::npos) << msg;
}

// SymJAX tests/function_test.py, test_base: a function without inputs called 100 times.
TEST_P(FunctionInputs, SymjaxFunctionTestBase) {
    Tensor b = sum(ones({10}));
    EXPECT_EQ(b.eval().item<float>(), 10.0f);
    Function f = function({}, {b}, {}, opts());
    for (int i = 0; i < 100; ++i)
        ASSERT_EQ(f()[0].item<float>(), 10.0f);
}

// SymJAX tests/base_test.py, test_pymc: a model whose random variables are Variables, compiled
// with the variables as inputs; the log density and its gradient against closed forms.
TEST_P(FunctionInputs, SymjaxPymcVariablesAsInputs) {
    auto var = [](const char* n) { return Variable(Array::scalar<double>(0), n); };
    Variable x = var("fi_pymc_x"), s = var("fi_pymc_s"), y = var("fi_pymc_y");
    // log N(v; mu, sigma) = (-tau (v - mu)^2 + log(tau / pi / 2)) / 2, tau = sigma^-2
    auto logp = [](const Tensor& v, const Tensor& mu, const Tensor& sigma) {
        Tensor tau = 1.0 / (sigma * sigma);
        return (-tau * (v - mu) * (v - mu) + log(tau / M_PI / 2.0)) / 2.0;
    };
    Tensor c0 = scalar(0.0, DType::F64);
    Tensor logpt = logp(x, c0, scalar(10.0, DType::F64)) + logp(s, c0, scalar(5.0, DType::F64)) +
                   logp(y, x, exp(s));
    EXPECT_EQ(y.eval().item<double>(), 0.0);
    std::vector<Tensor> grads = gradients(logpt, {x, s, y});
    Function f = function({x, s, y}, {logpt, grads[0], grads[1], grads[2]}, {}, opts());
    auto normal = [](double v, double mu, double sigma) {
        return -0.5 * (v - mu) * (v - mu) / (sigma * sigma) - std::log(sigma) -
               0.5 * std::log(2 * M_PI);
    };
    const double xs[] = {3.1, -12.0, 0.4}, ss[] = {0.7, -2.5, 4.0}, ys[] = {3.05, -11.9, 7.0};
    for (int i = 0; i < 3; ++i) {
        double xv = xs[i], sv = ss[i], yv = ys[i];
        std::vector<Array> out = f(xv, sv, yv);
        double expect = normal(xv, 0, 10) + normal(sv, 0, 5) + normal(yv, xv, std::exp(sv));
        double e2s = std::exp(-2 * sv);
        EXPECT_NEAR(out[0].item<double>(), expect, 1e-9 * std::abs(expect));
        EXPECT_NEAR(out[1].item<double>(), -xv / 100 + (yv - xv) * e2s, 1e-9);
        EXPECT_NEAR(out[2].item<double>(), -sv / 25 + (yv - xv) * (yv - xv) * e2s - 1, 1e-9);
        EXPECT_NEAR(out[3].item<double>(), -(yv - xv) * e2s, 1e-9);
    }
    // the variables keep their values
    EXPECT_EQ(x.value().item<double>(), 0.0);
    EXPECT_EQ(s.value().item<double>(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Backends, FunctionInputs, ::testing::Values("reference", "cpu"));
