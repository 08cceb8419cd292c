// Port of SymJAX's tests/clone_test.py: clone with givens (SymJAX's `t.clone({a: b})` is
// sj::clone(t, {{a, b}})), same numbers, same checks.
#include "symjax_suite/SuiteUtil.h"

using namespace sj;
using namespace sj::suite;

namespace {

double value_of(const Function& f, double x) {
    return f(x)[0].at(0);
}

} // namespace

// 2 w u with w replaced by u: [f(1), g(1), f(2), g(2)] == [2, 2, 4, 8].
TEST(SymjaxClone, Clone0) {
    Variable w(scalar_f32(1.0), "w");
    Tensor u;
    {
        Scope s("placing");
        u = Placeholder({}, DType::F32, "u");
    }
    Tensor value = 2.0 * w * u;
    Tensor c = clone(value, {{w, u}});
    Function f = function({u}, {value});
    Function g = function({u}, {c});
    EXPECT_EQ((std::vector<double>{value_of(f, 1), value_of(g, 1), value_of(f, 2), value_of(g, 2)}),
              (std::vector<double>{2, 2, 4, 8}));
}

// Replacing the intermediate z = 2x by x: the gradient of the clone at 6 equals the original's
// at 3, before and after ww changes.
TEST(SymjaxClone, Clone1) {
    Variable w(scalar_f32(1.0), "w");
    Variable ww(scalar_f32(1.0), "ww");
    Placeholder x({}, DType::F32, "x");
    Tensor z = x * 2.0;
    Tensor loss = z * w * ww + 1.0 + 2.0 + 3.0;
    Tensor grad = gradients(loss, {w})[0];
    Tensor loss2 = clone(loss, {{z, x}});
    Tensor grad2 = gradients(loss2, {w})[0];
    Function f = function({x}, {grad});
    Function g = function({x}, {grad2});

    EXPECT_EQ(value_of(f, 3), value_of(g, 6));
    EXPECT_EQ(value_of(f, 3), 6.0);
    ww.assign(scalar_f32(2.0));
    EXPECT_EQ(value_of(f, 3), value_of(g, 6));
    EXPECT_EQ(value_of(f, 3), 12.0);
}

// Gradients of a clone whose placeholder was replaced by another.
TEST(SymjaxClone, Clone2) {
    Variable w(scalar_f32(1.0), "w");
    Variable ww(scalar_f32(1.0), "ww");
    Placeholder x({100}, DType::F32, "x");
    Placeholder y({100}, DType::F32, "y");
    Tensor loss = sum(x * w + ww);
    Tensor other = clone(loss, {{x, y}});
    std::vector<Tensor> grad = gradients(other, {w, ww});
    Function f = function({y}, grad);
    Array twos = Array::full(DType::F32, {100}, 2.0);
    EXPECT_EQ(f(twos)[1].at(0), 100.0);
    EXPECT_EQ(f(twos)[0].at(0), 200.0);
}

// c = concatenate(a, b) of two ones((10, 1)) constants; d replaces a only by 2w.
TEST(SymjaxClone, Clone4) {
    Tensor a = ones({10, 1});
    Tensor b = ones({10, 1});
    Tensor c = concat({a, b}, 1);
    Variable w(ones({10, 1}), "w");
    Tensor d = clone(c, {{a, 2.0 * w}});
    Function f = function({}, {c, d});

    std::vector<double> ones20(20, 1.0), d2(20, 1.0), d8(20, 1.0);
    for (int i = 0; i < 10; ++i)
        d2[size_t(2 * i)] = 2, d8[size_t(2 * i)] = 8;
    EXPECT_TRUE(array_equal(f()[0], ones20, {10, 2}));
    EXPECT_TRUE(array_equal(f()[1], d2, {10, 2}));
    w.assign(Array::full(DType::F32, {10, 1}, 4.0));
    EXPECT_TRUE(array_equal(f()[0], ones20, {10, 2}));
    EXPECT_TRUE(array_equal(f()[1], d8, {10, 2}));
}

