// Differential fuzzing of the compiler: seeded random graphs of elementwise, reduction,
// broadcast and movement ops, compiled by the cpu backend (rewrites, fusion, JIT kernels) and
// run by the reference interpreter, outputs and gradients compared within tolerances derived
// from a first-order error analysis of each graph.
//
// Reproduce a failure with the seed it prints:
//   SJ_FUZZ_SEED=<seed> SJ_FUZZ_COUNT=1 ./build/tests/symjax_tests --gtest_filter=FuzzFusion.*
// Run more graphs with SJ_FUZZ_COUNT=<n> (seeds SJ_FUZZ_SEED, SJ_FUZZ_SEED+1, ...);
// SJ_FUZZ_VERBOSE=1 lists the outputs whose tolerance is looser than 1e-4 of their scale.
//
// Graphs: 1-3 inputs of random small shapes (0-d, size-1 dims, odd sizes, sizes around the
// vector widths; 5% of the graphs have a 40k-element input, above the threading threshold),
// f32 or (15%) f64, 2-17 steps over a pool of nodes that later steps reuse (shared
// subexpressions: sibling kernels, recomputation, materialisation), with unary/binary elementwise
// ops, reductions (keepdims or not), reshape/permute/slice/flip/broadcast, where over a
// comparison, i32 side computations, concat/pad (reference fallbacks inside fused graphs),
// matmul with a folded transpose, and forms the rewrite passes fire on (log(1 + x), exp(x) - 1,
// log(sum(exp)), x * 1 + 0). Up to four outputs, some of them intermediates. Every third graph
// also compares the gradients of the sum of its outputs w.r.t. its inputs, every fourth reruns
// with -1 dims in its placeholders.
//
// Note [Fuzz tolerances]
// Both backends compute in the graph's dtype and round every op's result to it (the reference
// evaluates each op in double and rounds; the cpu kernels use f32 arithmetic, our f32
// polynomials for exp/log/tanh/erf/expm1/log1p and libm for sin/cos/pow). Their results differ
// because the cpu's transcendentals are a few ulp off where the reference is correctly rounded,
// because sums are reassociated (vectorised, split over threads), and because the rewrites change
// the formula (log(1+x) -> log1p(x), ...). All of these are errors of a correctly working
// implementation relative to exact arithmetic, so the test bounds that error: every node gets an
// interval [lo, hi] holding all its values (interval arithmetic from the actual inputs) and an
// absolute error bound E, propagated to first order:
//   E(f(x)) = max|f'| over [lo - E(x), hi + E(x)] * E(x) + (rounding of f: c ulp of max|f|)
// with c = 0.5 for IEEE arithmetic and each transcendental's tested ulp bound
// (TranscendentalAccuracyTest holds the cpu's functions to those bounds). Sums of n terms add
// n errors plus one rounding per term bound. Each backend is within E of the exact value, so
//   |cpu - reference| <= 2 E,
// and the test allows 4 E (a factor 2 for the neglected second-order terms and for intervals
// evaluated at perturbed points). The bound is tight where the graph is well conditioned
// (~1e-7 relative) and loose where it is not (cancellation, exp of large values), which is where
// a correct f32 computation is inaccurate too. A wrong index, a lost term or a wrong op gives
// errors of the size of the values themselves, far above 4 E; the test counts how many outputs had
// a tolerance tighter than 1e-4 of their magnitude and requires that most of them did.
// Discontinuous ops (comparisons feeding where, the masks of max gradients) are assumed not to
// flip: values within a few ulp of a comparison threshold are improbable for continuous random
// inputs, and the seeds run in CI are fixed. Where the assumption fails, Note [Threshold flips].
//
// Note [Threshold flips]
// A comparison whose operands come within their error bounds of each other at some element may
// take either side on a correct backend: seed 1001742 compares x with the mean of 31 copies of
// its own column maximum, which f32 rounds an ulp away from the maximum, so x > mean is true on
// one backend and false on the other where x is the maximum. So when an output misses its
// tolerance, the comparisons of the graph are evaluated on the reference, in f64, and if one has
// a near tie the mismatch is reported as a possible flip and the run is not compared further. A
// near tie of an ordering comparison is |a - b| <= 4 (E(a) + E(b)) > 0 (exact operands do not
// flip); of eq and ne only a near miss, 0 < |a - b| <= 4 (E(a) + E(b)): an exact tie (a value
// against its own maximum, the mask of a max gradient) is the same arithmetic on both backends.
// Operands without a finite bound give no evidence and excuse nothing. At most 2% of a run's
// graphs (or one) may be excused, and none of the suite's seeds is.
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/ir/Node.h>
#include <symjax/symjax.h>

#include "backend/cpu/Jit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <unordered_map>

using namespace sj;
using sj::test::env_u64;
using sj::test::on;

namespace {

// ---- error bounds -------------------------------------------------------------------------

struct Bound {
    double lo = 0, hi = 0; // every value lies in [lo, hi]
    double err = 0;        // |computed - exact| <= err (first order); inf: not bounded
    double mag() const { return std::max(std::fabs(lo), std::fabs(hi)); }
};

double unit_roundoff(DType t) { return t == DType::F64 ? 0x1p-53 : 0x1p-24; }
double tiny(DType t) { return t == DType::F64 ? 0x1p-1074 : 0x1p-149; }

/// Error in ulp of the cpu backend's implementation of op (the reference is correctly rounded,
/// <= 0.5 ulp). f32 polynomials: the bounds TranscendentalAccuracyTest asserts; libm: 1 ulp.
double op_ulps(Op op, DType t) {
    if (t == DType::F32) {
        switch (op) {
        case Op::Exp: case Op::Log: case Op::Erf: return 2;
        case Op::Expm1: case Op::Log1p: case Op::Tanh: return 3;
        case Op::Sin: case Op::Cos: case Op::Pow: return 1;
        case Op::Rsqrt: return 1.5;
        default: return 0.5;
        }
    }
    return has_trait(op, kTranscendental) ? 1 : op == Op::Rsqrt ? 1.5 : 0.5;
}

/// Bounds of every node of a graph, memoised; leaves' intervals come from the actual inputs.
class Bounds {
public:
    void set_input(const Tensor& t, const Array& v) {
        memo_[t.node().get()] = range_of(v);
        alive_.push_back(t.node());
    }

