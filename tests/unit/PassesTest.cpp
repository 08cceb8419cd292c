// Graph in / graph out tests of the compiler passes (src/compiler): each builds a small graph,
// runs one pass, checks the structure of the result (op counts, the rewritten node, fusion groups
// and the reasons of fusion refusals) and that the value is unchanged, on the reference
// interpreter (rewrites) or the cpu backend against it (fusion).
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/ir/ControlFlow.h>
#include <symjax/ir/Layout.h>
#include <symjax/ir/Node.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include "backend/cpu/Conv.h"
#include "backend/cpu/CpuTarget.h"
#include "backend/cpu/Jit.h"
#include "backend/cpu/LayoutPass.h"
#include "compiler/Canonicalize.h"
#include "compiler/Fusion.h"
#include "compiler/MergeConstants.h"
#include "compiler/MergeLoops.h"
#include "compiler/Pipeline.h"
#include "compiler/Specialize.h"
#include "compiler/Stabilize.h"
#include "ops/ChannelBlocking.h"
#include "ops/OpDef.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>

using namespace sj;
using sj::test::ChannelBlocks;
using sj::test::on;
using sj::test::random_array;
namespace cc = sj::compiler;

namespace {

using PassFn = std::vector<NodePtr> (*)(const std::vector<NodePtr>&, cc::RewriteStats*);

struct Rewritten {
    std::vector<Tensor> outs;
    cc::RewriteStats stats;
    const Tensor& operator[](size_t i) const { return outs[i]; }
};

Rewritten run(PassFn pass, const std::vector<Tensor>& outs) {
    std::vector<NodePtr> roots;
    for (const auto& t : outs) roots.push_back(t.node());
    Rewritten r;
    for (const auto& n : pass(roots, &r.stats)) r.outs.emplace_back(n);
    return r;
}

/// Non-leaf op counts of the graph under outs.
std::map<Op, int> ops(const std::vector<Tensor>& outs) {
    std::vector<const Node*> rs;
    for (const auto& t : outs) rs.push_back(t.node().get());
    std::map<Op, int> m;
    for (const Node* n : topo_order(rs))
        if (!has_trait(n->op(), kLeaf)) ++m[n->op()];
    return m;
}
int count(const std::vector<Tensor>& outs, Op op) { return ops(outs)[op]; }
int count(const Tensor& t, Op op) { return count(std::vector<Tensor>{t}, op); }
int non_leaf(const Tensor& t) {
    int n = 0;
    for (const auto& [op, k] : ops({t})) n += k;
    return n;
}



std::vector<Array> eval_on(const char* backend, const std::vector<Tensor>& ins, const std::vector<Tensor>& outs,
                           const std::vector<Array>& args) {
    std::vector<Function::Arg> a(args.begin(), args.end());
    return function(ins, outs, {}, on(backend)).call(a);
}

void expect_close(const Array& got, const Array& want, double rtol, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    ASSERT_EQ(got.dtype(), want.dtype()) << what;
    for (int64_t i = 0; i < got.size(); ++i) {
        double a = got.at(i), b = want.at(i);
        if (a == b) continue; // also infinities
        if (std::isnan(b)) {
            EXPECT_TRUE(std::isnan(a)) << what << " at " << i;
            continue;
        }
        EXPECT_LE(std::fabs(a - b), rtol * std::fabs(b)) << what << " at " << i << ": " << a << " vs " << b;
    }
}

/// The rewritten graph computes what the original did, on the reference interpreter. rtol 0
/// for rewrites that keep every rounding (identities, folding, movement); otherwise the caller
/// gives the few-ulp difference of the new formula.
void expect_same_value(const std::vector<Tensor>& ins, const std::vector<Tensor>& before,
                       const std::vector<Tensor>& after, const std::vector<Array>& args, double rtol = 0) {
    auto a = eval_on("reference", ins, before, args);
    auto b = eval_on("reference", ins, after, args);
    for (size_t i = 0; i < a.size(); ++i) expect_close(b[i], a[i], rtol, "output " + std::to_string(i));
}

bool has_decision(const cc::FusionPlan& p, const std::string& text) {
    for (const auto& d : p.decisions)
        if (d.find(text) != std::string::npos) return true;
    return false;
}

cc::Compiled compile(const std::vector<Tensor>& outs) {
    std::vector<NodePtr> roots;
    for (const auto& t : outs) roots.push_back(t.node());
    return cc::compile(roots, cpu::cpu_target());
}

/// The cpu backend (fused) against the reference interpreter; f64 graphs without
/// transcendentals round identically in both, so the tolerance is a few ulp of f64.
void expect_cpu_matches_reference(const std::vector<Tensor>& ins, const std::vector<Tensor>& outs,
                                  const std::vector<Array>& args, double rtol = 1e-13) {
    auto c = eval_on("cpu", ins, outs, args);
    auto r = eval_on("reference", ins, outs, args);
    for (size_t i = 0; i < c.size(); ++i) expect_close(c[i], r[i], rtol, "output " + std::to_string(i));
}

/// The cpu backend against the reference on f32 graphs whose sums factor_sum reassociated (the
/// reference sums in the graph's order): within 2e-4 of 1 + |reference|.
void expect_cpu_near_reference_f32(const std::vector<Tensor>& ins, const std::vector<Tensor>& outs,
                                   const std::vector<Array>& args) {
    auto c = eval_on("cpu", ins, outs, args);
    auto r = eval_on("reference", ins, outs, args);
    for (size_t i = 0; i < outs.size(); ++i)
        for (int64_t k = 0; k < c[i].size(); ++k)
            EXPECT_NEAR(c[i].at(k), r[i].at(k), 2e-4 * (1 + std::fabs(r[i].at(k))))
                << "output " << i << " at " << k;
}

} // namespace

// ---- merge constants (Note [Constant identity]) -------------------------------------------

//   add(mul(x, 2#1), mul(x, 2#2))  ->  add(%m, %m), m = mul(x, 2)
TEST(MergeConstants, EqualConstantsBecomeOneNode) {
    Placeholder x({3}, f32, "x");
    Tensor y = x * 2.0 + x * 2.0 + x * 3.0;
    EXPECT_EQ(count(y, Op::Mul), 3) << "each user constant is a leaf of its own";
    Rewritten r = run(cc::merge_constants, {y});
    EXPECT_EQ(count(r[0], Op::Mul), 2) << to_text(r.outs);
    const Node& sum2 = *r[0].node()->input(0);
    ASSERT_TRUE(sum2.is(Op::Add)) << to_text(r.outs);
    EXPECT_EQ(sum2.input(0), sum2.input(1)) << to_text(r.outs);
    EXPECT_EQ(r.stats.hits["merge_constants"], 3);
    // a merged graph has nothing left to merge
    Rewritten again = run(cc::merge_constants, r.outs);
    EXPECT_TRUE(again[0].same(r[0]));
    EXPECT_EQ(again.stats.hits["merge_constants"], 0);
    expect_same_value({x}, {y}, r.outs, {random_array(f32, {3}, 1)});
}

// Note [Scan residuals]: the backward pass of a scan whose body multiplies by matrices reads the
// products the forward stored (as extra step outputs of a copy of the loop) instead of
// recomputing them, and merge_loops makes the primal results the copy's: one forward loop.
TEST(MergeLoops, ScanStoresItsProductsAndRunsOnce) {
    using Ts = std::vector<Tensor>;
    Placeholder xs({6, 3}, f64, "xs"), h0({4}, f64, "h0"), W({4, 4}, f64, "W"), U({4, 3}, f64, "U");
    Tensor Wc = W, Uc = U;
    auto [carry, ys] = scan(
        [&](const Ts& h, const Ts& a) {
            Tensor n = tanh(matmul(Wc, h[0]) + matmul(Uc, a[0]));
            return std::pair{Ts{n}, Ts{sum(n)}};
        },
        {h0}, {xs});
    Tensor cost = sum(ys[0]) + sum(carry[0] * carry[0]);
    Ts outs{cost};
    for (const Tensor& g : gradients(cost, {W, U, h0, xs}))
        outs.push_back(g);
    using RegionSet = std::set<const detail::Region*>;
    auto regions = [](const Ts& ts, RegionSet* fwd, RegionSet* bwd) {
        std::vector<const Node*> rs;
        for (const auto& t : ts)
            rs.push_back(t.node().get());
        for (const Node* n : topo_order(rs))
            if (n->is(Op::Scan)) {
                const detail::Region* r = n->attr<RegionAttrs>().region.get();
                (r->name == "scan" ? fwd : bwd)->insert(r);
            }
    };
    RegionSet fwd, bwd;
    regions(outs, &fwd, &bwd);
    ASSERT_EQ(fwd.size(), 2u) << "the loop and its copy with residuals: " << to_text(outs);
    ASSERT_EQ(bwd.size(), 1u);
    const detail::Region *base = nullptr, *copy = nullptr;
    for (const detail::Region* r : fwd)
        (r->base ? copy : base) = r;
    ASSERT_TRUE(base && copy && copy->base.get() == base);
    EXPECT_EQ(copy->outputs, base->outputs + 2) << "both products are stored";
    // the backward body computes the products' vjps (dW, dU, dh, dx) but not the products
    const detail::Region& back = **bwd.begin();
    std::vector<const Node*> body;
    for (const auto& r : back.body.results)
        body.push_back(r.get());
    const DotAttrs& product =
        copy->body.results[size_t(copy->carries + base->outputs)]->attr<DotAttrs>();
    int recomputed = 0, dots = 0;
    for (const Node* n : topo_order(body))
        if (n->is(Op::DotGeneral)) {
            ++dots;
            const DotAttrs& a = n->attr<DotAttrs>();
            recomputed += a.lhs_contract == product.lhs_contract &&
                          a.rhs_contract == product.rhs_contract &&
                          n->input(1)->is(Op::Placeholder) && n->input(0)->is(Op::Placeholder);
        }
    EXPECT_GT(dots, 0);
    EXPECT_EQ(recomputed, 0) << "a forward product is recomputed in the backward body";
    // merged: the primal reads the copy too
    Rewritten r = run(cc::merge_loops, outs);
    EXPECT_GT(r.stats.hits["merge_loops"], 0);
    RegionSet fwd2, bwd2;
    regions(r.outs, &fwd2, &bwd2);
    EXPECT_EQ(fwd2, RegionSet{copy});
    std::vector<Array> vals{random_array(f64, {6, 3}, 71), random_array(f64, {4}, 72, -1, 1),
                            random_array(f64, {4, 4}, 73, -0.7, 0.7),
                            random_array(f64, {4, 3}, 74, -0.7, 0.7)};
    expect_same_value({xs, h0, W, U}, outs, r.outs, vals);
    // the cpu backend (which merges) against the reference interpreter (which runs both loops);
    // 1e-12: the JIT's tanh is within a few ulp of libm's, carried through six steps
    expect_cpu_matches_reference({xs, h0, W, U}, outs, vals, 1e-12);
}

// The pipeline merges before it folds: x * (2 + 3) + x * 5 has one product, by 5.
TEST(MergeConstants, PipelineMergesThenFolds) {
    Placeholder x({3}, f64, "x");
    Tensor y = x * (scalar(2.0, f64) + scalar(3.0, f64)) + x * 5.0;
    cc::Compiled c = compile({y});
    std::vector<Tensor> out{Tensor(c.roots[0])};
    EXPECT_EQ(count(out, Op::Mul), 1) << to_text(out);
    std::vector<const Node*> rs{c.roots[0].get()};
    for (const Node* n : topo_order(rs))
        if (n->is(Op::Constant)) {
            EXPECT_EQ(n->attr<ConstantAttrs>().value.item<double>(), 5.0) << to_text(out);
            EXPECT_EQ(n->attr<ConstantAttrs>().id, 0u) << "a constant was left unmerged";
        }
    Array r = function({x}, {y})(Array(std::vector<double>{1, -2, 0.5}))[0];
    EXPECT_EQ(r.to_vector<double>(), (std::vector<double>{10, -20, 5}));
}

// Two builds of the same graph have distinct constants but compile to the same kernels: the
// second build finds all of them in the kernel cache.
TEST(MergeConstants, TwoBuildsOfAGraphShareTheirKernels) {
    auto build = [] {
        Placeholder x({1000}, f32, "x");
        Tensor h = exp(x * 0.25 + 1.0);
        return function({x}, {h * 0.25 + sum(h * 1.0 + 0.25)});
    };
    Array in(std::vector<float>(1000, 0.0f));
    Function f = build();
    Array a = f(in)[0];
    auto before = cpu::kernel_cache_stats();
    Function g = build();
    Array b = g(in)[0];
    auto after = cpu::kernel_cache_stats();
    EXPECT_EQ(after.compiles, before.compiles) << "the second build compiled new kernels";
    EXPECT_EQ(after.memory_hits - before.memory_hits, int64_t(g.stats().kernels));
    EXPECT_EQ(f.dump(), g.dump());
    EXPECT_EQ(f.stats().kernels, g.stats().kernels);
    // h = e everywhere: e / 4 + 1000 (e + 1/4)
    float want = float(std::exp(1.0) / 4 + 1000 * (std::exp(1.0) + 0.25));
    EXPECT_NEAR(a.to_vector<float>()[0], want, 1e-6 * want);
    EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
}

// ---- canonicalize -------------------------------------------------------------------------

//   add(x, mul(add([1,2,3], 2), [4,5,6]))  ->  add(x, [12, 20, 30])
TEST(Canonicalize, FoldsConstantSubgraphs) {
    Placeholder x({3}, f64, "x");
    Tensor c = (constant(Array(std::vector<double>{1, 2, 3})) + 2.0) * constant(Array(std::vector<double>{4, 5, 6}));
    Tensor y = x + c;
    Rewritten r = run(cc::canonicalize, {y});
    EXPECT_EQ(ops(r.outs), (std::map<Op, int>{{Op::Add, 1}})) << to_text(r.outs);
    const Node& k = *r[0].node()->input(1);
    ASSERT_TRUE(k.is(Op::Constant)) << to_text(r.outs);
    EXPECT_EQ(k.attr<ConstantAttrs>().value.to_vector<double>(), (std::vector<double>{12, 20, 30}));
    EXPECT_EQ(r.stats.hits["fold_constants"], 2);
    expect_same_value({x}, {y}, r.outs, {random_array(f64, {3}, 1)});
}

// Folding stops at kMaxFoldElements (a huge constant is not materialised), and a scalar
// broadcast stays a broadcast of a scalar.
TEST(Canonicalize, FoldingIsCappedAndKeepsScalarBroadcasts) {
    Array big(DType::F32, {cc::kMaxFoldElements + 1}), fits(DType::F32, {cc::kMaxFoldElements});
    Tensor over = exp(constant(big)), at = exp(constant(fits));
    Rewritten r = run(cc::canonicalize, {over, at});
    EXPECT_EQ(count(r[0], Op::Exp), 1) << "a constant above the cap was folded";
    EXPECT_TRUE(r[1].node()->is(Op::Constant)) << "a constant at the cap was not folded";

    Placeholder x({4, 5}, f32, "x");
    Tensor y = x * (full({4, 5}, 2.0) + 1.0);
    Rewritten s = run(cc::canonicalize, {y});
    // (add(broadcast(2), 1) itself is not folded: fold_constants skips broadcasts and no pattern
    // sinks a broadcast below a binary op; the kernel adds per element)
    std::vector<const Node*> rs{s[0].node().get()};
    for (const Node* n : topo_order(rs))
        if (n->is(Op::Constant)) EXPECT_EQ(n->attr<ConstantAttrs>().value.size(), 1) << to_text(s.outs);
    expect_same_value({x}, {y}, s.outs, {random_array(f32, {4, 5}, 2)});
}

