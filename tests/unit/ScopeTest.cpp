// Tests of Scope as a value: absolute names, re-entry, the variables, ops and placeholders made
// under a scope, and get_ops / get_placeholders.
#include <gtest/gtest.h>
#include <symjax/ir/Node.h>
#include <symjax/symjax.h>

#include <algorithm>

using namespace sj;

namespace {
template <class T> bool holds(const std::vector<T>& ts, const Tensor& t) {
    return std::any_of(ts.begin(), ts.end(), [&](const T& x) { return x.same(t); });
}
std::vector<std::string> names(const std::vector<Variable>& vs) {
    std::vector<std::string> out;
    for (const auto& v : vs)
        out.push_back(v.full_name());
    return out;
}
} // namespace

TEST(Scope, NamesAndAbsoluteNames) {
    EXPECT_EQ(Scope::here().absolute_name(), "/");
    {
        Scope model("sc_model");
        Scope dense("dense");
        EXPECT_EQ(dense.path(), "sc_model/dense");
        EXPECT_EQ(dense.name(), "dense");
        EXPECT_EQ(dense.absolute_name(), "/sc_model/dense/");
        EXPECT_EQ(model.absolute_name(), "/sc_model/");
        EXPECT_EQ(Scope::here().absolute_name(), "/sc_model/dense/");
        Variable W(Array::scalar<float>(1), "W");
        EXPECT_EQ(W.full_name(), "sc_model/dense/W");
    }
    EXPECT_EQ(Scope::current(), "");
    EXPECT_EQ(Scope::at("/a/b/").path(), "a/b");
    EXPECT_EQ(Scope::at("a/b").absolute_name(), "/a/b/");
    EXPECT_EQ(Scope::at("/").absolute_name(), "/");
    EXPECT_EQ(Scope::at("").name(), "");
    EXPECT_THROW(Scope::at("a//b"), Error);
    EXPECT_THROW(Scope::make("a/b"), Error);
    EXPECT_THROW(Scope::make(""), Error);
    EXPECT_THROW(Scope bad("x/y"), Error);
}

TEST(Scope, KeptAndReenteredAddsToTheSameScope) {
    Scope keep = Scope::make("sc_keep"); // defined, not entered
    EXPECT_EQ(Scope::current(), "");
    Variable a, b, c, frozen;
    {
        auto in = keep.enter();
        EXPECT_EQ(Scope::current(), "sc_keep");
        a = Variable(Array::scalar<float>(1), "a");
        frozen = Variable(Array::scalar<float>(1), "frozen", false);
    }
    EXPECT_EQ(Scope::current(), "");
    {
        auto in = keep.enter(); // again: the same scope, no "sc_keep_1"
        b = Variable(Array::scalar<float>(2), "b");
    }
    {
        Scope other("sc_other");
        {
            auto in = keep.enter(); // from elsewhere: still the same absolute scope
            c = Variable(Array::scalar<float>(3), "c");
        }
        EXPECT_EQ(Scope::current(), "sc_other");
    }
    EXPECT_EQ(names(keep.variables()),
              (std::vector<std::string>{"sc_keep/a", "sc_keep/frozen", "sc_keep/b", "sc_keep/c"}));
    EXPECT_EQ(names(keep.variables(true)),
              (std::vector<std::string>{"sc_keep/a", "sc_keep/b", "sc_keep/c"}));
    EXPECT_EQ(names(keep.variables(false)), (std::vector<std::string>{"sc_keep/frozen"}));
    // a copy names the same scope; a scope with a longer name is another scope
    Scope copy = keep;
    EXPECT_EQ(copy.variables().size(), 4u);
    Variable d;
    {
        Scope longer("sc_keep2");
        d = Variable(Array::scalar<float>(4), "d");
    }
    EXPECT_EQ(keep.variables().size(), 4u);
    // nested scopes are listed by their parents
    {
        auto in = keep.enter();
        Scope inner("inner");
        Variable e(Array::scalar<float>(5), "e");
        EXPECT_EQ(keep.variables().size(), 5u);
        EXPECT_EQ(Scope::here().variables().size(), 1u);
    }
    // a dead variable is not listed (nothing holds it or its name)
    EXPECT_EQ(keep.variables().size(), 4u);
}