    const Bound& of(const Tensor& t) {
        for (const Node* n : topo_order({t.node().get()}))
            if (!memo_.count(n)) {
                Bound b = eval(*n);
                if (is_float(n->dtype())) {
                    // an input without a bound (err infinite: a pow of a base that may be <= 0,
                    // a sign that may flip) leaves this value without one too. The formulas
                    // below do not all keep infinity: a product with an input bounded to [0, 0]
                    // gave inf * 0 = NaN, and std::max(0, NaN) in a where dropped it, so an
                    // output was compared at a tolerance of one rounding (seed 1000542)
                    for (const auto& i : n->inputs())
                        if (is_float(i->dtype()) && !std::isfinite(memo_.at(i.get()).err))
                            b.err = INFINITY;
                    if (std::isnan(b.err)) b.err = INFINITY;
                    // arithmetic on exact points whose result is a point of the dtype is exact
                    // (IEEE rounds a representable result to itself): 3 - 1 is 2, not 2 +- 1 ulp,
                    // and a pow whose exponent it is keeps its bound
                    bool points = !n->inputs().empty();
                    for (const auto& i : n->inputs()) {
                        const Bound& a = memo_.at(i.get());
                        points = points && a.err == 0 && a.lo == a.hi;
                    }
                    const bool basic = n->is(Op::Add) || n->is(Op::Sub) || n->is(Op::Mul) ||
                                       n->is(Op::Neg) || n->is(Op::Abs);
                    const bool representable = n->dtype() == DType::F64 || double(float(b.lo)) == b.lo;
                    if (points && basic && b.lo == b.hi && representable) b.err = 0;
                }
                if (!is_float(n->dtype()) && !n->inputs().empty()) {
                    // integer arithmetic is exact on exact inputs (no overflow at these ranges)
                    bool exact = true;
                    for (const auto& i : n->inputs()) exact &= memo_.at(i.get()).err == 0;
                    b.err = exact ? 0 : INFINITY;
                }
                memo_[n] = b;
                alive_.push_back(n->shared_from_this()); // no other node may reuse the address
            }
        return memo_.at(t.node().get());
    }

private:
    static Bound range_of(const Array& a) {
        Bound b{INFINITY, -INFINITY, 0};
        for (int64_t i = 0; i < a.size(); ++i) {
            b.lo = std::min(b.lo, a.at(i));
            b.hi = std::max(b.hi, a.at(i));
        }
        if (a.size() == 0) b = {0, 0, 0};
        return b;
    }

