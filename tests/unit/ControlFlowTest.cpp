// scan, map, fori_loop, while_loop, cond, switch_: values (closed forms and unrolled graphs run
// by the reference interpreter), gradients against f64 finite differences, second order and
// jvp, errors, on every backend.
#include "TestUtil.h"

#include <symjax/symjax.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

namespace sj::test {
namespace {

using Ts = std::vector<Tensor>;

class ControlFlow : public BackendTest {};

Ts concat_ts(Ts a, const Ts& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

/// Central differences of the scalar output 0 of f with respect to argument k (f64).
Array finite_diff(const Function& f, std::vector<Array> args, size_t k, double eps = 1e-6) {
    Array g(DType::F64, args[k].shape());
    for (int64_t i = 0; i < args[k].size(); ++i) {
        Array x = args[k].clone();
        double v = x.data<double>()[i];
        x.data<double>()[i] = v + eps;
        std::vector<Function::Arg> a(args.begin(), args.end());
        a[k] = x;
        double up = f.call(a)[0].at(0);
        x.data<double>()[i] = v - eps;
        a[k] = x;
        double down = f.call(a)[0].at(0);
        g.data<double>()[i] = (up - down) / (2 * eps);
    }
    return g;
}

std::vector<Function::Arg> as_args(const std::vector<Array>& a) {
    return {a.begin(), a.end()};
}

// carry + x: the final carry is the sum, the stacked outputs the running sums (closed form).
TEST_P(ControlFlow, ScanCumulativeSum) {
    Placeholder xs({6}, DType::F64, "xs");
    auto [carry, ys] = scan(
        [](const Ts& c, const Ts& x) {
            return std::pair{Ts{c[0] + x[0]}, Ts{c[0] + x[0]}};
        },
        {scalar(0.0, DType::F64)}, {xs});
    Function f = function({xs}, {carry[0], ys[0]}, {}, opts());
    Array x = random_array(DType::F64, {6}, 1);
    auto r = f(x);
    double s = 0;
    for (int64_t i = 0; i < 6; ++i) {
        s += x.at(i);
        EXPECT_NEAR(r[1].at(i), s, 1e-12) << i;
    }
    EXPECT_NEAR(r[0].at(0), s, 1e-12);
}

// reverse: slices from the last to the first, outputs kept in the sequence's order.
TEST_P(ControlFlow, ScanReverse) {
    Placeholder xs({5}, DType::F64, "xs");
    auto [carry, ys] = scan(
        [](const Ts& c, const Ts& x) {
            return std::pair{Ts{c[0] + x[0]}, Ts{c[0] + x[0]}};
        },
        {scalar(0.0, DType::F64)}, {xs}, {}, {.reverse = true});
    Function f = function({xs}, {ys[0]}, {}, opts());
    Array x = random_array(DType::F64, {5}, 2);
    Array r = f(x)[0];
    double s = 0;
    for (int64_t i = 4; i >= 0; --i) {
        s += x.at(i);
        EXPECT_NEAR(r.at(i), s, 1e-12) << i;
    }
}

// Results a body may give that the loop cannot compute in place (Note [Loop rows in place]):
// a slice of a sequence passed through, a view (reshape) of the new carry, the same value as a
// carry and an output, and a carry passed through unchanged; forward and reverse, with the
// carry history a gradient reads. Against the same recurrence unrolled by hand.
TEST_P(ControlFlow, ScanRowsInPlaceOrCopied) {
    for (bool reverse : {false, true}) {
        Placeholder xs({5, 2, 3}, DType::F64, "xs"), h0({2, 3}, DType::F64, "h0");
        auto [carry, ys] = scan(
            [](const Ts& c, const Ts& x) {
                Tensor h = tanh(c[0] * 0.9 + x[0]);
                return std::pair{Ts{h, c[1]}, Ts{h * 2.0, x[0], reshape(h, {6}), h}};
            },
            {h0, h0 * 3.0}, {xs}, {}, {.reverse = reverse});
        Tensor cost =
            sum(carry[0] * carry[0]) + sum(ys[0] * ys[3]) + sum(sin(ys[2])) + sum(ys[1] * carry[1]);
        // the same by hand
        Tensor h = h0;
        std::vector<Tensor> hs(5);
        for (int s = 0; s < 5; ++s) {
            const int t = reverse ? 4 - s : s;
            h = tanh(h * 0.9 + xs[t]);
            hs[size_t(t)] = h;
        }
        Tensor want_cost = sum(h * h);
        for (int t = 0; t < 5; ++t)
            want_cost = want_cost + sum(hs[size_t(t)] * 2.0 * hs[size_t(t)]) +
                        sum(sin(reshape(hs[size_t(t)], {6}))) + sum(xs[t] * (h0 * 3.0));
        Ts got = concat_ts({cost}, gradients(cost, {xs, h0}));
        Ts want = concat_ts({want_cost}, gradients(want_cost, {xs, h0}));
        Ts outs = concat_ts(concat_ts(got, ys), {carry[0], carry[1]});
        Function f = function({xs, h0}, outs, {}, opts());
        Function g = function({xs, h0}, want, {}, opts());
        Array xv = random_array(DType::F64, {5, 2, 3}, 21),
              hv = random_array(DType::F64, {2, 3}, 22);
        auto a = f(xv, hv);
        auto b = g(xv, hv);
        const std::string how = reverse ? "reverse" : "forward";
        for (size_t k = 0; k < want.size(); ++k)
            expect_close(a[k], b[k], 1e-12, 1e-12, how + " result " + std::to_string(k));
        expect_close(a[got.size() + 1], xv, 0, 0, how + ": the sequence passed through");
        for (int t = 0; t < 5; ++t)
            for (int64_t i = 0; i < 6; ++i) {
                EXPECT_EQ(a[got.size() + 2].at(t * 6 + i), a[got.size() + 3].at(t * 6 + i))
                    << how << ": the view of the carry, step " << t;
                EXPECT_EQ(a[got.size()].at(t * 6 + i), 2.0 * a[got.size() + 3].at(t * 6 + i))
                    << how << ": h * 2, step " << t;
            }
        Array h3 = hv.clone();
        for (int64_t i = 0; i < h3.size(); ++i)
            h3.data<double>()[i] *= 3.0;
        expect_close(a[got.size() + 5], h3, 0, 0, how + ": the carry passed through");
    }
}

/// h_{t+1} = tanh(W h_t + U x_t + b), y_t = h_{t+1} . v; cost = sum(y) + sum(h_T^2).
struct Rnn {
    Placeholder x{{7, 3}, DType::F64, "x"}; // 7 steps of 3 features
    Placeholder h0{{4}, DType::F64, "h0"};
    Placeholder W{{4, 4}, DType::F64, "W"};
    Placeholder U{{4, 3}, DType::F64, "U"};
    Placeholder b{{4}, DType::F64, "b"};
    Tensor cost;
    Rnn() {
        Tensor v = constant(random_array(DType::F64, {4}, 9));
        Tensor Wc = W, Uc = U, bc = b;
        auto [carry, ys] = scan(
            [&](const Ts& h, const Ts& a) {
                Tensor n = tanh(matmul(Wc, h[0]) + matmul(Uc, a[0]) + bc);
                return std::pair{Ts{n}, Ts{sum(n * v)}};
            },
            {h0}, {x});
        cost = sum(ys[0]) + sum(carry[0] * carry[0]);
    }
    std::vector<Tensor> inputs() const { return {x, h0, W, U, b}; }
    std::vector<Array> values() const {
        return {random_array(DType::F64, {7, 3}, 3), random_array(DType::F64, {4}, 4, -1, 1),
                random_array(DType::F64, {4, 4}, 5, -0.7, 0.7),
                random_array(DType::F64, {4, 3}, 6, -0.7, 0.7), random_array(DType::F64, {4}, 7)};
    }
};

// Gradients with respect to the sequence, the initial carry and three captured tensors.
TEST_P(ControlFlow, ScanGradientsMatchFiniteDifferences) {
    Rnn m;
    Ts wrt = m.inputs();
    Ts g = gradients(m.cost, wrt);
    Function fg = function(wrt, g, {}, opts());
    Function fc = function(wrt, {m.cost}, {}, on("reference"));
    auto vals = m.values();
    auto got = fg.call(as_args(vals));
    for (size_t k = 0; k < wrt.size(); ++k)
        expect_close(got[k], finite_diff(fc, vals, k), 1e-6, 1e-8, "d cost / d " + wrt[k].name());
}

// A body with a matrix product (stored for the backward pass, Note [Scan residuals]) and a loop
// of its own: the outer loop's residuals are chosen while the inner loop's gradient is taken.
TEST_P(ControlFlow, NestedScanWithProductGradients) {
    Placeholder xs({4, 2, 3}, DType::F64, "xs"), W({3, 3}, DType::F64, "W");
    Tensor Wc = W;
    auto outer = scan(
        [&](const Ts& h, const Ts& x) {
            Tensor inner = scan(
                               [](const Ts& c, const Ts& row) {
                                   return std::pair{Ts{c[0] * 0.5 + sin(row[0])}, Ts{}};
                               },
                               {zeros({3}, DType::F64)}, {x[0]})
                               .carry[0];
            Tensor n = tanh(matmul(Wc, h[0]) + inner);
            return std::pair{Ts{n}, Ts{}};
        },
        {zeros({3}, DType::F64)}, {xs});
    Tensor cost = sum(outer.carry[0] * outer.carry[0]);
    Ts g = gradients(cost, {xs, W});
    Function fg = function({xs, W}, g, {}, opts());
    Function fc = function({xs, W}, {cost}, {}, on("reference"));
    std::vector<Array> vals{random_array(DType::F64, {4, 2, 3}, 31),
                            random_array(DType::F64, {3, 3}, 32, -0.6, 0.6)};
    auto got = fg.call(as_args(vals));
    expect_close(got[0], finite_diff(fc, vals, 0), 1e-6, 1e-8, "d cost / d xs");
    expect_close(got[1], finite_diff(fc, vals, 1), 1e-6, 1e-8, "d cost / d W");
}

// Hessian-vector product through the scan (the backward scan differentiated again).
TEST_P(ControlFlow, ScanSecondOrderMatchesFiniteDifferences) {
    Rnn m;
    Placeholder v({4, 4}, DType::F64, "v");
    Tensor hv = hessian_vector_product(m.cost, m.W, v);
    Ts ins = m.inputs();
    ins.push_back(v);
    Function f = function(ins, {hv}, {}, opts());
    Tensor gw = gradients(m.cost, {m.W})[0];
    auto vals = m.values();
    Array vv = random_array(DType::F64, {4, 4}, 11);
    auto a = as_args(vals);
    a.push_back(vv);
    Array got = f.call(a)[0];
    vals.push_back(vv);
    // d/dW <grad, v> = H v (H symmetric)
    Function fgv = function(ins, {sum(gw * v)}, {}, on("reference"));
    expect_close(got, finite_diff(fgv, vals, 2), 1e-5, 1e-7, "H v");
}

// Forward mode (jvp) through the scan against a directional finite difference.
TEST_P(ControlFlow, ScanJvpMatchesFiniteDifferences) {
    Rnn m;
    Placeholder t({4, 4}, DType::F64, "t");
    Tensor j = jvp(m.cost, {m.W}, {t});
    Ts ins = m.inputs();
    ins.push_back(t);
    Function f = function(ins, {j}, {}, opts());
    Function fc = function(m.inputs(), {m.cost}, {}, on("reference"));
    auto vals = m.values();
    Array tv = random_array(DType::F64, {4, 4}, 12);
    auto a = as_args(vals);
    a.push_back(tv);
    double got = f.call(a)[0].at(0);
    const double eps = 1e-6;
    auto shifted = [&](double s) {
        auto w = vals;
        w[2] = w[2].clone();
        for (int64_t i = 0; i < 16; ++i)
            w[2].data<double>()[i] += s * tv.at(i);
        return fc.call(as_args(w))[0].at(0);
    };
    EXPECT_NEAR(got, (shifted(eps) - shifted(-eps)) / (2 * eps), 1e-6 * (1 + std::fabs(got)));
}

// A profile of a function with loops has a table for each body (cpu backend) after its own.
TEST(ControlFlowProfile, EachBodyHasItsTable) {
    Placeholder xs({5, 8}, DType::F32, "xs");
    Placeholder W({8, 8}, DType::F32, "W");
    Tensor Wc = W;
    auto [c, ys] = scan(
        [&](const Ts& h, const Ts& x) {
            Tensor n = tanh(matmul(h[0], Wc) + x[0]);
            return std::pair{Ts{n}, Ts{}};
        },
        {zeros({8}, DType::F32)}, {xs}, {}, {.name = "my_loop"});
    FunctionOptions o = on("cpu");
    o.profile = true;
    Function f = function({xs, W}, {sum(c[0])}, {}, o);
    f(random_array(DType::F32, {5, 8}, 1), random_array(DType::F32, {8, 8}, 2));
    const std::string p = f.profile_report();
    const size_t outer = p.find("[symjax] profile ("),
                 body = p.find("[symjax] body of my_loop: profile (");
    ASSERT_NE(outer, std::string::npos) << p;
    ASSERT_NE(body, std::string::npos) << p;
    EXPECT_LT(outer, body) << p;
    EXPECT_NE(p.find("loop "), std::string::npos) << "the loop's own row: " << p;
    // the body's table times its product (5 calls, one per step)
    const size_t gemm = p.find("gemm", body);
    ASSERT_NE(gemm, std::string::npos) << p;
    EXPECT_NE(p.substr(gemm, p.find('\n', gemm) - gemm).find(" 5 "), std::string::npos) << p;
}

// A variable read by the body is captured: its gradient flows, its updates come from function().
TEST_P(ControlFlow, ScanReadsVariablesAndTrains) {
    Variable w(Array(std::vector<double>{0.5}, Shape{}), "w");
    Placeholder xs({4}, DType::F64, "xs");
    auto [c, ys] = scan(
        [&](const Ts& h, const Ts& x) {
            return std::pair{Ts{h[0] * w + x[0]}, Ts{}};
        },
        {scalar(0.0, DType::F64)}, {xs});
    Tensor loss = c[0] * c[0];
    Tensor g = gradients(loss, {w})[0];
    Function step = function({xs}, {loss, g}, Updates{{w, w - 0.01 * g}}, opts());
    Array x(std::vector<double>{1, 2, 3, 4}, Shape{4});
    // c = ((x0 w + x1) w + x2) w + x3
    auto poly = [&](double wv) { return ((1 * wv + 2) * wv + 3) * wv + 4; };
    auto dpoly = [&](double wv) { return 3 * wv * wv + 4 * wv + 3; };
    double wv = 0.5;
    for (int i = 0; i < 3; ++i) {
        auto r = step(x);
        EXPECT_NEAR(r[0].at(0), poly(wv) * poly(wv), 1e-12);
        EXPECT_NEAR(r[1].at(0), 2 * poly(wv) * dpoly(wv), 1e-10);
        wv -= 0.01 * 2 * poly(wv) * dpoly(wv);
    }
    EXPECT_NEAR(w.value().at(0), wv, 1e-12);
}

// checkpoint_every (Note [Scan checkpointing]): the same values, gradients and second order as the
// plain scan, for segment lengths that divide the steps, leave a tail, or exceed them, both
// directions; and the gradient function holds fewer bytes of carries.
TEST_P(ControlFlow, ScanCheckpointingGivesTheSameGradients) {
    Placeholder xs({10, 3}, DType::F64, "xs");
    Variable w(random_array(DType::F64, {3, 3}, 60), "w_ckpt");
    auto run = [&](int64_t k, bool reverse) {
        auto r = scan(
            [&](const Ts& c, const Ts& x) {
                Tensor h = tanh(matmul(expand_dims(c[0], 0), w)[0] + x[0]);
                return std::pair{Ts{h}, Ts{h * h}};
            },
            {zeros({3}, DType::F64)}, {xs}, {}, {.reverse = reverse, .checkpoint_every = k});
        Tensor loss = sum(r.outputs[0]) + sum(r.carry[0] * r.carry[0]);
        Tensor gw = gradients(loss, Ts{w})[0];
        Tensor hv = hessian_vector_product(loss, xs, ones({10, 3}, DType::F64));
        return Ts{r.carry[0], r.outputs[0], gw, gradients(loss, Ts{xs})[0], hv};
    };
    Array xv = random_array(DType::F64, {10, 3}, 61);
    for (bool reverse : {false, true}) {
        auto want = function({xs}, run(0, reverse), {}, on("reference"))(xv);
        for (int64_t k : {1, 2, 3, 5, 10, 20}) {
            auto got = function({xs}, run(k, reverse), {}, opts())(xv);
            for (size_t j = 0; j < want.size(); ++j)
                expect_close(got[j], want[j], 1e-12, 1e-12,
                             "k " + std::to_string(k) + (reverse ? " reverse" : "") + " result " +
                                 std::to_string(j));
        }
    }
}

// unroll (Note [Scan unrolling]): the same carries, outputs, gradients and second order as the
// plain scan for block lengths that divide the steps, leave a tail or exceed them, both
// directions, with two sequences, a non-sequence, two outputs, and combined with checkpointing.
// On the reference interpreter the unrolled forward computes the same ops in the same order: the
// same bits (the gradients add their per-step terms block by block: the same to rounding).
TEST_P(ControlFlow, ScanUnrollGivesTheSameResults) {
    Placeholder xs({10, 3}, DType::F64, "xs"), zs({10}, DType::F64, "zs"), b({3}, DType::F64, "b");
    Variable w(random_array(DType::F64, {3, 3}, 62), "w_unroll");
    auto run = [&](int64_t k, bool reverse, int64_t ckpt) {
        auto r = scan(
            [&](const Ts& c, const Ts& a) { // a: x slice, z slice, then b
                Tensor h = tanh(matmul(expand_dims(c[0], 0), w)[0] + a[0] * a[1] + a[2]);
                return std::pair{Ts{h, c[1] + sum(h)}, Ts{h * h, a[1] * sum(h)}};
            },
            {zeros({3}, DType::F64), scalar(0.0, DType::F64)}, {xs, zs}, {b},
            {.reverse = reverse, .checkpoint_every = ckpt, .unroll = k});
        Tensor loss =
            sum(r.outputs[0]) + sum(r.outputs[1]) + r.carry[1] + sum(r.carry[0] * r.carry[0]);
        Tensor gw = gradients(loss, Ts{w})[0];
        Tensor hv = hessian_vector_product(loss, xs, ones({10, 3}, DType::F64));
        return Ts{r.carry[0], r.carry[1], r.outputs[0], r.outputs[1], gw, gradients(loss, Ts{b})[0],
                  hv};
    };
    std::vector<Array> args = {random_array(DType::F64, {10, 3}, 63),
                               random_array(DType::F64, {10}, 64),
                               random_array(DType::F64, {3}, 65)};
    auto call = [&](const Ts& outs, const FunctionOptions& fo) {
        return function({xs, zs, b}, outs, {}, fo)(args[0], args[1], args[2]);
    };
    for (bool reverse : {false, true}) {
        auto want = call(run(1, reverse, 0), on("reference"));
        for (int64_t k : {2, 3, 5, 10, 20}) {
            for (int64_t ckpt : {0, 4}) {
                std::string what = "unroll " + std::to_string(k) + (ckpt ? ", checkpoint 4" : "") +
                                   (reverse ? ", reverse" : "");
                auto got = call(run(k, reverse, ckpt), opts());
                for (size_t j = 0; j < want.size(); ++j)
                    expect_close(got[j], want[j], 1e-12, 1e-12,
                                 what + ", result " + std::to_string(j));
                if (ckpt ==
                    0) { // the forward results (0-3); gradients add per-step terms in blocks
                    auto ref = call(run(k, reverse, 0), on("reference"));
                    for (size_t j = 0; j < 4; ++j)
                        EXPECT_EQ(
                            std::memcmp(ref[j].raw(), want[j].raw(), size_t(want[j].nbytes())), 0)
                            << what << ": the reference's bits differ, result " << j;
                }
            }
        }
    }
    // a length unknown when the graph is built cannot be cut into blocks; unroll must be >= 1
    Placeholder dyn({-1, 3}, DType::F64, "dyn");
    auto step = [&](const Ts& c, const Ts& a) { return std::pair{Ts{c[0] + a[0]}, Ts{}}; };
    EXPECT_THROW(scan(step, {zeros({3}, DType::F64)}, {dyn}, {}, {.unroll = 2}), ShapeError);
    EXPECT_THROW(scan(step, {zeros({3}, DType::F64)}, {xs}, {}, {.unroll = 0}), ShapeError);
}

// The memory plan's bytes (the cpu backend's FunctionStats; the reference interpreter keeps none).
TEST(ControlFlowCpu, ScanCheckpointingSavesCarryMemory) {
    // 1024 steps of a [1024] carry driven by an [8] input: the plain gradient stores 1024 carries
    // (4 MB in f32), the checkpointed one the 32 segment carries and one segment's 32 carries
    Placeholder xs({1024, 8}, DType::F32, "xs");
    auto bytes = [&](int64_t k) {
        auto r = scan(
            [](const Ts& c, const Ts& x) { return std::pair{Ts{sin(c[0]) + sum(x[0])}, Ts{}}; },
            {zeros({1024})}, {xs}, {}, {.checkpoint_every = k});
        Function f = function({xs}, {gradients(sum(r.carry[0]), Ts{xs})[0]}, {}, on("cpu"));
        f(Array(DType::F32, {1024, 8})); // the stats of a call
        return f.stats().intermediate_bytes;
    };
    const int64_t plain = bytes(0), ckpt = bytes(32);
    EXPECT_GE(plain, 1024 * 1024 * 4);
    EXPECT_LT(ckpt, plain / 4) << "plain " << plain << ", checkpointed " << ckpt;
    std::string m = message_of<ShapeError>([&] {
        Placeholder dyn({-1, 2}, DType::F32, "dyn");
        scan([](const Ts& c, const Ts& x) { return std::pair{Ts{c[0] + x[0]}, Ts{}}; }, {zeros({2})},
             {dyn}, {}, {.name = "ck", .checkpoint_every = 4});
    });
    EXPECT_NE(m.find("ck: checkpoint_every needs the number of steps"), std::string::npos) << m;
}

TEST_P(ControlFlow, MapAndForiLoop) {
    Placeholder xs({5, 2}, DType::F64, "xs");
    Tensor m = map([](const Ts& a) { return sum(a[0] * a[0]); }, {xs});
    Ts f = fori_loop(
        2, 6, [](const Tensor& i, const Ts& c) { return Ts{c[0] * 2.0 + cast(i, DType::F64)}; },
        {scalar(1.0, DType::F64)});
    Function fn = function({xs}, {m, f[0]}, {}, opts());
    Array x = random_array(DType::F64, {5, 2}, 13);
    auto r = fn(x);
    ASSERT_EQ(r[0].shape(), (Shape{5}));
    for (int64_t i = 0; i < 5; ++i)
        EXPECT_NEAR(r[0].at(i), x.at(2 * i) * x.at(2 * i) + x.at(2 * i + 1) * x.at(2 * i + 1),
                    1e-12);
    double c = 1;
    for (int i = 2; i < 6; ++i)
        c = 2 * c + i;
    EXPECT_EQ(r[1].at(0), c);
}

// A scan inside a scan's body, reading the outer carry (captured from the enclosing body).
TEST_P(ControlFlow, NestedScanValueAndGradient) {
    Placeholder xs({3, 4}, DType::F64, "xs");
    Placeholder a({}, DType::F64, "a");
    auto [outer, ys] = scan(
        [&](const Ts& c, const Ts& row) {
            auto [inner, zs] = scan(
                [&](const Ts& d, const Ts& x) {
                    return std::pair{Ts{d[0] * a + x[0] * c[0]}, Ts{}};
                },
                {scalar(1.0, DType::F64)}, {row[0]});
            return std::pair{Ts{sin(inner[0])}, Ts{}};
        },
        {scalar(0.5, DType::F64)}, {xs});
    Ts g = gradients(outer[0], {a, xs});
    Function f = function({xs, a}, {outer[0], g[0], g[1]}, {}, opts());
    Function fc = function({xs, a}, {outer[0]}, {}, on("reference"));
    Array x = random_array(DType::F64, {3, 4}, 14, -0.5, 0.5);
    Array av(std::vector<double>{0.7}, Shape{});
    auto r = f(x, av);
    // closed form: an explicit loop
    double c = 0.5;
    for (int i = 0; i < 3; ++i) {
        double d = 1;
        for (int j = 0; j < 4; ++j)
            d = d * 0.7 + x.at(4 * i + j) * c;
        c = std::sin(d);
    }
    EXPECT_NEAR(r[0].at(0), c, 1e-12);
    expect_close(r[1], finite_diff(fc, {x, av}, 1), 1e-6, 1e-8, "d/da");
    expect_close(r[2], finite_diff(fc, {x, av}, 0), 1e-6, 1e-8, "d/dxs");
}

// Carries whose batch dim is known only at call time.
TEST_P(ControlFlow, ScanDynamicBatch) {
    Placeholder xs({5, -1}, DType::F64, "xs");
    Placeholder h0({-1}, DType::F64, "h0");
    auto [c, ys] = scan(
        [](const Ts& h, const Ts& x) {
            return std::pair{Ts{h[0] * 0.5 + x[0]}, Ts{h[0]}};
        },
        {h0}, {xs});
    EXPECT_EQ(ys[0].shape(), (Shape{5, -1}));
    Tensor g = gradients(sum(c[0]), {h0})[0];
    Function f = function({xs, h0}, {c[0], ys[0], g}, {}, opts());
    for (int64_t n : {1, 3}) {
        Array x = random_array(DType::F64, {5, n}, 15), h = random_array(DType::F64, {n}, 16);
        auto r = f(x, h);
        ASSERT_EQ(r[1].shape(), (Shape{5, n}));
        for (int64_t j = 0; j < n; ++j) {
            double v = h.at(j);
            for (int64_t t = 0; t < 5; ++t) {
                EXPECT_NEAR(r[1].at(t * n + j), v, 1e-12);
                v = v * 0.5 + x.at(t * n + j);
            }
            EXPECT_NEAR(r[0].at(j), v, 1e-12);
            EXPECT_NEAR(r[2].at(j), std::pow(0.5, 5), 1e-12);
        }
    }
}

// Newton's iteration for sqrt(a) until converged: value, trip count, gradient (with
// max_iterations) against finite differences.
TEST_P(ControlFlow, WhileLoopValueTripCountAndGradient) {
    Placeholder a({}, DType::F64, "a");
    Ts out = while_loop([](const Ts& v, const Ts& ns) { return abs(v[0] * v[0] - ns[0]) > 1e-12; },
                        [](const Ts& v, const Ts& ns) {
                            return Ts{0.5 * (v[0] + ns[0] / v[0]), v[1] + 1.0};
                        },
                        {a, scalar(0.0, DType::F64)}, {a}, {.max_iterations = 100});
    Tensor g = gradients(out[0] * out[0] * out[0], {a})[0];
    Function f = function({a}, {out[0], out[1], trip_count(out[0]), g}, {}, opts());
    auto r = f(2.0);
    EXPECT_NEAR(r[0].at(0), std::sqrt(2.0), 1e-12);
    EXPECT_EQ(r[1].at(0), r[2].at(0));
    EXPECT_GT(r[2].at(0), 2);
    // d (sqrt a)^3 / da = 1.5 sqrt(a), through the unrolled iterations
    EXPECT_NEAR(r[3].at(0), 1.5 * std::sqrt(2.0), 1e-6);
}

TEST_P(ControlFlow, WhileLoopBoundedByMaxIterations) {
    Ts out = while_loop([](const Ts& v, const Ts&) { return v[0] < 1e9; },
                        [](const Ts& v, const Ts&) { return Ts{v[0] + 1.0}; }, {scalar(0.0)}, {},
                        {.max_iterations = 7});
    Function f = function({}, {out[0], trip_count(out[0])}, {}, opts());
    auto r = f();
    EXPECT_EQ(r[0].at(0), 7.0);
    EXPECT_EQ(r[1].at(0), 7.0);
}

TEST_P(ControlFlow, WhileLoopGradientNeedsMaxIterations) {
    Placeholder a({}, DType::F64, "a");
    Ts out = while_loop([](const Ts& v, const Ts&) { return v[0] < 10.0; },
                        [](const Ts& v, const Ts&) { return Ts{v[0] * 2.0}; }, {a});
    std::string msg = message_of<Error>([&] { gradients(out[0], {a}); });
    EXPECT_NE(msg.find("max_iterations"), std::string::npos) << msg;
}

// Only the chosen branch runs: the other one would fail its index check.
TEST_P(ControlFlow, CondRunsOnlyTheChosenBranch) {
    Placeholder p({}, DType::Bool, "p");
    Placeholder i({}, DType::I64, "i");
    Tensor x = constant(Array(std::vector<double>{1, 2, 3}, Shape{3}));
    Ts out = cond(
        p, [&](const Ts& o) { return Ts{x[o[0]]}; },
        [](const Ts&) { return Ts{scalar(-1.0, DType::F64)}; }, {i});
    Function f = function({p, i}, {out[0]}, {}, opts());
    EXPECT_EQ(f(true, 2)[0].at(0), 3.0);
    EXPECT_EQ(f(false, 99)[0].at(0), -1.0);
    EXPECT_THROW(f(true, 99), InputError);
}

TEST_P(ControlFlow, CondGradientMatchesFiniteDifferences) {
    Placeholder x({3}, DType::F64, "x");
    Placeholder w({3}, DType::F64, "w");
    Tensor pred = sum(x) > 0.0;
    Ts out = cond(
        pred, [&](const Ts& o) { return Ts{sum(exp(o[0]) * w)}; },
        [&](const Ts& o) { return Ts{sum(o[0] * o[0])}; }, {x});
    Ts g = gradients(out[0], {x, w});
    Function f = function({x, w}, {out[0], g[0], g[1]}, {}, opts());
    Function fc = function({x, w}, {out[0]}, {}, on("reference"));
    for (uint64_t seed : {17, 18, 19}) {
        Array xv = random_array(DType::F64, {3}, seed),
              wv = random_array(DType::F64, {3}, seed + 10);
        auto r = f(xv, wv);
        expect_close(r[1], finite_diff(fc, {xv, wv}, 0), 1e-6, 1e-8, "d/dx");
        expect_close(r[2], finite_diff(fc, {xv, wv}, 1), 1e-6, 1e-8, "d/dw");
    }
}

TEST_P(ControlFlow, SwitchPicksTheIndexedBranch) {
    Placeholder k({}, DType::I32, "k");
    Placeholder x({}, DType::F64, "x");
    Ts out = switch_(k,
                     {[](const Ts& o) { return Ts{o[0] + 1.0}; },
                      [](const Ts& o) { return Ts{o[0] * 10.0}; },
                      [](const Ts& o) { return Ts{-o[0]}; }},
                     {x});
    Function f = function({k, x}, {out[0]}, {}, opts());
    EXPECT_EQ(f(0, 2.0)[0].at(0), 3.0);
    EXPECT_EQ(f(1, 2.0)[0].at(0), 20.0);
    EXPECT_EQ(f(2, 2.0)[0].at(0), -2.0);
    EXPECT_EQ(f(7, 2.0)[0].at(0), -2.0);
}

// Compiled loops (Note [Compiled scan loops], Note [Step kernels] in CpuExecutable.cpp): the
// cpu backend runs small scans without calling the body step by step. Each case runs on the cpu
// backend and on the reference interpreter (the oracle, which always calls the body), and says
// which way the cpu backend must have run it.
struct LoopCase {
    std::string name;
    Ts inputs;
    Ts outputs;
    size_t compiled = 1, step_kernels = 1; // FunctionStats after a cpu call
};

void check_loop_case(const LoopCase& c, uint64_t seed) {
    Function cpu = function(c.inputs, c.outputs, {}, {.backend = "cpu"});
    Function ref = function(c.inputs, c.outputs, {}, {.backend = "reference"});
    std::vector<Array> args;
    for (const auto& p : c.inputs)
        args.push_back(random_array(p.dtype(), p.shape(), seed++));
    for (int call = 0; call < 2; ++call) { // the second call reuses the loop's plan
        auto a = cpu.call(as_args(args));
        auto b = ref.call(as_args(args));
        for (size_t k = 0; k < a.size(); ++k)
            expect_close(a[k], b[k], 1e-12, 1e-12, c.name + ": result " + std::to_string(k));
        EXPECT_EQ(cpu.stats().compiled_loops, c.compiled) << c.name;
        EXPECT_EQ(cpu.stats().step_kernels, c.step_kernels) << c.name;
    }
}

TEST(CompiledLoops, MatchTheReference) {
    constexpr DType f64 = DType::F64;
    std::vector<LoopCase> cases;
    auto cumsum = [](const Ts& c, const Ts& x) {
        return std::pair{Ts{c[0] + x[0]}, Ts{c[0] + x[0]}};
    };
    for (bool reverse : {false, true}) {
        const std::string how = reverse ? " (reverse)" : "";
        { // the carry is also the stacked output: one step kernel
            Placeholder xs({1000}, f64, "xs");
            auto r = scan(cumsum, {scalar(0.5, f64)}, {xs}, {}, {.reverse = reverse});
            cases.push_back({"cumsum" + how, {xs}, {r.carry[0], r.outputs[0]}});
        }
        { // two carries of a [3, 5] state, a captured value, a view of a sequence
            Placeholder xs({40, 15}, f64, "xs"), h0({3, 5}, f64, "h0"), w({3, 5}, f64, "w");
            auto r = scan(
                [&](const Ts& c, const Ts& x) {
                    Tensor a = c[0] * 0.9 + reshape(x[0], {3, 5}) * w;
                    Tensor b = c[1] + tanh(a);
                    return std::pair{Ts{a, b}, Ts{b * 2.0, a - b}};
                },
                {h0, h0 * 0.5}, {xs}, {}, {.reverse = reverse});
            cases.push_back({"two carries" + how,
                             {xs, h0, w},
                             {r.carry[0], r.carry[1], r.outputs[0], r.outputs[1]}});
        }
        { // a gradient: the forward keeps the carry history, the backward is a reverse scan
            Placeholder xs({30, 4}, f64, "xs"), h0({4}, f64, "h0");
            auto r = scan(
                [](const Ts& c, const Ts& x) {
                    Tensor h = sin(c[0]) * 0.8 + x[0];
                    return std::pair{Ts{h}, Ts{h * h}};
                },
                {h0}, {xs}, {}, {.reverse = reverse});
            Tensor cost = sum(r.outputs[0]) + sum(r.carry[0] * 3.0);
            Ts g = gradients(cost, {xs, h0});
            cases.push_back({"gradient" + how, {xs, h0}, {cost, g[0], g[1]}, 2, 2});
        }
    }
    { // no carry (map)
        Placeholder xs({20, 7}, f64, "xs");
        Tensor ys = map([](const Ts& x) { return exp(x[0]) - 1.0; }, {xs});
        cases.push_back({"map", {xs}, {ys}});
    }
    { // the carry read through a broadcast: two kernels, a compiled loop without step kernel
        Placeholder xs({25, 2, 3}, f64, "xs"), c0({3}, f64, "c0");
        auto r = scan(
            [](const Ts& c, const Ts& x) {
                return std::pair{Ts{c[0] * 0.5 + 1.0}, Ts{c[0] + x[0]}};
            },
            {c0}, {xs});
        cases.push_back({"broadcast carry", {xs, c0}, {r.carry[0], r.outputs[0]}, 1, 0});
    }
    { // a reduction in the body: a compiled loop of its kernels
        Placeholder xs({25, 6}, f64, "xs");
        auto r = scan(
            [](const Ts& c, const Ts& x) {
                Tensor s = c[0] + sum(x[0] * x[0]);
                return std::pair{Ts{s}, Ts{s, x[0] * s}};
            },
            {scalar(0.0, f64)}, {xs});
        cases.push_back({"reduction", {xs}, {r.carry[0], r.outputs[0], r.outputs[1]}, 1, 0});
    }
    { // a matrix product: the body runs step by step
        Placeholder xs({10, 4}, f64, "xs"), w({4, 4}, f64, "w");
        auto r = scan(
            [&](const Ts& c, const Ts& x) {
                Tensor h = tanh(matmul(w, c[0]) + x[0]);
                return std::pair{Ts{h}, Ts{h}};
            },
            {zeros({4}, f64)}, {xs});
        cases.push_back({"matmul", {xs, w}, {r.carry[0], r.outputs[0]}, 0, 0});
    }
    { // many steps of a wide state: the step kernel runs in chunks, split over the threads
        Placeholder xs({600, 2048}, f64, "xs");
        auto r = scan(
            [](const Ts& c, const Ts& x) {
                Tensor h = c[0] * 0.99 + x[0];
                return std::pair{Ts{h}, Ts{h}};
            },
            {zeros({2048}, f64)}, {xs});
        cases.push_back({"chunks", {xs}, {r.carry[0], r.outputs[0]}});
    }
    uint64_t seed = 100;
    for (const auto& c : cases)
        check_loop_case(c, seed += 10);
}

// A compiled loop polls for interrupts between chunks of steps: a check that asks to stop makes
// the call throw, naming the loop, and leaves the variables as they were.
TEST(CompiledLoops, StopWhenInterrupted) {
    Placeholder xs({100000}, DType::F32, "xs");
    Variable v(Array::full(DType::F32, {}, 1.0), "v");
    auto r = scan(
        [](const Ts& c, const Ts& x) {
            return std::pair{Ts{c[0] + x[0]}, Ts{}};
        },
        {scalar(0.0f)}, {xs}, {}, {.name = "running_sum"});
    Function f = function({xs}, {r.carry[0]}, {{v, v + r.carry[0]}});
    Array x = Array::full(DType::F32, {100000}, 1.0);
    EXPECT_EQ(f(x)[0].at(0), 100000.0);
    EXPECT_EQ(f.stats().step_kernels, 1u);
    int polls = 0; // the call polls once before its first step, then the loop polls
    InterruptScope scope([&] { return ++polls > 1; }, std::chrono::milliseconds(0));
    try {
        f(x);
        ADD_FAILURE() << "the call was not interrupted";
    } catch (const Interrupted& e) {
        EXPECT_NE(std::string(e.what()).find("running_sum"), std::string::npos) << e.what();
    }
    EXPECT_EQ(v.value().at(0), 100001.0) << "the interrupted call changed the variable";
}

INSTANTIATE_TEST_SUITE_P(Backends, ControlFlow, ::testing::Values("reference", "cpu"));

// ---- errors
// --------------------------------------------------------------------------------------

TEST(ControlFlowErrors, CarryChangingTypeNamesTheLoopAndTheCarry) {
    std::string msg = message_of<TypeError>([] {
        scan(
            [](const Ts& c, const Ts& x) {
                return std::pair{Ts{c[0] + x[0]}, Ts{}};
            },
            {scalar(0.0)}, {ones({4, 3})}, {}, {.name = "accumulate"});
    });
    EXPECT_NE(msg.find("accumulate"), std::string::npos) << msg;
    EXPECT_NE(msg.find("carry 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f32[3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f32[]"), std::string::npos) << msg;
}

TEST(ControlFlowErrors, PredicateMustBeABoolScalar) {
    Tensor x = ones({3});
    std::string msg = message_of<TypeError>([&] {
        cond(
            x > 0.0, [](const Ts& o) { return o; }, [](const Ts& o) { return o; }, {x});
    });
    EXPECT_NE(msg.find("bool scalar"), std::string::npos) << msg;
    msg = message_of<TypeError>([&] {
        while_loop([](const Ts& v, const Ts&) { return v[0]; },
                   [](const Ts& v, const Ts&) { return v; }, {scalar(1.0)});
    });
    EXPECT_NE(msg.find("bool scalar"), std::string::npos) << msg;
}

TEST(ControlFlowErrors, BranchesMustAgree) {
    Tensor x = ones({3});
    std::string msg = message_of<TypeError>([&] {
        cond(
            scalar(1.0) > 0.0, [](const Ts& o) { return Ts{o[0]}; },
            [](const Ts& o) { return Ts{sum(o[0])}; }, {x});
    });
    EXPECT_NE(msg.find("false branch"), std::string::npos) << msg;
}

TEST(ControlFlowErrors, SequenceLengthsMustAgree) {
    std::string msg = message_of<ShapeError>([] {
        scan(
            [](const Ts& c, const Ts& x) {
                return std::pair{Ts{c[0] + x[0] + x[1]}, Ts{}};
            },
            {scalar(0.0)}, {ones({4}), ones({5})});
    });
    EXPECT_NE(msg.find("steps"), std::string::npos) << msg;
}

TEST(ControlFlowErrors, RandomNumbersInsideABodyAreRefused) {
    std::string msg = message_of<Error>([] {
        scan(
            [](const Ts& c, const Ts& x) {
                return std::pair{Ts{c[0] + x[0] * random::uniform_like(x[0])}, Ts{}};
            },
            {scalar(0.0)}, {ones({4})});
    });
    EXPECT_NE(msg.find("random"), std::string::npos) << msg;
}

} // namespace
} // namespace sj::test
