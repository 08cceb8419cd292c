// Behaviour specs of functions, updates, clone, RNG, scopes, variables and autodiff (after SymJAX).
#include "TestUtil.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <symjax/ir/Node.h>
#include <symjax/symjax.h>

#include <cmath>
#include <string>
#include <vector>

using namespace sj;
using ::testing::HasSubstr;
using sj::test::message_of;

namespace {

Array f32s(std::vector<float> v, Shape s) { return Array(v, std::move(s)); }
Array semantics_f32(std::vector<float> v) {
    return Array(v);
}
float item(const Array& a) { return a.item<float>(); }

} // namespace

// ---- updates --------------------------------------------------------------------------------

// Theano semantics: every update value is computed from the values before the call.
TEST(Semantics, SimultaneousUpdatesSwap) {
    Variable a(Array::scalar(1.0f), "swap_a");
    Variable b(Array::scalar(2.0f), "swap_b");
    Function f = function({}, {a, b}, {{a, b}, {b, a}});
    std::vector<Array> out = f();
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(item(out[0]), 1.0f); // outputs see the values before the call
    EXPECT_EQ(item(out[1]), 2.0f);
    EXPECT_EQ(item(a.value()), 2.0f);
    EXPECT_EQ(item(b.value()), 1.0f);
    out = f();
    EXPECT_EQ(item(out[0]), 2.0f);
    EXPECT_EQ(item(out[1]), 1.0f);
    EXPECT_EQ(item(a.value()), 1.0f);
    EXPECT_EQ(item(b.value()), 2.0f);
}

TEST(Semantics, CounterIncrementedByAFunction) {
    Variable counter(Array::scalar<int64_t>(0), "counter", /*trainable=*/false);
    Function tick = function({}, {counter}, {{counter, counter + 1.0}});
    for (int64_t k = 0; k < 5; ++k) {
        std::vector<Array> out = tick();
        ASSERT_EQ(out.size(), 1u);
        EXPECT_EQ(out[0].dtype(), i64);
        EXPECT_EQ(out[0].item<int64_t>(), k); // value before this call's update
    }
    EXPECT_EQ(counter.value().dtype(), i64);
    EXPECT_EQ(counter.value().item<int64_t>(), 5);
    EXPECT_EQ(tick.calls(), 5u);
}

// SymJAX's test_updating_variables: an update may read placeholders.
TEST(Semantics, UpdateReadsAnInput) {
    Variable w(Array::scalar(1.0f), "upd_w");
    Placeholder in({}, f32, "upd_in");
    Function f = function({in}, {}, {{w, w + in + 1.0}});
    EXPECT_EQ(item(w.value()), 1.0f);
    f(10.0f);
    EXPECT_EQ(item(w.value()), 12.0f);
}

// d(a*b)/da = b, and a compiled gradient reads b's current value on every call.
TEST(Semantics, GradientFollowsAnUpdatedVariable) {
    Variable a(Array::scalar(3.0f), "grad_a");
    Variable b(Array::scalar(2.0f), "grad_b");
    Tensor g = gradients(a * b, a);
    Function grad = function({}, {g});
    EXPECT_FLOAT_EQ(item(grad()[0]), 2.0f);

    Placeholder nb({}, f32, "new_b");
    Function set_b = function({nb}, {}, {{b, nb}});
    set_b(5.0f);
    EXPECT_FLOAT_EQ(item(b.value()), 5.0f);
    EXPECT_FLOAT_EQ(item(grad()[0]), 5.0f);
    b.assign(Array::scalar(-1.5f));
    EXPECT_FLOAT_EQ(item(grad()[0]), -1.5f);
}

TEST(Semantics, OutputsAreComputedBeforeUpdates) {
    Variable w(Array::scalar(4.0f), "before_w");
    Function f = function({}, {w * 2.0, w}, {{w, w + 1.0}});
    std::vector<Array> out = f();
    EXPECT_EQ(item(out[0]), 8.0f);
    EXPECT_EQ(item(out[1]), 4.0f);
    EXPECT_EQ(item(w.value()), 5.0f);
    std::vector<Array> out2 = f();
    EXPECT_EQ(item(out2[0]), 10.0f);
    EXPECT_EQ(item(out2[1]), 5.0f);
    EXPECT_EQ(item(w.value()), 6.0f);
    // arrays returned earlier keep their values (no later call writes into them)
    EXPECT_EQ(item(out[0]), 8.0f);
    EXPECT_EQ(item(out[1]), 4.0f);
}