//   x*1, 1*x, x+0, 0+x, x-0, x/1, neg(neg(x)), stop_gradient(x)  ->  x
TEST(Canonicalize, AlgebraicIdentities) {
    Placeholder x({2, 3}, f32, "x");
    std::vector<Tensor> ys = {x * 1.0, 1.0 * x, x + 0.0, 0.0 + x, x - 0.0, x / 1.0, -(-x), stop_gradient(x),
                              ((x * 1.0 + 0.0) * ones({2, 3}) - 0.0) / 1.0};
    Rewritten r = run(cc::canonicalize, ys);
    for (size_t i = 0; i < ys.size(); ++i) EXPECT_TRUE(r[i].same(x)) << i << ": " << to_text({r[i]});
    EXPECT_EQ(r.stats.hits["mul_one"], 4); // each x * 1.0 has its own 1.0 (merged later)
    EXPECT_EQ(r.stats.hits["add_zero"], 7);
    EXPECT_EQ(r.stats.hits["neg_neg"], 1);
    EXPECT_EQ(r.stats.hits["drop_stop_gradient"], 1);
}

// Identities that would change the shape or the value are not applied:
//   x[3] * ones[2, 3] broadcasts (stays a mul of shape [2, 3]); 0 - x is -x, not x.
TEST(Canonicalize, IdentitiesKeepShapeAndValue) {
    Placeholder x({3}, f32, "x");
    Tensor a = x * ones({2, 3});
    Tensor b = 0.0 - x;
    Rewritten r = run(cc::canonicalize, {a, b});
    EXPECT_EQ(r[0].shape(), (Shape{2, 3}));
    EXPECT_FALSE(r[1].same(x));
    expect_same_value({x}, {a, b}, r.outs, {random_array(f32, {3}, 3)});
}

//   reshape(reshape(x, [6, 4]), [2, 12])   ->  reshape(x, [2, 12])
//   reshape(x, shape(x))                   ->  x
//   transpose(transpose(x, [1,2,0]), [1,0,2])  ->  transpose(x, [2,1,0])
//   transpose(transpose(x, [1,2,0]), [2,0,1])  ->  x
//   broadcast(broadcast(v, [4,3]), [2,4,3]) -> broadcast(v, [2,4,3])
TEST(Canonicalize, MovementChainsCollapse) {
    Placeholder x({2, 3, 4}, f32, "x");
    Placeholder v({3}, f32, "v");
    std::vector<Tensor> ys = {reshape(reshape(x, {6, 4}), {2, 12}), reshape(reshape(x, {24}), {2, 3, 4}),
                              transpose(transpose(x, {1, 2, 0}), {1, 0, 2}), transpose(transpose(x, {1, 2, 0}), {2, 0, 1}),
                              broadcast_to(broadcast_to(v, {4, 3}), {2, 4, 3})};
    Rewritten r = run(cc::canonicalize, ys);
    EXPECT_EQ(count(r[0], Op::Reshape), 1);
    EXPECT_TRUE(r[0].node()->input(0)->is(Op::Placeholder));
    EXPECT_TRUE(r[1].same(x)) << to_text({r[1]});
    ASSERT_TRUE(r[2].node()->is(Op::Permute));
    EXPECT_TRUE(r[2].node()->input(0)->is(Op::Placeholder));
    EXPECT_EQ(r[2].node()->attr<AxesAttrs>().axes, (std::vector<int64_t>{2, 1, 0}));
    EXPECT_TRUE(r[3].same(x)) << to_text({r[3]});
    EXPECT_EQ(count(r[4], Op::Broadcast), 1);
    EXPECT_TRUE(r[4].node()->input(0)->is(Op::Placeholder));
    // movement is exact: distinct values must land in the same places
    expect_same_value({x, v}, ys, r.outs, {random_array(f32, {2, 3, 4}, 4), random_array(f32, {3}, 5)});
}

//   cast(cast(x: f32, f64), f32) -> x, but cast(cast(y: f64, f32), f64) is lossy and stays
TEST(Canonicalize, OnlyLosslessCastRoundTripsVanish) {
    Placeholder x({5}, f32, "x");
    Placeholder y({5}, f64, "y");
    Tensor a = cast(cast(x, f64), f32), b = cast(cast(y, f32), f64);
    Rewritten r = run(cc::canonicalize, {a, b});
    EXPECT_TRUE(r[0].same(x));
    EXPECT_EQ(count(r[1], Op::Cast), 2);
    Array yv = Array(std::vector<double>{0.1, 1.0 / 3, 1e-50, 1e300, -2.5});
    expect_same_value({x, y}, {a, b}, r.outs, {random_array(f32, {5}, 6), yv});
    EXPECT_NE(eval_on("reference", {y}, {r[1]}, {yv})[0].at(0), 0.1); // the round trip does round
}

//   exp(broadcast(s, [1000]))  ->  broadcast(exp(s), [1000])   (one exp instead of 1000)
TEST(Canonicalize, BroadcastSinksBelowUnaryOps) {
    Placeholder s({}, f32, "s");
    Tensor y = tanh(exp(broadcast_to(s, {1000})));
    Rewritten r = run(cc::canonicalize, {y});
    ASSERT_TRUE(r[0].node()->is(Op::Broadcast)) << to_text(r.outs);
    EXPECT_TRUE(r[0].node()->input(0)->is(Op::Tanh));
    EXPECT_EQ(r.stats.hits["sink_broadcast"], 2);
    expect_same_value({s}, {y}, r.outs, {Array::scalar(0.3f)});
}

// An input that only gives a shape names the earliest value of that shape along elementwise ops
// (earliest_shape_source): autodiff's gradient of sum(d * d) broadcasts to d * d's shape, and a
// one-pass variance no longer computes d * d. The broadcast now names x; a window op's shape
// input and a non-elementwise producer stay.
TEST(Canonicalize, ShapeSourcesAreTheEarliestOfTheirShape) {
    Placeholder x({-1, 4}, f32, "x");
    Tensor m = mean(x, {0}, true);
    Tensor d = x - m;
    NodePtr b =
        Node::make(Op::Broadcast, BroadcastAttrs{{-1, 4}, {0, 1}}, {m.node(), (d * d).node()});
    Tensor y = Tensor(b) * 2.0;
    Rewritten r = run(cc::canonicalize, {y});
    EXPECT_EQ(r.stats.hits["earliest_shape_source"], 1);
    const Node* nb = r[0].node()->input(0).get();
    ASSERT_TRUE(nb->is(Op::Broadcast)) << to_text(r.outs);
    EXPECT_EQ(nb->input(1).get(), x.node().get()) << to_text(r.outs);
    EXPECT_EQ(count(r.outs, Op::Sub), 0) << "nothing reads d any more\n" << to_text(r.outs);
    expect_same_value({x}, {y}, r.outs, {random_array(f32, {5, 4}, 61)});
    // a source that is not elementwise (a sum's broadcast back) is already the earliest
    Tensor s = sum(x, {1}, true) * 3.0; // [-1, 1]
    NodePtr b2 = Node::make(Op::Broadcast, BroadcastAttrs{{-1, 1}, {0, 1}},
                            {sum(m, {1}, true).node(), s.node()});
    Rewritten r2 = run(cc::canonicalize, {Tensor(b2)});
    EXPECT_EQ(r2.stats.hits["earliest_shape_source"], 1) << "mul(sum, 3) -> sum";
    EXPECT_TRUE(r2[0].node()->input(1)->is(Op::ReduceSum)) << to_text(r2.outs);
    // a chain longer than 16 elementwise steps is not walked (nor in hops: the rule would not
    // reach its fixpoint in one rewrite), the input stays
    Tensor chain = x;
    for (int k = 0; k < 20; ++k)
        chain = chain * 1.5 + 0.5;
    NodePtr b3 =
        Node::make(Op::Broadcast, BroadcastAttrs{{-1, 4}, {0, 1}}, {m.node(), chain.node()});
    Rewritten r3 = run(cc::canonicalize, {Tensor(b3)});
    EXPECT_EQ(r3.stats.hits["earliest_shape_source"], 0) << to_text(r3.outs);
}

// Note [Variance in one pass] (src/compiler/Specialize.cpp), the cpu target's lowering: a batch
// norm's variance over (0, 2, 3) and a layer norm's over the last dim become f64 sums of x and
// x * x beside the mean's sum; no sum reads x - mean. Values against the two-pass graph on the
// reference interpreter, for data whose mean is 1000 times its deviation (mean^2 / var = 1e6):
// the f64 sums leave an error of ~1e-16 * 1e6 relative to the variance, far below f32's 6e-8,
// so the results agree to f32 rounding of the terms (2e-6).
TEST(Specialize, VarianceTakesOnePass) {
    Placeholder x({-1, 3, 5, 5}, f32, "x");
    Tensor v = var(x, {0, 2, 3}, true);
    Tensor ln = var(x, {3});
    Tensor sd = sqrt(var(x, {1}, false, 1) + 1e-5); // ddof 1, over a middle dim
    Rewritten s = run(cc::one_pass_variances, {v, ln, sd});
    EXPECT_EQ(s.stats.hits["one_pass_variance"], 3);
    std::vector<const Node*> rs;
    for (const Tensor& t : s.outs)
        rs.push_back(t.node().get());
    for (const Node* n : topo_order(rs))
        if (n->is(Op::ReduceSum))
            EXPECT_FALSE(n->input(0)->is(Op::Mul) && n->input(0)->input(0)->is(Op::Sub))
                << "a sum of squared differences is left\n"
                << to_text(s.outs);
    EXPECT_EQ(s[0].dtype(), f32);
    for (double centre : {0.0, 1000.0}) {
        Array a = random_array(f32, {4, 3, 5, 5}, 62, centre - 1, centre + 1);
        expect_same_value({x}, {v, ln, sd}, s.outs, {a}, 2e-6);
    }
    // not rewritten: c does not come from x (nothing waits), x in f64, c varying along the sum
    Placeholder c({1, 3, 1, 1}, f32, "c"), x64({4, 3}, f64, "x64");
    for (const Tensor& y : {sum((x - c) * (x - c), {0, 2, 3}), var(x64, {0}),
                            sum((x - mean(x, {1}, true)) * (x - mean(x, {1}, true)), {0, 1})}) {
        EXPECT_EQ(run(cc::one_pass_variances, {y}).stats.hits["one_pass_variance"], 0)
            << to_text({y});
    }
}

// ---- stabilize (f64 graphs: the rewritten formula differs by a few ulp of f64) -------------

constexpr double kFormulaTol = 1e-14; // a few f64 ulp: a different but equivalent formula

//   log(1 + x), log(x + 1)  ->  log1p(x)
TEST(Stabilize, LogOnePlusXBecomesLog1p) {
    Placeholder x({6}, f64, "x");
    Tensor a = log(1.0 + x), b = log(x + 1.0);
    Rewritten r = run(cc::stabilize, {a, b});
    EXPECT_EQ(ops(r.outs), (std::map<Op, int>{{Op::Log1p, 1}})) << to_text(r.outs);
    EXPECT_EQ(r.stats.hits["log1p_form"], 2);
    expect_same_value({x}, {a, b}, r.outs, {random_array(f64, {6}, 7, -0.5, 2)}, kFormulaTol);
    // and it is the accurate one where 1 + x rounds: log1p(1e-20) = 1e-20, log(1 + 1e-20) = 0
    Array tiny = Array(std::vector<double>{1e-20, -1e-18, 1e-10, 3e-17, 0, 1});
    Array got = eval_on("reference", {x}, {r[0]}, {tiny})[0];
    for (int64_t i = 0; i < tiny.size(); ++i)
        EXPECT_NEAR(got.at(i), double(std::log1p((long double)tiny.at(i))), 1e-16 * std::fabs(got.at(i)));
}

//   exp(x) - 1  ->  expm1(x)
TEST(Stabilize, ExpMinusOneBecomesExpm1) {
    Placeholder x({6}, f64, "x");
    Tensor y = exp(x) - 1.0;
    Rewritten r = run(cc::stabilize, {y});
    EXPECT_EQ(ops(r.outs), (std::map<Op, int>{{Op::Expm1, 1}})) << to_text(r.outs);
    expect_same_value({x}, {y}, r.outs, {random_array(f64, {6}, 8)}, kFormulaTol);
    Array got = eval_on("reference", {x}, r.outs, {Array(std::vector<double>{1e-20, 1e-12, 0, 0, 0, 0})})[0];
    EXPECT_EQ(got.at(0), 1e-20); // exp(1e-20) - 1 would be 0
}

//   log(softmax(x)) = log(exp(x - m) / sum(exp(x - m)))  ->  (x - m) - log(sum(exp(x - m)))
TEST(Stabilize, LogOfSoftmaxBecomesLogSoftmax) {
    Placeholder x({2, 3}, f64, "x");
    Tensor y = log(softmax(x, 1));
    Rewritten r = run(cc::stabilize, run(cc::canonicalize, {y}).outs);
    EXPECT_EQ(count(r.outs, Op::Div), 0) << to_text(r.outs);
    EXPECT_EQ(r.stats.hits["log_softmax_form"], 1);
    expect_same_value({x}, {y}, r.outs, {random_array(f64, {2, 3}, 9)}, kFormulaTol);
    // logits 1000 apart: softmax underflows to 0 and its log to -inf; the rewrite stays finite
    Array xv(std::vector<double>{1000, 0, -1000, 3, 2, 1}, {2, 3});
    Array got = eval_on("reference", {x}, r.outs, {xv})[0];
    for (int i = 0; i < 2; ++i) {
        long double m = xv.at(3 * i), s = 0;
        for (int j = 0; j < 3; ++j) s += std::exp((long double)xv.at(3 * i + j) - m);
        for (int j = 0; j < 3; ++j)
            EXPECT_NEAR(got.at(3 * i + j), double(xv.at(3 * i + j) - m - std::log(s)), 1e-12);
    }
    // and in a cross-entropy with one-hot labels
    Placeholder lab({2, 3}, f64, "labels");
    Tensor ce = -sum(lab * log(softmax(x, 1)), {1});
    Rewritten rc = run(cc::stabilize, run(cc::canonicalize, {ce}).outs);
    Array onehot(std::vector<double>{0, 0, 1, 1, 0, 0}, {2, 3});
    Array cev = eval_on("reference", {x, lab}, rc.outs, {xv, onehot})[0];
    EXPECT_NEAR(cev.at(0), 2000.0, 1e-9);
    EXPECT_NEAR(cev.at(1), double(-3 + 3 + std::log(1 + std::exp(-1.0L) + std::exp(-2.0L))), 1e-12);
}

//   log(sum(exp(x), axes))  ->  m + log(sum(exp(x - m), axes)),  m = max(x, axes)
TEST(Stabilize, LogSumExpIsShiftedByTheMax) {
    Placeholder x({2, 2}, f64, "x");
    Tensor y = log(sum(exp(x), {1}));
    Rewritten r = run(cc::stabilize, {y});
    EXPECT_EQ(count(r.outs, Op::ReduceMax), 1) << to_text(r.outs);
    expect_same_value({x}, {y}, r.outs, {random_array(f64, {2, 2}, 10)}, kFormulaTol);
    Array got = eval_on("reference", {x}, r.outs, {Array(std::vector<double>{1000, 1000, -1000, -1000}, {2, 2})})[0];
    EXPECT_NEAR(got.at(0), 1000 + std::log(2.0), 1e-12);
    EXPECT_NEAR(got.at(1), -1000 + std::log(2.0), 1e-12);
    // the composite logsumexp is already shifted: left alone
    Tensor l = logsumexp(x, {1});
    Rewritten c = run(cc::canonicalize, {l});
    Rewritten s = run(cc::stabilize, c.outs);
    EXPECT_TRUE(s[0].same(c[0])) << to_text(s.outs);
}

//   log1p(exp(x)), log(1 + exp(x))  ->  max(x, 0) + log1p(exp(-|x|))
TEST(Stabilize, SoftplusForms) {
    Placeholder x({4}, f64, "x");
    Tensor a = log1p(exp(x)), b = log(1.0 + exp(x));
    Rewritten r = run(cc::stabilize, {a, b});
    // each rewrite makes its own constants: equal graphs are one node once constants are merged
    Rewritten m = run(cc::merge_constants, {r[0], r[1], softplus(x)});
    EXPECT_TRUE(m[0].same(m[1])) << to_text(m.outs);
    EXPECT_TRUE(m[0].same(m[2])) << to_text(m.outs);
    Array xv(std::vector<double>{-800, -3, 0.5, 800});
    Array got = eval_on("reference", {x}, {r[0]}, {xv})[0];
    for (int i = 0; i < 4; ++i) {
        long double v = xv.at(i);
        double want = double(v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)));
        EXPECT_NEAR(got.at(i), want, 1e-15 * std::fabs(want)) << "x = " << xv.at(i);
    }
    // the stable form is left alone
    Rewritten s = run(cc::stabilize, {softplus(x)});
    EXPECT_EQ(s.stats.hits["softplus_form"], 0);
}

