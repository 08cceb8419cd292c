// Port of SymJAX's tests/graph_test.py: variables, their updates, listing and resetting them.
#include "symjax_suite/SuiteUtil.h"

#include <algorithm>

using namespace sj;
using namespace sj::suite;

namespace {

bool contains(const std::vector<Variable>& vs, const Variable& v) {
    return std::any_of(vs.begin(), vs.end(), [&](const Variable& x) { return x.same(v); });
}

std::vector<double> call2(const Function& f) {
    std::vector<Array> out = f();
    return {out[0].at(0), out[1].at(0)};
}

} // namespace

// f returns [w, x] and increments both; reset_variables("*w") resets w only, "*" both.
TEST(SymjaxGraph, Reset) {
    Variable w(scalar_f32(1.0), "w");
    Variable x(scalar_f32(2.0), "x");
    Function f = function({}, {w, x}, Updates{{w, w + 1.0}, {x, x + 1.0}});
    int i = 0;
    for (i = 0; i < 10; ++i)
        EXPECT_EQ(call2(f), (std::vector<double>{1.0 + i, 2.0 + i}));
    --i; // Python's loop variable keeps its last value, 9

    reset_variables("*w");
    EXPECT_EQ(call2(f), (std::vector<double>{1.0, 2.0 + i + 1}));
    reset_variables("*");
    EXPECT_EQ(call2(f), (std::vector<double>{1.0, 2.0}));
}

// get_variables filters by the trainable flag and by name.
TEST(SymjaxGraph, AccessingVariables) {
    Variable w1(scalar_f32(1.0), "w1", true);
    Variable w2(scalar_f32(1.0), "w2", true);
    Variable w3(scalar_f32(1.0), "w3", false);

    std::vector<Variable> v = get_variables("*", true);
    EXPECT_TRUE(contains(v, w1) && contains(v, w2) && !contains(v, w3));
    v = get_variables("*", false);
    EXPECT_TRUE(!contains(v, w1) && !contains(v, w2) && contains(v, w3));
    v = get_variables("*test");
    EXPECT_EQ(v.size(), 0u);
}

// A function with no outputs that updates w1 <- w1 + input + 1.
TEST(SymjaxGraph, UpdatingVariables) {
    Variable w1(scalar_f32(1.0), "w1");
    Placeholder input({}, DType::F32, "input");
    Tensor update = w1 + input + 1.0;
    Function f = function({input}, {}, Updates{{w1, update}});
    EXPECT_EQ(w1.value().at(0), 1.0);
    f(10);
    EXPECT_EQ(w1.value().at(0), 12.0);
}

// index_update at Python ints, at 1-tuples and at T.index[i] (all `{i}` here; the third is
// written x.at(i).set(v), sj's T.index), then at an int32 variable i advanced by the function.
TEST(SymjaxGraph, Update) {
    std::vector<double> iota;
    for (int i = 0; i < 10; ++i) iota.push_back(i);

    Tensor w = zeros({10});
    for (int i = 0; i < 10; ++i) w = index_update(w, {i}, double(i));
    EXPECT_TRUE(array_equal(function({}, {w})()[0], iota, {10}));

    Tensor w2 = zeros({10});
    for (int i = 0; i < 10; ++i) w2 = index_update(w2, std::vector<Index>{Index(i)}, double(i));
    EXPECT_TRUE(array_equal(function({}, {w2})()[0], iota, {10}));

    Tensor w3 = zeros({10});
    for (int i = 0; i < 10; ++i) w3 = w3.at(i).set(double(i));
    EXPECT_TRUE(array_equal(function({}, {w3})()[0], iota, {10}));

    Variable w4(zeros({10}), "w4");
    Variable i(Array::scalar<int32_t>(0), "i");
    Tensor update = index_update(w4, {i}, i);
    Function f = function({}, {}, Updates{{w4, update}, {i, i + 1.0}});
    for (int k = 0; k < 10; ++k) f();
    EXPECT_TRUE(array_equal(w4.value(), iota, {10}));
}