// An output that is also an update's value (one node, by hash-consing) is returned as the
// caller's own array: neither later calls nor writes by the caller mix it with the variable.
TEST(Semantics, OutputThatIsAlsoAnUpdateValue) {
    Variable w(semantics_f32({1, 2}), "out_upd_w");
    Tensor next = w + 1.0;
    Function f = function({}, {next}, {{w, w + 1.0}});
    Array first = f()[0];
    EXPECT_EQ(first.to_vector<float>(), (std::vector<float>{2, 3}));
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{2, 3}));
    first.data<float>()[0] = -5.0f;
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{2, 3}));
    Array second = f()[0];
    EXPECT_EQ(second.to_vector<float>(), (std::vector<float>{3, 4}));
    EXPECT_EQ(first.to_vector<float>(), (std::vector<float>{-5, 3}));
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{3, 4}));
}

TEST(Semantics, FunctionWithOnlyUpdates) {
    Variable w(semantics_f32({1, 2, 3}), "only_upd_w");
    Function f = function({}, {}, {{w, w * 2.0}});
    EXPECT_EQ(f.num_outputs(), 0u);
    std::vector<Array> out = f();
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{2, 4, 6}));
    f();
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{4, 8, 12}));
}

TEST(Semantics, UpdatesMergeAndRejectDuplicates) {
    Variable a(Array::scalar(1.0f), "merge_a");
    Variable b(Array::scalar(10.0f), "merge_b");
    Tensor na = a + 1.0, nb = b * 3.0; // (a + 1.0 again would be another graph: its own 1.0)
    Updates ua{{a, na}};
    Updates ub{{b, nb}};
    Updates both = ua + ub;
    EXPECT_EQ(both.size(), 2u);
    EXPECT_TRUE(both.get(a).same(na));
    EXPECT_TRUE(both.get(b).same(nb));
    EXPECT_FALSE(ua.get(b).defined());
    Function f = function({}, {}, both);
    f();
    EXPECT_EQ(item(a.value()), 2.0f);
    EXPECT_EQ(item(b.value()), 30.0f);

    Updates again{{a, a * 5.0}};
    std::string msg = message_of<Error>([&] { (void)(ua + again); });
    EXPECT_THAT(msg, HasSubstr("merge_a"));
    EXPECT_THAT(msg, HasSubstr("twice"));
    msg = message_of<Error>([&] { Updates u{{b, b}, {b, b + 1.0}}; });
    EXPECT_THAT(msg, HasSubstr("merge_b"));
}

// ---- outputs that are leaves ----------------------------------------------------------------

TEST(Semantics, OutputsThatAreInputsOrVariables) {
    Placeholder x({3}, f32, "leaf_x");
    Variable w(semantics_f32({1, 10, 100}), "leaf_w");
    Function f = function({x}, {x, w, x * w});
    std::vector<Array> out = f(semantics_f32({1, 2, 3}));
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{1, 10, 100}));
    EXPECT_EQ(out[2].to_vector<float>(), (std::vector<float>{1, 20, 300}));
}

// A returned array is the caller's: writing into it must not change the variable (or a constant
// that the graph, shared by hash-consing, still holds).
TEST(Semantics, ReturnedLeafValuesDoNotAliasState) {
    Variable w(semantics_f32({1, 2}), "alias_w");
    Function f = function({}, {w});
    Array out = f()[0];
    out.data<float>()[0] = 99.0f;
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{1, 2}));
    EXPECT_EQ(f()[0].to_vector<float>(), (std::vector<float>{1, 2}));

    Tensor c = constant(semantics_f32({7, 8}));
    Function g = function({}, {c});
    Array gout = g()[0];
    gout.data<float>()[1] = -1.0f;
    EXPECT_EQ(g()[0].to_vector<float>(), (std::vector<float>{7, 8}));
    Array ev = c.eval();
    ev.data<float>()[0] = -2.0f;
    EXPECT_EQ(c.eval().to_vector<float>(), (std::vector<float>{7, 8}));

    // a view of a variable (reshape) is the caller's too
    Function h = function({}, {reshape(w, {2, 1})});
    Array hout = h()[0];
    hout.data<float>()[1] = 42.0f;
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{1, 2}));
}

// Variables own their storage: an update from an input copies it, so the caller's array can be
// reused (as a training loop reuses its batch buffer).
TEST(Semantics, UpdateFromAnInputDoesNotAliasTheCallersArray) {
    Variable w(semantics_f32({0, 0}), "alias_in_w");
    Placeholder x({2}, f32, "alias_in_x");
    Function set = function({x}, {}, {{w, x}});
    Array batch = semantics_f32({1, 2});
    set(batch);
    batch.data<float>()[0] = 100.0f;
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{1, 2}));
}