//   where(c, 0, g) * 0.01 -> where(c, 0, g * 0.01);  where(c, g, 0) + where(c, 0, h) -> where(c, g, h)
// (leaky relu's backward becomes one select)
TEST(Canonicalize, WhereBranchesMerge) {
    Placeholder x({2, 3}, f64, "x"), g({2, 3}, f64, "g");
    Tensor y = where(x >= 0.0, x, x * 0.01);
    Tensor dx = gradients(sum(y * g), {x})[0];
    Rewritten r = run(cc::canonicalize, {dx});
    EXPECT_EQ(count(r.outs, Op::Where), 1) << to_text(r.outs);
    EXPECT_EQ(count(r.outs, Op::Add), 0) << to_text(r.outs);
    EXPECT_GE(r.stats.hits["where_merge"], 1);
    Array xv = random_array(f64, {2, 3}, 51, -1, 1), gv = random_array(f64, {2, 3}, 52);
    expect_same_value({x, g}, {dx}, r.outs, {xv, gv});
    // a non-finite scale (0 * inf is NaN) and different conditions are left alone
    Placeholder c({2, 3}, DType::Bool, "c");
    Tensor inf = where(c, 0.0, g) * std::numeric_limits<double>::infinity();
    EXPECT_EQ(run(cc::canonicalize, {inf}).stats.hits["where_scale"], 0);
    Tensor two = where(c, g, 0.0) + where(x >= 0.0, 0.0, g);
    EXPECT_EQ(run(cc::canonicalize, {two}).stats.hits["where_merge"], 0);
}

//   pad(a, hi 6) + pad(b, lo 2, hi 3) + pad(c, lo 5)  ->  concat(a, b, c)
// (the gradient of slicing a tensor into pieces: an RNN's gates, over a dynamic batch)
TEST(Canonicalize, PadSumIsConcat) {
    Placeholder x({-1, 8}, f64, "x");
    auto grad = [&](std::vector<std::pair<int64_t, int64_t>> ranges, bool whole) {
        std::vector<Tensor> terms;
        if (whole)
            terms.push_back(sum(x * x));
        for (auto [a, b] : ranges) {
            Tensor p = x[{sl(), sl(a, b)}];
            terms.push_back(sum(terms.size() % 2 ? sin(p) : p * p * p));
        }
        Tensor y = terms[0];
        for (size_t k = 1; k < terms.size(); ++k)
            y = y + terms[k];
        return gradients(y, {x})[0];
    };
    Array xv = random_array(f64, {3, 8}, 61, -1, 1);
    {
        Tensor dx = grad({{0, 2}, {2, 5}, {5, 8}}, false);
        EXPECT_EQ(count({dx}, Op::Pad), 3) << "the slices' gradients are pads: " << to_text({dx});
        EXPECT_EQ(count({dx}, Op::DynamicUpdateSlice), 0) << to_text({dx});
        Rewritten r = run(cc::canonicalize, {dx});
        EXPECT_GE(r.stats.hits["pad_sum"], 1);
        EXPECT_EQ(count(r.outs, Op::Pad), 0) << to_text(r.outs);
        EXPECT_EQ(count(r.outs, Op::Concat), 1) << to_text(r.outs);
        expect_same_value({x}, {dx}, r.outs, {xv});
    }
    {
        // part of the dim, beside an addend that is not a pad: one pad of the concat, one add
        Tensor dx = grad({{2, 5}, {5, 7}}, true);
        Rewritten r = run(cc::canonicalize, {dx});
        EXPECT_EQ(count(r.outs, Op::Pad), 1) << to_text(r.outs);
        EXPECT_EQ(count(r.outs, Op::Concat), 1) << to_text(r.outs);
        expect_same_value({x}, {dx}, r.outs, {xv});
    }
    // a gap or an overlap between the pieces is left alone
    for (auto ranges : {std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {3, 8}},
                        std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {2, 8}}}) {
        Tensor dx = grad(ranges, false);
        Rewritten r = run(cc::canonicalize, {dx});
        EXPECT_EQ(r.stats.hits["pad_sum"], 0) << to_text(r.outs);
        expect_same_value({x}, {dx}, r.outs, {xv});
    }
}

// ---- specialize ---------------------------------------------------------------------------

//   pow(x, 1) -> x; 2 -> x*x; 3 -> x*x*x; 0.5 -> sqrt; -0.5 -> rsqrt; -1 -> reciprocal; 2.5 stays
TEST(Specialize, PowBySmallConstants) {
    Placeholder x({7}, f64, "x");
    struct Row {
        double c;
        std::map<Op, int> want;
    };
    std::vector<Row> rows = {{1, {}},
                             {2, {{Op::Mul, 1}}},
                             {3, {{Op::Mul, 2}}},
                             {0.5, {{Op::Sqrt, 1}}},
                             {-0.5, {{Op::Rsqrt, 1}}},
                             {-1, {{Op::Reciprocal, 1}}},
                             {2.5, {{Op::Pow, 1}}}};
    Array xv = random_array(f64, {7}, 11, 0.1, 3);
    for (const auto& row : rows) {
        Tensor y = pow(x, row.c);
        Rewritten r = run(cc::specialize, {y});
        EXPECT_EQ(ops(r.outs), row.want) << "pow(x, " << row.c << "): " << to_text(r.outs);
        expect_same_value({x}, {y}, r.outs, {xv}, kFormulaTol);
    }
}

//   dot_general(transpose(a, [1, 0]), b)  ->  dot_general(a, b) contracting a's dim 0 (no copy)
TEST(Specialize, TransposeFoldsIntoDotGeneral) {
    Placeholder a({5, 3}, f64, "a"), b({5, 4}, f64, "b"), c({3, 4}, f64, "c");
    Tensor y = matmul(transpose(a), b); // [3, 4]
    Tensor z = matmul(b, transpose(transpose(transpose(c)))); // [5, 3]
    Rewritten r = run(cc::specialize, run(cc::canonicalize, {y, z}).outs);
    EXPECT_EQ(count(r.outs, Op::Permute), 0) << to_text(r.outs);
    ASSERT_TRUE(r[0].node()->is(Op::DotGeneral));
    EXPECT_EQ(r[0].node()->attr<DotAttrs>().lhs_contract, (std::vector<int64_t>{0}));
    EXPECT_EQ(r[1].node()->attr<DotAttrs>().rhs_contract, (std::vector<int64_t>{1}));
    expect_same_value({a, b, c}, {y, z}, r.outs,
                      {random_array(f64, {5, 3}, 12), random_array(f64, {5, 4}, 13), random_array(f64, {3, 4}, 14)});
}

// A permutation that reorders the free dims would change the result's dim order: kept.
TEST(Specialize, TransposeThatReordersFreeDimsStays) {
    Placeholder a({3, 2, 4}, f64, "a"), b({4, 5}, f64, "b");
    Tensor y = dot_general(transpose(a, {1, 0, 2}), b, {{}, {}, {2}, {0}}); // [2, 3, 5]
    Rewritten r = run(cc::specialize, {y});
    EXPECT_EQ(count(r.outs, Op::Permute), 1) << to_text(r.outs);
    EXPECT_EQ(r.stats.hits["fold_transpose_into_dot"], 0);
    expect_same_value({a, b}, {y}, r.outs, {random_array(f64, {3, 2, 4}, 15), random_array(f64, {4, 5}, 16)});
}

//   sum(-(a * broadcast(c) + b * r), axes 0, 2)  ->  -(sum(a) * c + sum(b) * r)
// (Note [Factoring reductions]): c and r are computed from sums and constant along the summed
// axes, so the outer sum no longer waits for them.
TEST(Specialize, FactorSumMovesInvariantFactorsOut) {
    Placeholder a({3, 4, 5}, f64, "a"), b({3, 4, 5}, f64, "b");
    Tensor c = mean(b, {0, 2}, true);                      // [1, 4, 1]
    Tensor r = reshape(rsqrt(sum(a * a, {0, 2}) + 1.0), {4, 1}); // [4, 1]
    Tensor y = sum(-(a * broadcast_to(c, {3, 4, 5}) + b * r), {0, 2});
    Rewritten s = run(cc::specialize, {y});
    EXPECT_EQ(s.stats.hits["factor_sum"], 1);
    // the sums of a and b now read a and b alone
    int plain = 0;
    std::vector<const Node*> rs{s[0].node().get()};
    for (const Node* n : topo_order(rs))
        plain += n->is(Op::ReduceSum) && n->input(0)->is(Op::Placeholder);
    EXPECT_EQ(plain, 2) << "sum(a), and sum(b), which is also mean's (one node)\n" << to_text(s.outs);
    EXPECT_EQ(s[0].shape(), (Shape{4}));
    std::vector<Array> args = {random_array(f64, {3, 4, 5}, 31), random_array(f64, {3, 4, 5}, 32)};
    // reassociated sums: a few ulp of the sum's magnitude
    expect_same_value({a, b}, {y}, s.outs, args, 1e-12);
    // the same varying product in two terms is summed once: sum(a*c + a*r) -> sum(a) * (c + r)
    Tensor z = sum(a * c + a * r, {0, 2}, true);
    Rewritten t = run(cc::specialize, {z});
    EXPECT_EQ(t.stats.hits["factor_sum"], 1);
    EXPECT_EQ(count(t.outs, Op::ReduceSum), 3) << "sum(a), and the sums inside c and r\n" << to_text(t.outs);
    expect_same_value({a, b}, {z}, t.outs, args, 1e-12);
}

// Nothing to factor (no invariant factor), a factor that varies along a summed axis, a varying
// product broadcast along a summed axis (its sum would need a count), or invariant factors that
// are constants (they delay nothing): unchanged. An invariant parameter leaves the sum (so that
// batch norm's dgamma and dx share theirs: NormalisationParameterGradientsShareTheSums).
TEST(Specialize, FactorSumLeavesOtherSumsAlone) {
    Placeholder a({3, 4}, f64, "a"), b({3, 4}, f64, "b"), row({1, 4}, f64, "row");
    Tensor s0 = broadcast_to(sum(a, {0}, true), {3, 4}); // computed, invariant along axis 0
    for (const Tensor& y :
         {sum(a * b + a, {0}), sum(a * sum(a, {1}, true), {0}), sum(a * 2.0, {0}), sum(a * b)}) {
        Rewritten s = run(cc::specialize, {y});
        EXPECT_EQ(s.stats.hits["factor_sum"], 0) << to_text({y});
    }
    std::vector<Array> args = {random_array(f64, {3, 4}, 91), random_array(f64, {3, 4}, 92),
                               random_array(f64, {1, 4}, 93)};
    for (const Tensor& y : {sum(row * s0, {0}), sum(a * row * 2.0, {0})}) {
        Rewritten s = run(cc::specialize, {y});
        EXPECT_EQ(s.stats.hits["factor_sum"], 1) << to_text({y});
        expect_same_value({a, b, row}, {y}, s.outs, args, 1e-12); // reassociated: a few ulp
    }
    // integers keep their sums (the rewrite is for floats, where only rounding changes)
    Placeholder i({3, 4}, DType::I64, "i");
    EXPECT_EQ(run(cc::specialize, {sum(i * sum(i, {0}, true), {0})}).stats.hits["factor_sum"], 0);
}

// A running sum (Note [Factoring reductions]): the backward of h <- h - max(h, axis 1) + c reads,
// at every step, g_k = g_{k+1} + w * broadcast(sum(-g_{k+1})), and sums -g_k. The walk used to
// expand g_{k+1} into its own terms, 16 levels deep, although the graph had its sum already:
// every step's sum became a dozen, 200 steps grew the graph 8x and 1,000 took 3.6 s to compile.
// Now g_{k+1} stays one term whose sum is the one the graph has.
TEST(Specialize, RunningSumsAreNotExpandedAgain) {
    Placeholder x({4, 8}, f64, "x"), c({4, 8}, f64, "c");
    Tensor h = x;
    for (int i = 0; i < 200; ++i)
        h = h - max(h, {1}, true) + c;
    std::vector<Tensor> g = gradients(sum(h * sum(x, {0}, true)), {x, c});
    Rewritten before = run(cc::canonicalize, g);
    Rewritten s = run(cc::specialize, before.outs);
    EXPECT_GT(s.stats.hits["factor_sum"], 100) << "the sums are still factored";
    const size_t n0 = graph_size(before.outs), n1 = graph_size(s.outs);
    // each step's sum becomes sum(-g_{k+1}) * (1 - sum(w)) and its few [4, 1] ops
    EXPECT_LE(n1, n0 + n0 / 2) << n0 << " nodes before specialize, " << n1 << " after";
    std::vector<Array> args = {random_array(f64, {4, 8}, 81), random_array(f64, {4, 8}, 82)};
    // reassociated sums over 200 steps; the values stay O(10) (each step subtracts the max)
    expect_same_value({x, c}, g, s.outs, args, 1e-9);
}

// factor_sum's walk over the product under a sum is bounded (Note [Factoring reductions]): a
// chain of 2x10^5 products once overflowed the stack (a segfault compiling a 10^5-step GELU
// chain), and 40 squarings (h = h * h) took 2^40 calls. Both now stop expanding after 16 levels
// and compute what the reference interpreter computes; a sum with an invariant factor on top of
// such a chain is still factored.
TEST(Specialize, FactoringLongProductChainsIsBounded) {
    Placeholder x({4, 8}, f64, "x"), c({4, 8}, f64, "c");
    Tensor squared = x;
    for (int i = 0; i < 40; ++i)
        squared = squared * squared;
    Tensor chain = x;
    for (int i = 0; i < 200000; ++i)
        chain = chain * c;
    Tensor rowsum = broadcast_to(sum(x, {0}, true), {4, 8}); // invariant along axis 0, a reduction
    Tensor y0 = sum(squared, {0}), y1 = sum(chain, {0}), y2 = sum(chain * rowsum, {0});
    Rewritten s = run(cc::specialize, {y0, y1, y2});
    EXPECT_EQ(s.stats.hits["factor_sum"], 1) << "only y2 has an invariant factor";
    // values: x and c of +-1 keep every product at +-1, so the sums are exact
    Array xv = random_array(f64, {4, 8}, 71), cv = random_array(f64, {4, 8}, 72);
    for (int64_t k = 0; k < xv.size(); ++k) {
        xv.data<double>()[k] = xv.data<double>()[k] < 0 ? -1.0 : 1.0;
        cv.data<double>()[k] = cv.data<double>()[k] < 0 ? -1.0 : 1.0;
    }
    expect_same_value({x, c}, {y0, y1, y2}, s.outs, {xv, cv}, 0);
}

