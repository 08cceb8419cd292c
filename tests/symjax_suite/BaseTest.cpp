// Port of SymJAX's tests/base_test.py: one TEST per test_* function, same numbers, same checks.
#include "symjax_suite/SuiteUtil.h"

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