// ---- variables --------------------------------------------------------------------------------

TEST(Semantics, VariableValueAssignReset) {
    Array init = semantics_f32({1, 2, 3});
    Variable v(init, "var_sem");
    init.data<float>()[0] = 50.0f; // the variable copied its initial value
    EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{1, 2, 3}));

    Array copy = v.value(); // value() is a copy
    copy.data<float>()[1] = -7.0f;
    EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{1, 2, 3}));

    Array nv = semantics_f32({4, 5, 6});
    v.assign(nv);
    nv.data<float>()[0] = 0.0f; // assign copies too
    EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{4, 5, 6}));

    v.assign(Array(std::vector<double>{7, 8, 9}), /*allow_cast=*/true);
    EXPECT_EQ(v.value().dtype(), f32);
    EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{7, 8, 9}));
    EXPECT_THROW(v.assign(Array(std::vector<double>{7, 8, 9})), TypeError);
    EXPECT_THROW(v.assign(semantics_f32({1, 2})), ShapeError);
    EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{7, 8, 9}));

    v.reset();
    EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{1, 2, 3}));

    // a function sees assign() at its next call
    Function f = function({}, {sum(v)});
    EXPECT_EQ(item(f()[0]), 6.0f);
    v.assign(semantics_f32({1, 1, 1}));
    EXPECT_EQ(item(f()[0]), 3.0f);
}

TEST(Semantics, VariableWithInitialiserExpression) {
    Tensor init = random::uniform({4}, -1, 1, f32, /*seed=*/11);
    Variable v(init, "var_init_expr");
    Array first = v.value();
    EXPECT_TRUE(first.equals(init.eval()));
    v.assign(semantics_f32({0, 0, 0, 0}));
    v.reset(); // re-evaluates the initialiser: the same seed draws the same numbers
    EXPECT_TRUE(v.value().equals(first));
    for (float x : first.to_vector<float>()) {
        EXPECT_GE(x, -1.0f);
        EXPECT_LT(x, 1.0f);
    }
}

// ---- scopes, variable lookup and reset --------------------------------------------------------

TEST(Semantics, ScopeNaming) {
    EXPECT_EQ(Scope::current(), "");
    Placeholder xin({2}, f32, "scope_x_in");
    Variable w1, w2, top;
    Tensor inner;
    {
        Scope model("sem_model");
        EXPECT_EQ(Scope::current(), "sem_model");
        {
            Scope dense("dense");
            EXPECT_EQ(Scope::current(), "sem_model/dense");
            EXPECT_EQ(Scope::qualify("b"), "sem_model/dense/b");
            w1 = Variable(semantics_f32({1, 2}), "W");
            w2 = Variable(semantics_f32({3, 4}), "W");
            inner = xin * w1;
        }
        EXPECT_EQ(Scope::current(), "sem_model");
        Placeholder p({}, f32, "p");
        EXPECT_EQ(p.name(), "sem_model/p");
    }
    EXPECT_EQ(Scope::current(), "");
    top = Variable(semantics_f32({0}), "W");
    EXPECT_EQ(w1.full_name(), "sem_model/dense/W");
    EXPECT_EQ(w2.full_name(), "sem_model/dense/W_1");
    EXPECT_EQ(w1.name(), "sem_model/dense/W");
    EXPECT_EQ(inner.node()->scope(), "sem_model/dense");
    EXPECT_EQ(top.full_name().find("sem_model"), std::string::npos);
    EXPECT_THROW(Scope bad("a/b"), Error);
}

