// Port of the doctests SymJAX's tests/doc.py runs: those of symjax/base.py and
// symjax/nn/schedules.py (symjax/tensor/base.py has none), and those of
// symjax/tensor/control_flow.py, which doc.py also runs (with
// scan and map from include/symjax/ControlFlow.h). Each TEST names the docstring it comes from; what the doctest prints is checked
// value by value.
#include "symjax_suite/SuiteUtil.h"

#include <symjax/nn.h>

#include <algorithm>

using namespace sj;
using namespace sj::suite;

// symjax/base.py, reset_variables: w and x incremented by a function, printed 10 times, then
// reset_variables('w') and reset_variables('*').
TEST(SymjaxDoc, BaseResetVariables) {
    Variable w(scalar_f32(1.0), "w");
    Variable x(scalar_f32(2.0), "x");
    Function f = function({}, {w, x}, Updates{{w, w + 1.0}, {x, x + 1.0}});
    for (int i = 0; i < 10; ++i) {
        std::vector<Array> out = f();
        // [array(1., dtype=float32), array(2., dtype=float32)], [array(2., ...), array(3., ...)]
        EXPECT_EQ(out[0].dtype(), DType::F32);
        EXPECT_EQ(out[0].at(0), 1.0 + i);
        EXPECT_EQ(out[1].at(0), 2.0 + i);
    }
    reset_variables("w");
    EXPECT_EQ(w.value().at(0), 1.0);
    EXPECT_EQ(x.value().at(0), 12.0);
    reset_variables("*");
    EXPECT_EQ(x.value().at(0), 2.0);
}

// symjax/base.py, gradients: d sum(w^2) x / dw = 2 w x with x incremented after each call:
// [4. 4. 4.] then [6. 6. 6.].
TEST(SymjaxDoc, BaseGradients) {
    Tensor w = ones({3});
    Variable x(scalar_f32(2.0), "x");
    Tensor l = sum(pow(w, 2.0)) * x;
    Tensor g = gradients(l, {w})[0];
    Function f = function({}, {g}, Updates{{x, x + 1.0}});
    EXPECT_TRUE(array_equal(f()[0], {4, 4, 4}, {3}));
    EXPECT_TRUE(array_equal(f()[0], {6, 6, 6}, {3}));
}

// symjax/base.py, function: ones((4, 4)).sum() + 1 prints 17.0; a function of updates only,
// called 10 times, leaves w at 10.0.
TEST(SymjaxDoc, BaseFunction) {
    Tensor x = ones({4, 4});
    Tensor xs = sum(x) + 1.0;
    Function f = function({}, {xs});
    EXPECT_EQ(f()[0].at(0), 17.0);

    Variable w(scalar_f32(0.0), "w");
    Function increment = function({}, {}, Updates{{w, w + 1.0}});
    for (int i = 0; i < 10; ++i)
        increment();
    EXPECT_EQ(w.value().at(0), 10.0);
}

// symjax/nn/schedules.py, PiecewiseConstant: 0.1 until step 4, then 1.0, from step 8 2.0. (The
// doctest also prints symjax.get_updates(), the counter's update SymJAX records globally; sj
// keeps no global updates, the function is given the counter's update.)
TEST(SymjaxDoc, SchedulesPiecewiseConstant) {
    Variable step(Array::scalar<int64_t>(0), "step", false);
    Tensor var = nn::schedules::piecewise_constant(step, {4, 8}, {0.1, 1, 2});
    Function f = function({}, {var}, Updates{{step, step + 1.0}});
    const std::vector<float> printed{0.1f, 0.1f, 0.1f, 0.1f, 1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f};
    for (int i = 0; i < 10; ++i)
        EXPECT_EQ(f()[0].item<float>(), printed[size_t(i)]) << i;
}