    Bound eval(const Node& n) {
        std::vector<Bound> in;
        for (const auto& i : n.inputs()) in.push_back(memo_.at(i.get()));
        const DType t = n.dtype();
        const double u = unit_roundoff(t);
        // rounding of the result: c ulp of the largest value, ulp <= 2u|v|; plus half the
        // smallest denormal for results that underflow
        auto round = [&](const Bound& b, double ulps) { return 2 * ulps * u * b.mag() + tiny(t); };
        // first-order propagation: derivative bound times input error (exact inputs stay exact,
        // even where the derivative is unbounded)
        auto prop = [](double deriv, double e) { return e == 0 ? 0.0 : deriv * e; };
        auto monotone = [&](double (*f)(double), const Bound& a, double deriv, Op op) {
            Bound b{f(a.lo), f(a.hi), 0};
            if (b.lo > b.hi) std::swap(b.lo, b.hi);
            b.err = prop(deriv, a.err) + round(b, op_ulps(op, in.empty() ? t : n.input(0)->dtype()));
            return b;
        };
        if (t == DType::Bool) return {0, 1, 0}; // comparisons are assumed not to flip
        switch (n.op()) {
        case Op::Constant: return range_of(n.attr<ConstantAttrs>().value);
        case Op::Placeholder: return memo_.at(&n); // set by set_input
        case Op::Neg: return {-in[0].hi, -in[0].lo, in[0].err};
        case Op::Abs: {
            const Bound& a = in[0];
            double lo = a.lo >= 0 ? a.lo : a.hi <= 0 ? -a.hi : 0;
            return {lo, a.mag(), a.err};
        }
        case Op::StopGradient: return in[0];
        case Op::Exp: {
            const Bound& a = in[0];
            return monotone([](double x) { return std::exp(x); }, a, std::exp(a.hi + a.err), Op::Exp);
        }
        case Op::Expm1: {
            const Bound& a = in[0];
            return monotone([](double x) { return std::expm1(x); }, a, std::exp(a.hi + a.err), Op::Expm1);
        }
        case Op::Log: {
            const Bound& a = in[0];
            if (a.lo - a.err <= 0) return {0, 0, INFINITY};
            return monotone([](double x) { return std::log(x); }, a, 1 / (a.lo - a.err), Op::Log);
        }
        case Op::Log1p: {
            const Bound& a = in[0];
            if (a.lo - a.err <= -1) return {0, 0, INFINITY};
            return monotone([](double x) { return std::log1p(x); }, a, 1 / (1 + a.lo - a.err), Op::Log1p);
        }
        case Op::Sqrt: {
            const Bound& a = in[0];
            if (a.lo < 0 || (a.err > 0 && a.lo - a.err <= 0)) return {0, 0, INFINITY};
            double d = a.err > 0 ? 0.5 / std::sqrt(a.lo - a.err) : 0;
            return monotone([](double x) { return std::sqrt(x); }, a, d, Op::Sqrt);
        }
        case Op::Rsqrt: {
            const Bound& a = in[0];
            if (a.lo - a.err <= 0) return {0, 0, INFINITY};
            return monotone([](double x) { return 1 / std::sqrt(x); }, a, 0.5 * std::pow(a.lo - a.err, -1.5),
                            Op::Rsqrt);
        }
        case Op::Reciprocal: {
            const Bound& a = in[0];
            double m = a.lo > 0 ? a.lo - a.err : a.hi < 0 ? -a.hi - a.err : 0;
            if (m <= 0) return {0, 0, INFINITY};
            return monotone([](double x) { return 1 / x; }, a, 1 / (m * m), Op::Reciprocal);
        }
        case Op::Tanh: return monotone([](double x) { return std::tanh(x); }, in[0], 1, Op::Tanh);
        case Op::Erf: return monotone([](double x) { return std::erf(x); }, in[0], 1.1283791670955126, Op::Erf);
        case Op::Sin: case Op::Cos: {
            Bound b{-1, 1, 0};
            b.err = prop(1, in[0].err) + round(b, op_ulps(n.op(), t));
            return b;
        }
        case Op::Sign: { // exact unless an inexact input may cross zero
            const Bound& a = in[0];
            bool flips = a.err > 0 && a.lo - a.err <= 0 && a.hi + a.err >= 0;
            return {-1, 1, flips ? INFINITY : 0};
        }
        case Op::Floor: case Op::Ceil: case Op::Round: { // exact on exact inputs; may flip otherwise
            const Bound& a = in[0];
            return {std::floor(a.lo), std::ceil(a.hi), a.err == 0 ? 0 : INFINITY};
        }
        case Op::Cast: {
            DType from = n.input(0)->dtype();
            if (!is_float(t)) return {std::trunc(in[0].lo), std::trunc(in[0].hi), in[0].err == 0 ? 0 : INFINITY};
            if (!is_float(from)) return {in[0].lo, in[0].hi, 0}; // masks: exact (no flips)
            Bound b = in[0];
            if (unit_roundoff(t) > unit_roundoff(from)) b.err += round(b, 0.5);
            return b;
        }
        case Op::Add: case Op::Sub: {
            const Bound &a = in[0], &c = in[1];
            Bound b = n.is(Op::Add) ? Bound{a.lo + c.lo, a.hi + c.hi, 0} : Bound{a.lo - c.hi, a.hi - c.lo, 0};
            b.err = a.err + c.err + round(b, 0.5);
            return b;
        }
        case Op::Mul: {
            const Bound &a = in[0], &c = in[1];
            double p[] = {a.lo * c.lo, a.lo * c.hi, a.hi * c.lo, a.hi * c.hi};
            Bound b{*std::min_element(p, p + 4), *std::max_element(p, p + 4), 0};
            b.err = a.err * c.mag() + c.err * a.mag() + a.err * c.err + round(b, 0.5);
            return b;
        }
        case Op::Div: {
            const Bound &a = in[0], &c = in[1];
            double m = c.lo > 0 ? c.lo - c.err : c.hi < 0 ? -c.hi - c.err : 0;
            if (m <= 0) return {0, 0, INFINITY};
            double q[] = {a.lo / c.lo, a.lo / c.hi, a.hi / c.lo, a.hi / c.hi};
            Bound b{*std::min_element(q, q + 4), *std::max_element(q, q + 4), 0};
            b.err = prop(1 / m, a.err) + prop(a.mag() / (m * m), c.err) + round(b, 0.5);
            return b;
        }
        case Op::Pow: { // positive base, constant exponent
            const Bound &a = in[0], &c = in[1];
            if (c.err != 0 || c.lo != c.hi || a.lo - a.err <= 0) return {0, 0, INFINITY};
            double e = c.lo, x0 = a.lo - a.err, x1 = a.hi + a.err;
            Bound b{std::pow(a.lo, e), std::pow(a.hi, e), 0};
            if (b.lo > b.hi) std::swap(b.lo, b.hi);
            double d = std::fabs(e) * std::max(std::pow(x0, e - 1), std::pow(x1, e - 1));
            b.err = prop(d, a.err) + round(b, op_ulps(Op::Pow, t));
            return b;
        }
        case Op::Max: case Op::Min: {
            const Bound &a = in[0], &c = in[1];
            Bound b = n.is(Op::Max) ? Bound{std::max(a.lo, c.lo), std::max(a.hi, c.hi), 0}
                                    : Bound{std::min(a.lo, c.lo), std::min(a.hi, c.hi), 0};
            b.err = std::max(a.err, c.err);
            return b;
        }
        case Op::Where: {
            const Bound &a = in[1], &c = in[2];
            return {std::min(a.lo, c.lo), std::max(a.hi, c.hi), std::max(a.err, c.err)};
        }
        case Op::ReduceSum: case Op::ReduceProd: case Op::ReduceMax: case Op::ReduceMin: {
            const Bound& a = in[0];
            int64_t count = numel(n.input(0)->shape()) / std::max<int64_t>(1, numel(n.shape()));
            if (n.is(Op::ReduceMax) || n.is(Op::ReduceMin)) return a;
            double N = double(count);
            if (n.is(Op::ReduceSum)) {
                // f32: double accumulation then one rounding; threads round their partial sums
                // too. f64 accumulates in f64 on both backends, each add rounding at the partial
                // sum's size: at most (N - 1) u of the sum of |terms| each (the reference's
                // sequential order and the cpu's lanes and threads alike). Two roundings were
                // assumed before, and a mean of 40000 exp values (seed 607671) missed by 2%.
                Bound b{N * a.lo, N * a.hi, 0};
                const double adds = t == DType::F64 ? 2 * std::max(1.0, N - 1) : 2;
                b.err = N * a.err + adds * u * N * a.mag() + tiny(t);
                return b;
            }
            double M = a.mag();
            Bound b = a.lo >= 0 ? Bound{std::pow(a.lo, N), std::pow(a.hi, N), 0}
                                : Bound{-std::pow(M, N), std::pow(M, N), 0};
            b.err = prop(N * std::pow(M + a.err, N - 1), a.err) + 2 * u * std::pow(M, N) + tiny(t);
            return b;
        }
        case Op::Reshape: case Op::Permute: case Op::Broadcast: case Op::Slice: case Op::Flip: return in[0];
        case Op::Pad: {
            double v = n.attr<PadAttrs>().value;
            return {std::min(in[0].lo, v), std::max(in[0].hi, v), in[0].err};
        }
        case Op::Concat: {
            Bound b = in[0];
            for (const auto& x : in) b = {std::min(b.lo, x.lo), std::max(b.hi, x.hi), std::max(b.err, x.err)};
            return b;
        }
        case Op::DotGeneral: {
            // oneDNN accumulates in f32: a recursive sum of K products errs by up to K u per
            // product magnitude
            const Bound &a = in[0], &c = in[1];
            double K = 1;
            for (int64_t d : n.attr<DotAttrs>().lhs_contract) K *= double(n.input(0)->shape()[d]);
            double M = K * a.mag() * c.mag();
            Bound b{-M, M, 0};
            b.err = K * (a.err * c.mag() + c.err * a.mag() + a.err * c.err) + 2 * K * u * M + tiny(t);
            return b;
        }
        default: return {0, 0, INFINITY}; // ops the generator and autodiff never build here
        }
    }