TEST(Semantics, GetVariablesByGlobAndTrainable) {
    Scope s("getvars");
    Variable w1(Array::scalar(1.0f), "w1");
    Variable w2(Array::scalar(1.0f), "w2", /*trainable=*/true);
    Variable w3(Array::scalar(1.0f), "w3", /*trainable=*/false);
    auto names = [](const std::vector<Variable>& vs) {
        std::vector<std::string> n;
        for (const auto& v : vs) n.push_back(v.full_name());
        return n;
    };
    using V = std::vector<std::string>;
    EXPECT_EQ(names(get_variables("getvars/*")), (V{"getvars/w1", "getvars/w2", "getvars/w3"}));
    EXPECT_EQ(names(get_variables("getvars/*", true)), (V{"getvars/w1", "getvars/w2"}));
    EXPECT_EQ(names(get_variables("getvars/*", false)), (V{"getvars/w3"}));
    EXPECT_EQ(names(get_variables("getvars/w?")), (V{"getvars/w1", "getvars/w2", "getvars/w3"}));
    EXPECT_TRUE(get_variables("*test_no_such_var").empty());
    // the handles found refer to the same variables
    std::vector<Variable> found = get_variables("getvars/w2");
    ASSERT_EQ(found.size(), 1u);
    EXPECT_TRUE(found[0].same(w2));
    found[0].assign(Array::scalar(9.0f));
    EXPECT_EQ(item(w2.value()), 9.0f);
    EXPECT_TRUE(glob_match("*", "a/b/c"));
    EXPECT_FALSE(glob_match("a/?", "a/bc"));
}

// SymJAX's test_reset: reset_variables by glob.
TEST(Semantics, ResetVariablesByGlob) {
    Variable w(Array::scalar(1.0f), "rst_w");
    Variable x(Array::scalar(2.0f), "rst_x");
    Function f = function({}, {w, x}, {{w, w + 1.0}, {x, x + 1.0}});
    int i = 0;
    for (; i < 10; ++i) {
        std::vector<Array> out = f();
        EXPECT_EQ(item(out[0]), 1.0f + i);
        EXPECT_EQ(item(out[1]), 2.0f + i);
    }
    reset_variables("*rst_w");
    std::vector<Array> out = f();
    EXPECT_EQ(item(out[0]), 1.0f);
    EXPECT_EQ(item(out[1]), 2.0f + i);
    reset_variables("rst_*");
    out = f();
    EXPECT_EQ(item(out[0]), 1.0f);
    EXPECT_EQ(item(out[1]), 2.0f);
}

// ---- clone with givens (SymJAX's clone tests) --------------------------------------------------

TEST(Semantics, CloneReplacesAVariableByAPlaceholder) {
    Variable w(Array::scalar(1.0f), "clone_w");
    Placeholder u({}, f32, "clone_u");
    Tensor value = 2.0 * w * u;
    Tensor c = clone(value, {{w, u}}); // 2 * u * u
    Function f = function({u}, {value});
    Function g = function({u}, {c});
    EXPECT_EQ(item(f(1.0f)[0]), 2.0f);
    EXPECT_EQ(item(g(1.0f)[0]), 2.0f);
    EXPECT_EQ(item(f(2.0f)[0]), 4.0f);
    EXPECT_EQ(item(g(2.0f)[0]), 8.0f);
    EXPECT_FALSE(c.same(value));
}

TEST(Semantics, CloneReplacesAnIntermediateNode) {
    Variable w(Array::scalar(1.0f), "clone_i_w");
    Variable ww(Array::scalar(1.0f), "clone_i_ww");
    Placeholder x({}, f32, "clone_i_x");
    Tensor z = x * 2.0;
    Tensor loss = z * w * ww + 1.0 + 2.0 + 3.0;
    Tensor grad = gradients(loss, w);                     // z * ww
    Tensor grad2 = gradients(clone(loss, {{z, x}}), w);   // x * ww
    Function f = function({x}, {grad});
    Function g = function({x}, {grad2});
    EXPECT_EQ(item(f(3.0f)[0]), 6.0f);
    EXPECT_EQ(item(g(6.0f)[0]), 6.0f);
    ww.assign(Array::scalar(2.0f));
    EXPECT_EQ(item(f(3.0f)[0]), 12.0f);
    EXPECT_EQ(item(g(6.0f)[0]), 12.0f);
}

// (SymJAX's version swaps in tensors of another shape; ours requires compatible shapes.)
TEST(Semantics, CloneReplacesAPlaceholderAndAVariable) {
    Variable w(Array(std::vector<float>(3, 1.0f)), "clone_p_w");
    Variable z(semantics_f32({1, 2, 3}), "clone_p_z");
    Placeholder x({3}, f32, "clone_p_x");
    Placeholder y({-1}, f32, "clone_p_y");
    Tensor v1 = x * w;
    Tensor v2 = clone(v1, {{x, y}, {w, z}}); // y * z
    Function f = function({x, y}, {sum(v1), sum(v2)});
    std::vector<Array> out = f(semantics_f32({1, 1, 1}), semantics_f32({1, 1, 2}));
    EXPECT_EQ(item(out[0]), 3.0f);
    EXPECT_EQ(item(out[1]), 9.0f);
    // the clone keeps reading the replacement variable's current value
    z.assign(semantics_f32({0, 0, 4}));
    out = f(semantics_f32({1, 1, 1}), semantics_f32({1, 1, 2}));
    EXPECT_EQ(item(out[0]), 3.0f);
    EXPECT_EQ(item(out[1]), 8.0f);
    // the original graph is untouched
    EXPECT_TRUE(v1.same(x * w));
}