// The backward of batch norm + relu (as autodiff writes it) over a batch bound at call time:
// after factoring, its sums read only the incoming gradient and forward values, they merge into
// one kernel (Note [Equal dynamic dims]), and the gradient takes two passes over the activations.
// The forward's statistics take one more: the cpu target sums x for the mean and x, x * x in f64
// for the variance in one kernel (Note [Variance in one pass] in Specialize.cpp; before, the
// variance was a second pass around the mean).
TEST(Specialize, NormalisationBackwardTakesTwoPasses) {
    Placeholder x({-1, 4, 5, 5}, f32, "x"), w({-1, 4, 5, 5}, f32, "w");
    Placeholder gamma({1, 4, 1, 1}, f32, "gamma");
    Tensor m = mean(x, {0, 2, 3}, true);
    Tensor y = nn::relu((x - m) * rsqrt(var(x, {0, 2, 3}, true) + 1e-5) * gamma);
    Tensor loss = sum(y * w);
    std::vector<Tensor> g = gradients(loss, {x, gamma});
    cc::Compiled c = compile(g);
    int full = 0;
    for (const auto& grp : c.plan.groups)
        if (grp.kind == cc::Group::Kind::Kernel && grp.space->rank() == 4 && grp.space->shape()[1] == 4 &&
            grp.space->shape()[2] == 5)
            ++full;
    EXPECT_EQ(full, 3) << c.plan.str();
    EXPECT_FALSE(has_decision(c.plan, "materialise sub")) << "x - mean is recomputed\n" << c.plan.str();
    // values: the cpu backend against the reference interpreter (f32: reassociated sums)
    std::vector<Array> args = {random_array(f32, {6, 4, 5, 5}, 41), random_array(f32, {6, 4, 5, 5}, 42),
                               random_array(f32, {1, 4, 1, 1}, 43, 0.5, 2)};
    expect_cpu_near_reference_f32({x, w, gamma}, g, args);

    // layer norm over the last axis (a dynamic batch in front): the same passes
    Placeholder h({-1, 16, 64}, f32, "h"), v({-1, 16, 64}, f32, "v");
    nn::LayerNorm ln(64);
    Tensor dh = gradients(sum(nn::relu(ln(h)) * v), {h})[0];
    cc::Compiled l = compile({dh});
    int passes = 0;
    for (const auto& grp : l.plan.groups) passes += grp.kind == cc::Group::Kind::Kernel;
    EXPECT_EQ(passes, 3) << "the statistics, the backward's sums, dh\n" << l.plan.str();
    std::vector<Array> largs = {random_array(f32, {3, 16, 64}, 44), random_array(f32, {3, 16, 64}, 45)};
    Array lc = eval_on("cpu", {h, v}, {dh}, largs)[0], lr = eval_on("reference", {h, v}, {dh}, largs)[0];
    for (int64_t k = 0; k < lc.size(); ++k)
        EXPECT_NEAR(lc.at(k), lr.at(k), 2e-4 * (1 + std::fabs(lr.at(k)))) << "dh at " << k;
}

// Batch norm's parameter gradients are sums the input gradient needs anyway: dbeta = sum(dy),
// dgamma = rstd * sum(dy * d). Autodiff sums a broadcast [C, 1, 1] operand's gradient over all
// its axes at once (sum_to_shape), and factor_sum moves gamma out of sum(dy * gamma * d), so both
// are the backward's own sums (Note [Factoring reductions]). Before, they were sums over (H, W)
// and then over the batch, of other products: one more pass over the activations and a kernel
// for the batch sums, per layer (the paper's network: 88 -> 83 kernels a step).
TEST(Specialize, NormalisationParameterGradientsShareTheSums) {
    Placeholder x({-1, 4, 5, 5}, f32, "x"), w({-1, 4, 5, 5}, f32, "w");
    Placeholder gamma({4}, f32, "gamma"), beta({4}, f32, "beta");
    Tensor m = mean(x, {0, 2, 3}, true);
    Tensor xhat = (x - m) * rsqrt(var(x, {0, 2, 3}, true) + 1e-5);
    Tensor y = nn::relu(xhat * reshape(gamma, {4, 1, 1}) + reshape(beta, {4, 1, 1}));
    std::vector<Tensor> g = gradients(sum(y * w), {x, gamma, beta});
    cc::Compiled c = compile(g);
    int full = 0, kernels = 0;
    for (const auto& grp : c.plan.groups) {
        if (grp.kind != cc::Group::Kind::Kernel)
            continue;
        ++kernels;
        if (grp.space->rank() != 4 || grp.space->shape()[1] != 4 || grp.space->shape()[2] != 5)
            continue;
        ++full;
        // before: dgamma and dbeta summed (H, W) inside the dx kernel, then the batch in a kernel
        // of their own
        EXPECT_TRUE(grp.reduce_axes.empty() || grp.reduce_axes == (std::vector<int64_t>{0, 2, 3}))
            << c.plan.str();
    }
    // (the statistics in one pass: Note [Variance in one pass] in Specialize.cpp)
    EXPECT_EQ(full, 3) << "the statistics, the backward's sums, dx\n" << c.plan.str();
    EXPECT_EQ(kernels, 4) << "and rstd * sum(dy * d) for dgamma (was 6, then 5 with two "
                             "passes for the statistics)\n"
                          << c.plan.str();
    std::vector<Array> args = {random_array(f32, {6, 4, 5, 5}, 51),
                               random_array(f32, {6, 4, 5, 5}, 52),
                               random_array(f32, {4}, 53, 0.5, 2), random_array(f32, {4}, 54)};
    expect_cpu_near_reference_f32({x, w, gamma, beta}, g, args);
}

// Note [Masks of a normalised relu]: the backward of batch norm + leaky relu reads the relu's
// mask from the pre-activation, recomputed from the conv-like input x it loads anyway, not from
// the relu's output (one activation-sized stream fewer in each of its two kernels; before, both
// loaded y). A relu of a plain product keeps reading its output (Note [Relu masks]).
TEST(Specialize, MasksOfANormalisedReluReadThePreActivation) {
    Placeholder x({-1, 4, 5, 5}, f32, "x"), w({-1, 4, 5, 5}, f32, "w"), b({-1, 4, 5, 5}, f32, "b");
    Placeholder gamma({4}, f32, "gamma"), beta({4}, f32, "beta");
    Tensor m = mean(x, {0, 2, 3}, true);
    Tensor xhat = (x - m) * rsqrt(var(x, {0, 2, 3}, true) + 1e-5);
    Tensor y = nn::leaky_relu(xhat * reshape(gamma, {4, 1, 1}) + reshape(beta, {4, 1, 1}), 0.1);
    Tensor plain = nn::leaky_relu(x * b, 0.1);
    // y and plain are outputs too, so their buffers exist and a backward kernel could load them
    auto loads_of = [](const cc::Compiled& c, const Tensor& t) {
        int n = 0;
        for (const auto& grp : c.plan.groups)
            for (const auto& l : grp.loads)
                n += grp.kind == cc::Group::Kind::Kernel && l.buffer->is(Op::Where) &&
                     detail::output_mask(*l.buffer) && l.buffer->shape() == t.shape();
        return n;
    };
    std::vector<Tensor> g = gradients(sum(y * w), {x, gamma, beta});
    std::vector<Tensor> outs = g;
    outs.push_back(y);
    cc::Compiled c = compile(outs);
    EXPECT_EQ(loads_of(c, y), 0) << "the backward reads x, not y\n" << c.plan.str();
    Rewritten s = run(cc::specialize, outs);
    EXPECT_GE(s.stats.hits["mask_of_normalised_relu"], 1);
    std::vector<Tensor> gp = gradients(sum(plain * w), {x, b});
    gp.push_back(plain);
    EXPECT_EQ(run(cc::specialize, gp).stats.hits["mask_of_normalised_relu"], 0)
        << "a plain relu's mask stays on its output";
    // values against the reference, with points where the pre-activation is exactly 0 (beta = 0
    // and x constant along a channel: xhat = 0) and NaN (x = NaN in one image)
    Array xv = random_array(f32, {6, 4, 5, 5}, 61);
    for (int64_t k = 0; k < 6 * 25; ++k)
        xv.data<float>()[(k / 25) * 100 + 25 + k % 25] = 0.5f; // channel 1: constant
    Array betav = random_array(f32, {4}, 64);
    betav.data<float>()[1] = 0.f;
    std::vector<Array> args = {xv, random_array(f32, {6, 4, 5, 5}, 62),
                               random_array(f32, {4}, 63, 0.5, 2), betav};
    expect_cpu_near_reference_f32({x, w, gamma, beta}, outs, args);
    xv.data<float>()[7] = std::nanf("");
    args[0] = xv;
    auto cpu_out = eval_on("cpu", {x, w, gamma, beta}, outs, args);
    auto ref_out = eval_on("reference", {x, w, gamma, beta}, outs, args);
    for (size_t i = 0; i < outs.size(); ++i)
        for (int64_t k = 0; k < cpu_out[i].size(); ++k)
            EXPECT_EQ(std::isnan(cpu_out[i].at(k)), std::isnan(ref_out[i].at(k)))
                << "output " << i << " at " << k;
}

// ---- fusion (the whole pipeline; values on the cpu backend against the reference) -----------

// A reduction absorbs its producers and a sibling over the same iteration space joins it:
//   sum(exp(x) * 2, axis 1) and tanh(x) + x  ->  one kernel with two outputs
// Note [Small reductions unrolled]: a reduction of at most 8 terms over float values into at
// least 64 results becomes
// the combination of its terms; over a reshape that splits dims (2x2 windows), the terms are
// strided slices of the reshape's input. Values against the graph before the pass, on the
// reference interpreter (the terms add in memory order: a few f64 ulp).
TEST(Specialize, SmallReductionsAreUnrolled) {
    Placeholder x({3, 4, 6, 4}, f64, "x"), b({-1, 4, 6, 4}, f64, "b"), c({64, 2}, f64, "c");
    Placeholder k({3, 4}, i32, "k");
    const Shape win{3, 4, 3, 2, 2, 2};
    struct Row {
        const char* what;
        Tensor y;
        std::map<Op, int> want; // the pass's ops
    };
    std::vector<Row> rows = {
        {"mean of 2x2 windows",
         mean(reshape(x, win), {3, 5}),
         {{Op::Slice, 4}, {Op::Add, 3}, {Op::Div, 1}}},
        {"max of 2x2 windows", max(reshape(x, win), {3, 5}), {{Op::Slice, 4}, {Op::Max, 3}}},
        {"sum of the halves of H and W",
         sum(reshape(x, {3, 4, 2, 3, 2, 2}), {2, 4}),
         {{Op::Slice, 4}, {Op::Add, 3}}},
        {"min over an axis, kept", min(x, {3}, true), {{Op::Slice, 4}, {Op::Min, 3}}},
        {"product over the last axis",
         prod(c, {1}),
         {{Op::Slice, 2}, {Op::Mul, 1}, {Op::Reshape, 1}}},
        {"2x2 windows of a dynamic batch",
         sum(reshape(b, {-1, 4, 3, 2, 2, 2}), {3, 5}),
         {{Op::Slice, 4}, {Op::Add, 3}}},
        {"16 terms: a reduction", sum(b, {1, 3}), {{Op::ReduceSum, 1}}},
        {"8 terms over a dynamic batch",
         sum(reshape(b, {-1, 8, 12}), {1}),
         {{Op::Slice, 8}, {Op::Add, 7}, {Op::Reshape, 2}}},
        {"integers: a reduction", sum(k, {1}), {{Op::ReduceSum, 1}}},
        {"fewer than 64 results: a reduction",
         sum(reshape(x, {8, 36}), {0}),
         {{Op::Reshape, 1}, {Op::ReduceSum, 1}}},
    };
    const std::vector<Array> args{
        random_array(f64, {3, 4, 6, 4}, 90), random_array(f64, {2, 4, 6, 4}, 91),
        random_array(f64, {64, 2}, 92), random_array(i32, {3, 4}, 93, -9, 9)};
    for (const auto& row : rows) {
        SCOPED_TRACE(row.what);
        Rewritten r = run(cc::specialize, run(cc::canonicalize, {row.y}).outs);
        std::map<Op, int> got = ops(r.outs);
        for (const auto& [op, n] : row.want)
            EXPECT_EQ(got[op], n) << op_name(op) << ": " << to_text(r.outs);
        for (Op red : {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd})
            if (!row.want.count(red))
                EXPECT_EQ(got[red], 0) << op_name(red) << ": " << to_text(r.outs);
        expect_same_value({x, b, c, k}, {row.y}, r.outs, args, kFormulaTol);
    }
}

// The pooling idiom runs as one kernel (the mean's division fused in), max propagates a NaN of
// its window, and both match the reference interpreter on f32.
TEST(Specialize, WindowReductionsRunAsOneKernel) {
    Placeholder x({-1, 16, 8, 8}, f32, "x");
    Tensor x6 = reshape(x, {-1, 16, 4, 2, 4, 2});
    Array xv = random_array(f32, {2, 16, 8, 8}, 94);
    xv.data<float>()[3 * 64 + 9] =
        std::numeric_limits<float>::quiet_NaN(); // plane 3, (1, 1): window (0, 0)
    for (bool is_max : {false, true}) {
        SCOPED_TRACE(is_max ? "max" : "mean");
        Tensor y = is_max ? max(x6, {3, 5}) : mean(x6, {3, 5});
        Function f = function({x}, {y});
        Function ref = function({x}, {y}, {}, on("reference"));
        Array got = f(xv)[0], want = ref(xv)[0];
        EXPECT_EQ(f.stats().kernels, 1u) << f.dump();
        ASSERT_EQ(got.shape(), (Shape{2, 16, 4, 4}));
        EXPECT_TRUE(std::isnan(got.data<float>()[3 * 16])) << "the NaN's window";
        for (int64_t i = 0; i < got.size(); ++i) {
            if (std::isnan(want.at(i))) {
                EXPECT_TRUE(std::isnan(got.at(i))) << i;
                continue;
            }
            EXPECT_NEAR(got.at(i), want.at(i), 2e-7 * (1 + std::fabs(want.at(i))))
                << i; // (f32 rounding of 4 terms)
        }
    }
}

TEST(Fusion, ReductionAbsorbsProducersAndMergesSiblings) {
    Placeholder x({8, 16}, f64, "x");
    std::vector<Tensor> outs = {sum(exp(x) * 2.0, {1}), tanh(x) + x};
    cc::Compiled c = compile(outs);
    ASSERT_EQ(c.plan.kernels(), 1u) << c.plan.str();
    const cc::Group& g = c.plan.groups[0];
    EXPECT_EQ(g.roots.size(), 2u);
    EXPECT_EQ(g.reduce_axes, (std::vector<int64_t>{1}));
    EXPECT_EQ(g.loads.size(), 1u) << "x is loaded once for both outputs";
    expect_cpu_matches_reference({x}, outs, {random_array(f64, {8, 16}, 17)}, 1e-14);
}

// A reduction and an elementwise kernel over one space merge only when they read a value in
// common (Note [A reduction joins a kernel it shares a read with]): a count over a batch bound
// at call time reads nothing, so it joins the sum beside it and the elementwise kernel stays
// one of its own, out of the reduction's loops.
TEST(Fusion, AReductionJoinsOnlyAKernelItSharesAReadWith) {
    Placeholder x({6, 8}, f64, "x"), y({6, 8}, f64, "y");
    std::vector<Tensor> shared = {sum(x, {0}), exp(x * y)};
    cc::Compiled c = compile(shared);
    EXPECT_EQ(c.plan.kernels(), 1u) << "the sum and exp(x * y) both read x\n" << c.plan.str();
    std::vector<Tensor> apart = {sum(y * 3.0, {0}), exp(x) + 1.0};
    cc::Compiled a = compile(apart);
    EXPECT_EQ(a.plan.kernels(), 2u) << a.plan.str();
    // positive values: the sums do not cancel, and 1e-14 is a few ulp of them
    std::vector<Array> args = {random_array(f64, {6, 8}, 65, 0.5, 2),
                               random_array(f64, {6, 8}, 66, 0.5, 2)};
    expect_cpu_matches_reference({x, y}, shared, args, 1e-14);
    expect_cpu_matches_reference({x, y}, apart, args, 1e-14);

    Placeholder b({-1, 8}, f64, "b");
    std::vector<Tensor> counted = {sum(ones_like(b), {0}), exp(b) + 1.0};
    cc::Compiled k = compile(counted);
    EXPECT_EQ(k.plan.kernels(), 2u) << "the count reads nothing\n" << k.plan.str();
    std::vector<Tensor> summed = {sum(ones_like(b), {0}), sum(b * 3.0, {0})};
    cc::Compiled m = compile(summed);
    EXPECT_EQ(m.plan.kernels(), 1u) << "two reductions\n" << m.plan.str();
    Array bv = random_array(f64, {5, 8}, 67, 0.5, 2);
    expect_cpu_matches_reference({b}, counted, {bv}, 1e-14);
    expect_cpu_matches_reference({b}, summed, {bv}, 1e-14);
}