    std::unordered_map<const Node*, Bound> memo_;
    std::vector<NodePtr> alive_;
};

// ---- the graph generator ------------------------------------------------------------------

constexpr int64_t kMaxElems = 3000;      // per node (big graphs: see kBigElems)
constexpr int64_t kBigElems = 40000;     // above the cpu backend's parallel threshold (32768)
constexpr double kMaxMagnitude = 1e4;    // nodes whose values could exceed this are not kept
constexpr double kMaxRelErr = 1e-3;      // nor nodes whose error bound is this large a fraction

struct Graph {
    std::vector<Placeholder> inputs;
    std::vector<Array> values;
    std::vector<Tensor> outputs;
    DType dtype = DType::F32;
    bool big = false;
};

class Generator {
public:
    explicit Generator(uint64_t seed) : g_(seed) {}

    Graph make() {
        Graph gr;
        gr.dtype = coin(0.15) ? DType::F64 : DType::F32;
        dt_ = gr.dtype;
        big_ = coin(0.05);
        gr.big = big_;
        int n_inputs = 1 + int(uniform(0, 2));
        for (int i = 0; i < n_inputs; ++i) {
            Shape s = random_shape(big_ && i == 0 ? kBigElems : 600);
            Placeholder p(s, dt_, "x" + std::to_string(i));
            bool positive = coin(0.3);
            Array v = random_values(s, positive ? 0.25 : -2.0, positive ? 3.0 : 2.0);
            bounds_.set_input(p, v);
            gr.inputs.push_back(p);
            gr.values.push_back(v);
            pool_.push_back(p);
        }
        int steps = 2 + int(uniform(0, 16));
        for (int s = 0; s < steps; ++s) {
            for (int attempt = 0; attempt < 8; ++attempt) {
                Tensor t = step();
                if (t.defined() && keep(t)) {
                    pool_.push_back(t);
                    break;
                }
            }
        }
        // outputs: the last node, plus up to three more (intermediates that other nodes also
        // read: multi-output kernels and materialised values)
        gr.outputs.push_back(pool_.back());
        int extra = int(uniform(0, 3));
        for (int i = 0; i < extra; ++i) {
            const Tensor& t = pool_[size_t(uniform(0, double(pool_.size()) - 1e-9))];
            bool dup = false;
            for (const auto& o : gr.outputs) dup |= o.same(t);
            if (!dup) gr.outputs.push_back(t);
        }
        return gr;
    }

    Bounds& bounds() { return bounds_; }

private:
    std::mt19937_64 g_;
    DType dt_ = DType::F32;
    bool big_ = false;
    std::vector<Tensor> pool_;
    Bounds bounds_;

    double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(g_); }
    bool coin(double p) { return uniform(0, 1) < p; }
    int64_t pick(const std::vector<int64_t>& v) { return v[size_t(uniform(0, double(v.size()) - 1e-9))]; }
    template <class T> const T& pick_of(const std::vector<T>& v) { return v[size_t(uniform(0, double(v.size()) - 1e-9))]; }

    /// Dims: size 1 often; odd sizes and sizes around the vector widths (8, 16).
    int64_t random_dim() { return pick({1, 1, 1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 33}); }

    Shape random_shape(int64_t max_elems) {
        int rank = int(pick({0, 1, 1, 2, 2, 2, 3, 3, 4}));
        Shape s;
        for (int i = 0; i < rank; ++i) s.push_back(random_dim());
        while (numel(s) > max_elems) s[size_t(uniform(0, double(rank) - 1e-9))] = 1;
        if (max_elems >= kBigElems) s = pick_of(std::vector<Shape>{{41, 1000}, {40000}, {8, 5001}});
        return s;
    }

    Array random_values(const Shape& s, double lo, double hi) {
        Array a(DType::F64, s);
        for (int64_t i = 0; i < a.size(); ++i) a.data<double>()[i] = uniform(lo, hi);
        return a.astype(dt_);
    }

    /// Keeps a node whose values and error stay in the ranges where the comparison is meaningful.
    bool keep(const Tensor& t) {
        if (!is_float(t.dtype()) || t.dtype() != dt_) return false;
        if (numel(t.shape()) > (big_ ? kBigElems * 2 : kMaxElems) || numel(t.shape()) == 0) return false;
        const Bound& b = bounds_.of(t);
        return std::isfinite(b.err) && b.mag() <= kMaxMagnitude && b.err <= kMaxRelErr * (b.mag() + 1);
    }

    /// A recent node usually (depth), any node sometimes (sharing: siblings, recomputation).
    const Tensor& operand() {
        size_t n = pool_.size();
        if (coin(0.35)) return pool_[size_t(uniform(0, double(n) - 1e-9))];
        size_t back = std::min<size_t>(n - 1, size_t(std::geometric_distribution<int>(0.5)(g_)));
        return pool_[n - 1 - back];
    }

    Tensor scalar_c(double v) { return scalar(v, dt_); }

    /// A node of a shape that broadcasts with s (same shape, a suffix with 1s, or a scalar).
    Tensor partner(const Tensor& a) {
        std::vector<Tensor> same, bcast;
        for (const auto& t : pool_) {
            if (t.shape() == a.shape()) same.push_back(t);
            else if (broadcasts_to(t.shape(), a.shape())) bcast.push_back(t);
        }
        double r = uniform(0, 1);
        if (r < 0.45 && !same.empty()) return pick_of(same);
        if (r < 0.8 && !bcast.empty()) return pick_of(bcast);
        if (r < 0.9 && a.rank() > 0) return reduced_for_broadcast(a);
        return scalar_c(uniform(-2, 2));
    }