// A clone keeps the random draw it copies: d = 2c on every call, and calls draw anew.
TEST(SymjaxClone, Clone5) {
    Tensor a = ones({10});
    Tensor b = random::normal({10});
    Tensor c = matmul(a, b);
    Tensor d = clone(c, {{a, 2.0 * a}});
    Function f = function({}, {c, d});

    std::vector<Array> outs = f();
    EXPECT_TRUE(allclose(Array::scalar<double>(outs[0].at(0) * 2), outs[1].astype(DType::F64)));
    std::vector<Array> outs2 = f();
    EXPECT_TRUE(allclose(Array::scalar<double>(outs2[0].at(0) * 2), outs2[1].astype(DType::F64)));
    EXPECT_FALSE(allclose(outs[0], outs2[0]));
}

// Clones of l = 2 w u w2 with u -> uu and with w -> uu, in functions that also update w2.
TEST(SymjaxClone, CloneBase) {
    Variable w(scalar_f32(1.0), "w");
    Variable w2(scalar_f32(1.0), "w2");
    Placeholder u({}, DType::F32, "u");
    Placeholder uu({}, DType::F32, "uu");

    Tensor l = 2.0 * w * u * w2;
    Tensor g = gradients(l, w);
    Tensor guu = clone(l, {{u, uu}});
    Tensor guuu = clone(l, {{w, uu}});

    Function f = function({u}, {g}, Updates{{w2, w2 + 1.0}});
    Function fuu = function({uu}, {guu}, Updates{{w2, w2 + 1.0}});
    Function fuuu = function({u, uu}, {guuu}, Updates{{w2, w2 + 1.0}});

    EXPECT_EQ(f(2)[0].at(0), 4.0);
    EXPECT_EQ(fuu(1)[0].at(0), 4.0);
    EXPECT_EQ(fuuu(0, 0)[0].at(0), 0.0);
}

// A clone to other shapes: x * w over 10 elements, cloned with x -> y and w -> z of 3.
TEST(SymjaxClone, Clone3) {
    Variable w(ones({10}), "w");
    Variable z(ones({3}), "z");
    Placeholder x({10}, DType::F32, "x");
    Placeholder y({3}, DType::F32, "y");
    Tensor v1 = x * w;
    Tensor total = sum(v1);
    Tensor v2 = clone(v1, {{x, y}, {w, z}});
    EXPECT_EQ(v2.shape(), (Shape{3}));
    Tensor total2 = sum(v2);
    Function f = function({x, y}, {total, total2});
    std::vector<Array> r = f(Array::full(DType::F32, {10}, 1.0), Array::full(DType::F32, {3}, 1.0));
    EXPECT_EQ((std::vector<double>{r[0].at(0), r[1].at(0)}), (std::vector<double>{10, 3}));
}

// Control flow (include/symjax/ControlFlow.h).

namespace {
using Ts = std::vector<Tensor>;
}

// A scan's stacked outputs cloned with its sequence replaced.
TEST(SymjaxClone, Clone6) {
    Tensor a = ones({20});
    auto [final_, each] = scan(
        [](const Ts& c, const Ts& i) {
            return std::pair{Ts{c[0] + i[0]}, Ts{c[0] + i[0]}};
        },
        {scalar(0.0)}, {a});
    EXPECT_EQ(each[0].shape(), (Shape{20}));
    Tensor each2 = clone(each[0], {{a, a * 4.0}});
    EXPECT_EQ(each2.shape(), (Shape{20}));
    Function f = function({}, {each[0], each2});
    std::vector<double> r1, r4;
    for (int i = 0; i < 20; ++i)
        r1.push_back(i + 1), r4.push_back(4.0 * (i + 1));
    EXPECT_TRUE(array_equal(f()[0], r1, {20}));
    EXPECT_TRUE(array_equal(f()[1], r4, {20}));
}

