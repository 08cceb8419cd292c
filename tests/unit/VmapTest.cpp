// vmap: every batching rule against the explicit loop over the batch (the per-example function
// applied to each slice, the results stacked, run by the reference interpreter), per-example
// gradients, nesting, random draws, control flow inside, gradients through vmap, and errors.
#include "TestUtil.h"

#include <symjax/ir/ControlFlow.h>
#include <symjax/ir/Node.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

namespace sj::test {
namespace {

using Ts = std::vector<Tensor>;

class Vmap : public BackendTest {};

/// Slice b of x along `axis` (the dim removed).
Tensor take(const Tensor& x, int64_t b, int64_t axis) {
    return squeeze(slice_axis(x, axis, b, b + 1), {axis});
}

/// The explicit loop vmap must agree with: fn on each slice of the mapped arguments, stacked.
Ts unrolled(const VmapFn& fn, const Ts& args, const std::vector<BatchAxis>& in_axes, int64_t batch,
            const std::vector<BatchAxis>& out_axes = {}) {
    std::vector<Ts> per;
    for (int64_t b = 0; b < batch; ++b) {
        Ts a;
        for (size_t i = 0; i < args.size(); ++i) {
            BatchAxis ax = in_axes.empty() ? BatchAxis(0) : in_axes[i];
            if (!ax) {
                a.push_back(args[i]);
                continue;
            }
            int64_t axis = *ax < 0 ? *ax + args[i].rank() : *ax;
            a.push_back(take(args[i], b, axis));
        }
        per.push_back(fn(a));
    }
    Ts out;
    for (size_t j = 0; j < per[0].size(); ++j) {
        Ts col;
        for (auto& p : per)
            col.push_back(p[j]);
        BatchAxis ax = out_axes.empty() ? BatchAxis(0) : out_axes[out_axes.size() == 1 ? 0 : j];
        int64_t axis = *ax < 0 ? *ax + col[0].rank() + 1 : *ax;
        out.push_back(stack(col, axis));
    }
    return out;
}

/// Runs vmap(fn) on `backend` and the unrolled loop on the reference interpreter, and compares.
void check_against_loop(const VmapFn& fn, const Ts& ins, const std::vector<Array>& values,
                        const VmapOptions& o, int64_t batch, const FunctionOptions& backend,
                        double tol = 1e-12) {
    const Ts& args = ins;
    Ts got = vmap(fn, o)(args);
    Ts want = unrolled(fn, args, o.in_axes, batch, o.out_axes);
    std::vector<Function::Arg> a(values.begin(), values.end());
    auto r = function(ins, got, {}, backend).call(a);
    auto e = function(ins, want, {}, on("reference")).call(a);
    ASSERT_EQ(r.size(), e.size());
    for (size_t j = 0; j < r.size(); ++j) {
        ASSERT_EQ(r[j].shape(), e[j].shape()) << "result " << j;
        expect_close(r[j], e[j], tol, tol, "result " + std::to_string(j));
    }
}

bool has_op(const Ts& roots, Op op) {
    std::vector<const Node*> r;
    for (const auto& t : roots)
        r.push_back(t.node().get());
    for (const Node* n : topo_order(r))
        if (n->op() == op)
            return true;
    return false;
}

/// How many distinct scan regions whose name passes `named` roots read.
int scans(const Ts& roots, const std::function<bool(const std::string&)>& named) {
    std::vector<const Node*> r;
    for (const auto& t : roots)
        r.push_back(t.node().get());
    std::set<const detail::Region*> loops;
    for (const Node* n : topo_order(r))
        if (n->op() == Op::Scan && named(n->attr<RegionAttrs>().region->name))
            loops.insert(n->attr<RegionAttrs>().region.get());
    return int(loops.size());
}

/// How many loops over the batch vmap made (its fallback: scans named "vmap(...)").
int batch_loops(const Ts& roots) {
    return scans(roots, [](const std::string& n) { return n.rfind("vmap(", 0) == 0; });
}

/// How many forward scans (the default name "scan"; backward ones are "scan_grad") roots read.
int forward_loops(const Ts& roots) {
    return scans(roots, [](const std::string& n) { return n == "scan"; });
}

TEST_P(Vmap, ElementwiseWithSharedOperands) {
    Placeholder x({4, 3}, DType::F64, "x"), w({3}, DType::F64, "w");
    auto fn = [&](const Ts& a) {
        return Ts{tanh(a[0] * a[1] + 0.5), where(a[0] > 0.0, a[0], a[1])};
    };
    VmapOptions o{{0, not_mapped}, {}, ""};
    Ts got = vmap(fn, o)({x, w});
    EXPECT_FALSE(has_op(got, Op::Scan)); // every op had a rule
    check_against_loop(fn, {x, w},
                       {random_array(DType::F64, {4, 3}, 1), random_array(DType::F64, {3}, 2)}, o,
                       4, opts());
}

TEST_P(Vmap, ReductionsAndSoftmax) {
    Placeholder x({5, 3, 4}, DType::F64, "x");
    auto fn = [](const Ts& a) {
        return Ts{sum(a[0], {1}),   max(a[0]),
                  softmax(a[0], 0), cast(argmax(a[0], 1), DType::F64),
                  cumsum(a[0], 1),  mean(a[0], {0}, true)};
    };
    Ts got = vmap(fn, {})({x});
    EXPECT_FALSE(has_op(got, Op::Scan));
    check_against_loop(fn, {x}, {random_array(DType::F64, {5, 3, 4}, 3)}, {}, 5, opts());
}

TEST_P(Vmap, SortArgsortTopKAndSortByKey) {
    // the axis moves past the batch dim; an unbatched key or value is repeated
    Placeholder x({4, 3, 5}, DType::F64, "x"), shared({3, 5}, DType::F64, "shared");
    auto fn = [](const Ts& a) {
        auto [v, i] = top_k(a[0], 2);
        return Ts{sort(a[0], 0),
                  cast(argsort(a[0], 1, true), DType::F64),
                  v,
                  cast(i, DType::F64),
                  sort_by_key(a[0], a[1], 1),
                  sort_by_key(a[1], a[0], 0, true)};
    };
    VmapOptions o{{0, not_mapped}, {}, ""};
    Ts got = vmap(fn, o)({x, shared});
    EXPECT_FALSE(has_op(got, Op::Scan));
    check_against_loop(
        fn, {x, shared},
        {random_array(DType::F64, {4, 3, 5}, 21), random_array(DType::F64, {3, 5}, 22)}, o, 4,
        opts());
}

TEST_P(Vmap, Movement) {
    Placeholder x({3, 2, 6}, DType::F64, "x"), y({3, 2}, DType::F64, "y"),
        s({2, 6}, DType::F64, "s");
    auto fn = [](const Ts& a) {
        const Tensor& v = a[0];
        return Ts{reshape(v, {3, 4}),          transpose(v),      slice(v, {0, 1}, {2, 6}, {1, 2}),
                  pad(v, {1, 0}, {0, 2}, 7.0), flip(v, {1}),      concat({v, a[2], v}, 0),
                  broadcast_to(a[1], {4, 2}),  expand_dims(v, 0), v[1],
                  concat({a[2], v}, 1)};
    };
    VmapOptions o{{0, 0, not_mapped}, {}, ""};
    Ts got = vmap(fn, o)({x, y, s});
    EXPECT_FALSE(has_op(got, Op::Scan));
    check_against_loop(fn, {x, y, s},
                       {random_array(DType::F64, {3, 2, 6}, 4), random_array(DType::F64, {3, 2}, 5),
                        random_array(DType::F64, {2, 6}, 6)},
                       o, 3, opts());
}

TEST_P(Vmap, DotGeneralEveryCase) {
    Placeholder x({4, 5}, DType::F64, "x"), m({4, 5, 3}, DType::F64, "m"),
        w({5, 3}, DType::F64, "w"), v({5}, DType::F64, "v");
    auto fn = [](const Ts& a) {
        return Ts{matmul(a[0], a[2]),                             // lhs batched
                  matmul(a[3], a[1]),                             // rhs batched
                  matmul(a[0], a[1]),                             // both
                  matmul(transpose(a[1]), a[0]),                  // both, other order
                  matmul(a[0], a[3]),                             // vector . vector
                  dot_general(a[1], a[1], {{0}, {0}, {1}, {1}})}; // batched dims of its own
    };
    VmapOptions o{{0, 0, not_mapped, not_mapped}, {}, ""};
    Ts got = vmap(fn, o)({x, m, w, v});
    EXPECT_FALSE(has_op(got, Op::Scan));
    check_against_loop(fn, {x, m, w, v},
                       {random_array(DType::F64, {4, 5}, 7), random_array(DType::F64, {4, 5, 3}, 8),
                        random_array(DType::F64, {5, 3}, 9), random_array(DType::F64, {5}, 10)},
                       o, 4, opts(), 1e-11);
}

TEST_P(Vmap, InAndOutAxes) {
    Placeholder x({3, 4}, DType::F64, "x"), y({2, 4}, DType::F64, "y");
    auto fn = [](const Ts& a) {
        return Ts{a[0] * 2.0, expand_dims(a[0], 1) * expand_dims(a[1], 0), a[1] + 1.0};
    };
    // x mapped along its last axis (4), y along axis 1; results stacked along 1, -1 and 0
    VmapOptions o{{-1, 1}, {1, -1, 0}, ""};
    check_against_loop(fn, {x, y},
                       {random_array(DType::F64, {3, 4}, 11), random_array(DType::F64, {2, 4}, 12)},
                       o, 4, opts());
}

TEST_P(Vmap, UnbatchedResultIsRepeated) {
    Placeholder x({3, 2}, DType::F64, "x"), w({2}, DType::F64, "w");
    auto fn = [](const Ts& a) { return Ts{a[1] * 3.0, sum(a[0])}; };
    VmapOptions o{{0, not_mapped}, {}, ""};
    check_against_loop(fn, {x, w},
                       {random_array(DType::F64, {3, 2}, 13), random_array(DType::F64, {2}, 14)}, o,
                       3, opts());
    // out_axes not_mapped: the result is returned as it is
    VmapOptions keep{{0, not_mapped}, {not_mapped, 0}, ""};
    Ts r = vmap(fn, keep)({x, w});
    EXPECT_EQ(r[0].shape(), (Shape{2}));
}

TEST_P(Vmap, GatherAndOneHot) {
    Placeholder t({3, 5, 2}, DType::F64, "t"), i({3, 4}, DType::I64, "i"),
        shared({5, 2}, DType::F64, "shared");
    auto fn = [](const Ts& a) {
        return Ts{gather(a[0], a[1], 0), // both batched: one gather from the stacked tables
                  gather(a[2], a[1], 0), // batched indices
                  gather(a[0], a[3], 1), // batched table
                  one_hot(a[1], 5, DType::F64)};
    };
    Placeholder k({2}, DType::I64, "k");
    Array idx(DType::I64, {3, 4});
    for (int64_t n = 0; n < 12; ++n)
        idx.data<int64_t>()[n] = (n * 7) % 5;
    Array kv(DType::I64, {2});
    kv.data<int64_t>()[0] = 1;
    kv.data<int64_t>()[1] = 0;
    VmapOptions o{{0, 0, not_mapped, not_mapped}, {}, ""};
    check_against_loop(
        fn, {t, i, shared, k},
        {random_array(DType::F64, {3, 5, 2}, 15), idx, random_array(DType::F64, {5, 2}, 16), kv}, o,
        3, opts());
}

TEST_P(Vmap, GatherAlongLaterAxesWithBothBatched) {
    // a table and indices per example, along the example's axis 1 and 2 (and 0), with 2-d
    // indices: one gather between two transposes, no loop over the examples
    Placeholder t({3, 4, 6, 3}, DType::F64, "t"), i({3, 2, 3}, DType::I64, "i");
    auto fn = [](const Ts& a) {
        return Ts{gather(a[0], a[1], 1), gather(a[0], a[1] % 3, 2), gather(a[0], a[1] % 4, 0)};
    };
    Array idx(DType::I64, {3, 2, 3});
    for (int64_t n = 0; n < 18; ++n)
        idx.data<int64_t>()[n] = (n * 5 + 1) % 6;
    VmapOptions o{{0, 0}, {}, ""};
    Ts got = vmap(fn, o)({t, i});
    EXPECT_EQ(batch_loops(got), 0);
    EXPECT_EQ(got[0].shape(), (Shape{3, 4, 2, 3, 3}));
    EXPECT_EQ(got[1].shape(), (Shape{3, 4, 6, 2, 3}));
    check_against_loop(fn, {t, i}, {random_array(DType::F64, {3, 4, 6, 3}, 41), idx}, o, 3, opts());
}

TEST_P(Vmap, DynamicSliceWithStartsPerExampleIsOneGather) {
    // random crops: a window per example at its own starts, clamped as the op clamps (past the
    // end, negative), from tables per example or one shared table; shared starts on batched
    // tables; none of them loops
    Placeholder x({4, 3, 7, 9}, DType::F64, "x"), s({4, 3}, DType::I32, "s"),
        shared({3, 7, 9}, DType::F64, "shared"), one({3}, DType::I64, "one");
    auto fn = [](const Ts& a) {
        return Ts{dynamic_slice(a[0], a[1], {2, 4, 5}), dynamic_slice(a[2], a[1], {3, 2, 9}),
                  dynamic_slice(a[0], a[3], {1, 7, 3})};
    };
    Array sv(std::vector<int32_t>{0, 1, 2, 1, 5, 9, -2, 0, 3, 2, 3, -1}, {4, 3});
    VmapOptions o{{0, 0, not_mapped, not_mapped}, {}, ""};
    Ts got = vmap(fn, o)({x, s, shared, one});
    EXPECT_EQ(batch_loops(got), 0);
    EXPECT_EQ(got[0].shape(), (Shape{4, 2, 4, 5}));
    check_against_loop(fn, {x, s, shared, one},
                       {random_array(DType::F64, {4, 3, 7, 9}, 42), sv,
                        random_array(DType::F64, {3, 7, 9}, 43),
                        Array(std::vector<int64_t>{2, 3, 4}, {3})},
                       o, 4, opts());
}

TEST_P(Vmap, DynamicUpdateSliceWithStartsPerExampleIsOneScatter) {
    // a window per example written at its own starts, clamped as the op clamps (past the end,
    // negative), into targets per example or one shared target, from updates per example or
    // shared; shared starts; none of them loops
    Placeholder x({4, 3, 7, 9}, DType::F64, "x"), s({4, 3}, DType::I32, "s"),
        u({4, 2, 4, 5}, DType::F64, "u"), shared({3, 7, 9}, DType::F64, "shared"),
        su({2, 4, 5}, DType::F64, "su"), one({3}, DType::I64, "one");
    auto fn = [](const Ts& a) {
        return Ts{dynamic_update_slice(a[0], a[2], a[1]), dynamic_update_slice(a[3], a[2], a[1]),
                  dynamic_update_slice(a[0], a[4], a[1]), dynamic_update_slice(a[0], a[2], a[5])};
    };
    Array sv(std::vector<int32_t>{0, 1, 2, 1, 5, 9, -2, 0, 3, 2, 3, -1}, {4, 3});
    VmapOptions o{{0, 0, 0, not_mapped, not_mapped, not_mapped}, {}, ""};
    Ts got = vmap(fn, o)({x, s, u, shared, su, one});
    EXPECT_EQ(batch_loops(got), 0);
    check_against_loop(
        fn, {x, s, u, shared, su, one},
        {random_array(DType::F64, {4, 3, 7, 9}, 51), sv, random_array(DType::F64, {4, 2, 4, 5}, 52),
         random_array(DType::F64, {3, 7, 9}, 53), random_array(DType::F64, {2, 4, 5}, 54),
         Array(std::vector<int64_t>{0, 3, 6}, {3})},
        o, 4, opts());
}

TEST_P(Vmap, CholeskyAndTriangularSolveBatchTheirOwnLeadingDims) {
    // a matrix per example (shared or per-example right-hand sides), and per-example gradients
    // of a Gaussian log-density through both: no loop
    Placeholder m({3, 4, 4}, DType::F64, "m"), r({3, 4, 2}, DType::F64, "r"),
        shared({4, 2}, DType::F64, "shared"), sa({4, 4}, DType::F64, "sa");
    auto fn = [](const Ts& a) {
        Tensor spd = matmul(a[0], transpose(a[0], {1, 0})) + 4.0 * eye(4, -1, 0, DType::F64);
        Tensor l = cholesky(spd);
        Tensor sl =
            cholesky(matmul(a[3], transpose(a[3], {1, 0})) + 4.0 * eye(4, -1, 0, DType::F64));
        Tensor z = triangular_solve(l, a[1], true, true);
        Tensor logdet = sum(log(diagonal(l, 0, 0, 1)));
        Tensor density = -0.5 * sum(z * z) - logdet;
        return Ts{l, z, triangular_solve(l, a[2], true, true),
                  triangular_solve(sl, a[1], true, true), gradients(density, {a[0], a[1]})[0]};
    };
    VmapOptions o{{0, 0, not_mapped, not_mapped}, {}, ""};
    Ts got = vmap(fn, o)({m, r, shared, sa});
    EXPECT_EQ(batch_loops(got), 0);
    check_against_loop(fn, {m, r, shared, sa},
                       {random_array(DType::F64, {3, 4, 4}, 55),
                        random_array(DType::F64, {3, 4, 2}, 56),
                        random_array(DType::F64, {4, 2}, 57), random_array(DType::F64, {4, 4}, 58)},
                       o, 3, opts(), 1e-10);
}

TEST_P(Vmap, ConvAndPool) {
    Placeholder x({3, 2, 1, 6, 6}, DType::F64, "x"), w({4, 1, 3, 3}, DType::F64, "w"),
        ws({3, 4, 1, 3, 3}, DType::F64, "ws");
    auto fn = [](const Ts& a) {
        Tensor y = conv2d(a[0], a[1], {1, 1}, "SAME");
        return Ts{max_pool2d(maximum(y, 0.0), {2, 2}), avg_pool2d(y, {2, 2}),
                  conv2d(a[0], a[2], {1, 1}, "VALID")}; // a filter per example: a loop
    };
    VmapOptions o{{0, not_mapped, 0}, {}, ""};
    Ts got = vmap(fn, o)({x, w, ws});
    EXPECT_EQ(batch_loops(got), 0); // the activations fold, the per-example filter groups
    check_against_loop(fn, {x, w, ws},
                       {random_array(DType::F64, {3, 2, 1, 6, 6}, 17),
                        random_array(DType::F64, {4, 1, 3, 3}, 18),
                        random_array(DType::F64, {3, 4, 1, 3, 3}, 19)},
                       o, 3, opts(), 1e-11);
}

TEST_P(Vmap, ControlFlowInsideLoopsOverTheBatch) {
    Placeholder xs({3, 5}, DType::F64, "xs"), c({}, DType::F64, "c");
    auto fn = [](const Ts& a) {
        auto r = scan(
            [](const Ts& carry, const Ts& s) {
                Tensor n = carry[0] * s[1] + s[0];
                return std::pair{Ts{n}, Ts{n}};
            },
            {scalar(0.0, DType::F64)}, {a[0]}, {a[1]});
        Ts branch = cond(
            sum(a[0]) > 0.0, [](const Ts& o) { return Ts{o[0] * 2.0}; },
            [](const Ts& o) { return Ts{o[0] - 1.0}; }, {a[0]});
        return Ts{r.carry[0], r.outputs[0], branch[0]};
    };
    VmapOptions o{{0, not_mapped}, {}, ""};
    EXPECT_EQ(batch_loops(vmap(fn, o)({xs, c})), 0); // the scan and the cond are batched
    Array c0 = Array::scalar(0.5);
    check_against_loop(fn, {xs, c}, {random_array(DType::F64, {3, 5}, 20), c0}, o, 3, opts());
}

// A recurrent cell over per-example sequences: the scan itself is batched (its body vmapped, one
// scan over the steps for the whole batch), with gradients through it, against the loop.
TEST_P(Vmap, ScanIsBatchedNotLooped) {
    Placeholder xs({3, 6, 2}, DType::F64, "xs"), h0({2}, DType::F64, "h0");
    Variable w(random_array(DType::F64, {2, 2}, 40), "w_rnn");
    auto fn = [&](const Ts& a) {
        auto r = scan(
            [&](const Ts& c, const Ts& s) {
                Tensor h = tanh(matmul(c[0], w) + s[0] * s[1]);
                return std::pair{Ts{h}, Ts{h * 2.0}};
            },
            {a[1]}, {a[0]}, {scalar(0.5, DType::F64)}, {.reverse = true});
        Tensor loss = sum(r.outputs[0] * r.outputs[0]) + sum(r.carry[0]);
        return Ts{r.carry[0], r.outputs[0], gradients(loss, Ts{w})[0]};
    };
    VmapOptions o{{0, not_mapped}, {}, ""};
    Ts got = vmap(fn, o)({xs, h0});
    EXPECT_EQ(batch_loops(got), 0);
    // the gradient reads the products a copy of the loop stores (Note [Scan residuals]); vmap
    // batches the loop and its copy as one loop, as the compiler's merge_loops runs them once
    Placeholder one({6, 2}, DType::F64, "one_example");
    EXPECT_EQ(forward_loops(fn({one, h0})), 2) << "the loop and its copy with residuals";
    EXPECT_EQ(forward_loops(got), 1);
    check_against_loop(fn, {xs, h0},
                       {random_array(DType::F64, {3, 6, 2}, 41), random_array(DType::F64, {2}, 42)},
                       o, 3, opts(), 1e-11);
}

// cond with a shared predicate (a cond of vmapped branches) and with one per example (both
// branches, then where), a branch that reads nothing batched, and gradients through both.
TEST_P(Vmap, CondSharedAndPerExamplePredicates) {
    Placeholder x({4, 3}, DType::F64, "x"), flag({}, DType::Bool, "flag"), w({3}, DType::F64, "w");
    auto fn = [](const Ts& a) {
        Ts shared = cond(
            a[1], [](const Ts& o) { return Ts{o[0] * o[1]}; },
            [](const Ts& o) { return Ts{o[1] + 1.0}; }, {a[0], a[2]});
        Ts per = cond(
            sum(a[0]) > 0.0,
            [](const Ts& o) {
                return Ts{exp(o[0]), sum(o[0])};
            },
            [&](const Ts& o) {
                return Ts{o[0] * 0.0 - 1.0, sum(a[2])};
            },
            {a[0]});
        Tensor loss = sum(shared[0] * per[0]) + per[1];
        return Ts{shared[0], per[0], per[1], gradients(loss, Ts{a[0]})[0]};
    };
    VmapOptions o{{0, not_mapped, not_mapped}, {}, ""};
    EXPECT_EQ(batch_loops(vmap(fn, o)({x, flag, w})), 0);
    Array xv = random_array(DType::F64, {4, 3}, 43);
    xv.data<double>()[0] = xv.data<double>()[1] = xv.data<double>()[2] = 1.0;  // sum > 0
    xv.data<double>()[3] = xv.data<double>()[4] = xv.data<double>()[5] = -1.0; // sum < 0
    for (bool f : {true, false})
        check_against_loop(fn, {x, flag, w},
                           {xv, Array::scalar(f), random_array(DType::F64, {3}, 44)}, o, 4, opts());
}

// while_loop with a condition per example: Newton's square root, each example converging in its
// own number of steps (its trip count), with gradients through the loop (max_iterations).
TEST_P(Vmap, WhileLoopPerExampleTripCounts) {
    Placeholder a({5}, DType::F64, "a");
    auto fn = [](const Ts& x) {
        WhileOptions o;
        o.max_iterations = 60;
        Ts root =
            while_loop([](const Ts& v, const Ts& ns) { return abs(v[0] * v[0] - ns[0]) > 1e-9; },
                       [](const Ts& v, const Ts& ns) { return Ts{0.5 * (v[0] + ns[0] / v[0])}; },
                       {x[0]}, {x[0]}, o);
        return Ts{root[0], cast(trip_count(root[0]), DType::F64), gradients(root[0], Ts{x[0]})[0]};
    };
    Ts got = vmap(fn, {})({a});
    EXPECT_EQ(batch_loops(got), 0);
    Array av(DType::F64, {5});
    double vals[] = {1.0, 2.0, 100.0, 0.25, 1e6};
    for (int i = 0; i < 5; ++i)
        av.data<double>()[i] = vals[i];
    check_against_loop(fn, {a}, {av}, {}, 5, opts(), 1e-12);
    auto r = function({a}, got, {}, opts())(av);
    for (int i = 0; i < 5; ++i) {
        EXPECT_NEAR(r[0].at(i), std::sqrt(vals[i]), 1e-9 * std::sqrt(vals[i])) << i;
        // a converged Newton iterate's derivative is d sqrt(a)/da; a = 1 takes no step, so its
        // result is the initial value a itself, with derivative 1
        double want = i == 0 ? 1.0 : 0.5 / std::sqrt(vals[i]);
        EXPECT_NEAR(r[2].at(i), want, 1e-6 * want) << i;
    }
    EXPECT_EQ(r[1].at(0), 0.0);            // sqrt(1) = 1 at once
    EXPECT_GT(r[1].at(4), r[1].at(1) + 5); // 1e6 takes many more steps than 2
}

TEST_P(Vmap, Nested) {
    Placeholder x({3, 4}, DType::F64, "x"), y({5, 4}, DType::F64, "y");
    // pairwise squared distances: vmap over x's rows of vmap over y's rows
    auto dist = [](const Ts& a) { return Ts{sum((a[0] - a[1]) * (a[0] - a[1]))}; };
    VmapFn inner = vmap(dist, {{not_mapped, 0}, {}, ""});
    VmapFn outer = vmap(inner, {{0, not_mapped}, {}, ""});
    Ts d = outer({x, y});
    ASSERT_EQ(d[0].shape(), (Shape{3, 5}));
    Array xv = random_array(DType::F64, {3, 4}, 21), yv = random_array(DType::F64, {5, 4}, 22);
    Array r = function({x, y}, d, {}, opts())(xv, yv)[0];
    for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 5; ++j) {
            double s = 0;
            for (int64_t k = 0; k < 4; ++k) {
                double t = xv.at(i * 4 + k) - yv.at(j * 4 + k);
                s += t * t;
            }
            EXPECT_NEAR(r.at(i * 5 + j), s, 1e-12) << i << "," << j;
        }
}

/// The loss of one example (x [784-like], label) of a small MLP with weights W1, b1, W2, b2.
Tensor mlp_loss(const Tensor& x, const Tensor& label, const Ts& p) {
    Tensor h = maximum(matmul(expand_dims(x, 0), p[0]) + p[1], 0.0);
    Tensor logits = matmul(h, p[2]) + p[3];
    return sum(nn::losses::sparse_softmax_crossentropy_logits(expand_dims(label, 0), logits));
}

TEST_P(Vmap, PerExampleGradients) {
    const int64_t B = 6, D = 7, H = 5, C = 3;
    Placeholder x({B, D}, DType::F64, "x"), y({B}, DType::I64, "y");
    Variable W1(random_array(DType::F64, {D, H}, 23), "W1"),
        b1(random_array(DType::F64, {H}, 24), "b1"), W2(random_array(DType::F64, {H, C}, 25), "W2"),
        b2(random_array(DType::F64, {C}, 26), "b2");
    Ts params{W1, b1, W2, b2};
    auto grads = [&](const Ts& a) { return gradients(mlp_loss(a[0], a[1], params), params); };
    Ts g = vmap(grads, {})({x, y});
    EXPECT_FALSE(has_op(g, Op::Scan)); // every op of the backward pass has a rule
    ASSERT_EQ(g[0].shape(), (Shape{B, D, H}));
    Array xv = random_array(DType::F64, {B, D}, 27);
    Array yv(DType::I64, {B});
    for (int64_t i = 0; i < B; ++i)
        yv.data<int64_t>()[i] = i % C;
    auto r = function({x, y}, g, {}, opts())(xv, yv);
    // each example's gradient on its own (a gradient graph per example, reference backend)
    for (int64_t b = 0; b < B; ++b) {
        Ts gb = gradients(mlp_loss(take(x, b, 0), take(y, b, 0), params), params);
        auto e = function({x, y}, gb, {}, on("reference"))(xv, yv);
        for (size_t k = 0; k < params.size(); ++k) {
            Array got = r[k];
            int64_t n = e[k].size();
            for (int64_t i = 0; i < n; ++i)
                EXPECT_NEAR(got.at(b * n + i), e[k].at(i), 1e-12)
                    << "example " << b << " param " << k;
        }
    }
}

// Per-example gradients of a small CNN (conv, pool, dense, a conv of two groups): the filter
// gradient of each example is one grouped conv_backward_filter, whether the batch is declared or
// unknown (Note [Groups that follow the batch] in src/ops/Conv.cpp); against each example's own
// gradient graph.
TEST_P(Vmap, PerExampleConvGradients) {
    for (int64_t declared : {int64_t(3), int64_t(-1)}) {
        SCOPED_TRACE("batch declared " + std::to_string(declared));
        const int64_t B = 3;
        Placeholder x({declared, 2, 7, 7}, DType::F64, "x"), y({declared}, DType::I64, "y");
        Variable w(random_array(DType::F64, {4, 2, 3, 3}, 50), "w_conv"),
            w2(random_array(DType::F64, {4, 2, 3, 3}, 51), "w_strided"),
            w3(random_array(DType::F64, {4, 1, 3, 3}, 54), "w_grouped"),
            d(random_array(DType::F64, {4 * 3 * 3 + 4 * 3 * 3, 5}, 52), "d_dense");
        Ts params{w, w2, w3, d};
        auto loss_of = [&](const Tensor& xi, const Tensor& yi) {
            Tensor img = expand_dims(xi, 0);
            Tensor h = max_pool2d(maximum(conv2d(img, w, {1, 1}, "SAME"), 0.0), {2, 2});
            Tensor h2 = tanh(conv2d(img, w2, {2, 2}, "VALID")); // stride 2: backward ops need like
            Tensor h3 = conv(img, w3, {1, 1}, "SAME", {}, 2);
            Tensor flat = concat({reshape(h, {1, -1}), reshape(h2, {1, -1})}, 1);
            return sum(nn::losses::sparse_softmax_crossentropy_logits(expand_dims(yi, 0),
                                                                      matmul(flat, d))) +
                   0.1 * sum(h3 * h3);
        };
        Ts g =
            vmap([&](const Ts& a) { return gradients(loss_of(a[0], a[1]), params); }, {})({x, y});
        EXPECT_EQ(batch_loops(g), 0);
        Array xv = random_array(DType::F64, {B, 2, 7, 7}, 53);
        Array yv(DType::I64, {B});
        for (int64_t i = 0; i < B; ++i)
            yv.data<int64_t>()[i] = (2 * i + 1) % 5;
        auto r = function({x, y}, g, {}, opts())(xv, yv);
        // each example's own gradient graph, on placeholders of the batch's size (an example taken
        // from a batch of unknown size has an unknown size itself)
        Placeholder xd({B, 2, 7, 7}, DType::F64, "xd"), yd({B}, DType::I64, "yd");
        for (int64_t b = 0; b < B; ++b) {
            Ts gb = gradients(loss_of(take(xd, b, 0), take(yd, b, 0)), params);
            auto e = function({xd, yd}, gb, {}, on("reference"))(xv, yv);
            for (size_t k = 0; k < params.size(); ++k) {
                int64_t n = e[k].size();
                for (int64_t i = 0; i < n; ++i)
                    EXPECT_NEAR(r[k].at(b * n + i), e[k].at(i), 1e-11)
                        << "example " << b << " param " << k;
            }
        }
    }
}

// Per-example gradients of an f32 CNN whose convolutions have 16 channels: on the cpu target they
// run channel-blocked, and vmap's reshapes around them ([B, 1, C, H, W] for the ops between the
// layers, [1, B * C, H, W] for the per-example weight gradients, the global mean per example)
// read the blocked tensors without reorders, also when the batch is unknown and so are the
// grouped convolutions' channel counts (Note [Reshapes of whole channel blocks] in
// src/backend/cpu/LayoutPass.cpp); against each example's own gradient on the reference
// interpreter.
TEST_P(Vmap, PerExampleGradientsOfABlockedCnn) {
    const int64_t B = 3;
    Variable w1(random_array(DType::F32, {16, 3, 3, 3}, 80), "w1"),
        w2(random_array(DType::F32, {16, 16, 3, 3}, 81), "w2"),
        d(random_array(DType::F32, {16, 4}, 82), "d");
    Ts params{w1, w2, d};
    auto loss_of = [&](const Tensor& xi) {
        Tensor h = nn::relu(conv2d(expand_dims(xi, 0), w1, {1, 1}, "SAME"));
        h = nn::relu(conv2d(h, w2, {1, 1}, "SAME") + 0.25);
        return sum(tanh(matmul(mean(h, {2, 3}), d))); // the mean: [1, 16]
    };
    const Array xv = random_array(DType::F32, {B, 3, 6, 6}, 83);
    Placeholder xd({B, 3, 6, 6}, DType::F32, "xd");
    for (int64_t declared : {B, int64_t(-1)}) {
        SCOPED_TRACE("batch declared " + std::to_string(declared));
        Placeholder x({declared, 3, 6, 6}, DType::F32, "x");
        Ts g = vmap([&](const Ts& a) { return gradients(loss_of(a[0]), params); }, {})({x});
        EXPECT_EQ(batch_loops(g), 0);
        auto r = function({x}, g, {}, opts())(xv);
        for (int64_t b = 0; b < B; ++b) {
            auto e =
                function({xd}, gradients(loss_of(take(xd, b, 0)), params), {}, on("reference"))(xv);
            for (size_t k = 0; k < params.size(); ++k) {
                const int64_t n = e[k].size();
                // f32 sums of up to 16 * 3 * 3 * 36 terms in oneDNN's order against the
                // reference's: a few ulps of the sums' magnitude (~10) each
                for (int64_t i = 0; i < n; ++i)
                    EXPECT_NEAR(r[k].at(b * n + i), e[k].at(i), 2e-5 * (1 + std::abs(e[k].at(i))))
                        << "example " << b << " param " << k;
            }
        }
    }
}

// A filter per example with an unknown batch: conv and, in the gradient, conv_backward_data and
// conv_backward_filter in groups that follow the batch (Note [Groups that follow the batch]),
// with two groups per example; nested vmap keeps them; a batch of another size at the next call
TEST_P(Vmap, PerExampleFiltersWithAnUnknownBatch) {
    Placeholder x({-1, 1, 4, 6, 6}, DType::F64, "x"), w({-1, 6, 2, 3, 3}, DType::F64, "w");
    auto fn = [](const Ts& a) {
        Tensor y = conv(a[0], a[1], {1, 1}, "SAME", {}, 2);
        Ts g = gradients(sum(y * y * y), {a[0], a[1]});
        return Ts{y, g[0], g[1]};
    };
    VmapOptions o{{0, 0}, {}, ""};
    // results of the batched graph against the loop over examples on declared placeholders (an
    // example taken from a batch of unknown size has an unknown size itself)
    auto check = [&](const Ts& unknown, const Ts& declared, const std::vector<Array>& values,
                     int64_t batch, const VmapFn& f) {
        Ts got = vmap(f, o)(unknown);
        EXPECT_EQ(batch_loops(got), 0);
        Ts want = unrolled(f, declared, o.in_axes, batch, o.out_axes);
        std::vector<Function::Arg> a(values.begin(), values.end());
        auto r = function(unknown, got, {}, opts()).call(a);
        auto e = function(declared, want, {}, on("reference")).call(a);
        ASSERT_EQ(r.size(), e.size());
        for (size_t j = 0; j < r.size(); ++j) {
            ASSERT_EQ(r[j].shape(), e[j].shape()) << "result " << j;
            expect_close(r[j], e[j], 1e-11, 1e-11, "result " + std::to_string(j));
        }
    };
    EXPECT_EQ(vmap(fn, o)({x, w})[0].shape(), (Shape{-1, 1, 6, 6, 6}));
    for (int64_t b : {3, 5}) { // one graph, two batch sizes
        SCOPED_TRACE("batch " + std::to_string(b));
        Placeholder xd({b, 1, 4, 6, 6}, DType::F64, "xd"), wd({b, 6, 2, 3, 3}, DType::F64, "wd");
        check({x, w}, {xd, wd},
              {random_array(DType::F64, {b, 1, 4, 6, 6}, 60 + uint64_t(b)),
               random_array(DType::F64, {b, 6, 2, 3, 3}, 70 + uint64_t(b))},
              b, fn);
    }
    // vmap of vmap: the inner rule's groups follow the channels, the outer batch keeps them
    SCOPED_TRACE("nested");
    Placeholder xx({2, -1, 1, 4, 6, 6}, DType::F64, "xx"),
        ww({2, -1, 6, 2, 3, 3}, DType::F64, "ww");
    Placeholder xxd({2, 3, 1, 4, 6, 6}, DType::F64, "xxd"),
        wwd({2, 3, 6, 2, 3, 3}, DType::F64, "wwd");
    auto inner = [&](const Ts& a) { return vmap(fn, o)(a); };
    check({xx, ww}, {xxd, wwd},
          {random_array(DType::F64, {2, 3, 1, 4, 6, 6}, 80),
           random_array(DType::F64, {2, 3, 6, 2, 3, 3}, 81)},
          2, inner);
}

TEST_P(Vmap, UnknownBatchSize) {
    Placeholder x({-1, 3}, DType::F64, "x"), w({3, 2}, DType::F64, "w");
    auto fn = [](const Ts& a) {
        Tensor z = matmul(expand_dims(a[0], 0), a[1]);
        return Ts{reshape(z, {2}), sum(a[0] * 2.0), broadcast_to(a[1], {4, 3, 2})};
    };
    VmapOptions o{{0, not_mapped}, {}, ""};
    Ts got = vmap(fn, o)({x, w});
    ASSERT_EQ(got[0].shape(), (Shape{-1, 2}));
    Array xv = random_array(DType::F64, {5, 3}, 28), wv = random_array(DType::F64, {3, 2}, 29);
    auto r = function({x, w}, got, {}, opts())(xv, wv);
    ASSERT_EQ(r[0].shape(), (Shape{5, 2}));
    ASSERT_EQ(r[2].shape(), (Shape{5, 4, 3, 2}));
    for (int64_t b = 0; b < 5; ++b)
        for (int64_t j = 0; j < 2; ++j) {
            double s = 0;
            for (int64_t k = 0; k < 3; ++k)
                s += xv.at(b * 3 + k) * wv.at(k * 2 + j);
            EXPECT_NEAR(r[0].at(b * 2 + j), s, 1e-12);
        }
}

TEST_P(Vmap, RandomDrawsDifferPerExample) {
    Placeholder x({-1, 1000}, DType::F32, "x");
    auto fn = [](const Ts& a) {
        return Ts{a[0] + random::normal({1000}, 0.0, 1.0, DType::F32, 7)};
    };
    Ts got = vmap(fn, {})({x});
    Array zeros(DType::F32, {4, 1000});
    Array r = function({x}, got, {}, opts())(zeros)[0];
    ASSERT_EQ(r.shape(), (Shape{4, 1000}));
    std::set<float> firsts;
    for (int64_t b = 0; b < 4; ++b) {
        double s = 0, s2 = 0;
        for (int64_t i = 0; i < 1000; ++i) {
            double v = r.at(b * 1000 + i);
            s += v;
            s2 += v * v;
        }
        // mean 0, variance 1: 5 standard errors (0.16 for the mean of 1000 normals)
        EXPECT_NEAR(s / 1000, 0.0, 0.16) << b;
        EXPECT_NEAR(s2 / 1000, 1.0, 0.25) << b;
        firsts.insert(float(r.at(b * 1000)));
    }
    EXPECT_EQ(firsts.size(), 4u); // each example drew its own numbers
    // a draw made outside the function is shared by every example
    Tensor shared = random::normal({1000}, 0.0, 1.0, DType::F32, 8);
    Ts same = vmap([&](const Ts& a) { return Ts{a[0] + shared}; }, {})({x});
    Array s = function({x}, same, {}, opts())(zeros)[0];
    for (int64_t i = 0; i < 1000; ++i)
        EXPECT_EQ(s.at(i), s.at(3000 + i));
}

TEST_P(Vmap, GradientThroughVmap) {
    Placeholder x({4, 3}, DType::F64, "x");
    Variable w(random_array(DType::F64, {3, 3}, 30), "w");
    auto fn = [&](const Ts& a) { return Ts{tanh(matmul(expand_dims(a[0], 0), w))}; };
    Tensor cost = sum(vmap(fn, {})({x})[0] * vmap(fn, {})({x})[0]);
    Tensor gx = gradients(cost, Ts{x})[0];
    Tensor gw = gradients(cost, Ts{w})[0];
    Tensor ref_cost = sum(unrolled(fn, {x}, {}, 4)[0] * unrolled(fn, {x}, {}, 4)[0]);
    Array xv = random_array(DType::F64, {4, 3}, 31);
    auto r = function({x}, {gx, gw}, {}, opts())(xv);
    auto e = function({x}, gradients(ref_cost, Ts{x, w}), {}, on("reference"))(xv);
    expect_close(r[0], e[0], 1e-12, 1e-12, "d/dx");
    expect_close(r[1], e[1], 1e-12, 1e-12, "d/dw");
}

TEST_P(Vmap, GatherPerExampleChecksItsIndices) {
    // one gather from the stacked tables: an index past an example's own table must not read the
    // next example's, on a table of known size and on one whose size is bound at call time
    for (int64_t len : {int64_t(5), int64_t(-1)}) {
        Placeholder t({3, len}, DType::F64, "t");
        Placeholder i({3, 2}, DType::I64, "i");
        Ts got = vmap([](const Ts& a) { return Ts{gather(a[0], a[1], 0)}; }, {})({t, i});
        EXPECT_FALSE(has_op(got, Op::Scan));
        Function f = function({t, i}, got, {}, opts());
        Array tv = random_array(DType::F64, {3, 5}, 31);
        Array ok(std::vector<int64_t>{0, 4, 2, 3, 1, 1}, {3, 2});
        std::vector<double> want;
        for (int64_t b = 0; b < 3; ++b)
            for (int64_t j = 0; j < 2; ++j)
                want.push_back(tv.data<double>()[b * 5 + ok.data<int64_t>()[b * 2 + j]]);
        EXPECT_EQ(f(tv, ok)[0].to_vector<double>(), want);
        Array bad(std::vector<int64_t>{0, 4, 5, 3, 1, 1}, {3, 2}); // 5: example 1's table ends at 4
        std::string m = message_of<InputError>([&] { f(tv, bad); });
        EXPECT_NE(m.find("out of range"), std::string::npos) << m;
    }
}

TEST_P(Vmap, ScattersPerExampleAreOneScatter) {
    // scatter_add and scatter (every mode) with targets, indices and updates per example or
    // shared, along the example's axes 0 and 1, repeated indices included: one scatter into the
    // stacked targets, against the loop
    Placeholder x({3, 4, 5}, DType::F64, "x"), i({3, 6}, DType::I64, "i"),
        u0({3, 6, 5}, DType::F64, "u0"), u1({3, 4, 6}, DType::F64, "u1"),
        shared({4, 5}, DType::F64, "shared"), si({6}, DType::I64, "si");
    auto fn = [](const Ts& a) {
        Tensor i4 = a[1] % 4, i5 = a[1] % 5;
        return Ts{scatter_add(a[0], i4, a[2], 0),
                  scatter_add(a[0], i5, a[3], 1),
                  scatter(a[0], i4, a[2], 0, ScatterMode::Set),
                  scatter(a[0], i5, a[3], 1, ScatterMode::Max),
                  scatter(a[0], i4, a[2], 0, ScatterMode::Mul),
                  scatter_add(a[4], i4, a[2], 0),                      // shared target
                  scatter_add(a[0], a[5] % 4, a[2], 0),                // shared indices
                  scatter(a[4], a[5] % 5, a[3], 1, ScatterMode::Min)}; // only updates batched
    };
    Array iv(std::vector<int64_t>{0, 3, 3, 1, 7, 2, 4, 4, 4, 0, 1, 9, 2, 6, 5, 5, 3, 0}, {3, 6});
    VmapOptions o{{0, 0, 0, 0, not_mapped, not_mapped}, {}, ""};
    Ts got = vmap(fn, o)({x, i, u0, u1, shared, si});
    EXPECT_EQ(batch_loops(got), 0);
    check_against_loop(
        fn, {x, i, u0, u1, shared, si},
        {random_array(DType::F64, {3, 4, 5}, 44), iv, random_array(DType::F64, {3, 6, 5}, 45),
         random_array(DType::F64, {3, 4, 6}, 46), random_array(DType::F64, {4, 5}, 47),
         Array(std::vector<int64_t>{1, 3, 1, 0, 2, 6}, {6})},
        o, 3, opts());
    // an index past an example's own target must not write into the next one's
    Ts s = vmap([](const Ts& a) { return Ts{scatter_add(a[0], a[1], a[2], 0)}; }, {})({x, i, u0});
    Function f = function({x, i, u0}, s, {}, opts());
    std::string m = message_of<InputError>([&] {
        f(random_array(DType::F64, {3, 4, 5}, 48), iv, random_array(DType::F64, {3, 6, 5}, 49));
    });
    EXPECT_NE(m.find("out of range"), std::string::npos) << m;
}

// Per-example gradients of an embedding lookup: the gather's gradient is a scatter_add per
// example, now one scatter, against each example's own gradient graph.
TEST_P(Vmap, PerExampleEmbeddingGradients) {
    const int64_t B = 4, V = 9, E = 3, T = 5;
    Placeholder tok({B, T}, DType::I64, "tok");
    Variable emb(random_array(DType::F64, {V, E}, 50), "emb");
    auto loss = [&](const Tensor& t) { return sum(tanh(gather(emb, t, 0)) * 1.5); };
    Ts g = vmap([&](const Ts& a) { return gradients(loss(a[0]), {emb}); }, {})({tok});
    EXPECT_FALSE(has_op(g, Op::Scan));
    Array tv(std::vector<int64_t>{0, 8, 8, 3, 1, 2, 2, 2, 7, 0, 5, 4, 3, 2, 1, 6, 6, 0, 8, 4},
             {B, T});
    Array r = function({tok}, g, {}, opts())(tv)[0];
    for (int64_t b = 0; b < B; ++b) {
        Array e =
            function({tok}, gradients(loss(take(tok, b, 0)), {emb}), {}, on("reference"))(tv)[0];
        for (int64_t k = 0; k < V * E; ++k)
            EXPECT_NEAR(r.at(b * V * E + k), e.at(k), 1e-12) << "example " << b;
    }
}

TEST_P(Vmap, Errors) {
    Placeholder x({4, 3}, DType::F64, "x"), y({5, 3}, DType::F64, "y"), s({}, DType::F64, "s");
    auto add = [](const Ts& a) { return Ts{a[0] + a[1]}; };
    std::string m = message_of<ShapeError>([&] { vmap(add, {})({x, y}); });
    EXPECT_NE(m.find("argument 1 (y)"), std::string::npos) << m;
    EXPECT_NE(m.find("has 5 elements along its batch axis 0"), std::string::npos) << m;
    m = message_of<Error>([&] { vmap(add, {{not_mapped, not_mapped}, {}, ""})({x, y}); });
    EXPECT_NE(m.find("no argument is mapped"), std::string::npos) << m;
    m = message_of<Error>([&] { vmap(add, {{0}, {}, ""})({x, y}); });
    EXPECT_NE(m.find("1 in_axes for 2 arguments"), std::string::npos) << m;
    m = message_of<ShapeError>([&] { vmap(add, {{0, 2}, {}, "pairs"})({x, x}); });
    EXPECT_NE(m.find("pairs: argument 1 (x)"), std::string::npos) << m;
    EXPECT_NE(m.find("batch axis 2 is out of range"), std::string::npos) << m;
    m = message_of<ShapeError>([&] { vmap([](const Ts& a) { return a; }, {})({s}); });
    EXPECT_NE(m.find("is 0-d"), std::string::npos) << m;
    m = message_of<ShapeError>([&] { vmap(add, {{0, 0}, {not_mapped}, ""})({x, x}); });
    EXPECT_NE(m.find("depends on the mapped arguments"), std::string::npos) << m;
    // a shape error inside the function names the per-example shapes
    m = message_of<ShapeError>([&] {
        vmap(
            [](const Ts& a) {
                return Ts{matmul(a[0], constant(Array(DType::F64, {4, 2})))};
            },
            {})({x});
    });
    EXPECT_NE(m.find("f64[3]"), std::string::npos) << m;
}

TEST_P(Vmap, SingleTensorOverload) {
    Placeholder x({3, 4}, DType::F64, "x");
    auto f = vmap([](const Tensor& v) { return sum(v * v); });
    Tensor y = f(x);
    Array xv = random_array(DType::F64, {3, 4}, 32);
    Array r = function({x}, {y}, {}, opts())(xv)[0];
    for (int64_t b = 0; b < 3; ++b) {
        double s = 0;
        for (int64_t k = 0; k < 4; ++k)
            s += xv.at(b * 4 + k) * xv.at(b * 4 + k);
        EXPECT_NEAR(r.at(b), s, 1e-12);
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, Vmap, ::testing::Values("reference", "cpu"));

} // namespace
} // namespace sj::test