    static bool broadcasts_to(const Shape& s, const Shape& to) {
        if (s.size() > to.size()) return false;
        size_t lead = to.size() - s.size();
        for (size_t i = 0; i < s.size(); ++i)
            if (s[i] != 1 && s[i] != to[i + lead]) return false;
        return true;
    }

    /// sum/max of a over some axes with keepdims: a broadcast partner with size-1 dims.
    Tensor reduced_for_broadcast(const Tensor& a) {
        Axes ax;
        for (int i = 0; i < a.rank(); ++i)
            if (coin(0.5)) ax.push_back(i);
        if (ax.empty()) ax.push_back(a.rank() - 1);
        return coin(0.5) ? max(a, ax, true) : tanh(sum(a, ax, true));
    }

    Tensor positive(const Tensor& a) { // a version of a that is >= 0.25
        const Bound& b = bounds_.of(a);
        if (b.lo - b.err > 0.25) return a;
        return coin(0.5) ? a * a + 0.25 : abs(a) + 0.5;
    }

    Tensor tame(const Tensor& a, double limit) { // a scaled so that |a| <= limit
        double m = bounds_.of(a).mag();
        return m <= limit ? a : a * (limit / m);
    }

    Tensor unary(const Tensor& a) {
        switch (int(uniform(0, 22))) {
        case 0: return -a;
        case 1: return abs(a);
        case 2: return exp(tame(a, 6));
        case 3: return expm1(tame(a, 6));
        case 4: return log(positive(a));
        case 5: return log1p(positive(a));
        case 6: return sqrt(positive(a));
        case 7: return rsqrt(positive(a));
        case 8: return reciprocal(positive(a));
        case 9: return tanh(a);
        case 10: return erf(tame(a, 3));
        case 11: return sin(tame(a, 10));
        case 12: return cos(tame(a, 10));
        case 13: return sigmoid(tame(a, 20));
        case 14: return softplus(tame(a, 20));
        case 15: return pow(positive(a), double(pick({2, 3, -1})) + (coin(0.5) ? 0.0 : 0.5));
        // rewrite motifs: the rewrites fire inside random contexts
        case 16: return log(1.0 + tame(abs(a), 100)); // -> log1p
        case 17: return exp(tame(a, 5)) - 1.0;        // -> expm1
        case 18: return log1p(exp(tame(a, 20)));      // -> softplus
        case 19: return (a * 1.0 + 0.0) * -(-a);      // identities
        case 20: return cast(tanh(cast(a, dt_ == DType::F32 ? DType::F64 : DType::F32)), dt_);
        default: return stop_gradient(a) * 0.5;
        }
    }

    Tensor binary(const Tensor& a) {
        Tensor b = partner(a);
        bool swap = coin(0.3);
        const Tensor& l = swap ? b : a;
        const Tensor& r = swap ? a : b;
        switch (int(uniform(0, 8))) {
        case 0: case 1: return l + r;
        case 2: return l - r;
        case 3: case 4: return l * r;
        case 5: return l / positive(r);
        case 6: return maximum(l, r);
        default: return minimum(l, r);
        }
    }

    Tensor reduce(const Tensor& a) {
        if (a.rank() == 0) return sum(a);
        Axes ax;
        for (int i = 0; i < a.rank(); ++i)
            if (coin(0.5)) ax.push_back(i);
        bool keep = coin(0.4);
        switch (int(uniform(0, 9))) {
        case 0: case 1: case 2: return sum(a, ax, keep);
        case 3: return max(a, ax, keep);
        case 4: return min(a, ax, keep);
        case 5: return mean(a, ax, keep);
        case 6: return logsumexp(tame(a, 20), ax, keep);
        case 7: return log(sum(exp(tame(a, 10)), ax, keep)); // -> stabilised logsumexp
        default: {
            int64_t n = numel(a.shape()) / std::max<int64_t>(1, numel(sum(a, ax).shape()));
            if (n <= 6) return prod(tame(a, 1.5), ax, keep);
            return sum(a, ax, keep);
        }
        }
    }

    /// A random shape with the same number of elements (factors regrouped, 1s inserted).
    Shape regroup(const Shape& s) {
        std::vector<int64_t> f;
        for (int64_t d : s) {
            for (int64_t p = 2; d > 1;) {
                if (d % p == 0) f.push_back(p), d /= p;
                else ++p;
            }
        }
        std::shuffle(f.begin(), f.end(), g_);
        Shape out;
        for (int64_t p : f) {
            if (!out.empty() && coin(0.5)) out.back() *= p;
            else out.push_back(p);
        }
        int ones = int(uniform(0, 2));
        for (int i = 0; i < ones && out.size() < 5; ++i)
            out.insert(out.begin() + ptrdiff_t(uniform(0, double(out.size()) + 1 - 1e-9)), 1);
        return out;
    }

    Tensor movement(const Tensor& a) {
        int r = a.rank();
        switch (int(uniform(0, 8))) {
        case 0: return reshape(a, regroup(a.shape()));
        case 1: {
            if (r < 2) return reshape(a, regroup(a.shape()));
            Axes p(size_t(r), 0);
            std::iota(p.begin(), p.end(), 0);
            std::shuffle(p.begin(), p.end(), g_);
            return transpose(a, p);
        }
        case 2: case 3: {
            if (r == 0) return a;
            std::vector<int64_t> st, sp, stp;
            for (int64_t d : a.shape()) {
                int64_t step = d > 2 && coin(0.4) ? pick({2, 3}) : 1;
                int64_t start = int64_t(uniform(0, double(d) / 2));
                int64_t stop = start + 1 + int64_t(uniform(0, double(d - start) - 1e-9));
                if (coin(0.2)) start -= d; // negative start, Python style
                st.push_back(start), sp.push_back(stop), stp.push_back(step);
            }
            return slice(a, st, sp, stp);
        }
        case 4: {
            if (r == 0) return a;
            Axes ax;
            for (int i = 0; i < r; ++i)
                if (coin(0.5)) ax.push_back(i);
            return flip(a, ax.empty() ? Axes{0} : ax);
        }
        case 5: case 6: {
            // broadcast: size-1 dims grow, maybe a new leading dim
            Shape s = a.shape();
            for (auto& d : s)
                if (d == 1 && coin(0.6)) d = random_dim();
            if (coin(0.5) && s.size() < 5) s.insert(s.begin(), random_dim());
            if (numel(s) > kMaxElems) return a;
            return broadcast_to(a, s);
        }
        default: return r >= 2 ? transpose(a) : expand_dims(a, 0);
        }
    }