TEST(Semantics, CloneReplacesAConstantByAnExpression) {
    Tensor a = ones({4, 1});
    Tensor b = full({4, 1}, 3.0);
    Tensor c = concat({a, b}, 1);
    Variable w(Array(std::vector<float>(4, 1.0f), {4, 1}), "clone_c_w");
    Tensor d = clone(c, {{a, 2.0 * w}});
    Function f = function({}, {c, d});
    auto expect = [](const Array& r, float left, float right) {
        std::vector<float> want;
        for (int i = 0; i < 4; ++i) {
            want.push_back(left);
            want.push_back(right);
        }
        EXPECT_EQ(r.shape(), (Shape{4, 2}));
        EXPECT_EQ(r.to_vector<float>(), want);
    };
    std::vector<Array> out = f();
    expect(out[0], 1, 3);
    expect(out[1], 2, 3);
    w.assign(Array(std::vector<float>(4, 4.0f), {4, 1}));
    out = f();
    expect(out[0], 1, 3);
    expect(out[1], 8, 3);
}

// ---- constant identity (Note [Constant identity] in src/compiler/MergeConstants.h) -----------

// A constant the user makes is a leaf of its own: d(3a + 1)/da = 3, the 1.0 is not a.
TEST(Semantics, GradientWrtAConstantIgnoresEqualConstants) {
    Tensor a = ones({});
    EXPECT_EQ(item(gradients(a * 3.0 + 1.0, {a})[0].eval()), 3.0f);
    // d(2a + 3b)/da = 2 with b = ones({}) another leaf of the same value
    Tensor b = ones({});
    EXPECT_EQ(item(gradients(a * 2.0 + b * 3.0, {a})[0].eval()), 2.0f);
    EXPECT_EQ(item(gradients(a * 2.0 + b * 3.0, {b})[0].eval()), 3.0f);
    // also through a compiled function
    Function f = function({}, {gradients(a * 3.0 + 1.0, {a})[0]});
    EXPECT_EQ(item(f()[0]), 3.0f);
}

// clone replaces the constant it names: 2 * 10 + 1 = 21 (not 2 * 10 + 10 = 30).
TEST(Semantics, CloneOfAConstantIgnoresEqualConstants) {
    Tensor a = ones({});
    Tensor c = clone(a * 2.0 + 1.0, {{a, scalar(10.0)}});
    EXPECT_EQ(item(c.eval()), 21.0f);
    EXPECT_EQ(item(function({}, {c})()[0]), 21.0f);
}

// SymJAX's clone test with two equal constants: replacing one leaves the other.
TEST(Semantics, CloneReplacesOneOfTwoEqualConstants) {
    Tensor a = ones({10, 1});
    Tensor b = ones({10, 1});
    Tensor c = concat({a, b}, 1);
    Variable w(Array(std::vector<float>(10, 1.0f), {10, 1}), "clone_two_w");
    Tensor d = clone(c, {{a, 2.0 * w}});
    std::vector<Array> out = function({}, {c, d})();
    std::vector<float> want_c, want_d;
    for (int i = 0; i < 10; ++i) {
        want_c.insert(want_c.end(), {1, 1});
        want_d.insert(want_d.end(), {2, 1});
    }
    EXPECT_EQ(out[0].to_vector<float>(), want_c);
    EXPECT_EQ(out[1].to_vector<float>(), want_d);
    EXPECT_EQ(d.eval().to_vector<float>(), want_d);
}