// Note [Siblings that share a read merge first]: a kernel that depends on no other of its space
// (sin(x)) joins the one that reads x too, not an unrelated one after a matmul, whichever comes
// first in group order; tried both ways round.
TEST(Fusion, SiblingsThatShareAReadMergeFirst) {
    Placeholder x({16, 32}, f32, "x"), y({16, 32}, f32, "y");
    // (positive weights over positive exp(x): the matmul's f32 sums do not cancel, so 1e-5 of
    // each value holds)
    Variable w(random_array(f32, {32, 32}, 68, 0.01, 0.05), "sibling_w");
    Tensor a = exp(x);
    Tensor b = tanh(matmul(a, w)) * y; // after a, through the matmul
    Tensor c = sin(x);
    for (bool c_first : {false, true}) {
        SCOPED_TRACE(c_first ? "sin(x) first" : "sin(x) last");
        std::vector<Tensor> outs =
            c_first ? std::vector<Tensor>{c, a, b} : std::vector<Tensor>{a, b, c};
        cc::Compiled p = compile(outs);
        const cc::Group* with_c = nullptr;
        for (const auto& g : p.plan.groups)
            for (const auto& r : g.roots)
                if (r == c.node())
                    with_c = &g;
        ASSERT_NE(with_c, nullptr) << p.plan.str();
        bool with_a = false;
        for (const auto& r : with_c->roots)
            with_a |= r == a.node();
        EXPECT_TRUE(with_a) << p.plan.str();
        expect_cpu_matches_reference(
            {x, y}, outs, {random_array(f32, {16, 32}, 69), random_array(f32, {16, 32}, 70)}, 1e-5);
    }
}

// A value that only gives a shape (here a matmul read by ones_like, and a product of two
// inputs read by zeros_like) is computed by no group: the plan has one kernel and no library
// call (Note [Values read for their shape alone]), and a batch bound at call time still
// gives the outputs their shapes.
TEST(Fusion, ValuesReadForTheirShapeAloneAreNotComputed) {
    Placeholder x({-1, 8}, f64, "x"), w({8, 4}, f64, "w"), z({-1, 4}, f64, "z");
    std::vector<Tensor> outs = {ones_like(tanh(matmul(x, w))) * 2.0 + z,
                                zeros_like(exp(z) * z) - z};
    cc::Compiled c = compile(outs);
    EXPECT_EQ(c.plan.library_calls(), 0u) << c.plan.str();
    EXPECT_EQ(c.plan.kernels(), 1u) << c.plan.str();
    for (const auto& g : c.plan.groups)
        for (const auto& r : g.roots)
            EXPECT_FALSE(r->is(Op::Exp) || r->is(Op::Tanh) || r->is(Op::DotGeneral))
                << "computed for its shape: " << r->describe(1);
    std::vector<Array> args = {random_array(f64, {5, 8}, 71), random_array(f64, {8, 4}, 72),
                               random_array(f64, {5, 4}, 73)};
    expect_cpu_matches_reference({x, w, z}, outs, args, 0);
}

// Kernels over a batch bound at call time merge when the graph makes their batches equal (an
// elementwise op between them), not when they only look alike: two placeholders of [-1, 8] may
// be bound to different batches (Note [Equal dynamic dims]).
TEST(Fusion, DynamicSpacesMergeOnlyWhenProvenEqual) {
    Placeholder x({-1, 8}, f64, "x"), y({-1, 8}, f64, "y");
    Tensor d = x * y; // forces x's batch to be y's
    std::vector<Tensor> same = {sum(exp(x), {0}), sum(d, {0}), sum(y, {0})};
    cc::Compiled c = compile(same);
    EXPECT_EQ(c.plan.kernels(), 1u) << c.plan.str();
    expect_cpu_matches_reference({x, y}, same, {random_array(f64, {5, 8}, 61), random_array(f64, {5, 8}, 62)},
                                 1e-14);
    std::vector<Tensor> apart = {sum(exp(x), {0}), sum(y, {0})};
    cc::Compiled a = compile(apart);
    EXPECT_EQ(a.plan.kernels(), 2u) << a.plan.str();
    // and they run with different batches
    auto out = eval_on("cpu", {x, y}, apart, {random_array(f64, {5, 8}, 63), random_array(f64, {3, 8}, 64)});
    auto ref = eval_on("reference", {x, y}, apart, {random_array(f64, {5, 8}, 63), random_array(f64, {3, 8}, 64)});
    for (size_t i = 0; i < out.size(); ++i) expect_close(out[i], ref[i], 1e-14, "output " + std::to_string(i));
}

// A producer joins its consumer's kernel only when the consumer's space is the producer's at
// every call: a slice or a transpose of a [-1, ...] value has dims of -1 that the graph does not
// tie to the producer's (Note [Equal dynamic dims]). Before, the statically equal shapes let
// the producer's output be stored over the consumer's smaller or transposed loops, and the call
// failed with an internal error (graphs of FuzzFusion seeds 501205 and 500737).
TEST(Fusion, ProducersJoinOnlyConsumersOverTheirOwnDynamicSpace) {
    Placeholder x({-1, 1}, f32, "x"), c({}, f32, "c");
    Tensor s = slice(x, {2, 0}, {6, 1});
    Tensor head = slice(maximum(s, maximum(c, s)), {0, 0}, {1, 1}); // [-1, 1]: 1 x 1 at the call
    std::vector<Tensor> outs = {expm1(reshape(head, {1})), s};
    expect_cpu_matches_reference({x, c}, outs,
                                 {random_array(f32, {9, 1}, 91), random_array(f32, {}, 92)}, 1e-6);
    Placeholder y({-1, -1}, f32, "y");
    Tensor a = cos(y * 0.5);
    Tensor t = transpose(sin(a), {1, 0}); // [-1, -1], transposed at the call
    std::vector<Tensor> both = {a, reshape(t, {-1})};
    expect_cpu_matches_reference({y}, both, {random_array(f32, {31, 17}, 93)}, 1e-6);
}

// An elementwise value read by several kernels is recomputed in each (up to kMaxRecompute),
// then materialised once it is needed by more. Kernels over one space with the same reduced
// axes count once (they merge: the six readers of `t` below are three kernels, so t is
// recomputed); five different ones make it materialise.
TEST(Fusion, RecomputeUpToTheCapThenMaterialise) {
    Placeholder x({6, 10}, f64, "x");
    Tensor t = x * x + 1.0;
    // different reduction axes over the same space: separate kernels
    std::vector<Tensor> few = {sum(t, {0}), max(t, {1}), min(t)};
    cc::Compiled c = compile(few);
    EXPECT_EQ(c.plan.kernels(), 3u) << c.plan.str();
    EXPECT_TRUE(has_decision(c.plan, "recompute")) << c.plan.str();
    for (const auto& g : c.plan.groups)
        for (const auto& r : g.roots) EXPECT_FALSE(r->is(Op::Add)) << "t was materialised:\n" << c.plan.str();
    expect_cpu_matches_reference({x}, few, {random_array(f64, {6, 10}, 18)});

    Placeholder v({10}, f64, "v");
    std::vector<Tensor> merged = {sum(t, {0}), max(t, {1}), min(t), sum(t * v, {1}), max(t * v, {0}), sum(t)};
    cc::Compiled k = compile(merged);
    EXPECT_EQ(k.plan.kernels(), 3u) << k.plan.str();
    EXPECT_FALSE(has_decision(k.plan, "used by")) << k.plan.str();
    expect_cpu_matches_reference({x, v}, merged, {random_array(f64, {6, 10}, 19), random_array(f64, {10}, 20)});

    std::vector<Tensor> many = {sum(t, {0}), max(t, {1}), min(t), t * v, transpose(t) + 1.0};
    cc::Compiled m = compile(many);
    EXPECT_TRUE(has_decision(m.plan, "used by")) << m.plan.str();
    bool materialised = false;
    for (const auto& g : m.plan.groups)
        for (const auto& r : g.roots) materialised |= r->is(Op::Add);
    EXPECT_TRUE(materialised) << m.plan.str();
    expect_cpu_matches_reference({x, v}, many, {random_array(f64, {6, 10}, 19), random_array(f64, {10}, 20)});
}

// Steps that map indices alike are one step (Note [Canonical chain steps]): each `h - m` of a
// chain broadcasts its own [4, 1] m over [4, 8], and a value read through two such broadcasts
// was expanded twice in a kernel, and whatever it read again under each. The backward of 100
// steps of h - logsumexp(h) * 0.1 made a kernel of 12,000 instructions and 1,500 loads (9 s in
// LLVM); 40 steps of flip(h) * c read c through chains of 0..40 flips, 19 MB of LLVM IR (11 s).
// Now every kernel keeps to the size cap (a load or constant is an instruction too, so up to
// twice the cap's ops) and its loads to about two per step.
TEST(Fusion, StepsThatMapIndicesAlikeAreOneStep) {
    for (int kind : {0, 1}) {
        Placeholder x({4, 8}, f32, "x"), c({4, 8}, f32, "c");
        Tensor h = x;
        for (int i = 0; i < (kind == 0 ? 100 : 40); ++i)
            h = kind == 0 ? h - logsumexp(h, {1}, true) * 0.1 : flip(h, {1}) * c;
        std::vector<Tensor> outs = gradients(sum(h * sum(x, {0}, true)), {x, c});
        outs.push_back(sum(h));
        cc::Compiled k = compile(outs);
        size_t most_insts = 0, most_loads = 0;
        for (const auto& g : k.plan.groups) {
            most_insts = std::max(most_insts, g.insts.size());
            most_loads = std::max(most_loads, g.loads.size());
        }
        EXPECT_LE(most_insts, 2 * cc::kMaxKernelInsts) << (kind == 0 ? "logsumexp" : "flip");
        // the backward kernel that ends the logsumexp chain reads two [4, 1] values per step
        // (about 110 loads): the loads of one fused chain are not capped, only merges are
        EXPECT_LE(most_loads, 2 * cc::kMaxKernelOperands) << (kind == 0 ? "logsumexp" : "flip");
        std::vector<Array> args = {random_array(f32, {4, 8}, 91),
                                   random_array(f32, {4, 8}, 92, 0.5, 1.0)};
        // f32 sums over 100 steps, reassociated differently by the two backends
        auto cpu = eval_on("cpu", {x, c}, outs, args),
             ref = eval_on("reference", {x, c}, outs, args);
        for (size_t i = 0; i < outs.size(); ++i)
            for (int64_t j = 0; j < cpu[i].size(); ++j)
                EXPECT_NEAR(cpu[i].at(j), ref[i].at(j), 1e-4 * (1 + std::fabs(ref[i].at(j))))
                    << i << " at " << j;
    }
}

// Note [Costs per context]: a sliding window of 48 slices over tanh(erf(sin(x))) put 48 copies of
// the chain in one kernel (seconds in LLVM, 48 times the work); now the chain is materialised
// once its copies would pass the size cap, and no kernel holds more than a few erfs. A cheap
// value read through four slices (a pool's window over relu(2x + 1)) stays fused.
TEST(Fusion, AValueReadUnderManyIndexMapsIsMaterialisedWhenItIsExpensive) {
    auto count_op = [](const cc::Group& g, Op op) {
        size_t n = 0;
        for (const auto& i : g.insts)
            n += i.kind == cc::KInst::Kind::Op && i.op == op;
        return n;
    };
    Placeholder x({1, 248}, f64, "x");
    Tensor y = tanh(erf(sin(x)));
    Tensor window = slice_axis(y, 1, 0, 200);
    for (int k = 1; k < 48; ++k)
        window = window + slice_axis(y, 1, k, 200 + k);
    cc::Compiled c = compile({window});
    EXPECT_TRUE(has_decision(c.plan, "index maps, past the kernel size cap")) << c.plan.str();
    for (const auto& g : c.plan.groups)
        EXPECT_LE(count_op(g, Op::Erf), 2u) << c.plan.str();
    expect_cpu_matches_reference({x}, {window}, {random_array(f64, {1, 248}, 31)}, 1e-12);

    Tensor z = nn::relu(x * 2.0 + 1.0);
    Tensor pool = maximum(maximum(slice_axis(z, 1, 0, 246), slice_axis(z, 1, 1, 247)),
                          maximum(slice_axis(z, 1, 2, 248), slice_axis(z, 1, 0, 246, 1) * 0.5));
    cc::Compiled p = compile({pool});
    EXPECT_EQ(p.plan.kernels(), 1u) << p.plan.str();
    EXPECT_FALSE(has_decision(p.plan, "index maps")) << p.plan.str();
    expect_cpu_matches_reference({x}, {pool}, {random_array(f64, {1, 248}, 32)});
}

// Refusals name their reason: a consumer that is not a kernel (concat runs its reference kernel,
// dot_general is a GEMM call), and siblings that depend on each other.
TEST(Fusion, RefusalsAreExplained) {
    Placeholder x({4, 6}, f64, "x"), w({6, 3}, f64, "w");
    Tensor e = exp(x);
    std::vector<Tensor> outs = {concat({e, e}, 0), tanh(matmul(tanh(x), w)) + 1.0};
    cc::Compiled c = compile(outs);
    EXPECT_TRUE(has_decision(c.plan, "consumer concat is not fusible")) << c.plan.str();
    EXPECT_TRUE(has_decision(c.plan, "consumer dot_general is not fusible")) << c.plan.str();
    EXPECT_EQ(c.plan.library_calls(), 1u);
    int fallbacks = 0;
    for (const auto& g : c.plan.groups) fallbacks += g.kind == cc::Group::Kind::Fallback;
    EXPECT_EQ(fallbacks, 1) << c.plan.str();
    expect_cpu_matches_reference({x, w}, outs, {random_array(f64, {4, 6}, 21), random_array(f64, {6, 3}, 22)},
                                 1e-12);

    // y needs s, the full sum over the same space: one kernel cannot produce both
    Tensor s = sum(x);
    std::vector<Tensor> dep = {s, x * s};
    cc::Compiled d = compile(dep);
    EXPECT_EQ(d.plan.kernels(), 2u) << d.plan.str();
    EXPECT_TRUE(has_decision(d.plan, "depend on each other")) << d.plan.str();
    expect_cpu_matches_reference({x}, dep, {random_array(f64, {4, 6}, 23)});
}

// An expression longer than kMaxKernelInsts is split into several kernels, and a kernel holds
// each scalar constant once (they used to be repeated per use, one per consumer's broadcast
// chain, which doubled the kernels past the cap).
TEST(Fusion, KernelSizeCapSplitsLongExpressions) {
    Placeholder x({5, 7}, f64, "x");
    Tensor y = x;
    for (int i = 0; i < 700; ++i) y = y * 0.999 + double(i % 7) * 1e-3;
    cc::Compiled c = compile({y});
    EXPECT_GE(c.plan.kernels(), 2u) << c.plan.str();
    EXPECT_TRUE(has_decision(c.plan, "kernel size cap reached")) << c.plan.str();
    for (const auto& g : c.plan.groups) {
        std::set<double> consts;
        size_t ops = 0, repeated = 0;
        for (const auto& k : g.insts) {
            if (k.kind == cc::KInst::Kind::Const) repeated += !consts.insert(k.value).second;
            ops += k.kind == cc::KInst::Kind::Op;
        }
        EXPECT_EQ(repeated, 0u) << "scalar constants repeated in one kernel";
        EXPECT_LE(ops, cc::kMaxKernelInsts) << c.plan.str();
        EXPECT_LE(g.insts.size(), cc::kMaxKernelInsts + consts.size() + g.loads.size()) << c.plan.str();
    }
    expect_cpu_matches_reference({x}, {y}, {random_array(f64, {5, 7}, 24)});
}