    /// Integer kernels: i32 values from an exact float node (floor of a * 4 is exact: no flips),
    /// integer arithmetic and reductions, back to floats.
    Tensor integer_path(const Tensor& a) {
        if (bounds_.of(a).err != 0) return {};
        Tensor k = cast(floor(a * 4.0), DType::I32);
        Tensor j;
        switch (int(uniform(0, 5))) {
        case 0: j = k * k + 3; break;
        case 1: j = maximum(k, -2) - abs(k); break;
        case 2: j = where(k > 0, k, -k) * 2; break;
        case 3: j = a.rank() ? sum(k, {int64_t(uniform(0, a.rank() - 1e-9))}, coin(0.5)) : k; break;
        default: j = a.rank() ? max(k * -1, {}, false) + min(k) : k - 1; break;
        }
        return cast(j, dt_) * 0.25;
    }

    Tensor step() {
        const Tensor& a = operand();
        if (coin(0.05)) return integer_path(a);
        double k = uniform(0, 1);
        if (k < 0.28) return unary(a);
        if (k < 0.56) return binary(a);
        if (k < 0.70) return reduce(a);
        if (k < 0.90) return movement(a);
        if (k < 0.94) { // where over a comparison
            Tensor b = partner(a);
            return where(a > b, a, tanh(b) * 2.0);
        }
        if (k < 0.96 && a.rank() >= 1) { // reference-kernel fallbacks in the middle of a graph
            return coin(0.5) ? concat({a, exp(tame(a, 3))}, int64_t(uniform(0, a.rank() - 1e-9)))
                             : pad(a, std::vector<int64_t>(size_t(a.rank()), 1),
                                   std::vector<int64_t>(size_t(a.rank()), 0), 0.5);
        }
        if (a.rank() >= 2 && a.dim(-1) <= 64) { // GEMM with a transpose folded in
            Tensor m = a.rank() == 2 ? a : reshape(a, {-1, a.dim(-1)});
            if (m.dim(0) > 64) return {};
            return matmul(m, transpose(tanh(m)));
        }
        return unary(a);
    }
};

// ---- the comparison -----------------------------------------------------------------------

struct Tally {
    int graphs = 0, grad_graphs = 0, dynamic_graphs = 0, refused = 0;
    int outputs = 0, tight_outputs = 0; // outputs compared; with tolerance <= 1e-4 of their scale
    size_t kernels = 0, library_calls = 0;
    int64_t values = 0, tight = 0, loose = 0; // compared elements; with tol < 1e-4 |scale|; > 1e-2
    double compile_ms = 0, max_compile_ms = 0;
    uint64_t slowest_seed = 0; // the graph of max_compile_ms
    int flips = 0; // runs whose mismatch a comparison's near tie excused (Note [Threshold flips])
};

/// The first comparison in `outs` whose operands, evaluated on the reference with g's values,
/// come within their error bounds of each other at some element, described; "" when none does
/// (Note [Threshold flips]). `outs` are functions of g.inputs, bounded by `bounds`.
std::string near_tie(const Graph& g, const std::vector<Tensor>& outs, Bounds& bounds) {
    std::vector<const Node*> roots;
    for (const auto& o : outs) roots.push_back(o.node().get());
    std::vector<const Node*> compares;
    std::vector<Tensor> gaps;
    for (const Node* n : topo_order(roots)) {
        if (!has_trait(n->op(), kCompare) || !is_float(n->input(0)->dtype())) continue;
        Tensor a(n->input(0)), b(n->input(1));
        if (!std::isfinite(bounds.of(a).err) || !std::isfinite(bounds.of(b).err)) continue;
        compares.push_back(n);
        gaps.push_back(abs(cast(a, DType::F64) - cast(b, DType::F64)));
    }
    if (compares.empty()) return "";
    std::vector<Tensor> ins(g.inputs.begin(), g.inputs.end());
    std::vector<Function::Arg> args(g.values.begin(), g.values.end());
    std::vector<Array> got = function(ins, gaps, {}, on("reference")).call(args);
    for (size_t c = 0; c < compares.size(); ++c) {
        const Node* n = compares[c];
        const double tol = 4 * (bounds.of(Tensor(n->input(0))).err + bounds.of(Tensor(n->input(1))).err);
        const bool ordering = !n->is(Op::Eq) && !n->is(Op::Ne);
        for (int64_t i = 0; i < got[c].size(); ++i) {
            const double d = got[c].at(i);
            if (tol > 0 && d <= tol && (ordering || d > 0))
            {
                std::ostringstream os;
                os << n->describe(1) << " at flat index " << i << ": |a - b| " << d << " within 4 (E(a) + E(b)) = "
                   << tol;
                return os.str();
            }
        }
    }
    return "";
}

std::string graph_text(const Graph& g, const std::vector<Tensor>& outs) {
    std::ostringstream os;
    for (size_t i = 0; i < g.inputs.size(); ++i)
        os << "  input " << g.inputs[i].name() << " " << g.inputs[i].type_str() << " = "
           << g.values[i].str(12) << "\n";
    os << to_text(outs);
    return os.str();
}

/// The backend under test: $SJ_FUZZ_BACKEND, by default "cpu" ("cuda" with a GPU or
/// SJ_CUDA_DEVICE=emulator: docs/gpu.md).
const char* fuzz_backend() {
    const char* e = std::getenv("SJ_FUZZ_BACKEND");
    return e && *e ? e : "cpu";
}