// Two equal expressions are one interned node; naming one must not rename the other, and a
// second name must not take the first one's (Note [Names and interning]).
TEST(Semantics, NamingAnExpressionLeavesEqualExpressionsAlone) {
    Placeholder x({3}, f32, "names_x");
    Tensor two = scalar(2.0); // one constant: x * two built twice is one interned node
    ASSERT_TRUE((x * two).same(x * two));
    Tensor a = (x * two).named("first");
    Tensor b = (x * two).named("second");
    Tensor plain = x * two;
    EXPECT_EQ(a.name(), "first");
    EXPECT_EQ(b.name(), "second");
    EXPECT_NE(plain.name(), "first");
    EXPECT_NE(plain.name(), "second");
    EXPECT_TRUE((x * two).named("first").same(a)); // the same name finds the same twin
    // the twins compute the same value, and gradients flow through them
    Array xv(std::vector<float>{1, 2, 3});
    std::vector<Array> out = function({x}, {a, b, plain})(xv);
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{2, 4, 6}));
    EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{2, 4, 6}));
    Tensor g = gradients(sum(a * b), {x})[0];
    EXPECT_EQ(function({x}, {g})(xv)[0].to_vector<float>(), (std::vector<float>{8, 16, 24}));
    // a leaf has an identity of its own: it is renamed in place
    Placeholder p({2}, f32, "names_p");
    Tensor q = p.named("renamed_p");
    EXPECT_TRUE(q.same(p));
    EXPECT_EQ(p.name(), "renamed_p");
}

// Every binary op takes a C++ number on either side, with the tensor's dtype; the expected values
// are the same op applied to a constant tensor holding the number.
TEST(Semantics, ScalarOverloadsOfEveryBinaryOp) {
    using Fn = Tensor (*)(const Tensor&, const Tensor&);
    using FnTD = Tensor (*)(const Tensor&, double);
    using FnDT = Tensor (*)(double, const Tensor&);
    struct Row {
        const char* name;
        Fn f;
        FnTD td;
        FnDT dt;
    };
#define SJ_ROW(f) Row{#f, static_cast<Fn>(&f), static_cast<FnTD>(&f), static_cast<FnDT>(&f)}
    const std::vector<Row> rows = {SJ_ROW(add), SJ_ROW(sub),   SJ_ROW(mul),     SJ_ROW(div),
                                   SJ_ROW(pow), SJ_ROW(mod),   SJ_ROW(maximum), SJ_ROW(minimum),
                                   SJ_ROW(atan2), SJ_ROW(hypot), SJ_ROW(eq),    SJ_ROW(ne),
                                   SJ_ROW(lt),  SJ_ROW(le),    SJ_ROW(gt),      SJ_ROW(ge)};
#undef SJ_ROW
    Tensor x = constant(Array(std::vector<float>{-1.5f, 0.5f, 2.0f, 3.0f}));
    Tensor two = constant(Array(std::vector<float>(4, 2.0f)));
    for (const Row& r : rows) {
        EXPECT_TRUE(r.td(x, 2.0).eval().equals(r.f(x, two).eval())) << r.name << "(x, 2.0)";
        EXPECT_TRUE(r.dt(2.0, x).eval().equals(r.f(two, x).eval())) << r.name << "(2.0, x)";
        EXPECT_EQ(r.td(x, 2.0).dtype(), r.f(x, two).dtype()) << r.name;
    }
    EXPECT_TRUE((x % 2.0).eval().equals(mod(x, two).eval()));
    EXPECT_TRUE((2.0 % x).eval().equals(mod(two, x).eval()));
    EXPECT_TRUE((x % two).eval().equals(mod(x, two).eval()));
    EXPECT_TRUE((2.0 < x).eval().equals(lt(two, x).eval()));
    EXPECT_TRUE((2.0 >= x).eval().equals(ge(two, x).eval()));
    // the number takes the tensor's dtype: an i32 tensor stays i32
    Tensor i = constant(Array(std::vector<int32_t>{7, -7}));
    EXPECT_EQ((i % 3.0).dtype(), DType::I32);
    EXPECT_EQ((i % 3.0).eval().to_vector<int32_t>(), (std::vector<int32_t>{1, 2}));
}

// ---- lazy evaluation ----------------------------------------------------------------------------

TEST(Semantics, EvalWithGivens) {
    Placeholder x({3}, f32, "eval_x");
    Tensor h = x * 2.0;
    Tensor y = h * h + 1.0;
    Array r = y.eval({{x, constant(semantics_f32({1, 2, 3}))}});
    EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{5, 17, 37}));
    // givens may replace an intermediate, which removes the need for x
    r = y.eval({{h, constant(semantics_f32({0, 1, -3}))}});
    EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{1, 2, 10}));
    // eval reads variables' current values
    Variable w(Array::scalar(2.0f), "eval_w");
    Tensor t = w * 3.0;
    EXPECT_EQ(item(t.eval()), 6.0f);
    w.assign(Array::scalar(-1.0f));
    EXPECT_EQ(item(t.eval()), -3.0f);
    EXPECT_EQ(item(t.eval({{w, scalar(10.0)}})), 30.0f);
    EXPECT_EQ(item(w.value()), -1.0f); // givens never write a variable
}

