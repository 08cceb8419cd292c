// Port of SymJAX's tests/flow_test.py (cond, map, while_loop). The doctests of
// symjax/tensor/control_flow.py are in DocTest.cpp and clone_test.py's scan test in CloneTest.cpp.
//
// The API is include/symjax/ControlFlow.h (docs/control-flow.md): scan returns (final carry,
// stacked outputs), map one stacked tensor, while_loop the final loop variables, cond the taken
// branch's results.
//
// SymJAX's cond takes separate true_inputs and false_inputs; here both lists are passed as the
// operands, the true branch reading the first half and the false branch the second.

#include "symjax_suite/SuiteUtil.h"

using namespace sj;
using namespace sj::suite;

namespace {

using Ts = std::vector<Tensor>;

std::vector<double> full_of(size_t n, double v) {
    return std::vector<double>(n, v);
}

} // namespace

// cond(u > 0, lambda u: u, lambda u: 2 * u, (v,), (v,)) with v = ones((10, 10)).
TEST(SymjaxFlow, Cond1) {
    Tensor v = ones({10, 10});
    Placeholder u({}, DType::I32, "u");
    Tensor out = cond(
        u > 0.0, [](const Ts& a) { return Ts{a[0]}; }, [](const Ts& a) { return Ts{2.0 * a[1]}; },
        {v, v})[0];
    Function f = function({u}, {out});
    EXPECT_TRUE(array_equal(f(1)[0], full_of(100, 1), {10, 10}));
    EXPECT_TRUE(array_equal(f(0)[0], full_of(100, 2), {10, 10}));
}

// cond(u > 0, lambda u: 4 * u, lambda u: u, (v,), (2 * v,)).
TEST(SymjaxFlow, Cond2) {
    Tensor v = ones({10, 10});
    Placeholder u({}, DType::I32, "u");
    Tensor out = cond(
        u > 0.0, [](const Ts& a) { return Ts{4.0 * a[0]}; }, [](const Ts& a) { return Ts{a[1]}; },
        {v, 2.0 * v})[0];
    Function f = function({u}, {out});
    EXPECT_TRUE(array_equal(f(1)[0], full_of(100, 4), {10, 10}));
    EXPECT_TRUE(array_equal(f(0)[0], full_of(100, 2), {10, 10}));
}

// Two operands per branch: a * u or a + u with a = 2 ones, u = 3 ones.
TEST(SymjaxFlow, Cond3) {
    Tensor v = ones({10, 10}) * 3.0;
    Placeholder u({}, DType::I32, "u");
    Tensor two = 2.0 * ones({10, 10});
    Tensor out = cond(
        u > 0.0, [](const Ts& a) { return Ts{a[0] * a[1]}; },
        [](const Ts& a) { return Ts{a[2] + a[3]}; }, {two, v, two, v})[0];
    Function f = function({u}, {out});
    EXPECT_TRUE(array_equal(f(1)[0], full_of(100, 6), {10, 10}));
    EXPECT_TRUE(array_equal(f(0)[0], full_of(100, 5), {10, 10}));
}

// An int32 variable W as an operand, incremented by the function: W v or W + v.
TEST(SymjaxFlow, Cond4) {
    Tensor v = ones({10, 10}) * 3.0;
    Variable W(Array::scalar<int32_t>(1), "W");
    Placeholder u({}, DType::I32, "u");
    Tensor out = cond(
        u > 0.0, [](const Ts& a) { return Ts{a[0] * a[1]}; },
        [](const Ts& a) { return Ts{a[2] + a[3]}; }, {W, v, W, v})[0];
    Function f = function({u}, {out}, Updates{{W, W + 1.0}});
    EXPECT_TRUE(array_equal(f(1)[0], full_of(100, 3), {10, 10}));
    EXPECT_TRUE(array_equal(f(0)[0], full_of(100, 5), {10, 10}));
    EXPECT_TRUE(array_equal(f(1)[0], full_of(100, 9), {10, 10}));
}

// As Cond4, the branches reading rows u[0] and u[1] of the operand.
TEST(SymjaxFlow, Cond5) {
    Tensor v = ones({10, 10}) * 3.0;
    Variable W(Array::scalar<int32_t>(1), "W");
    Placeholder u({}, DType::I32, "u");
    Tensor out = cond(
        u > 0.0, [](const Ts& a) { return Ts{a[0] * a[1][0]}; },
        [](const Ts& a) { return Ts{a[2] + a[3][1]}; }, {W, v, W, v})[0];
    Function f = function({u}, {out}, Updates{{W, W + 1.0}});
    EXPECT_TRUE(array_equal(f(1)[0], full_of(10, 3), {10}));
    EXPECT_TRUE(array_equal(f(0)[0], full_of(10, 5), {10}));
    EXPECT_TRUE(array_equal(f(1)[0], full_of(10, 9), {10}));
}

// map(lambda a, w, u: (u - w) * a, [range(3)], non_sequences=[w, u]) with w incremented.
TEST(SymjaxFlow, Map) {
    Variable w(scalar_f32(1.0), "w");
    Placeholder u({}, DType::F32, "u");
    Tensor out =
        map([](const Ts& a) { return (a[2] - a[1]) * a[0]; }, {arange(3, DType::I32)}, {w, u});
    Function f = function({u}, {out}, Updates{{w, w + 1.0}});
    EXPECT_TRUE(array_equal(f(2)[0], {0, 1, 2}, {3}));
    EXPECT_TRUE(array_equal(f(2)[0], {0, 0, 0}, {3}));
    EXPECT_TRUE(array_equal(f(0)[0], {0, -3, -6}, {3}));
}

// d sum(map(w a u))/dw = 3 u.
TEST(SymjaxFlow, GradMap) {
    Variable w(scalar_f32(1.0), "w");
    Placeholder u({}, DType::F32, "u");
    Tensor out =
        map([](const Ts& a) { return a[1] * a[0] * a[2]; }, {arange(3, DType::I32)}, {w, u});
    Tensor g = gradients(sum(out), w);
    Function f = function({u}, {g});
    EXPECT_EQ(f(0)[0].at(0), 0.0);
    EXPECT_EQ(f(1)[0].at(0), 3.0);
}

// map over two sequences: a * b.
TEST(SymjaxFlow, GradMapV2) {
    Tensor out = map([](const Ts& a) { return a[0] * a[1]; },
                     {arange(3, DType::I32), arange(3, DType::I32)});
    Function f = function({}, {out});
    EXPECT_TRUE(array_equal(f()[0], {0, 1, 4}, {3}));
}

// while i[0] + v < 5: (i[0], i[1]) <- (i[0] + 1, i[0]^2), from (w, 1) with w = 1.
TEST(SymjaxFlow, While) {
    Variable w(scalar_f32(1.0), "w");
    Placeholder v({}, DType::F32, "v");
    Ts out = while_loop([](const Ts& i, const Ts& ns) { return i[0] + ns[0] < 5.0; },
                        [](const Ts& i, const Ts&) {
                            return Ts{i[0] + 1.0, pow(i[0], 2.0)};
                        },
                        {w, scalar(1.0)}, {v});
    Function f = function({v}, out);
    std::vector<Array> r0 = f(0), r2 = f(2);
    EXPECT_EQ((std::vector<double>{r0[0].at(0), r0[1].at(0)}), (std::vector<double>{5, 16}));
    EXPECT_EQ((std::vector<double>{r2[0].at(0), r2[1].at(0)}), (std::vector<double>{3, 4}));
}