/// Compiles outs (a function of ins) with both backends, runs them on g's values and compares
/// every element within 4 E of the matching output of `bounded` (outs itself, or the graph outs
/// were cloned from; see Note [Fuzz tolerances]). Returns false (after reporting) on a mismatch.
bool run_and_compare(uint64_t seed, const char* what, const Graph& g, const std::vector<Tensor>& ins,
                     const std::vector<Tensor>& outs, const std::vector<Tensor>& bounded, Bounds& bounds,
                     Tally& tally) {
    std::vector<Function::Arg> args(g.values.begin(), g.values.end());
    std::string where = std::string(what) + " of graph seed " + std::to_string(seed) +
                        " (rerun: SJ_FUZZ_SEED=" + std::to_string(seed) + " SJ_FUZZ_COUNT=1)";
    std::vector<Array> got, want;
    Function fc;
    std::string cpu_error, ref_error;
    bool cpu_input_error = false, ref_input_error = false;
    try {
        auto t0 = std::chrono::steady_clock::now();
        fc = function(ins, outs, {}, on(fuzz_backend()));
        got = fc.call(args); // kernels are compiled at the first call
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        tally.compile_ms += ms;
        if (ms > tally.max_compile_ms) tally.max_compile_ms = ms, tally.slowest_seed = seed;
    } catch (const InputError& e) {
        cpu_error = e.what(), cpu_input_error = true;
    } catch (const std::exception& e) {
        cpu_error = e.what();
    }
    try {
        want = function(ins, outs, {}, on("reference")).call(args);
    } catch (const InputError& e) {
        ref_error = e.what(), ref_input_error = true;
    } catch (const std::exception& e) {
        ref_error = e.what();
    }
    // inputs a graph refuses (a -1 dim bound to 1 where it would broadcast) must be refused by
    // both backends alike
    if (cpu_input_error && ref_input_error) {
        ++tally.refused;
        return true;
    }
    if (!cpu_error.empty() || !ref_error.empty()) {
        ADD_FAILURE() << where << ": " << fuzz_backend() << " "
                      << (cpu_error.empty() ? "ran" : "threw: " + cpu_error) << "; reference "
                      << (ref_error.empty() ? "ran" : "threw: " + ref_error) << "\n"
                      << graph_text(g, outs);
        return false;
    }
    tally.kernels += fc.stats().kernels;
    tally.library_calls += fc.stats().library_calls;
    for (size_t k = 0; k < outs.size(); ++k) {
        const Bound& b = bounds.of(bounded[k]);
        double tol = 4 * b.err;
        double scale = b.mag() + tiny(outs[k].dtype());
        const Array &x = got[k], &y = want[k];
        if (x.shape() != y.shape() || x.dtype() != y.dtype()) {
            ADD_FAILURE() << where << ": output " << k << " is " << x.type_str() << ", reference " << y.type_str()
                          << "\n" << graph_text(g, outs);
            return false;
        }
        if (!std::isfinite(tol)) continue; // not bounded: not compared (counted below)
        if (std::getenv("SJ_FUZZ_VERBOSE") && !(tol <= 1e-4 * scale))
            std::printf("loose: seed %llu %s output %zu %s tol/scale %.3g range [%g, %g] err %.3g\n",
                        (unsigned long long)seed, what, k, outs[k].node()->describe(1).c_str(), tol / scale, b.lo,
                        b.hi, b.err);
        tally.tight += x.size() * (tol <= 1e-4 * scale);
        tally.loose += x.size() * (tol > 1e-2 * scale);
        tally.outputs += 1;
        tally.tight_outputs += tol <= 1e-4 * scale;
        tally.values += x.size();
        for (int64_t i = 0; i < x.size(); ++i) {
            double a = x.at(i), r = y.at(i);
            if (!(std::fabs(a - r) <= tol) || !std::isfinite(r)) {
                if (std::string tie = near_tie(g, bounded, bounds); !tie.empty() && std::isfinite(r)) {
                    ++tally.flips;
                    std::printf("[ fuzz     ] %s: output %zu differs at flat index %lld (%s %.9g, reference "
                                "%.9g), but %s: a possible flip (Note [Threshold flips]), not compared\n",
                                where.c_str(), k, static_cast<long long>(i), fuzz_backend(), a, r, tie.c_str());
                    return true;
                }
                ADD_FAILURE() << where << ": output " << k << " " << x.type_str()
                              << " differs at flat index " << i << ": cpu " << a << ", reference "
                              << r << " (|diff| " << std::fabs(a - r) << ", tolerance " << tol
                              << ", values in [" << b.lo << ", " << b.hi << "])\n"
                              << graph_text(g, outs) << fuzz_backend() << " program:\n"
                              << fc.dump();
                return false;
            }
        }
    }
    return true;
}

} // namespace