// Movement ops over a buffer are address arithmetic inside the consumer (no copies); a reshape
// of a computed value is a view of its buffer.
TEST(Fusion, MovementIsAddressArithmeticAndReshapeAView) {
    Placeholder x({6, 6}, f64, "x");
    Tensor y = transpose(x) + flip(x, {0}) * x[{sl(), sl(2, 3)}];
    Tensor z = reshape(exp(x), {4, 9});
    cc::Compiled c = compile({y, z});
    ASSERT_EQ(c.plan.kernels(), 1u) << c.plan.str();
    int views = 0;
    for (const auto& g : c.plan.groups) {
        views += g.kind == cc::Group::Kind::View;
        if (g.kind != cc::Group::Kind::Kernel) continue;
        EXPECT_EQ(g.loads.size(), 4u) << "x through four index maps:\n" << c.plan.str();
        for (const auto& l : g.loads) EXPECT_TRUE(l.buffer->is(Op::Placeholder));
    }
    EXPECT_EQ(views, 1) << c.plan.str();
    expect_cpu_matches_reference({x}, {y, z}, {random_array(f64, {6, 6}, 25)});
}

// ---- layout (cpu backend: channel-blocked conv chains) ------------------------------------

namespace {
/// The reference interpreter computes conv sums in double and rounds once, so the blocked ops
/// give the values of the plain ones; reductions over the blocked tensor sum in another order
/// (in double too), which may move an f32 result by one ulp.
constexpr double kReorderedSum = 2.4e-7;

/// The cpu backend against the reference interpreter on an f32 graph with convolutions: oneDNN
/// accumulates them in f32 in its own order (the reference in double) and batch norm subtracts
/// nearly equal sums, so each output is compared against its own scale, to the 1e-4 that
/// tests/parity/CnnParityTest.cpp holds against PyTorch.
void expect_cpu_near_reference(const std::vector<Tensor>& ins, const std::vector<Tensor>& outs,
                               const std::vector<Array>& args) {
    auto got = eval_on("cpu", ins, outs, args);
    auto want = eval_on("reference", ins, outs, args);
    for (size_t i = 0; i < outs.size(); ++i) {
        ASSERT_EQ(got[i].shape(), want[i].shape());
        double scale = 0, err = 0;
        for (int64_t k = 0; k < want[i].size(); ++k) {
            scale = std::max(scale, std::fabs(want[i].at(k)));
            err = std::max(err, std::fabs(got[i].at(k) - want[i].at(k)));
        }
        EXPECT_LE(err, 1e-4 * scale + 1e-7) << "output " << i << " " << outs[i].name();
    }
}

/// The layout pass in AVX2's 8-channel blocks (the suite's runs use 16: tests/CMakeLists.txt).
std::vector<NodePtr> layout8(const std::vector<NodePtr>& roots, cc::RewriteStats* stats) {
    return cpu::layout(roots, 8, stats);
}

int64_t mask_of(const std::vector<Tensor>& outs, Op op) {
    std::vector<const Node*> rs;
    for (const auto& t : outs) rs.push_back(t.node().get());
    for (const Node* n : topo_order(rs))
        if (n->is(op)) return detail::blocked_mask(*n);
    return -1;
}
} // namespace

namespace {
/// h = relu(conv(x, w1) * s + 0.5) over 16 channels, from a 3-channel x; w2 [out, 16, 3, 3]
struct ConvChain {
    Placeholder x, w1, w2, s;
    Tensor h;
    explicit ConvChain(int64_t out)
        : x({2, 3, 6, 6}, f32, "x"), w1({16, 3, 3, 3}, f32, "w1"), w2({out, 16, 3, 3}, f32, "w2"),
          s({16}, f32, "s"), h(nn::relu(conv2d(x, w1, {}, "SAME") * reshape(s, {16, 1, 1}) + 0.5)) {
    }
};
} // namespace

//   conv(relu(conv(x, w1) * s + 0.5), w2)  ->  unblock(conv'(relu(conv'(x, w1) * s' + 0.5), w2))
// the elementwise ops run on the blocked tensor; one reorder is left, at the output; x keeps its
// 3 channels plain (oneDNN reads a plain source directly)
TEST(Layout, ConvChainStaysBlocked) {
    ChannelBlocks sixteen(16); // AVX-512's width on every machine (AVX2's: EightChannelBlocks)
    ConvChain c(32);
    auto& [x, w1, w2, s, h] = c;
    Tensor y = conv2d(h, w2, {}, "SAME");
    Rewritten r = run(cpu::layout, {y});
    EXPECT_EQ(count(r.outs, Op::BlockChannels), 0) << to_text(r.outs);
    EXPECT_EQ(count(r.outs, Op::UnblockChannels), 1) << to_text(r.outs);
    EXPECT_EQ(r[0].node()->op(), Op::UnblockChannels);
    EXPECT_EQ(r[0].node()->input(0)->shape(), (Shape{2, 2, 6, 6, 16}));
    EXPECT_EQ(mask_of(r.outs, Op::Conv), detail::kBlockedResult) << "first conv: x stays plain";
    std::vector<Array> args = {random_array(f32, {2, 3, 6, 6}, 1), random_array(f32, {16, 3, 3, 3}, 2),
                               random_array(f32, {32, 16, 3, 3}, 3), random_array(f32, {16}, 4)};
    expect_same_value({x, w1, w2, s}, {y}, r.outs, args);
    expect_cpu_near_reference({x, w1, w2, s}, {y}, args);
}

// batch-norm statistics: reduce(unblock(b), {0, 2, 3}) -> reduce(b, {0, 2, 3}) over the blocked
// tensor; the per-channel results stay plain (reshapes, no reorder) and the normalisation reads
// the blocked tensor; a dynamic batch carries through
TEST(Layout, BatchNormStatisticsReduceTheBlockedTensor) {
    Placeholder x({-1, 16, 5, 5}, f32, "x");
    Placeholder w({32, 16, 3, 3}, f32, "w");
    Tensor y = conv2d(x, w, {}, "SAME");
    Tensor mu = mean(y, {0, 2, 3}, true);
    Tensor v = var(y, {0, 2, 3}, true);
    Tensor out = (y - mu) * rsqrt(v + 1e-5);
    Tensor running = reshape(mu, {32});
    Rewritten r = run(cpu::layout, {out, running});
    EXPECT_EQ(count(r.outs, Op::BlockChannels), 1) << "x: the chain's input\n" << to_text(r.outs);
    EXPECT_EQ(count(r.outs, Op::UnblockChannels), 1) << to_text(r.outs);
    std::vector<const Node*> rs = {r[0].node().get(), r[1].node().get()};
    int reductions = 0;
    for (const Node* n : topo_order(rs))
        if (n->is(Op::ReduceSum) && n->input(0)->rank() == 5) ++reductions;
    EXPECT_GE(reductions, 2) << "mean and variance over the blocked tensor\n" << to_text(r.outs);
    std::vector<Array> args = {random_array(f32, {3, 16, 5, 5}, 5), random_array(f32, {32, 16, 3, 3}, 6)};
    expect_same_value({x, w}, {out, running}, r.outs, args, kReorderedSum);
    expect_cpu_near_reference({x, w}, {out, running}, args);
}

// an elementwise op with a full-size plain operand keeps the unblock before it: sinking would
// need a reorder of the other operand
TEST(Layout, PlainOperandStopsTheSinking) {
    Placeholder x({2, 16, 4, 4}, f32, "x");
    Placeholder w({16, 16, 1, 1}, f32, "w");
    Placeholder z({2, 16, 4, 4}, f32, "z");
    Tensor y = conv2d(x, w) + z;
    Rewritten r = run(cpu::layout, {y});
    EXPECT_EQ(r[0].node()->op(), Op::Add);
    EXPECT_EQ(count(r.outs, Op::UnblockChannels), 1) << to_text(r.outs);
    EXPECT_EQ(count(r.outs, Op::BlockChannels), 1) << "x only\n" << to_text(r.outs);
    std::vector<Array> args = {random_array(f32, {2, 16, 4, 4}, 7), random_array(f32, {16, 16, 1, 1}, 8),
                               random_array(f32, {2, 16, 4, 4}, 9)};
    expect_same_value({x, w, z}, {y}, r.outs, args);
}

// pools are blocked inside a blocked chain only (oneDNN pools a plain tensor as fast); channel
// counts that do not fill blocks leave the graph alone
TEST(Layout, PoolsJoinChainsAndPartialBlocksStayPlain) {
    ChannelBlocks sixteen(16); // AVX-512's width on every machine (AVX2's: EightChannelBlocks)
    Placeholder x({2, 16, 4, 4}, f32, "x");
    Placeholder w({16, 16, 3, 3}, f32, "w");
    Tensor plain_pool = max_pool2d(x, {2, 2});
    Rewritten r = run(cpu::layout, {plain_pool});
    EXPECT_EQ(r[0].node(), plain_pool.node()) << to_text(r.outs);

    Tensor chained = max_pool2d(conv2d(x, w, {}, "SAME"), {2, 2});
    Rewritten c = run(cpu::layout, {chained});
    EXPECT_EQ(mask_of(c.outs, Op::Pool), 1 | detail::kBlockedResult) << to_text(c.outs);
    EXPECT_EQ(count(c.outs, Op::UnblockChannels), 1);
    std::vector<Array> args = {random_array(f32, {2, 16, 4, 4}, 10), random_array(f32, {16, 16, 3, 3}, 11)};
    expect_same_value({x, w}, {chained}, c.outs, args);

    Placeholder x8({2, 8, 4, 4}, f32, "x8");
    Placeholder w8({8, 8, 3, 3}, f32, "w8");
    Tensor small = nn::relu(conv2d(x8, w8));
    Rewritten s = run(cpu::layout, {small});
    EXPECT_EQ(s[0].node(), small.node()) << to_text(s.outs);
    EXPECT_TRUE(s.stats.hits.empty());
}

// AVX2's width: the chain of ConvChainStaysBlocked in 8-channel blocks, the width in the conv's
// layout mask; a layer of 8 channels, plain in 16-channel blocks, is blocked too
TEST(Layout, EightChannelBlocks) {
    ConvChain c(24);
    auto& [x, w1, w2, s, h] = c;
    Tensor y = max_pool2d(conv2d(h, w2, {}, "SAME"), {2, 2});
    Rewritten r = run(layout8, {y});
    EXPECT_EQ(count(r.outs, Op::BlockChannels), 0) << to_text(r.outs);
    EXPECT_EQ(count(r.outs, Op::UnblockChannels), 1) << to_text(r.outs);
    EXPECT_EQ(r[0].node()->op(), Op::UnblockChannels);
    EXPECT_EQ(r[0].node()->input(0)->shape(), (Shape{2, 3, 3, 3, 8})) << to_text(r.outs);
    EXPECT_EQ(mask_of(r.outs, Op::Conv), detail::kBlockedResult | detail::block_bits(8));
    EXPECT_EQ(mask_of(r.outs, Op::Pool), 1 | detail::kBlockedResult | detail::block_bits(8));
    std::vector<Array> args = {random_array(f32, {2, 3, 6, 6}, 41),
                               random_array(f32, {16, 3, 3, 3}, 42),
                               random_array(f32, {24, 16, 3, 3}, 43), random_array(f32, {16}, 44)};
    expect_same_value({x, w1, w2, s}, {y}, r.outs, args);
    {
        ChannelBlocks eight(8);
        expect_cpu_near_reference({x, w1, w2, s}, {y}, args);
    }

    Placeholder x8({2, 8, 4, 4}, f32, "x8");
    Placeholder w8({8, 8, 3, 3}, f32, "w8");
    Tensor small = nn::relu(conv2d(x8, w8));
    Rewritten b = run(layout8, {small});
    EXPECT_EQ(count(b.outs, Op::BlockChannels), 1) << to_text(b.outs);
    EXPECT_EQ(b[0].node()->op(), Op::UnblockChannels) << to_text(b.outs);
    expect_same_value({x8, w8}, {small}, b.outs,
                      {random_array(f32, {2, 8, 4, 4}, 45), random_array(f32, {8, 8, 3, 3}, 46)});
}

// blocked tensors of two widths never meet in one op (the pass sinks an unblock only past
// operands of its own width), and a width other than 8 or 16 is refused
TEST(Layout, BlockWidthsDoNotMix) {
    Placeholder a({2, 2, 4, 4, 8}, f32, "a");
    Placeholder b({2, 1, 4, 4, 16}, f32, "b");
    Tensor y = unblock_channels(a) + unblock_channels(b);
    for (PassFn pass : {layout8, static_cast<PassFn>(cpu::layout)}) {
        Rewritten r = run(pass, {y});
        EXPECT_EQ(r[0].node()->op(), Op::Add) << to_text(r.outs);
        EXPECT_EQ(count(r.outs, Op::UnblockChannels), 2) << to_text(r.outs);
        expect_same_value(
            {a, b}, {y}, r.outs,
            {random_array(f32, {2, 2, 4, 4, 8}, 47), random_array(f32, {2, 1, 4, 4, 16}, 48)});
    }
    Placeholder x({2, 16, 4, 4}, f32, "x");
    EXPECT_THROW(block_channels(x, 4), Error);
    Placeholder c({2, 4, 4, 4, 4}, f32, "c");
    EXPECT_THROW(unblock_channels(c), ShapeError);
}

namespace {
// a whole training step (conv-BN-ReLU-pool, dropout, residual blocks, global average pool, dense;
// loss and every gradient) on the cpu backend with the layout pass against the reference
// interpreter on the user's graph; `batch`: the placeholders' batch dim (-1: dynamic)
void cnn_train_step_matches_reference(int64_t block, int64_t batch = -1) {
    Scope scope("layout_cnn");
    nn::Sequential net;
    const nn::ConvOptions same{.padding = "SAME", .bias = false};
    net.add(nn::Conv2D(3, 16, 3, same)).add(nn::BatchNorm(16)).add(nn::ReLU()).add(nn::MaxPool2D({2, 2}));
    // a dropout mask drawn over the blocked tensor (philox_bits' blocked draw): the same bits
    // per element as the reference's, or the values below differ
    net.add(nn::Dropout(0.25));
    net.add(nn::ResidualBlock(16, 32, {.stride = 2})).add(nn::ResidualBlock(32, 32));
    net.add(nn::AvgPool2D({2, 2})).add(nn::GlobalAvgPool()).add(nn::Dense(32, 10));
    Placeholder x({batch, 3, 12, 12}, f32, "images");
    Placeholder y({batch}, i32, "labels");
    Tensor loss = mean(nn::losses::sparse_softmax_crossentropy_logits(y, net(x, nn::Mode::Train)));
    std::vector<Tensor> outs = {loss};
    std::vector<Tensor> params;
    for (const auto& v : net.trainable_variables()) params.push_back(v);
    for (const Tensor& g : gradients(loss, params)) outs.push_back(g);

    cc::Compiled c = compile(outs);
    int reorders = 0;
    for (const auto& g : c.plan.groups)
        for (const auto& root : g.roots)
            reorders += root->is(Op::BlockChannels) || root->is(Op::UnblockChannels);
    // the global pool's [N, C] result is the blocked [N, C / B, B] reshaped, and its gradient
    // spreads back over the blocked tensor: no reorder anywhere (the input has 3 channels)
    EXPECT_EQ(reorders, 0) << c.plan.str();
    int widths = 0;
    for (const Node* n : topo_order({c.roots[0].get()}))
        widths += n->is(Op::Conv) && detail::block_width(detail::blocked_mask(*n)) == block;
    EXPECT_GE(widths, 1) << "block " << block << "\n" << c.plan.str();

    Array xv = random_array(f32, {4, 3, 12, 12}, 12);
    Array yv(i32, {4});
    for (int i = 0; i < 4; ++i) yv.data<int32_t>()[i] = (i * 7) % 10;
    expect_cpu_near_reference({x, y}, outs, {xv, yv});
}
} // namespace

TEST(Layout, CnnTrainStepMatchesReference) {
    ChannelBlocks sixteen(16);
    cnn_train_step_matches_reference(16);
}

TEST(Layout, CnnTrainStepMatchesReferenceInEightChannelBlocks) {
    ChannelBlocks eight(8);
    cnn_train_step_matches_reference(8);
}