TEST(Scope, OpsAndPlaceholdersUnderAScopeAreHeldWeakly) {
    Scope s = Scope::make("sc_ops");
    Variable v(Array(std::vector<float>{2, 2}), "v");
    Tensor kept;
    Placeholder p({2}, DType::F32, "top_p");
    size_t before = s.ops().size();
    {
        auto in = s.enter();
        Placeholder x({2}, DType::F32, "x");
        kept = (x * v).named("scaled");
        Tensor tmp = exp(kept);
        EXPECT_TRUE(holds(s.ops(), kept));
        EXPECT_TRUE(holds(s.ops(), tmp));
        EXPECT_FALSE(holds(s.ops(), v)); // leaves are not ops
        EXPECT_TRUE(holds(s.placeholders(), x));
        EXPECT_FALSE(holds(s.placeholders(), p));
        EXPECT_EQ(before, 0u);
        EXPECT_EQ(s.ops().size(), 2u);
        // get_ops matches scope/name, or scope/op-name when unnamed
        EXPECT_TRUE(holds(get_ops("sc_ops/scaled"), kept));
        EXPECT_TRUE(holds(get_ops("sc_ops/exp"), tmp));
        EXPECT_TRUE(holds(get_placeholders("sc_ops/x"), x));
        EXPECT_TRUE(holds(get_placeholders("top_p"), p));
        EXPECT_TRUE(get_ops("sc_ops/nothing*").empty());
    }
    // tmp died with its handle; kept is alive (and x with it, as its input)
    EXPECT_EQ(s.ops().size(), 1u);
    EXPECT_EQ(s.placeholders().size(), 1u);
    kept = Tensor();
    EXPECT_TRUE(s.ops().empty());
    EXPECT_TRUE(s.placeholders().empty());
}

TEST(Scope, RaiiUsageAndLeave) {
    {
        Scope s("sc_raii");
        EXPECT_EQ(Scope::current(), "sc_raii");
        Scope copy = s; // a copy does not hold the entry
        { Scope copy2 = copy; }
        EXPECT_EQ(Scope::current(), "sc_raii");
        s.leave();
        EXPECT_EQ(Scope::current(), "");
        s.leave(); // twice: nothing
        auto in = s.enter();
        EXPECT_EQ(Scope::current(), "sc_raii");
        in.leave();
        EXPECT_EQ(Scope::current(), "");
    }
    EXPECT_EQ(Scope::current(), "");
    // a moved scope carries its entry
    {
        Scope a("sc_moved");
        Scope b = std::move(a);
        EXPECT_EQ(Scope::current(), "sc_moved");
    }
    EXPECT_EQ(Scope::current(), "");
}

// SymJAX symjax/base.py, the Scope doctest: ops made in a kept scope are listed by it.
TEST(Scope, SymjaxScopeDoctest) {
    Scope root = Scope::make("sc_doc");
    auto r = root.enter();
    Variable v(Array::scalar<int32_t>(1), "v");
    EXPECT_EQ(v.node()->scope(), "sc_doc");
    Tensor out;
    Variable w;
    {
        Scope my("my_scope");
        w = Variable(Array::scalar<int32_t>(2), "w");
        out = v * w;
    }
    EXPECT_EQ(Scope::at(out.node()->scope()).absolute_name(), "/sc_doc/my_scope/");
    Scope second = Scope::make("second_scope");
    Tensor other;
    {
        auto in = second.enter();
        other = out * w;
    }
    EXPECT_EQ(Scope::at(other.node()->scope()).absolute_name(), "/sc_doc/second_scope/");
    std::vector<Tensor> ops = second.ops();
    ASSERT_EQ(ops.size(), 1u);
    EXPECT_TRUE(ops[0].same(other));
    EXPECT_EQ(ops[0].dtype(), DType::I32);
}

// SymJAX tests/graph_test.py, test_accessing_variables and test_reset, under a scope.
TEST(Scope, SymjaxAccessingAndResettingVariables) {
    Scope s("sc_graph");
    Variable w1(Array::scalar<float>(1), "w1", true);
    Variable w2(Array::scalar<float>(1), "w2", true);
    Variable w3(Array::scalar<float>(1), "w3", false);
    auto in = [](const std::vector<Variable>& vs, const Variable& v) { return holds(vs, v); };
    std::vector<Variable> t = get_variables("sc_graph/*", true);
    EXPECT_TRUE(in(t, w1) && in(t, w2) && !in(t, w3));
    std::vector<Variable> f = get_variables("sc_graph/*", false);
    EXPECT_TRUE(!in(f, w1) && !in(f, w2) && in(f, w3));
    EXPECT_TRUE(get_variables("*test").empty());
    EXPECT_EQ(s.variables(true).size(), 2u);

    Variable w(Array::scalar<float>(1), "w");
    Variable x(Array::scalar<float>(2), "x");
    Function fn = function({}, {w, x}, {{w, w + 1.0}, {x, x + 1.0}});
    int i = 0;
    for (; i < 10; ++i) {
        std::vector<Array> o = fn();
        ASSERT_EQ(o[0].item<float>(), 1.0f + i);
        ASSERT_EQ(o[1].item<float>(), 2.0f + i);
    }
    reset_variables("sc_graph/w"); // only w
    std::vector<Array> o = fn();
    EXPECT_EQ(o[0].item<float>(), 1.0f);
    EXPECT_EQ(o[1].item<float>(), 2.0f + i);
    reset_variables("sc_graph/*");
    o = fn();
    EXPECT_EQ(o[0].item<float>(), 1.0f);
    EXPECT_EQ(o[1].item<float>(), 2.0f);
}