// ---- -1 dims --------------------------------------------------------------------------------

TEST(Semantics, AnyDimBoundPerCall) {
    Placeholder x({-1, 3}, f32, "batch_x");
    Variable w(semantics_f32({1, 10, 100}), "batch_w");
    Tensor y = sum(x * w, {1});
    EXPECT_EQ(y.shape(), (Shape{-1}));
    Function f = function({x}, {y, mean(x)});
    std::vector<Array> out = f(f32s({1, 2, 3, 4, 5, 6}, {2, 3}));
    EXPECT_EQ(out[0].shape(), (Shape{2}));
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{321, 654}));
    EXPECT_FLOAT_EQ(item(out[1]), 3.5f);
    out = f(f32s({1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, {4, 3}));
    EXPECT_EQ(out[0].shape(), (Shape{4}));
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1, 10, 100, 111}));
    EXPECT_FLOAT_EQ(item(out[1]), 6.0f / 12.0f);
    out = f(Array(f32, {0, 3})); // an empty batch is a valid size
    EXPECT_EQ(out[0].shape(), (Shape{0}));
}

// ---- random numbers ---------------------------------------------------------------------------

TEST(Semantics, SeedsAndCounters) {
    Tensor r1 = random::normal({6}, 0, 1, f32, /*seed=*/42);
    Tensor r2 = random::normal({6}, 0, 1, f32, /*seed=*/42);
    Tensor r3 = random::normal({6}, 0, 1, f32, /*seed=*/43);
    Function f1 = function({}, {r1});
    Function f2 = function({}, {r2});
    Function f3 = function({}, {r3});
    Array a1 = f1()[0], b1 = f2()[0], c1 = f3()[0];
    EXPECT_TRUE(a1.equals(b1)); // same seed, same draws, in two functions
    EXPECT_FALSE(a1.equals(c1));
    EXPECT_TRUE(a1.equals(r1.eval())); // a function's first call uses counter 0, as eval
    Array a2 = f1()[0];
    EXPECT_FALSE(a1.equals(a2)); // the counter advances: new draws each call
    EXPECT_TRUE(f2()[0].equals(a2)); // ... in step with another function of the same seed

    FunctionOptions frozen;
    frozen.freeze_rng = true;
    Function g = function({}, {r1}, {}, frozen);
    Array g1 = g()[0];
    EXPECT_TRUE(g1.equals(g()[0]));
    EXPECT_TRUE(g1.equals(g()[0]));
    EXPECT_TRUE(g1.equals(a1));

    FunctionOptions start2;
    start2.rng_counter = 1;
    Function h = function({}, {r1}, {}, start2);
    EXPECT_TRUE(h()[0].equals(a2)); // counter 1 is f1's second call
}

TEST(Semantics, ManualSeedMakesUnseededDrawsReproducible) {
    random::manual_seed(123);
    Tensor u1 = random::uniform({8});
    Tensor n1 = random::normal({8});
    random::manual_seed(123);
    Tensor u2 = random::uniform({8});
    Tensor n2 = random::normal({8});
    EXPECT_TRUE(u1.eval().equals(u2.eval()));
    EXPECT_TRUE(n1.eval().equals(n2.eval()));
    Tensor u3 = random::uniform({8}); // the next seed of the sequence: different numbers
    EXPECT_FALSE(u3.eval().equals(u1.eval()));
    random::manual_seed(124);
    EXPECT_FALSE(random::uniform({8}).eval().equals(u1.eval()));
}

// ---- autodiff -----------------------------------------------------------------------------------

// d/da (a + stop_gradient(a^2)) = 1, whatever a is.
TEST(Semantics, StopGradient) {
    Placeholder a({}, f32, "sg_a");
    Tensor cut = gradients(a + stop_gradient(a * a), a);
    Tensor full_path = gradients(a + a * a, a);
    Function f = function({a}, {cut, full_path, a + stop_gradient(a * a)});
    std::vector<Array> out = f(3.0f);
    EXPECT_EQ(item(out[0]), 1.0f);
    EXPECT_EQ(item(out[1]), 7.0f);  // 1 + 2a without the cut
    EXPECT_EQ(item(out[2]), 12.0f); // stop_gradient is the identity on values
}