// With a static batch autodiff spreads a reduction's gradient by a broadcast without `like`
// (batch norm's mean and variance): until 2026-12-05 the pass left those plain, and the
// backward pass unblocked and reblocked every batch-norm layer's tensors (the SymJAX paper
// network's step: 23 more library calls, 1.2x slower; docs/performance.md, "A static batch")
TEST(Layout, CnnTrainStepWithAStaticBatchStaysBlocked) {
    ChannelBlocks sixteen(16);
    cnn_train_step_matches_reference(16, 4);
}

// ---- epilogue fusion (oneDNN post-ops; Note [Epilogue fusion] in src/compiler/Fusion.cpp) ----

namespace {
const cc::Group* library_group(const cc::FusionPlan& p, Op op) {
    for (const auto& g : p.groups)
        if ((g.kind == cc::Group::Kind::Window || g.kind == cc::Group::Kind::Dot) && g.roots[0]->is(op))
            return &g;
    return nullptr;
}
std::string post_ops(const cc::Group& g) {
    std::string s;
    for (const auto& p : g.epilogue) s += (s.empty() ? "" : " ") + p.str();
    return s;
}
/// Eval-mode batch norm over [N, C, H, W]: per-channel affine with the running statistics.
Tensor bn_eval(const Tensor& y, const Tensor& mean, const Tensor& var, const Tensor& gamma,
               const Tensor& beta, int64_t c) {
    auto ch = [&](const Tensor& v) { return reshape(v, {c, 1, 1}); };
    return (y - ch(mean)) * rsqrt(ch(var) + 1e-5) * ch(gamma) + ch(beta);
}
Array positive(Shape s, uint64_t seed) { // variances
    Array a = random_array(f32, s, seed);
    for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = std::fabs(a.data<float>()[i]) + 0.5f;
    return a;
}
} // namespace

//   relu(conv(x, w) + b[C])  ->  one conv call with post-ops add[channel] relu; no kernel
TEST(Epilogue, ConvBiasReluIsOneCall) {
    ChannelBlocks sixteen(16); // AVX-512's width on every machine (AVX2's: EightChannelBlocks)
    Placeholder x({2, 3, 7, 7}, f32, "x");
    Placeholder w({8, 3, 3, 3}, f32, "w");
    Placeholder b({8}, f32, "b");
    Tensor y = nn::relu(conv2d(x, w, {}, "SAME") + reshape(b, {8, 1, 1}));
    cc::Compiled c = compile({y});
    EXPECT_EQ(c.plan.kernels(), 0u) << c.plan.str();
    const cc::Group* g = library_group(c.plan, Op::Conv);
    ASSERT_TRUE(g) << c.plan.str();
    EXPECT_EQ(post_ops(*g), "add[channel] relu") << c.plan.str();
    EXPECT_EQ(g->result(0), c.roots[0]); // y, with its constant merged
    EXPECT_TRUE(has_decision(c.plan, "epilogue of conv")) << c.plan.str();
    std::vector<Array> args = {random_array(f32, {2, 3, 7, 7}, 31), random_array(f32, {8, 3, 3, 3}, 32),
                               random_array(f32, {8}, 33)};
    expect_cpu_near_reference({x, w, b}, {y}, args);
}

// conv -> eval batch norm -> relu, plain (3, 8 channels) and channel-blocked (16, 32: the
// operands are [1, C/16, 1, 1, 16] reshapes after the layout pass); a dynamic batch
TEST(Epilogue, ConvEvalBatchNormReluPlainAndBlocked) {
    ChannelBlocks sixteen(16); // AVX-512's width on every machine (AVX2's: EightChannelBlocks)
    for (int64_t ch : {3, 8, 16, 32}) {
        SCOPED_TRACE("channels " + std::to_string(ch));
        Placeholder x({-1, 4, 6, 6}, f32, "x");
        Placeholder w({ch, 4, 3, 3}, f32, "w");
        Placeholder m({ch}, f32, "mean"), v({ch}, f32, "var"), ga({ch}, f32, "gamma"), be({ch}, f32, "beta");
        Tensor y = nn::relu(bn_eval(conv2d(x, w, {}, "SAME"), m, v, ga, be, ch));
        cc::Compiled c = compile({y});
        const cc::Group* g = library_group(c.plan, Op::Conv);
        ASSERT_TRUE(g) << c.plan.str();
        EXPECT_EQ(post_ops(*g), "sub[channel] mul[channel] mul[channel] add[channel] relu") << c.plan.str();
        bool blocked = detail::blocked_mask(*g->roots[0]) & detail::kBlockedResult;
        EXPECT_EQ(blocked, ch % 16 == 0) << c.plan.str();
        // the one kernel left computes rsqrt(var + eps) over [C, 1, 1], not over the image
        ASSERT_EQ(c.plan.kernels(), 1u) << c.plan.str();
        for (const auto& k : c.plan.groups)
            if (k.kind == cc::Group::Kind::Kernel) EXPECT_EQ(numel(k.space->shape()), ch) << c.plan.str();
        std::vector<Array> args = {random_array(f32, {3, 4, 6, 6}, 40), random_array(f32, {ch, 4, 3, 3}, 41),
                                   random_array(f32, {ch}, 42), positive({ch}, 43),
                                   random_array(f32, {ch}, 44), random_array(f32, {ch}, 45)};
        expect_cpu_near_reference({x, w, m, v, ga, be}, {y}, args);
        // an empty batch: no primitive; the reference kernels run the conv and its epilogue
        args[0] = random_array(f32, {0, 4, 6, 6}, 46);
        expect_cpu_near_reference({x, w, m, v, ga, be}, {y}, args);
    }
}

// an inference conv -> batch norm keeps its folded weights between calls while the weights
// and the statistics are the same bytes (Note [Folded weights cache] in Conv.cpp): a repeated
// call reuses them and gives the same bits; a changed weight, a changed variance and a
// return to the first values each make them again, and every result matches the reference
TEST(Epilogue, FoldedWeightsAreKeptWhileTheirSourceIsUnchanged) {
    for (int64_t ch : {8, 32}) { // plain, and blocked by the layout pass (16)
        SCOPED_TRACE("channels " + std::to_string(ch));
        Placeholder x({-1, 4, 6, 6}, f32, "x");
        Placeholder w({ch, 4, 3, 3}, f32, "w");
        Placeholder m({ch}, f32, "mean"), v({ch}, f32, "var"), ga({ch}, f32, "gamma"),
            be({ch}, f32, "beta");
        Tensor y = nn::relu(bn_eval(conv2d(x, w, {}, "SAME"), m, v, ga, be, ch));
        Function cpu_f = function({x, w, m, v, ga, be}, {y}, {}, on("cpu"));
        Function ref_f = function({x, w, m, v, ga, be}, {y}, {}, on("reference"));
        std::vector<Array> args = {
            random_array(f32, {2, 4, 6, 6}, 50), random_array(f32, {ch, 4, 3, 3}, 51),
            random_array(f32, {ch}, 52),         positive({ch}, 53),
            random_array(f32, {ch}, 54),         random_array(f32, {ch}, 55)};
        auto run = [&](const char* what, size_t hits, size_t misses) {
            SCOPED_TRACE(what);
            std::vector<Function::Arg> a(args.begin(), args.end());
            const auto before = cpu::window_cache_stats();
            Array got = cpu_f.call(a)[0];
            const auto after = cpu::window_cache_stats();
            EXPECT_EQ(after.folded_hits - before.folded_hits, hits);
            EXPECT_EQ(after.folded_misses - before.folded_misses, misses);
            Array want = ref_f.call(a)[0];
            double scale = 0, err = 0;
            for (int64_t k = 0; k < want.size(); ++k) {
                scale = std::max(scale, std::fabs(want.at(k)));
                err = std::max(err, std::fabs(got.at(k) - want.at(k)));
            }
            EXPECT_LE(err, 1e-4 * scale + 1e-7);
            return got;
        };
        Array first = run("first call", 0, 1);
        Array again = run("same values", 1, 0);
        EXPECT_EQ(std::memcmp(first.raw(), again.raw(), size_t(first.nbytes())), 0);
        Array w0 = args[1].clone(), v0 = args[3].clone();
        args[1].data<float>()[5] += 0.25f; // one weight of one output channel
        run("one weight changed", 0, 1);
        args[1] = w0;
        args[3].data<float>()[ch - 1] *= 2; // the last channel's variance
        run("one variance changed", 0, 1);
        args[3] = v0;
        Array back = run("the first values again", 0, 1);
        EXPECT_EQ(std::memcmp(first.raw(), back.raw(), size_t(first.nbytes())), 0);
        run("and again", 1, 0);
    }
}

// nn::leaky_relu is where(x >= 0, x, x * s): three readers of x that are one relu post-op with
// slope s; a scalar affine step is eltwise linear
TEST(Epilogue, LeakyReluAndScalarAffine) {
    Placeholder x({2, 16, 5, 5}, f32, "x");
    Placeholder w({16, 16, 3, 3}, f32, "w");
    Placeholder b({16}, f32, "b");
    Tensor y = nn::leaky_relu((conv2d(x, w, {}, "SAME") + reshape(b, {16, 1, 1})) * 0.5 - 0.25, 0.1);
    cc::Compiled c = compile({y});
    EXPECT_EQ(c.plan.kernels(), 0u) << c.plan.str();
    const cc::Group* g = library_group(c.plan, Op::Conv);
    ASSERT_TRUE(g) << c.plan.str();
    ASSERT_EQ(g->epilogue.size(), 3u) << c.plan.str();
    EXPECT_EQ(g->epilogue[1].kind, cc::PostOp::Kind::Linear) << "* 0.5 - 0.25 as one step";
    EXPECT_EQ(g->epilogue[1].alpha, 0.5);
    EXPECT_EQ(g->epilogue[1].beta, -0.25);
    EXPECT_EQ(g->epilogue[2].kind, cc::PostOp::Kind::Relu);
    EXPECT_FLOAT_EQ(float(g->epilogue[2].alpha), 0.1f);
    EXPECT_TRUE(g->result(0)->is(Op::Where)) << "the leaky relu's value is the call's";
    std::vector<Array> args = {random_array(f32, {2, 16, 5, 5}, 50), random_array(f32, {16, 16, 3, 3}, 51),
                               random_array(f32, {16}, 52)};
    expect_cpu_near_reference({x, w, b}, {y}, args);
}

// a relu select whose input has a third reader keeps that input: the post-ops never write it. In
// channel blocks the function's output a is unblock(a), not a itself, so the "function output"
// stop does not see it. Before the readers were counted, the relu post-op left unblock(a) or
// exp(a) reading a buffer nobody wrote (a segfault on AVX2 machines, whose blocks are 8 wide).
TEST(Epilogue, ReluSelectWithAThirdReaderKeepsItsInput) {
    for (int64_t block : {int64_t(0), int64_t(8), int64_t(16)}) {
        SCOPED_TRACE("channel block " + std::to_string(block));
        ChannelBlocks blocks(block);
        Placeholder x({2, 16, 5, 5}, f32, "x");
        Placeholder w({16, 16, 3, 3}, f32, "w");
        Placeholder b({16}, f32, "b");
        Tensor a = conv2d(x, w, {}, "SAME") + reshape(b, {16, 1, 1});
        std::vector<Array> args = {random_array(f32, {2, 16, 5, 5}, 64),
                                   random_array(f32, {16, 16, 3, 3}, 65),
                                   random_array(f32, {16}, 66)};
        // a read by the select's compare and where, and by unblock(a) (blocked) or exp (any layout)
        for (const std::vector<Tensor>& outs :
             {std::vector<Tensor>{a, nn::relu(a)}, std::vector<Tensor>{nn::relu(a), exp(a)}}) {
            cc::Compiled c = compile(outs);
            const cc::Group* g = library_group(c.plan, Op::Conv);
            ASSERT_TRUE(g) << c.plan.str();
            EXPECT_EQ(post_ops(*g), "add[channel]") << c.plan.str();
            expect_cpu_near_reference({x, w, b}, outs, args);
        }
    }
}

// the epilogue stops where the graph needs a value the call would no longer write: the conv
// result also read by a reduction (no epilogue at all), an operand of full size (the bias
// folds, the product with z and the relu stay in a kernel), the chain's value a function output
TEST(Epilogue, StopsAtOtherReadersAndFullSizeOperands) {
    // the plain graph's stops (in blocks: ReluSelectWithAThirdReaderKeepsItsInput)
    ChannelBlocks plain(0);
    Placeholder x({2, 8, 5, 5}, f32, "x");
    Placeholder w({8, 8, 3, 3}, f32, "w");
    Placeholder b({8}, f32, "b");
    Placeholder z({2, 8, 5, 5}, f32, "z");
    std::vector<Array> args = {random_array(f32, {2, 8, 5, 5}, 60), random_array(f32, {8, 8, 3, 3}, 61),
                               random_array(f32, {8}, 62), random_array(f32, {2, 8, 5, 5}, 63)};
    Tensor y = conv2d(x, w, {}, "SAME");
    std::vector<Tensor> shared = {nn::relu(y + reshape(b, {8, 1, 1})), sum(y, {0, 2, 3})};
    cc::Compiled s = compile(shared);
    ASSERT_TRUE(library_group(s.plan, Op::Conv));
    EXPECT_TRUE(library_group(s.plan, Op::Conv)->epilogue.empty()) << s.plan.str();
    EXPECT_TRUE(has_decision(s.plan, "no epilogue for conv")) << s.plan.str();
    EXPECT_TRUE(has_decision(s.plan, "read by 2 ops")) << s.plan.str();
    expect_cpu_near_reference({x, w, b, z}, shared, args);

    Tensor a = y + reshape(b, {8, 1, 1});
    std::vector<Tensor> full = {nn::relu(a * z)};
    cc::Compiled f = compile(full);
    ASSERT_TRUE(library_group(f.plan, Op::Conv)) << f.plan.str();
    EXPECT_EQ(post_ops(*library_group(f.plan, Op::Conv)), "add[channel]") << f.plan.str();
    EXPECT_TRUE(has_decision(f.plan, "is not per-channel")) << f.plan.str();
    EXPECT_EQ(f.plan.kernels(), 1u) << f.plan.str();
    expect_cpu_near_reference({x, w, b, z}, full, args);

    std::vector<Tensor> out = {a, nn::relu(a)};
    cc::Compiled o = compile(out);
    ASSERT_TRUE(library_group(o.plan, Op::Conv)) << o.plan.str();
    EXPECT_EQ(post_ops(*library_group(o.plan, Op::Conv)), "add[channel]") << o.plan.str();
    EXPECT_TRUE(has_decision(o.plan, "is a function output")) << o.plan.str();
    expect_cpu_near_reference({x, w, b, z}, out, args);
}

//   min(relu(x @ W * 2 + b[F]), 6)  ->  one matmul call: linear add[channel] relu min[1]
TEST(Epilogue, MatmulBiasReluIsOneCall) {
    Placeholder x({-1, 12}, f32, "x");
    Placeholder w({12, 7}, f32, "w");
    Placeholder b({7}, f32, "b");
    Tensor y = minimum(nn::relu(matmul(x, w) * 2.0 + b), 6.0);
    cc::Compiled c = compile({y});
    EXPECT_EQ(c.plan.kernels(), 0u) << c.plan.str();
    const cc::Group* g = library_group(c.plan, Op::DotGeneral);
    ASSERT_TRUE(g) << c.plan.str();
    EXPECT_EQ(post_ops(*g), "linear(2, 0) add[channel] relu min[1]") << c.plan.str();
    Function f = function({x, w, b}, {y}, {}, on("cpu"));
    EXPECT_EQ(f.stats().post_ops, 4u);
    EXPECT_EQ(f.stats().kernels, 0u);
    EXPECT_EQ(f.stats().library_calls, 1u);
    for (int64_t n : {5, 0}) { // an empty batch: the epilogue runs on the reference kernels
        std::vector<Array> args = {random_array(f32, {n, 12}, 70), random_array(f32, {12, 7}, 71),
                                   random_array(f32, {7}, 72)};
        expect_cpu_near_reference({x, w, b}, {y}, args);
    }
    // f64 products take our own loop: no post-ops
    Placeholder xd({5, 12}, f64, "xd"), wd({12, 7}, f64, "wd"), bd({7}, f64, "bd");
    cc::Compiled d = compile({nn::relu(matmul(xd, wd) + bd)});
    EXPECT_EQ(d.plan.post_ops(), 0u) << d.plan.str();
}

