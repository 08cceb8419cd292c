// Tests of clone(): substitutions keyed on node identity, replacements of another shape or dtype
// (the graph is typed again), and errors naming the op and the replacement.
#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include "TestUtil.h"

using namespace sj;
using sj::test::message_of;

// SymJAX tests/clone_test.py, test_clone_0: a variable replaced by a placeholder.
TEST(Clone, SymjaxVariableByPlaceholder) {
    Variable w(Array::scalar<float>(1), "cl_w0");
    Tensor u;
    {
        Scope s("placing");
        u = Placeholder({}, DType::F32, "u");
    }
    Tensor value = 2.0 * w * u;
    Tensor c = clone(value, {{w, u}});
    Function f = function({u}, {value});
    Function g = function({u}, {c});
    EXPECT_EQ(f(1.0)[0].item<float>(), 2.0f);
    EXPECT_EQ(g(1.0)[0].item<float>(), 2.0f);
    EXPECT_EQ(f(2.0)[0].item<float>(), 4.0f);
    EXPECT_EQ(g(2.0)[0].item<float>(), 8.0f);
}

// SymJAX tests/clone_test.py, test_clone_3: replacements of another shape (10 -> 3 elements).
TEST(Clone, SymjaxReplacementsOfAnotherShape) {
    for (const char* backend : {"reference", "cpu"}) {
        Variable w(ones({10}), "cl_w3");
        Variable z(ones({3}), "cl_z3");
        Placeholder x({10}, DType::F32, "cl_x3");
        Placeholder y({3}, DType::F32, "cl_y3");
        Tensor v1 = x * w;
        Tensor total = sum(v1);
        Tensor v2 = clone(v1, {{x, y}, {w, z}});
        EXPECT_EQ(v2.shape(), (Shape{3}));
        Tensor total2 = sum(v2);
        FunctionOptions o;
        o.backend = backend;
        Function f = function({x, y}, {total, total2}, {}, o);
        std::vector<Array> out =
            f(Array(std::vector<float>(10, 1)), Array(std::vector<float>(3, 1)));
        EXPECT_EQ(out[0].item<float>(), 10.0f) << backend;
        EXPECT_EQ(out[1].item<float>(), 3.0f) << backend;
    }
}

TEST(Clone, ReplacementOfAnotherDtypeIsTypedAgain) {
    Placeholder x({2}, DType::F32, "cl_xd");
    Tensor h = cast(x, DType::F64) * 2.0;
    Placeholder k({2}, DType::I32, "cl_kd");
    Tensor h2 = clone(h, {{x, k}});
    EXPECT_EQ(h2.dtype(), DType::F64);
    Function f = function({k}, {h2});
    EXPECT_EQ(f(Array(std::vector<int32_t>{3, -4}))[0].to_vector<double>(),
              (std::vector<double>{6, -8}));
    // a placeholder of unknown dims by a concrete one: the types downstream become concrete
    Placeholder any({-1}, DType::F32, "cl_any");
    Tensor s = clone(any * 2.0, {{any, ones({4})}});
    EXPECT_EQ(s.shape(), (Shape{4}));
}

TEST(Clone, IllTypedResultNamesTheOpAndTheReplacement) {
    Variable w(ones({10}), "cl_wi");
    Placeholder x({10}, DType::F32, "cl_xi");
    Placeholder y({3}, DType::F32, "cl_yi");
    Tensor t = sum(x * w);
    std::string msg = message_of<Error>([&] { clone(t, {{x, y}}); });
    EXPECT_NE(msg.find("clone: replacing cl_xi f32[10] by cl_yi f32[3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(mul)"), std::string::npos) << msg;
    EXPECT_THROW(clone(t, {{x, y}}), ShapeError);
    // a dtype the op refuses: log of an integer
    Placeholder i({10}, DType::I32, "cl_ii");
    Tensor l = log(x);
    msg = message_of<Error>([&] { clone(l, {{x, i}}); });
    EXPECT_NE(msg.find("by cl_ii i32[10]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(log)"), std::string::npos) << msg;
    EXPECT_THROW(clone(l, {{x, i}}), TypeError);
    EXPECT_THROW(clone(l, {{x, Tensor()}}), Error);
}

// SymJAX tests/clone_test.py, test_clone_4: of two equal constants, only the one given is
// replaced (givens key on identity, not value).
TEST(Clone, SymjaxEqualConstantsKeepTheirIdentity) {
    Tensor a = ones({10, 1});
    Tensor b = ones({10, 1});
    EXPECT_FALSE(a.same(b));
    Tensor c = concat({a, b}, 1);
    Variable w(ones({10, 1}), "cl_w4");
    Tensor d = clone(c, {{a, 2.0 * w}});
    Function f = function({}, {c, d});
    auto expect_cols = [](const Array& m, float left, float right) {
        std::vector<float> v = m.to_vector<float>();
        ASSERT_EQ(v.size(), 20u);
        for (int r = 0; r < 10; ++r) {
            EXPECT_EQ(v[2 * r], left);
            EXPECT_EQ(v[2 * r + 1], right);
        }
    };
    std::vector<Array> out = f();
    expect_cols(out[0], 1, 1);
    expect_cols(out[1], 2, 1);
    w.assign(Array(std::vector<float>(10, 4)).reshape({10, 1}));
    out = f();
    expect_cols(out[0], 1, 1);
    expect_cols(out[1], 8, 1);
}