TEST(Semantics, GradientsWithRespectToPlaceholderAndIntermediate) {
    Placeholder x({3}, f32, "gw_x");
    Tensor h = x * 2.0;
    Tensor cost = sum(h * h); // = 4 sum(x^2)
    std::vector<Tensor> g = gradients(cost, {x, h});
    Function f = function({x}, {g[0], g[1]});
    std::vector<Array> out = f(semantics_f32({1, -2, 0.5f}));
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{8, -16, 4})); // 8x
    EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{4, -8, 2}));  // 2h = 4x
    // a wrt the cost does not depend on gets zeros of its shape
    Variable unused(semantics_f32({1, 2}), "gw_unused");
    Tensor z = gradients(cost, unused);
    EXPECT_EQ(z.shape(), (Shape{2}));
    EXPECT_EQ(z.eval().to_vector<float>(), (std::vector<float>{0, 0}));
}

// y_i = x_i^2 + sum(x): J = diag(2x) + 1.
TEST(Semantics, JacobianMatchesClosedForm) {
    std::vector<double> xv{0.5, -1.0, 2.0};
    Placeholder x({3}, f64, "jac_x");
    Tensor y = x * x + sum(x);
    Tensor jac = jacobian(y, x);
    EXPECT_EQ(jac.shape(), (Shape{3, 3}));
    Array j = function({x}, {jac})(Array(xv))[0];
    for (int i = 0; i < 3; ++i)
        for (int k = 0; k < 3; ++k)
            EXPECT_DOUBLE_EQ(j.at(i * 3 + k), (i == k ? 2 * xv[i] : 0.0) + 1.0) << i << "," << k;
}

// cost = sum(x^3): H = diag(6x), so H v = 6 x v.
TEST(Semantics, HessianVectorProductMatchesClosedForm) {
    std::vector<double> xv{1.0, -2.0, 0.5, 3.0}, vv{0.25, 1.0, -4.0, 2.0};
    Placeholder x({4}, f64, "hvp_x");
    Placeholder v({4}, f64, "hvp_v");
    Tensor hv = hessian_vector_product(sum(x * x * x), x, v);
    Array r = function({x, v}, {hv})(Array(xv), Array(vv))[0];
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(r.at(i), 6 * xv[i] * vv[i], 1e-12) << i;
    // through pow as well
    Tensor hv_pow = hessian_vector_product(sum(pow(x, 3.0)), x, v);
    r = function({x, v}, {hv_pow})(Array(xv), Array(vv))[0];
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(r.at(i), 6 * xv[i] * vv[i], 1e-9) << i;
}

// d/dx x^4 = 4x^3, d2 = 12x^2, d3 = 24x, d4 = 24.
TEST(Semantics, HigherOrderGradients) {
    Placeholder x({}, f64, "ho_x");
    Tensor y = x * x * x * x;
    Tensor d1 = gradients(y, x);
    Tensor d2 = gradients(d1, x);
    Tensor d3 = gradients(d2, x);
    Tensor d4 = gradients(d3, x);
    Function f = function({x}, {d1, d2, d3, d4});
    for (double xv : {1.5, -0.75, 2.0}) {
        std::vector<Array> out = f(xv);
        EXPECT_NEAR(out[0].item<double>(), 4 * xv * xv * xv, 1e-12);
        EXPECT_NEAR(out[1].item<double>(), 12 * xv * xv, 1e-12);
        EXPECT_NEAR(out[2].item<double>(), 24 * xv, 1e-12);
        EXPECT_NEAR(out[3].item<double>(), 24.0, 1e-12);
    }
}

// jvp is J t: for y = x^2 + sum(x), J t = 2 x t + sum(t).
TEST(Semantics, JvpMatchesClosedForm) {
    std::vector<double> xv{1.0, 2.0, -3.0}, tv{0.5, -1.0, 2.0};
    Placeholder x({3}, f64, "jvp_x");
    Placeholder t({3}, f64, "jvp_t");
    Tensor jt = jvp(x * x + sum(x), {x}, {t});
    Array r = function({x, t}, {jt})(Array(xv), Array(tv))[0];
    double st = tv[0] + tv[1] + tv[2];
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(r.at(i), 2 * xv[i] * tv[i] + st, 1e-12) << i;
}

// SymJAX's test_grad: gradient of w*v + 2 with respect to a variable.
TEST(Semantics, GradientWithRespectToVariableReadsInput) {
    Placeholder w({}, f32, "tg_w");
    Variable v(Array::scalar(1.0f), "tg_v");
    Tensor g = gradients(w * v + 2.0, v);
    Function f = function({w}, {g});
    EXPECT_EQ(item(f(1.0f)[0]), 1.0f);
    EXPECT_EQ(item(f(10.0f)[0]), 10.0f);
}