// symjax/base.py, Scope: v made at the root prints scope "/", out and w made in my_scope print
// "/my_scope/"; a kept scope entered later holds `other`, and its ops list that one multiply
// (Op(name=multiply, fn=multiply, shape=(), dtype=int32, scope=/second_scope/)). A tensor's
// scope is read here from the scope's side: the scope whose ops() or variables() list it.
TEST(SymjaxDoc, BaseScope) {
    auto holds = [](const std::vector<Tensor>& ts, const Tensor& t) {
        return std::any_of(ts.begin(), ts.end(), [&](const Tensor& x) { return x.same(t); });
    };
    Variable v(Array::scalar<int32_t>(1), "v");
    EXPECT_EQ(v.full_name(), "v"); // at the root: "/"
    Variable w;
    Tensor out;
    {
        Scope s("my_scope");
        w = Variable(Array::scalar<int32_t>(2), "w");
        out = v * w;
    }
    Scope my_scope = Scope::at("/my_scope/");
    EXPECT_EQ(my_scope.absolute_name(), "/my_scope/");
    EXPECT_TRUE(holds(my_scope.ops(), out));
    std::vector<Variable> vars = my_scope.variables();
    EXPECT_TRUE(holds(std::vector<Tensor>(vars.begin(), vars.end()), w));
    EXPECT_EQ(w.full_name(), "my_scope/w");

    Scope scope = Scope::make("second_scope");
    Tensor other;
    {
        auto in = scope.enter();
        other = out * w;
    }
    EXPECT_EQ(scope.absolute_name(), "/second_scope/");
    std::vector<Tensor> ops = scope.ops();
    ASSERT_EQ(ops.size(), 1u);
    EXPECT_TRUE(ops[0].same(other));
    EXPECT_EQ(ops[0].shape(), Shape{});
    EXPECT_EQ(ops[0].dtype(), DType::I32);
    EXPECT_FALSE(holds(my_scope.ops(), other));
}

// symjax/nn/schedules.py, ExponentialMovingAverage: 25 noisy inputs around 1 (np.random.seed(0))
// and the EMA printed after each. The printed numbers were made by the SymJAX version whose EMA
// started at the first value (the `first_step` variable in the printed updates); sj's
// start_at_first option is that EMA. (The printed updates themselves are SymJAX's global
// registry, which sj does not have: the average returns its updates.)
TEST(SymjaxDoc, SchedulesExponentialMovingAverage) {
    const auto& e = expected()["doc_ema"];
    Placeholder input({2}, DType::F32, "input");
    nn::Averaged ema =
        nn::exponential_moving_average(input, 0.9, {.debias = false, .start_at_first = true});
    Function f = function({input}, {ema.value}, ema.updates);
    Array inputs = json_array(e["inputs"], {25, 2});
    Array printed = json_array(e["ema"], {25, 2});
    for (int64_t i = 0; i < 25; ++i) {
        Array x = Array::from_buffer(DType::F32, {2}, inputs.data<float>() + 2 * i);
        Array p = Array::from_buffer(DType::F32, {2}, printed.data<float>() + 2 * i);
        EXPECT_TRUE(allclose(f(x)[0], p, 0, 1e-6)) << i;
    }
}

// Control flow (include/symjax/ControlFlow.h).

namespace {
using Ts = std::vector<Tensor>;
}

// symjax/tensor/control_flow.py, map: index_update(w, i, x) over x = ones(3), i = arange(3) with
// w = zeros(3) builds the identity matrix.
TEST(SymjaxDoc, ControlFlowMap) {
    Tensor x = ones({3});
    Tensor y = zeros({3});
    Tensor w = arange(3, DType::I32);
    Tensor out = map([](const Ts& a) { return index_update(a[2], {a[1]}, a[0]); }, {x, w}, {y});
    Function f = function({}, {out});
    EXPECT_TRUE(array_equal(f()[0], {1, 0, 0, 0, 1, 0, 0, 0, 1}, {3, 3}));
}

// symjax/tensor/control_flow.py, scan: acc + w[i] over the given indices of w = arange(10),
// also returning the indices: f([0, 2, 3]) = [[5.], [0, 2, 3]], f([1, 1, 1]) = [[3.], [1, 1, 1]].
TEST(SymjaxDoc, ControlFlowScan) {
    Placeholder indices({3}, DType::I32, "indices");
    Tensor w = arange(10, DType::I32);
    auto [carry, ys] = scan(
        [](const Ts& acc, const Ts& a) {
            return std::pair{Ts{acc[0] + a[1][a[0]]}, Ts{a[0]}};
        },
        {zeros({1})}, {indices}, {w});
    Function f = function({indices}, {carry[0], ys[0]});
    std::vector<Array> r = f(Array(std::vector<int32_t>{0, 2, 3}, Shape{3}));
    EXPECT_TRUE(array_equal(r[0], {5}, {1}));
    EXPECT_TRUE(array_equal(r[1], {0, 2, 3}, {3}));
    r = f(Array(std::vector<int32_t>{1, 1, 1}, Shape{3}));
    EXPECT_TRUE(array_equal(r[0], {3}, {1}));
    EXPECT_TRUE(array_equal(r[1], {1, 1, 1}, {3}));
}