TEST(FuzzFusion, RandomGraphsMatchReference) {
    const uint64_t first = env_u64("SJ_FUZZ_SEED", 1);
    const uint64_t count = env_u64("SJ_FUZZ_COUNT", 200);
    Tally tally;
    int failures = 0;
    const auto cache0 = cpu::kernel_cache_stats();
    auto t0 = std::chrono::steady_clock::now();
    for (uint64_t seed = first; seed < first + count && failures < 3; ++seed) {
        Generator gen(seed);
        Graph g;
        try {
            g = gen.make();
        } catch (const std::exception& e) {
            ADD_FAILURE() << "the generator built an invalid graph (seed " << seed << "): " << e.what();
            ++failures;
            continue;
        }
        ++tally.graphs;
        std::vector<Tensor> ins(g.inputs.begin(), g.inputs.end());
        if (!run_and_compare(seed, "outputs", g, ins, g.outputs, g.outputs, gen.bounds(), tally)) {
            ++failures;
            continue;
        }
        // every fourth graph again with -1 dims in its placeholders: kernels over iteration
        // spaces unknown at compile time (no sibling merging, sizes bound per call)
        if (seed % 4 == 1 && !g.big) {
            std::mt19937_64 r(seed);
            Givens givens;
            std::vector<Tensor> dyn;
            for (const auto& p : g.inputs) {
                Shape s = p.shape();
                for (auto& d : s)
                    if (d > 1 && r() % 2) d = -1;
                dyn.push_back(Placeholder(s, p.dtype(), p.name() + "_dyn"));
                givens.emplace_back(p, dyn.back());
            }
            std::vector<Tensor> outs;
            try {
                outs = clone(g.outputs, givens);
            } catch (const std::exception& e) {
                ADD_FAILURE() << "seed " << seed << ": the graph does not rebuild with -1 dims: " << e.what() << "\n"
                              << graph_text(g, g.outputs);
                ++failures;
                continue;
            }
            ++tally.dynamic_graphs;
            if (!run_and_compare(seed, "outputs with -1 dims", g, dyn, outs, g.outputs, gen.bounds(), tally)) {
                ++failures;
                continue;
            }
        }
        // gradients of the sum of the outputs w.r.t. every input, for every third graph
        if (seed % 3 == 0) {
            Tensor cost = scalar(0.0, g.dtype);
            for (const auto& o : g.outputs) cost = cost + sum(o);
            std::vector<Tensor> wrt(g.inputs.begin(), g.inputs.end());
            std::vector<Tensor> grads = gradients(cost, wrt);
            ++tally.grad_graphs;
            if (!run_and_compare(seed, "gradients", g, ins, grads, grads, gen.bounds(), tally)) ++failures;
        }
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto cache1 = cpu::kernel_cache_stats();
    std::printf("[ fuzz     ] distinct kernels: %lld compiled, %lld loaded from the disk cache\n",
                static_cast<long long>(cache1.compiles - cache0.compiles),
                static_cast<long long>(cache1.disk_hits - cache0.disk_hits));
    auto pct = [](double a, double b) { return 100.0 * a / std::max(1.0, b); };
    std::printf("[ fuzz     ] %d graphs (%d also with -1 dims, %d with gradients; %d runs refused by both "
                "backends): %zu kernels, %zu library calls; %d outputs, %lld values compared, %.1f%% of the outputs "
                "(%.1f%% of the values) with a tolerance <= 1e-4 of their scale, %.1f%% of the values > 1e-2; cpu "
                "compile + first call %.1f ms per graph (max %.0f ms, seed %llu); %.1f s in all\n",
                tally.graphs, tally.dynamic_graphs, tally.grad_graphs, tally.refused, tally.kernels,
                tally.library_calls, tally.outputs, static_cast<long long>(tally.values),
                pct(tally.tight_outputs, tally.outputs), pct(double(tally.tight), double(tally.values)),
                pct(double(tally.loose), double(tally.values)),
                tally.compile_ms / std::max(1, tally.graphs + tally.dynamic_graphs + tally.grad_graphs),
                tally.max_compile_ms, static_cast<unsigned long long>(tally.slowest_seed), s);
    // the tolerances must leave the test its teeth: most outputs compared tightly, and few
    // mismatches excused as flips (Note [Threshold flips])
    EXPECT_GE(tally.tight_outputs, 0.7 * tally.outputs);
    EXPECT_LE(tally.flips, std::max(1, tally.graphs / 50)) << tally.flips << " of " << tally.graphs
                                              << " graphs excused as threshold flips";
    if (tally.flips) std::printf("[ fuzz     ] %d graphs excused as threshold flips\n", tally.flips);
}

// Note [Threshold flips]: seed 1001742's comparison of x with the mean of its column maxima is
// a near tie; comparisons far from their threshold, exact operands and the exact ties of eq are
// not.
TEST(FuzzFusion, NearTiesAreOnlyThoseWithinTheErrorBounds) {
    Generator gen(1001742);
    Graph g = gen.make();
    EXPECT_NE(near_tie(g, g.outputs, gen.bounds()), "");
    ASSERT_EQ(g.inputs[0].shape(), Shape({31, 17, 1}));
    const Tensor x = g.inputs[0];
    const Tensor m = max(x, {0}, true), mean = sum(maximum(x, m), {0}) / 31.0;
    EXPECT_NE(near_tie(g, {where(ge(x, mean), x, mean)}, gen.bounds()), "");
    EXPECT_EQ(near_tie(g, {where(ge(x, mean + 0.5), x, mean)}, gen.bounds()), "");
    EXPECT_EQ(near_tie(g, {where(ge(x, m), x, m)}, gen.bounds()), ""); // exact operands
    EXPECT_EQ(near_tie(g, {where(eq(x * 3.0, m * 3.0), x, m)}, gen.bounds()), ""); // exact ties
}

// Shapes the generator avoids because interval bounds are meaningless there: size-0 dims.
// Reductions over an empty axis give the identity (sum 0, prod 1, any false, all true), max/min
// over one is an error (NumPy's too), raised at build time for static dims and at call time for
// a -1 dim bound to 0, on both backends.
TEST(FuzzFusion, ZeroSizeDims) {
    for (DType t : {DType::F32, DType::I32}) {
        Placeholder x({3, 0, 2}, t, "x");
        Placeholder b({0, 4}, DType::Bool, "b");
        std::vector<Tensor> outs = {sum(x, {1}), prod(x, {1}), sum(x, {0, 2}), max(x, {0, 2}), x * 2, sum(x),
                                    any(b, {0}), all(b, {0}), logical_not(b), sum(exp(cast(x, f32)), {1}, true)};
        Array xv(t, {3, 0, 2}), bv(DType::Bool, {0, 4});
        auto got = function({x, b}, outs, {}, on("cpu"))(xv, bv);
        auto want = function({x, b}, outs, {}, on("reference"))(xv, bv);
        for (size_t k = 0; k < got.size(); ++k) {
            ASSERT_EQ(got[k].shape(), want[k].shape()) << dtype_name(t) << " output " << k;
            for (int64_t i = 0; i < got[k].size(); ++i)
                EXPECT_EQ(got[k].at(i), want[k].at(i)) << dtype_name(t) << " output " << k << " at " << i;
        }
        EXPECT_THROW(max(x, {1}), Error);
        Placeholder d({3, -1, 2}, t, "d");
        for (const char* backend : {"cpu", "reference"}) {
            Function f = function({d}, {max(d, {1}), min(d, {1}, true)}, {}, on(backend));
            EXPECT_THROW(f(xv), InputError) << backend;
            EXPECT_NO_THROW(f(Array(t, {3, 4, 2}))) << backend;
        }
    }
}
