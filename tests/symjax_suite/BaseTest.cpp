// Port of SymJAX's tests/base_test.py: one TEST per test_* function, same numbers, same checks.
#include "symjax_suite/SuiteUtil.h"

#include <symjax/nn.h>

#include <cmath>

using namespace sj;
using namespace sj::suite;

// a = T.ones(2); current_graph().get(a.max()) == 1
TEST(SymjaxBase, Add) {
    Tensor a = ones({2});
    EXPECT_EQ(max(a).eval().at(0), 1.0);
}

// An int32 placeholder times a float32 constant, in two functions.
TEST(SymjaxBase, Placeholders) {
    Tensor a = ones({1}) * 2.0;
    Placeholder x({}, DType::I32, "x");
    Function f = function({x}, {x * a});
    Placeholder y({}, DType::I32, "y");
    Function g = function({y}, {y * a});
    EXPECT_TRUE(allclose(f(1)[0], 2.0));
    EXPECT_TRUE(allclose(g(2)[0], 4.0));
}

// d(a + a^2)/da = 3 at a = 1; with stop_gradient on a^2 it is 1.
TEST(SymjaxBase, Stop) {
    Tensor a = ones({});
    Tensor b = a + pow(a, 2.0);
    Tensor g = gradients(b, {a})[0];
    EXPECT_EQ(function({}, {g})()[0].at(0), 3.0);
    b = a + stop_gradient(pow(a, 2.0));
    g = gradients(b, {a})[0];
    EXPECT_EQ(function({}, {g})()[0].at(0), 1.0);
}

// d(a * b)/da = b, read before each update b <- b + 1.
TEST(SymjaxBase, G) {
    Tensor a = ones({});
    Variable b(scalar_f32(1.0), "b");
    Tensor l = a * b;
    Tensor g = gradients(l, {a})[0];
    Function f = function({}, {g}, Updates{{b, b + 1.0}});
    EXPECT_EQ(f()[0].at(0), 1.0);
    EXPECT_EQ(f()[0].at(0), 2.0);
    EXPECT_EQ(f()[0].at(0), 3.0);
}

// stack([u, 2u, 3u]) of a variable u = ones(2).
TEST(SymjaxBase, Stack) {
    Variable u(ones({2}), "u");
    Tensor output = stack({u, 2.0 * u, 3.0 * u});
    Function f = function({}, {output});
    Array expected(std::vector<float>{1, 1, 2, 2, 3, 3}, Shape{3, 2});
    EXPECT_TRUE(allclose(f()[0], expected));
    EXPECT_TRUE(allclose(f()[0], expected));
}

// d sum(w v + 2)/dv = w.
TEST(SymjaxBase, Grad) {
    Placeholder w({}, DType::F32, "w");
    Variable v(scalar_f32(1.0), "v");
    Tensor x = w * v + 2.0;
    Tensor g = gradients(sum(x), {v})[0];
    Function f = function({w}, {g});
    EXPECT_EQ(f(1)[0].at(0), 1.0);
    EXPECT_EQ(f(10)[0].at(0), 10.0);
}

// EMA of a scalar input without debiasing: the average before the call is `current`, after it
// 0.9 current + 0.1.
TEST(SymjaxBase, Ema) {
    Placeholder a({}, DType::F32, "a");
    nn::Averaged ema = nn::exponential_moving_average(a, 0.9, {.debias = false});
    Function f = function({a}, {ema.value, ema.average}, ema.updates);
    double current = 0;
    for (int i = 0; i < 10; ++i) {
        std::vector<Array> out = f(1);
        EXPECT_TRUE(allclose(out[1], current)) << i;
        current = 0.9 * current + 0.1 * 1;
        EXPECT_TRUE(allclose(out[0], current)) << i;
    }
}

// Simple moving average over 3 of four vectors: data[0], mean(data[:2]), mean(data[:3]),
// mean(data[1:4]) (gen_expected.py's; SymJAX's test draws the data unseeded).
TEST(SymjaxBase, Sma) {
    const auto& e = expected()["sma"];
    Placeholder a({4}, DType::F32, "a");
    nn::Averaged sma = nn::simple_moving_average(a, 3);
    Function f = function({a}, {sma.value, sma.average}, sma.updates);
    Array data = json_array(e["data"], {4, 4});
    Array current = json_array(e["sma"], {4, 4});
    for (int64_t i = 0; i < 4; ++i) {
        Array row = Array::from_buffer(DType::F32, {4}, data.data<float>() + 4 * i);
        Array expect = Array::from_buffer(DType::F32, {4}, current.data<float>() + 4 * i);
        EXPECT_TRUE(allclose(f(row)[0], expect)) << i;
    }
}

namespace {

/// test_pymc's random variables: a Variable (0 when nothing is observed) with a normal log
/// density, (-tau (value - mu)^2 + log(tau / pi / 2)) / 2 with tau = sigma^-2.
struct Normal {
    Normal(const std::string& name, Tensor mu_, Tensor sigma_)
        : var(scalar_f32(0.0), name), mu(std::move(mu_)), sigma(std::move(sigma_)) {}
    Tensor logp(const Tensor& value) const {
        Tensor tau = pow(sigma, -2.0);
        return (-tau * pow(value - mu, 2.0) + log(tau / M_PI / 2.0)) / 2.0;
    }
    Tensor logpt() const { return logp(var); }
    Variable var;
    Tensor mu, sigma;
};

} // namespace

// A three-variable model x ~ N(0, 10), s ~ N(0, 5), y ~ N(x, exp(s)) whose variables are the
// function's inputs: its log density against scipy's norm.logpdf (torch's here) at rtol 1e-6.
// SymJAX's test also builds the gradient and JAX's, without comparing them; here they are
// compared (rtol 1e-5).
TEST(SymjaxBase, Pymc) {
    Normal x("x", scalar(0.0), scalar(10.0));
    Normal s("s", scalar(0.0), scalar(5.0));
    Normal y("y", x.var, exp(s.var));
    EXPECT_EQ(y.var.value().at(0), 0.0);

    Tensor model_logpt = x.logpt() + s.logpt() + y.logpt();
    Function f = function({x.var, s.var, y.var}, {model_logpt});
    std::vector<Tensor> model_dlogpt = gradients(model_logpt, {x.var, s.var, y.var});
    std::vector<Tensor> outs{model_logpt};
    outs.insert(outs.end(), model_dlogpt.begin(), model_dlogpt.end());
    Function f_with_grad = function({x.var, s.var, y.var}, outs);

    for (const auto& row : expected()["pymc"]) {
        float xv = row["x"].get<float>(), sv = row["s"].get<float>(), yv = row["y"].get<float>();
        double logp = row["logp"].get<double>();
        EXPECT_TRUE(isclose(f(xv, sv, yv)[0].at(0), logp, 1e-6)) << xv << " " << sv << " " << yv;
        std::vector<Array> r = f_with_grad(xv, sv, yv);
        EXPECT_TRUE(isclose(r[0].at(0), logp, 1e-6));
        for (size_t k = 0; k < 3; ++k)
            EXPECT_TRUE(isclose(r[k + 1].at(0), row["grad"][k].get<double>(), 1e-5))
                << "d/d"
                << "xsy"[k] << ": " << r[k + 1].at(0) << " vs " << row["grad"][k];
    }
}