// a dense network's training step: the logits' bias add folds into its matmul (the loss reads
// only the sum), and so do the hidden layer's bias and relu (relu's gradient reads its output,
// Note [Relu masks]); every gradient still matches the reference
TEST(Epilogue, MatmulBiasInATrainingStep) {
    Placeholder x({-1, 20}, f32, "x");
    Placeholder y({-1}, i32, "labels");
    Placeholder w1({20, 16}, f32, "w1"), b1({16}, f32, "b1"), w2({16, 10}, f32, "w2"), b2({10}, f32, "b2");
    Tensor logits = matmul(nn::relu(matmul(x, w1) + b1), w2) + b2;
    Tensor loss = mean(nn::losses::sparse_softmax_crossentropy_logits(y, logits));
    std::vector<Tensor> outs = {loss};
    for (const Tensor& g : gradients(loss, {w1, b1, w2, b2})) outs.push_back(g);
    cc::Compiled c = compile(outs);
    int folded = 0, hidden = 0;
    for (const auto& g : c.plan.groups) {
        folded += post_ops(g) == "add[channel]";
        hidden += post_ops(g) == "add[channel] relu";
    }
    EXPECT_EQ(folded, 1) << c.plan.str();
    EXPECT_EQ(hidden, 1) << c.plan.str();
    Array yv(i32, {6});
    for (int i = 0; i < 6; ++i) yv.data<int32_t>()[i] = (i * 3) % 10;
    expect_cpu_near_reference({x, y, w1, b1, w2, b2}, outs,
                              {random_array(f32, {6, 20}, 80), yv, random_array(f32, {20, 16}, 81),
                               random_array(f32, {16}, 82), random_array(f32, {16, 10}, 83),
                               random_array(f32, {10}, 84)});
}

// Note [Accumulating post-op]: y + d * k after a matmul becomes its sum post-op. SGD momentum's
// velocity update writes into the velocity's own buffer (in place: ExecPlan.MatmulAccumulates
// IntoItsVariableInPlace); a residual that dies at the
// matmul lends it its buffer; one still needed later is copied; a long contraction (fixed pieces,
// no epilogue) runs the epilogue's reference kernels. Every value matches the reference.
TEST(Epilogue, SumPostOpAccumulatesIntoItsOperand) {
    // momentum: three steps on cpu and on the reference interpreter, from the same values
    auto train = [](const char* backend) {
        Placeholder x({6, 20}, f32, "x");
        Variable w(random_array(f32, {20, 16}, 101), "w"), v(random_array(f32, {20, 16}, 102), "v");
        Tensor g = gradients(sum(tanh(matmul(x, w))), {w})[0];
        Tensor v2 = v * 0.9 + g;
        Updates u;
        u.add(v, v2);
        u.add(w, w - 0.01 * v2);
        Function f = function({x}, {}, u, on(backend));
        for (int i = 0; i < 3; ++i)
            f(random_array(f32, {6, 20}, 110 + uint64_t(i)));
        return std::make_tuple(w.value(), v.value(), f.dump());
    };
    auto [wc, vc, dump] = train("cpu");
    auto [wr, vr, unused] = train("reference");
    EXPECT_NE(dump.find("sum(0.9)"), std::string::npos) << dump;
    sj::test::expect_close(wc, wr, 1e-5, 1e-5, "w"); // f32 sums in different orders
    sj::test::expect_close(vc, vr, 1e-5, 1e-5, "v");
    // residuals: tanh(r) dies at the matmul (its buffer is lent), t * 2 is also an output (copied)
    Placeholder x({6, 20}, f32, "x"), w({20, 16}, f32, "w"), r({6, 16}, f32, "r");
    Tensor t = sin(r);
    // (and a sum of two matmuls, which only the first one's epilogue takes)
    std::vector<Tensor> outs = {matmul(x, w) + tanh(r), matmul(cos(x), w) + t * 2.0, t,
                                matmul(exp(x), w) + matmul(sin(x), w)};
    cc::Compiled c = compile(outs);
    int sums = 0;
    for (const auto& g : c.plan.groups)
        sums += post_ops(g) == "sum(1)" || post_ops(g) == "sum(2)";
    EXPECT_EQ(sums, 3) << c.plan.str();
    expect_cpu_near_reference({x, w, r}, outs,
                              {random_array(f32, {6, 20}, 103), random_array(f32, {20, 16}, 104),
                               random_array(f32, {6, 16}, 105)});
    // a long contraction into a small result runs in fixed pieces, which take no post-ops
    Placeholder a({4, 3000}, f32, "a"), b({3000, 8}, f32, "b"), d({4, 8}, f32, "d");
    Tensor y = matmul(a, b) + exp(d) * 0.5;
    expect_cpu_near_reference({a, b, d}, {y},
                              {random_array(f32, {4, 3000}, 106), random_array(f32, {3000, 8}, 107),
                               random_array(f32, {4, 8}, 108)});
}

// A sum post-op's operand that is also the call's own operand (a x + a, a read as the lhs) dies
// at the call, but the call must not write into it: the product would read rows it has already
// overwritten (cpu gave 195.2 where the reference gave 1.55, FuzzFusion seed 606262). The
// result goes to a copy of a. Conv: the same with the convolution's source.
TEST(Epilogue, SumPostOpNeverWritesIntoTheCallsOwnOperand) {
    Placeholder x({33, 9}, f32, "x");
    Tensor a = matmul(x, transpose(tanh(x), {1, 0})); // [33, 33], read by the three ops below
    Tensor y = matmul(a, transpose(tanh(a), {1, 0})) + a;
    cc::Compiled c = compile({y});
    int sums = 0;
    for (const auto& g : c.plan.groups)
        sums += post_ops(g) == "sum(1)";
    EXPECT_EQ(sums, 1) << c.plan.str();
    expect_cpu_near_reference({x}, {y}, {random_array(f32, {33, 9}, 130)});
    Placeholder im({2, 16, 8, 8}, f32, "im"), w({16, 16, 3, 3}, f32, "w");
    Tensor h = conv2d(im * 2.0, w, {}, "SAME");
    Tensor z = conv2d(h, w, {}, "SAME") + h;
    expect_cpu_near_reference(
        {im, w}, {z},
        {random_array(f32, {2, 16, 8, 8}, 131), random_array(f32, {16, 16, 3, 3}, 132)});
}

// residual blocks in eval mode: relu(conv(y) + h) with h a blocked convolution's result takes
// the add as a sum post-op (blocked h dies there and lends its buffer; the plain h returned is
// its unblocked copy); relu(bn(conv(h)) + x) with x the plain input adds after the unblock,
// in a kernel (x is not in the call's layout)
TEST(Epilogue, ConvResidualIsASumPostOp) {
    Placeholder x({2, 16, 8, 8}, f32, "x");
    Placeholder w1({16, 16, 3, 3}, f32, "w1"), w2({16, 16, 3, 3}, f32, "w2");
    Placeholder m({16}, f32, "m"), v({16}, f32, "v"), ga({16}, f32, "ga"), be({16}, f32, "be");
    Tensor h = nn::relu(bn_eval(conv2d(x, w1, {}, "SAME"), m, v, ga, be, 16));
    Tensor y = nn::relu(bn_eval(conv2d(h, w2, {}, "SAME"), m, v, ga, be, 16) + x);
    Tensor z = nn::relu(conv2d(y, w1, {}, "SAME") + h);
    cc::Compiled c = compile({y, z, h});
    int sums = 0;
    for (const auto& g : c.plan.groups)
        sums += post_ops(g) == "sum(1) relu";
    EXPECT_EQ(sums, 1) << c.plan.str();
    expect_cpu_near_reference(
        {x, w1, w2, m, v, ga, be}, {y, z, h},
        {random_array(f32, {2, 16, 8, 8}, 120), random_array(f32, {16, 16, 3, 3}, 121),
         random_array(f32, {16, 16, 3, 3}, 122), random_array(f32, {16}, 123), positive({16}, 124),
         random_array(f32, {16}, 125), random_array(f32, {16}, 126)});
}

// the epilogue's ops leave the kernel list: two conv-BN-relu blocks keep one kernel (the
// per-channel rsqrt of both, merged), where each block's epilogue was a kernel of its own over
// the whole image; no kernel reads an intermediate value of an epilogue
TEST(Epilogue, OpsLeaveTheKernelList) {
    Placeholder x({2, 3, 8, 8}, f32, "x");
    Placeholder w1({16, 3, 3, 3}, f32, "w1"), w2({16, 16, 3, 3}, f32, "w2");
    Placeholder m({16}, f32, "m"), v({16}, f32, "v"), ga({16}, f32, "ga"), be({16}, f32, "be");
    Tensor h = nn::relu(bn_eval(conv2d(x, w1, {}, "SAME"), m, v, ga, be, 16));
    Tensor y = nn::relu(bn_eval(conv2d(h, w2, {}, "SAME"), m, v, ga, be, 16));
    cc::Compiled c = compile({y});
    EXPECT_EQ(c.plan.kernels(), 1u) << c.plan.str();
    EXPECT_EQ(c.plan.post_ops(), 10u) << c.plan.str();
    std::set<const Node*> inner;
    for (const auto& g : c.plan.groups)
        for (size_t i = 0; i + 1 < g.epilogue.size(); ++i) inner.insert(g.epilogue[i].node.get());
    for (const auto& g : c.plan.groups)
        if (g.kind == cc::Group::Kind::Kernel) {
            for (const auto& r : g.roots) EXPECT_FALSE(inner.count(r.get())) << c.plan.str();
            for (const auto& l : g.loads) EXPECT_FALSE(inner.count(l.buffer.get())) << c.plan.str();
        }
    Function f = function({x, w1, w2, m, v, ga, be}, {y}, {}, on("cpu"));
    EXPECT_EQ(f.stats().kernels, c.plan.kernels());
    EXPECT_EQ(f.stats().post_ops, 10u);
    EXPECT_NE(f.dump().find("post-ops: sub[channel]"), std::string::npos) << f.dump();
    expect_cpu_near_reference({x, w1, w2, m, v, ga, be}, {y},
                              {random_array(f32, {2, 3, 8, 8}, 90), random_array(f32, {16, 3, 3, 3}, 91),
                               random_array(f32, {16, 16, 3, 3}, 92), random_array(f32, {16}, 93),
                               positive({16}, 94), random_array(f32, {16}, 95), random_array(f32, {16}, 96)});
}
// oneDNN 2.6's jit convolution applies one parameter set per eltwise algorithm of a chain (a
// relu after a leaky relu ran as a leaky relu, a second linear as the first): consecutive
// scalar affine steps compose into one linear post-op, and a later relu or linear with other
// parameters ends the epilogue
TEST(Epilogue, OneParameterSetPerEltwiseKind) {
    Placeholder x({2, 16, 5, 5}, f32, "x");
    Placeholder w({16, 16, 3, 3}, f32, "w");
    Placeholder b({16}, f32, "b");
    std::vector<Array> args = {random_array(f32, {2, 16, 5, 5}, 53), random_array(f32, {16, 16, 3, 3}, 54),
                               random_array(f32, {16}, 55)};
    Tensor c = conv2d(x, w, {}, "SAME");
    Tensor bias = reshape(b, {16, 1, 1});
    struct Case {
        Tensor y;
        std::string post_ops;
    };
    for (const Case& k : {Case{c * 0.5 - 0.25, "linear(0.5, -0.25)"},
                          Case{nn::relu((c * 0.5 + bias) * 2.0), "linear(0.5, 0) add[channel]"},
                          Case{nn::relu(nn::leaky_relu(c, 0.1) + bias), "relu(0.1) add[channel]"},
                          Case{nn::relu(c * 0.5) * 0.5, "linear(0.5, 0) relu linear(0.5, 0)"}}) {
        SCOPED_TRACE(k.post_ops);
        cc::Compiled p = compile({k.y});
        EXPECT_EQ(post_ops(*library_group(p.plan, Op::Conv)), k.post_ops) << p.plan.str();
        expect_cpu_near_reference({x, w, b}, {k.y}, args);
    }
}

// the nn layers as a user writes them: Conv2D (with bias) - BatchNorm - LeakyReLU in eval mode
// is one conv call per block, the dense head one matmul with its bias; in train mode batch
// norm's statistics read the conv result: a conv keeps at most its own bias add
TEST(Epilogue, NnConvBlocksInEvalMode) {
    Scope scope("epilogue_nn");
    nn::Sequential net;
    net.add(nn::Conv2D(3, 16, 3, {.padding = "SAME"})).add(nn::BatchNorm(16)).add(nn::LeakyReLU(0.2));
    net.add(nn::Conv2D(16, 8, 3, {.padding = "SAME", .bias = false})).add(nn::BatchNorm(8)).add(nn::ReLU());
    net.add(nn::GlobalAvgPool()).add(nn::Dense(8, 4));
    Placeholder x({-1, 3, 6, 6}, f32, "images");
    Tensor eval = net(x, nn::Mode::Eval);
    cc::Compiled c = compile({eval});
    std::vector<std::string> chains;
    for (const auto& g : c.plan.groups)
        if (!g.epilogue.empty()) chains.push_back(g.roots[0]->op() == Op::Conv ? "conv" : "dot");
    EXPECT_EQ(chains, (std::vector<std::string>{"conv", "conv", "dot"})) << c.plan.str();
    EXPECT_TRUE(has_decision(c.plan, "relu(0.2)")) << c.plan.str();
    expect_cpu_near_reference({x}, {eval}, {random_array(f32, {2, 3, 6, 6}, 97)});

    Tensor train = net(x, nn::Mode::Train);
    cc::Compiled t = compile({train});
    for (const auto& g : t.plan.groups)
        if (g.kind == cc::Group::Kind::Window)
            EXPECT_TRUE(g.epilogue.empty() || post_ops(g) == "add[channel]") << t.plan.str();
    // the bias stops where the statistics read the conv's result: sum(x), and x - mean (two
    // ops) or, where the target sums the variance in one pass, cast(x) for the f64 sums too
    EXPECT_TRUE(has_decision(t.plan, "stops: read by 2 ops") ||
                has_decision(t.plan, "stops: read by 3 ops"))
        << t.plan.str();
}

// the leading affine steps become the call's bias and per-output-channel weight scales, folded
// on every call from the operands' current values (Note [Affine prefix] in Dnnl.cpp): new
// statistics through the cached primitive, a grouped conv (the weights' rows are output channels), and a
// scalar variable operand
TEST(Epilogue, AffinePrefixFollowsItsOperands) {
    Placeholder x({2, 8, 6, 6}, f32, "x");
    Placeholder w({16, 4, 3, 3}, f32, "w");
    Placeholder m({16}, f32, "m"), v({16}, f32, "v"), ga({16}, f32, "ga"), be({16}, f32, "be");
    Placeholder k({}, f32, "k");
    Tensor y = nn::relu(bn_eval(conv2d(x, w, {}, "SAME", {}, 2), m, v, ga, be, 16) * k);
    cc::Compiled c = compile({y});
    EXPECT_EQ(post_ops(*library_group(c.plan, Op::Conv)),
              "sub[channel] mul[channel] mul[channel] add[channel] mul[1] relu")
        << c.plan.str();
    for (uint64_t seed : {100, 200}) {
        std::vector<Array> args = {random_array(f32, {2, 8, 6, 6}, seed), random_array(f32, {16, 4, 3, 3}, seed + 1),
                                   random_array(f32, {16}, seed + 2), positive({16}, seed + 3),
                                   random_array(f32, {16}, seed + 4), random_array(f32, {16}, seed + 5),
                                   positive({}, seed + 6)};
        expect_cpu_near_reference({x, w, m, v, ga, be, k}, {y}, args);
    }
}
