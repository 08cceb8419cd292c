// Indexed updates (x.at(idx), index_update...), tensor subscripts, diagonals, eye's offset and
// the nan reductions: their error messages, lowering and the gradient conventions the op
// harness (tests/ops) does not pin down. Expected values are worked out by hand (closed forms).
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/ir/Attrs.h>
#include <symjax/ir/Node.h>
#include <symjax/symjax.h>

#include <cmath>
#include <set>

using namespace sj;
using sj::test::message_of;
using sj::test::values;

namespace {

Array vec(std::vector<double> v, DType t = DType::F64) {
    Array a(DType::F64, {int64_t(v.size())});
    for (size_t i = 0; i < v.size(); ++i)
        a.data<double>()[i] = v[i];
    return a.astype(t);
}

/// The ops reachable from t.
std::multiset<Op> ops_of(const Tensor& t) {
    std::multiset<Op> out;
    std::set<const Node*> seen;
    std::vector<const Node*> todo = {t.node().get()};
    while (!todo.empty()) {
        const Node* n = todo.back();
        todo.pop_back();
        if (!seen.insert(n).second)
            continue;
        out.insert(n->op());
        for (size_t i = 0; i < n->num_inputs(); ++i)
            todo.push_back(n->input(i).get());
    }
    return out;
}

TEST(Indexed, UpdatesAreFunctional) {
    Tensor x = constant(vec({1, 2, 3, 4}));
    Tensor y = x.at(1).set(10.0);
    EXPECT_EQ(values(y.eval()), (std::vector<double>{1, 10, 3, 4}));
    EXPECT_EQ(values(x.eval()), (std::vector<double>{1, 2, 3, 4}));
    EXPECT_EQ(values(x.at(sl(1, Index::kEnd, 2)).add(1.0).eval()),
              (std::vector<double>{1, 3, 3, 5}));
    EXPECT_EQ(values(index_mul(x, {sl(-2)}, 2.0).eval()), (std::vector<double>{1, 2, 6, 8}));
    EXPECT_EQ(values(x.at(sl()).min(2.5).eval()), (std::vector<double>{1, 2, 2.5, 2.5}));
    EXPECT_EQ(values(x.at(sl(0, 2)).max(constant(vec({0, 5}))).eval()),
              (std::vector<double>{1, 5, 3, 4}));
    EXPECT_EQ(values(x.at(1).get().eval()), (std::vector<double>{2}));
}

TEST(Indexed, RepeatedTensorIndicesAccumulate) {
    Tensor x = constant(vec({1, 2, 3}));
    Tensor i = constant(vec({0, 2, 0, -1}, DType::I64));
    Tensor v = constant(vec({10, 20, 30, 40}));
    EXPECT_EQ(values(x.at(i).add(v).eval()), (std::vector<double>{41, 2, 63}));
    EXPECT_EQ(values(x.at(i).mul(v).eval()), (std::vector<double>{300, 2, 2400}));
    EXPECT_EQ(values(x.at(i).min(v).eval()), (std::vector<double>{1, 2, 3}));
    EXPECT_EQ(values(x.at(i).max(v).eval()), (std::vector<double>{30, 2, 40}));
    // the reference kernel writes in index order: the last update of a repeated index wins
    EXPECT_EQ(values(x.at(i).set(v).eval()), (std::vector<double>{30, 2, 40}));
    EXPECT_EQ(values(x[i].eval()), (std::vector<double>{1, 3, 1, 3}));
}

TEST(Indexed, StaticSubscriptsLowerWithoutScatter) {
    Placeholder x({4, 5}, f32, "x");
    for (Tensor y : {x.at({1, sl(1, 3)}).add(1.0), x.at({sl(0, Index::kEnd, 2), 2}).set(0.0),
                     index_max(x, {sl(-2)}, 0.0)}) {
        auto ops = ops_of(y);
        EXPECT_EQ(ops.count(Op::Scatter) + ops.count(Op::ScatterAdd) + ops.count(Op::Gather), 0u)
            << y.name();
    }
    EXPECT_EQ(ops_of(x.at({1, sl(1, 3)}).add(1.0)).count(Op::DynamicUpdateSlice), 1u);
    EXPECT_EQ(ops_of(x.at(sl(0, Index::kEnd, 2)).set(0.0)).count(Op::Pad), 2u); // values, mask
}

TEST(Indexed, UpdatesRunOnTheCpuBackend) {
    Placeholder x({3, 4}, f64, "x");
    Placeholder i({2}, i64, "i");
    Tensor y = x.at({i, sl(1, 3)}).mul(2.0).at({-1, sl(0, Index::kEnd, 3)}).set(7.0);
    Array xv = test::random_array(DType::F64, {3, 4}, 3);
    Array iv = vec({2, -3}, DType::I64);
    Array ref = function({x, i}, {y}, {}, test::on("reference"))(xv, iv)[0];
    Array cpu = function({x, i}, {y}, {}, test::on("cpu"))(xv, iv)[0];
    test::expect_close(cpu, ref, 0, 0, "cpu vs reference");
    for (int64_t r = 0; r < 3; ++r)
        for (int64_t c = 0; c < 4; ++c) {
            double want = xv.at(r * 4 + c) * ((r == 0 || r == 2) && (c == 1 || c == 2) ? 2 : 1);
            if (r == 2 && (c == 0 || c == 3))
                want = 7;
            EXPECT_EQ(ref.at(r * 4 + c), want) << r << ", " << c;
        }
}

TEST(Indexed, GradientsOfSetMinMaxAndMul) {
    Placeholder x({3}, f64, "x");
    Placeholder v({2}, f64, "v");
    Tensor i = constant(vec({2, 2}, DType::I64));
    // set: x's gradient is zero where it was overwritten; the winning update gets it
    auto g = gradients(sum(x.at(i).set(v) * constant(vec({1, 2, 3}))), {x, v});
    Array xv = vec({1, 2, 3}), vv = vec({5, 6});
    auto f = function({x, v}, g);
    auto r = f(xv, vv);
    EXPECT_EQ(values(r[0]), (std::vector<double>{1, 2, 0}));
    EXPECT_EQ(values(r[1]), (std::vector<double>{0, 3}));
    // max with ties: the gradient is shared among the operands equal to the result
    auto gm = gradients(sum(x.at(i).max(v)), {x, v});
    auto rm = function({x, v}, gm)(vec({1, 2, 4}), vec({4, 3}));
    EXPECT_EQ(values(rm[0]), (std::vector<double>{1, 1, 0.5}));
    EXPECT_EQ(values(rm[1]), (std::vector<double>{0.5, 0}));
    // mul with a zero update: d/dv_k is x times the other updates of the position
    auto gp = gradients(sum(x.at(i).mul(v)), {x, v});
    auto rp = function({x, v}, gp)(vec({1, 2, 4}), vec({0, 3}));
    EXPECT_EQ(values(rp[0]), (std::vector<double>{1, 1, 0}));
    EXPECT_EQ(values(rp[1]), (std::vector<double>{12, 0}));
}

TEST(Indexed, ErrorsNameTheSubscript) {
    Placeholder x({3, 4}, f32, "x");
    std::string m = message_of<ShapeError>([&] { (void)x.at({5}).set(0.0); });
    EXPECT_NE(m.find("x[5].set"), std::string::npos) << m;
    EXPECT_NE(m.find("index 5 out of range for dim 0 of size 3"), std::string::npos) << m;
    m = message_of<ShapeError>([&] { (void)x.at({sl(), -5}).add(1.0); });
    EXPECT_NE(m.find("index -5 out of range for dim 1 of size 4"), std::string::npos) << m;
    m = message_of<ShapeError>([&] { (void)x.at({0, 1, 2}).add(1.0); });
    EXPECT_NE(m.find("3 indices for x f32[3, 4] of rank 2"), std::string::npos) << m;
    Placeholder v({3}, f32, "v");
    m = message_of<ShapeError>([&] { (void)x.at({sl(0, 2)}).set(v); });
    EXPECT_NE(m.find("x[:2].set: the update v f32[3] does not broadcast to the indexed shape "
                     "[2, 4]"),
              std::string::npos)
        << m;
    Placeholder fi({2}, f32, "fidx");
    m = message_of<TypeError>([&] { (void)x.at(fi).set(0.0); });
    EXPECT_NE(m.find("index fidx on dim 0 is f32[2]; tensor indices must be integers"),
              std::string::npos)
        << m;
    m = message_of<ShapeError>([&] { (void)x.at(sl(0, Index::kEnd, 0)).set(0.0); });
    EXPECT_NE(m.find("x[::0].set: step 0 on dim 0 (a step must be non-zero)"), std::string::npos)
        << m;
    m = message_of<ShapeError>([&] { (void)x[{sl(), sl(0, Index::kEnd, 0)}]; });
    EXPECT_NE(m.find("step 0 on dim 1 (a step must be non-zero)"), std::string::npos) << m;
    // a dim unknown at build time can be indexed whole only
    Placeholder b({-1, 3}, f32, "batch");
    EXPECT_NO_THROW((void)b.at({sl(), 1}).set(0.0));
    m = message_of<ShapeError>([&] { (void)b.at(0).set(0.0); });
    EXPECT_NE(m.find("dim 0 of batch f32[-1, 3] is unknown until call time"), std::string::npos)
        << m;
    // several tensor indices need the indexed dims
    Placeholder i({2}, i64, "i");
    m = message_of<ShapeError>([&] { (void)b[{i, i}]; });
    EXPECT_NE(m.find("several tensor indices"), std::string::npos) << m;
}

TEST(Indexed, TensorIndexOutOfRangeFailsWhenRun) {
    Placeholder x({5}, f32, "x");
    Placeholder i({3}, i64, "idx");
    for (Tensor y : {x[i], x.at(i).add(1.0)}) {
        auto f = function({x, i}, {y});
        EXPECT_NO_THROW(f(Array(DType::F32, {5}), vec({-5, 4, 0}, DType::I64)));
        std::string m = message_of<InputError>([&] {
            f(Array(DType::F32, {5}), vec({1, 5, 0}, DType::I64));
        });
        EXPECT_NE(m.find("(dim 0 of size 5): index 5 at position [1] of idx i64[3] is out of "
                         "range [-5, 5)"),
                  std::string::npos)
            << m;
        m = message_of<InputError>([&] { f(Array(DType::F32, {5}), vec({-6, 1, 0}, DType::I64)); });
        EXPECT_NE(m.find("index -6 at position [0]"), std::string::npos) << m;
    }
    // on a dim of unknown size, the gather or scatter checks the (non-negative) index
    Placeholder xd({-1}, f32, "xd");
    auto f = function({xd, i}, {xd[i]});
    EXPECT_EQ(values(f(vec({1, 2, 3}, DType::F32), vec({-1, 0, -3}, DType::I64))[0]),
              (std::vector<double>{3, 1, 1}));
    std::string m = message_of<InputError>([&] {
        f(vec({1, 2, 3}, DType::F32), vec({3, 0, 0}, DType::I64));
    });
    EXPECT_NE(m.find("out of range [0, 3)"), std::string::npos) << m;
}

// Python's slices with a negative step (Note [Negative steps] in src/ops/Movement.cpp), on a dim
// known when the graph is built and on one bound at call time; the expected elements are
// Python's (x = 0..6: x[5:1:-2] is [5, 3], x[::-3] is [6, 3, 0], ...).
TEST(Indexed, NegativeStepsFollowPython) {
    const int64_t E = Index::kEnd, B = Index::kBegin;
    struct Want {
        Index ix;
        std::vector<double> v;
    };
    const std::vector<Want> cases = {
        {sl(-1, B, -1), {6, 5, 4, 3, 2, 1, 0}},
        {sl(5, 1, -2), {5, 3}},
        {sl(E, B, -3), {6, 3, 0}},
        {sl(-2, -6, -1), {5, 4, 3, 2}},
        {sl(100, 4, -1), {6, 5}},     // a start past the end clamps to the last element
        {sl(2, -100, -1), {2, 1, 0}}, // a stop before the start clamps to "through 0"
        {sl(1, 5, -1), {}},           // backwards from 1 never reaches 5
        {sl(-100, B, -1), {}},        // a start before the first element: nothing
        {sl(0, B, -1), {0}},
    };
    Array xv = vec({0, 1, 2, 3, 4, 5, 6}, DType::F32);
    for (int64_t n : {int64_t(7), int64_t(-1)}) {
        Placeholder x({n}, f32, "x");
        std::vector<Tensor> outs;
        for (const Want& w : cases)
            outs.push_back(x[{w.ix}]);
        for (const char* backend : {"reference", "cpu"}) {
            auto r = function({x}, outs, {}, test::on(backend))(xv);
            for (size_t k = 0; k < cases.size(); ++k)
                EXPECT_EQ(values(r[k]), cases[k].v) << backend << " dim " << n << " case " << k;
        }
    }
    // in an update, the k-th element of v goes to the k-th position the range walks
    Tensor c = constant(vec({0, 1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(values(c.at(sl(5, 1, -2)).set(constant(vec({10, 20}))).eval()),
              (std::vector<double>{0, 1, 2, 20, 4, 10, 6}));
    EXPECT_EQ(values(c.at(sl(-1, B, -3)).add(constant(vec({10, 20, 30}))).eval()),
              (std::vector<double>{30, 1, 2, 23, 4, 5, 16}));
    // a dim of unknown size reversed whole can be updated
    Placeholder d({-1, 2}, f64, "d");
    Tensor u = d.at({sl(-1, B, -1), 0}).set(constant(vec({7, 8, 9})));
    Array dv = vec({0, 1, 2, 3, 4, 5}).reshape({3, 2});
    EXPECT_EQ(values(function({d}, {u})(dv)[0]), (std::vector<double>{9, 1, 8, 3, 7, 5}));
}

// x[k] with k < 0 on a dim bound at call time counts from the end, and its gradient, like that of
// a range starting from the end of such a dim, lands where the element came from.
TEST(Indexed, FromTheEndOfADimOfUnknownSize) {
    Placeholder x({-1, 2}, f64, "x");
    Array xv = vec({0, 1, 2, 3, 4, 5, 6, 7}).reshape({4, 2});
    auto f = function({x}, {x[-1], x[{-4, 1}], x[{sl(-3), 0}], x[{sl(-1, -4, -2)}]});
    auto r = f(xv);
    EXPECT_EQ(values(r[0]), (std::vector<double>{6, 7}));
    EXPECT_EQ(values(r[1]), (std::vector<double>{1}));
    EXPECT_EQ(values(r[2]), (std::vector<double>{2, 4, 6}));
    EXPECT_EQ(values(r[3]), (std::vector<double>{6, 7, 2, 3})); // rows 3 and 1
    std::string m = message_of<InputError>([&] { function({x}, {x[-5]})(xv); });
    EXPECT_NE(m.find("index -5 out of range for dim 0 of size 4"), std::string::npos) << m;
    // d/dx of sum(w * x[-1]) + sum(x[-3:, 0]) + 10 * sum(x[-1:-4:-2]), by hand
    Tensor cost =
        sum(x[-1] * constant(vec({2, 3}))) + sum(x[{sl(-3), 0}]) + 10.0 * sum(x[{sl(-1, -4, -2)}]);
    for (const char* backend : {"reference", "cpu"}) {
        Array g = function({x}, gradients(cost, {x}), {}, test::on(backend))(xv)[0];
        // rows 1 and 3 take 10, row 3 also w = (2, 3), rows 1-3 take 1 in column 0
        EXPECT_EQ(values(g), (std::vector<double>{0, 0, 11, 10, 1, 0, 13, 13})) << backend;
    }
}

TEST(Indexed, ScatterModeIsAnAttribute) {
    Tensor x = constant(vec({1, 2, 3}));
    Tensor y = scatter(x, constant(vec({1}, DType::I64)), constant(vec({7})), 0, ScatterMode::Max);
    EXPECT_EQ(attrs_str(y.node()->attrs()), "axis=0, mode=max");
    EXPECT_EQ(values(y.eval()), (std::vector<double>{1, 7, 3}));
    // add is the scatter_add op
    EXPECT_EQ(scatter(x, constant(vec({1}, DType::I64)), constant(vec({7})), 0, ScatterMode::Add)
                  .node()
                  ->op(),
              Op::ScatterAdd);
}

TEST(Diagonals, MatchNumPy) {
    Array m(DType::F64, {3, 4});
    for (int64_t k = 0; k < 12; ++k)
        m.data<double>()[k] = double(k);
    Tensor x = constant(m);
    EXPECT_EQ(values(diagonal(x).eval()), (std::vector<double>{0, 5, 10}));
    EXPECT_EQ(values(diagonal(x, 1).eval()), (std::vector<double>{1, 6, 11}));
    EXPECT_EQ(values(diagonal(x, -1).eval()), (std::vector<double>{4, 9}));
    EXPECT_EQ(values(diagonal(x, 4).eval()), (std::vector<double>{}));
    EXPECT_EQ(values(diag(x, -2).eval()), (std::vector<double>{8}));
    EXPECT_EQ(trace(x, 1).eval().at(0), 18.0);
    Tensor d = diag(constant(vec({1, 2})), -1);
    EXPECT_EQ(d.shape(), (Shape{3, 3}));
    EXPECT_EQ(values(d.eval()), (std::vector<double>{0, 0, 0, 1, 0, 0, 0, 2, 0}));
    EXPECT_EQ(values(eye(2, 3, 1).eval()), (std::vector<double>{0, 1, 0, 0, 0, 1}));
    EXPECT_EQ(values(eye(3, -1, -2, DType::I32).eval()),
              (std::vector<double>{0, 0, 0, 0, 0, 0, 1, 0, 0}));
    EXPECT_EQ(values(eye(2, 2, 5).eval()), (std::vector<double>{0, 0, 0, 0}));
    // d trace / dx = the identity
    Placeholder p({3, 3}, f64, "p");
    Array g = function({p}, {gradients(trace(p), p)})(Array(DType::F64, {3, 3}))[0];
    EXPECT_EQ(values(g), values(eye(3, 3, 0, DType::F64).eval()));
}

TEST(Diagonals, Errors) {
    Placeholder v({3}, f32, "v");
    std::string m = message_of<ShapeError>([&] { (void)diagonal(v); });
    EXPECT_NE(m.find("diagonal(v): needs rank >= 2, got v f32[3]"), std::string::npos) << m;
    Placeholder x({3, 3}, f32, "x");
    m = message_of<ShapeError>([&] { (void)trace(x, 0, 1, -1); });
    EXPECT_NE(m.find("axis1 and axis2 are both dim 1"), std::string::npos) << m;
    Placeholder t({2, 2, 2}, f32, "t");
    m = message_of<ShapeError>([&] { (void)diag(t); });
    EXPECT_NE(m.find("diag(t): needs a vector or a matrix"), std::string::npos) << m;
    Placeholder u({-1, 3}, f32, "u");
    m = message_of<ShapeError>([&] { (void)diagonal(u); });
    EXPECT_NE(m.find("must be known when the graph is built"), std::string::npos) << m;
}

TEST(NanReductions, SkipNaNAndGiveItNoGradient) {
    Placeholder x({2, 3}, f64, "x");
    Array xv = Array(DType::F64, {2, 3});
    double vals[] = {1, NAN, 3, NAN, NAN, 5};
    for (int k = 0; k < 6; ++k)
        xv.data<double>()[k] = vals[k];
    auto f = function({x}, {nansum(x, {0}), nanmean(x, {0}), nanmax(x, {1}), nanmin(x),
                            gradients(sum(nanmean(x, {1})), x)});
    auto r = f(xv);
    EXPECT_EQ(values(r[0]), (std::vector<double>{1, 0, 8}));
    auto mean0 = values(r[1]);
    EXPECT_EQ(mean0[0], 1);
    EXPECT_TRUE(std::isnan(mean0[1])); // an all-NaN slice
    EXPECT_EQ(mean0[2], 4);
    EXPECT_EQ(values(r[2]), (std::vector<double>{3, 5}));
    EXPECT_EQ(r[3].at(0), 1);
    EXPECT_EQ(values(r[4]), (std::vector<double>{0.5, 0, 0.5, 0, 0, 1}));
}

} // namespace
