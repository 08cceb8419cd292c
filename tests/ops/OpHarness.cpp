// The op-consistency harness: input generators, comparisons, the checks and golden-file loading.
#include "OpHarness.h"

#include "backend/Backend.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <symjax/ir/Node.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#ifndef SJ_TEST_DATA_DIR
#error "SJ_TEST_DATA_DIR must name the tests/ folder (see tests/CMakeLists.txt)"
#endif

namespace sj::test {

// ---- input specs --------------------------------------------------------------------------

In in(Shape shape, Gen gen) {
    In s;
    s.shape = std::move(shape);
    s.gen = gen;
    return s;
}
In in_range(Shape shape, double lo, double hi, std::optional<DType> dtype) {
    In s = in(std::move(shape), Gen::Range);
    s.lo = lo;
    s.hi = hi;
    s.dtype = dtype;
    return s;
}
In in_values(Shape shape, std::vector<double> values, std::optional<DType> dtype) {
    In s = in(std::move(shape), Gen::Values);
    s.values = std::move(values);
    s.dtype = dtype;
    return s;
}
In in_index(Shape shape, int64_t lo, int64_t hi, DType dtype) {
    // Range is inclusive; indices are [lo, hi)
    return in_range(std::move(shape), double(lo), double(hi - 1), dtype);
}
In in_bool(Shape shape) {
    In s = in(std::move(shape), Gen::Any);
    s.dtype = DType::Bool;
    return s;
}

Tensor swap_last(const Tensor& x) {
    Axes p(x.rank());
    std::iota(p.begin(), p.end(), 0);
    std::swap(p[x.rank() - 1], p[x.rank() - 2]);
    return transpose(x, p);
}

namespace {

// ---- deterministic random numbers (SplitMix64: the same on every platform) -----------------

uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

struct Rng {
    uint64_t state;
    uint64_t next() { return mix(state++); }
    /// Uniform in [0, 1).
    double uniform() { return double(next() >> 11) * 0x1.0p-53; }
    double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
    /// Uniform integer in [lo, hi].
    int64_t integer(int64_t lo, int64_t hi) { return lo + int64_t(next() % uint64_t(hi - lo + 1)); }
};

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s)
        h = (h ^ c) * 0x100000001b3ull;
    return h;
}

/// The seed of one (row, case, dtype); inputs mix in their position.
uint64_t case_seed(const OpRow& row, size_t case_index, DType dtype) {
    return mix(fnv1a(row.name) ^ (uint64_t(case_index) << 32) ^ uint64_t(dtype));
}

double dtype_min(DType d) {
    switch (d) {
    case DType::Bool:
    case DType::U8:
    case DType::U32:
        return 0;
    case DType::I32:
        return double(std::numeric_limits<int32_t>::lowest());
    case DType::I64:
        return -9007199254740992.0; // 2^53: exact in a double
    case DType::F32:
    case DType::F64:
        return -INFINITY;
    }
    return 0;
}
double dtype_max(DType d) {
    switch (d) {
    case DType::Bool:
        return 1;
    case DType::U8:
        return 255;
    case DType::U32:
        return 4294967295.0;
    case DType::I32:
        return double(std::numeric_limits<int32_t>::max());
    case DType::I64:
        return 9007199254740992.0;
    case DType::F32:
    case DType::F64:
        return INFINITY;
    }
    return 0;
}

/// An array of dtype d from doubles (integers must be integral and in range: generator bug).
Array to_array(DType d, const Shape& shape, const std::vector<double>& v) {
    Array a(d, shape);
    dispatch(d, [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* p = static_cast<T*>(a.raw());
        for (size_t i = 0; i < v.size(); ++i) {
            if (d == DType::Bool) {
                p[i] = T(v[i] != 0);
            } else if (is_float(d)) {
                p[i] = static_cast<T>(v[i]);
            } else {
                SJ_ASSERT(std::floor(v[i]) == v[i] && v[i] >= dtype_min(d) && v[i] <= dtype_max(d))
                    << "test generator: value " << v[i] << " does not fit " << dtype_name(d);
                p[i] = static_cast<T>(v[i]);
            }
        }
    });
    return a;
}

std::vector<double> draw(const In& s, DType d, Rng& rng) {
    int64_t n = numel(s.shape);
    std::vector<double> v(size_t(std::max<int64_t>(n, 0)));
    bool fl = is_float(d), uns = d == DType::U8 || d == DType::U32, bo = d == DType::Bool;
    auto clamp_int = [&](double x) { return std::min(std::max(x, dtype_min(d)), dtype_max(d)); };
    switch (s.gen) {
    case Gen::Any:
        for (auto& x : v)
            x = bo   ? double(rng.integer(0, 1))
                : fl ? rng.uniform(-3, 3)
                     : double(uns ? rng.integer(0, 9) : rng.integer(-5, 5));
        break;
    case Gen::Positive:
        for (auto& x : v)
            x = bo ? 1.0 : fl ? rng.uniform(0.5, 3) : double(rng.integer(1, 6));
        break;
    case Gen::NonZero:
        for (auto& x : v) {
            double sgn = (uns || bo || rng.integer(0, 1)) ? 1.0 : -1.0;
            x = bo ? 1.0 : sgn * (fl ? rng.uniform(0.5, 3) : double(rng.integer(1, 5)));
        }
        break;
    case Gen::Range:
    case Gen::WithZeros:
        for (auto& x : v) {
            if (s.gen == Gen::WithZeros && rng.integer(0, 2) == 0) {
                x = 0;
            } else if (bo) {
                x = double(rng.integer(0, 1));
            } else if (fl) {
                x = rng.uniform(s.lo, s.hi);
            } else {
                double lo = clamp_int(std::ceil(s.lo)), hi = clamp_int(std::floor(s.hi));
                x = double(rng.integer(int64_t(lo), int64_t(hi)));
            }
        }
        break;
    case Gen::Ties: {
        static const double kFloats[] = {-1, 0, 0.5, 1, 2};
        for (auto& x : v)
            x = bo   ? double(rng.integer(0, 1))
                : fl ? kFloats[rng.integer(0, 4)]
                     : double(rng.integer(0, 2));
        break;
    }
    case Gen::Distinct: {
        std::vector<int64_t> perm(v.size());
        std::iota(perm.begin(), perm.end(), 0);
        for (size_t i = perm.size(); i > 1; --i)
            std::swap(perm[i - 1], perm[rng.integer(0, int64_t(i - 1))]);
        double half = double(v.size() / 2);
        for (size_t i = 0; i < v.size(); ++i) {
            if (bo)
                v[i] = double(rng.integer(0, 1));
            else if (fl)
                v[i] = (double(perm[i]) - half) * 0.37 + rng.uniform(0, 0.05);
            else
                v[i] = clamp_int(uns ? double(perm[i]) : double(perm[i]) - half);
        }
        break;
    }
    case Gen::Spd:
    case Gen::Triangular: {
        SJ_ASSERT(s.shape.size() >= 2 && s.shape.back() == s.shape[s.shape.size() - 2])
            << "test generator: Spd/Triangular need [..., n, n], got " << shape_str(s.shape);
        int64_t m = s.shape.back(), mm = m * m;
        for (int64_t b = 0; mm > 0 && b < n / mm; ++b) {
            double* a = v.data() + b * mm;
            if (s.gen == Gen::Triangular) {
                for (int64_t i = 0; i < m; ++i)
                    for (int64_t j = 0; j < m; ++j)
                        a[i * m + j] = i == j ? (rng.integer(0, 1) ? 1 : -1) * rng.uniform(2, 3)
                                              : rng.uniform(-0.5, 0.5);
                continue;
            }
            std::vector<double> r(static_cast<size_t>(mm));
            for (auto& x : r)
                x = rng.uniform(-1, 1);
            for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < m; ++j) {
                    double acc = i == j ? double(m) : 0.0;
                    for (int64_t k = 0; k < m; ++k)
                        acc += r[i * m + k] * r[j * m + k];
                    a[i * m + j] = acc;
                }
        }
        break;
    }
    case Gen::Values:
        SJ_ASSERT(!s.values.empty() || v.empty()) << "test generator: Values without values";
        for (size_t i = 0; i < v.size(); ++i)
            v[i] = s.values[i % s.values.size()];
        break;
    }
    return v;
}

} // namespace

Array generate(const In& spec, DType dtype, uint64_t seed) {
    DType d = spec.dtype.value_or(dtype);
    Rng rng{seed};
    return to_array(d, spec.shape, draw(spec, d, rng));
}

std::string shapes_str(const Case& c) {
    std::string s;
    for (size_t i = 0; i < c.inputs.size(); ++i)
        s += (i ? "," : "") + shape_str(c.inputs[i].shape);
    return s.empty() ? "()" : s;
}

// ---- backends --------------------------------------------------------------------------------

namespace {
/// The non-empty names in the comma-separated list of environment variable `var`.
std::vector<std::string> env_names(const char* var) {
    std::vector<std::string> out;
    const char* env = std::getenv(var);
    std::stringstream ss(env ? env : "");
    for (std::string b; std::getline(ss, b, ',');)
        if (!b.empty())
            out.push_back(b);
    return out;
}
} // namespace

const std::vector<std::string>& test_backends() {
    static const std::vector<std::string> list = [] {
        const std::vector<std::string> required = env_names("SJ_TEST_REQUIRE_BACKENDS");
        std::vector<std::string> names{"cpu", "cuda"};
        for (auto& b : env_names("SJ_TEST_BACKENDS"))
            names.push_back(b);
        std::vector<std::string> out{"reference"};
        for (const auto& b : names) {
            if (std::find(out.begin(), out.end(), b) != out.end())
                continue;
            try {
                // built, and able to run here: "cuda" is built wherever the toolkit is, but
                // runs only with a GPU or SJ_CUDA_DEVICE=emulator (docs/gpu.md)
                Placeholder x({2}, f32, "x");
                function({x}, {x * 2.0}, {}, [&] {
                    FunctionOptions o;
                    o.backend = b;
                    return o;
                }());
                out.push_back(b);
            } catch (const Error& e) {
                // not built into this library, or no device: nothing to compare, unless the run
                // asked for this backend ($SJ_TEST_REQUIRE_BACKENDS, set by the gpu label's
                // tests): then a GPU test cannot pass by testing nothing
                if (std::find(required.begin(), required.end(), b) != required.end())
                    throw std::runtime_error("SJ_TEST_REQUIRE_BACKENDS names \"" + b +
                                             "\", which cannot run here: " + e.what());
            }
        }
        return out;
    }();
    return list;
}

// ---- the specials case ----------------------------------------------------------------------

std::vector<Case> row_cases(const OpRow& row) {
    std::vector<Case> cases = row.cases;
    if (!row.specials)
        return cases;
    static const double kValues[kSpecials] = {NAN,  INFINITY, -INFINITY, 0.0,  -0.0,   1.0,
                                              -1.0, 0.5,      -2.5,      1e30, -1e-30, 3.0};
    Case c;
    c.grad = false;
    for (size_t k = 0; k < row.cases.at(0).inputs.size(); ++k) {
        const In& first = row.cases[0].inputs[k];
        if (first.dtype && !is_float(*first.dtype)) {
            In keep = first;
            keep.shape = {kSpecials};
            c.inputs.push_back(keep);
            continue;
        }
        // input k visits the specials in another order (a multiplier coprime with 12 makes a
        // permutation), so the pairs differ: (NaN, 0), (inf, -2.5), (-inf, inf), (1, -0), ...
        static const int64_t kStride[] = {1, 5, 7, 11};
        std::vector<double> v(kSpecials);
        for (int64_t i = 0; i < kSpecials; ++i)
            v[i] = kValues[(i * kStride[k % 4] + 3 * int64_t(k)) % kSpecials];
        c.inputs.push_back(in_values({kSpecials}, v, first.dtype));
    }
    cases.push_back(c);
    return cases;
}

namespace {

// ---- reproducer and filters -----------------------------------------------------------------

std::string current_test() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    if (!info)
        return "Op*";
    return std::string(info->test_suite_name()) + "." + info->name();
}

struct Where {
    const OpRow& row;
    size_t case_index;
    DType dtype;
    std::string shapes;
    uint64_t seed;
    std::string check;
};

std::string repro(const Where& w) {
    std::ostringstream os;
    os << "[op-harness] row=" << w.row.name << " op=" << w.row.op << " case=" << w.case_index
       << " dtype=" << dtype_name(w.dtype) << " shapes=" << w.shapes << " seed=";
    if (w.seed)
        os << "0x" << std::hex << w.seed << std::dec;
    else
        os << "none(golden entry " << w.case_index << ")";
    os << " check=" << w.check << " | repro: SJ_OP_CASE=" << w.case_index
       << " SJ_OP_DTYPE=" << dtype_name(w.dtype) << " ./build/tests/symjax_tests --gtest_filter='"
       << current_test() << "'";
    return os.str();
}

#define SJ_HARNESS_FAIL(where) ADD_FAILURE() << repro(where) << "\n  "

bool selected(size_t case_index, DType dtype) {
    if (const char* c = std::getenv("SJ_OP_CASE");
        c && *c && std::strtoul(c, nullptr, 10) != case_index)
        return false;
    if (const char* d = std::getenv("SJ_OP_DTYPE"); d && *d && dtype_from_name(d) != dtype)
        return false;
    return true;
}

bool runs_in(const Case& c, DType dtype) {
    return c.only.empty() || std::find(c.only.begin(), c.only.end(), dtype) != c.only.end();
}

// ---- comparisons ----------------------------------------------------------------------------

std::string index_str(const Shape& s, int64_t flat) {
    if (s.empty())
        return "[]";
    std::vector<int64_t> idx(s.size());
    for (size_t d = s.size(); d-- > 0;) {
        idx[d] = s[d] ? flat % s[d] : 0;
        flat = s[d] ? flat / s[d] : 0;
    }
    return shape_str(idx);
}

/// Empty when `got` matches `want`; else a description of the mismatches. `exact` compares
/// floats with == (NaN matching NaN); otherwise |got - want| <= atol + rtol |want|, infinities
/// equal, NaN positions equal. Integers and bools are always exact.
std::string compare(const Array& got, const Array& want, Tol tol, bool exact) {
    std::ostringstream os;
    if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
        os << "type " << got.type_str() << ", expected " << want.type_str();
        return os.str();
    }
    int64_t bad = 0;
    dispatch(got.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* g = static_cast<const T*>(got.raw());
        const T* w = static_cast<const T*>(want.raw());
        for (int64_t i = 0; i < got.size(); ++i) {
            bool ok;
            if constexpr (std::is_floating_point_v<T>) {
                double a = g[i], b = w[i];
                if (std::isnan(a) || std::isnan(b))
                    ok = std::isnan(a) && std::isnan(b);
                else if (exact || std::isinf(a) || std::isinf(b))
                    ok = a == b;
                else
                    ok = std::fabs(a - b) <= tol.atol + tol.rtol * std::fabs(b);
            } else {
                ok = g[i] == w[i];
            }
            if (ok)
                continue;
            if (bad++ < 4) {
                os.precision(17);
                os << (bad > 1 ? "; " : "") << "at " << index_str(got.shape(), i) << " got "
                   << +g[i] << " expected " << +w[i];
            }
        }
    });
    if (bad == 0)
        return "";
    std::ostringstream head;
    head << bad << " of " << got.size() << " elements differ (" << dtype_name(got.dtype());
    if (!exact && is_float(got.dtype()))
        head << ", atol " << tol.atol << ", rtol " << tol.rtol;
    head << "): " << os.str();
    return head.str();
}

Tol tol_for(const OpRow& row, DType d) {
    return d == DType::F64 ? row.tol_f64 : row.tol_f32;
}

// ---- building a case ------------------------------------------------------------------------

struct Instance {
    std::vector<Tensor> phs;
    std::vector<Array> values;
    std::vector<Function::Arg> args() const { return {values.begin(), values.end()}; }
};

std::vector<Array> draw_inputs(const Case& c, DType dtype, uint64_t seed) {
    std::vector<Array> v;
    for (size_t k = 0; k < c.inputs.size(); ++k)
        v.push_back(generate(c.inputs[k], dtype, mix(seed + k)));
    return v;
}

/// Placeholders for the values; with `dynamic`, every dim other than 1 is declared -1.
Instance instance(const std::vector<Array>& values, bool dynamic) {
    Instance in;
    in.values = values;
    for (size_t k = 0; k < values.size(); ++k) {
        Shape s = values[k].shape();
        if (dynamic)
            for (auto& d : s)
                if (d != 1)
                    d = -1;
        in.phs.push_back(Placeholder(s, values[k].dtype(), "x" + std::to_string(k)));
    }
    return in;
}

Givens givens_of(const Instance& in) {
    Givens g;
    for (size_t k = 0; k < in.phs.size(); ++k)
        g.emplace_back(in.phs[k], constant(in.values[k]));
    return g;
}

FunctionOptions on(const std::string& backend) {
    FunctionOptions o;
    o.backend = backend;
    return o;
}

/// The oracle: the reference interpreter, whatever the default backend is.
Function reference_function(const std::vector<Tensor>& in, const std::vector<Tensor>& out) {
    return function(in, out, {}, on("reference"));
}

Array run1(const Instance& in, const Tensor& out, const std::string& backend) {
    return function(in.phs, {out}, {}, on(backend)).call(in.args()).at(0);
}

Array random_like(const Shape& s, DType d, uint64_t seed) {
    return generate(in_range(s, -1, 1), d, seed);
}

/// Up to `cap` flat indices spread evenly over [0, n).
std::vector<int64_t> spread(int64_t n, int64_t cap) {
    std::vector<int64_t> out;
    if (n <= cap) {
        for (int64_t i = 0; i < n; ++i)
            out.push_back(i);
    } else {
        for (int64_t k = 0; k < cap; ++k)
            out.push_back(k * (n - 1) / (cap - 1));
    }
    return out;
}

double get(const Array& a, int64_t i) {
    return a.at(i);
}
void set(Array& a, int64_t i, double v) {
    dispatch(a.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        static_cast<T*>(a.raw())[i] = static_cast<T>(v);
    });
}

double abs_sum_product(const Array& a, const Array& b) {
    double s = 0;
    for (int64_t i = 0; i < a.size(); ++i) {
        double t = std::fabs(a.at(i) * b.at(i));
        if (std::isfinite(t))
            s += t;
    }
    return s;
}

} // namespace

// ---- check 1 and 2: backends, eval, dynamic shapes ------------------------------------------

void check_forward(const OpRow& row) {
    std::vector<Case> cases = row_cases(row);
    for (size_t ci = 0; ci < cases.size(); ++ci) {
        const Case& c = cases[ci];
        bool specials_case = row.specials && ci + 1 == cases.size();
        for (DType dt : row.dtypes) {
            if (specials_case && !is_float(dt))
                continue;
            if (!runs_in(c, dt) || !selected(ci, dt))
                continue;
            uint64_t seed = case_seed(row, ci, dt);
            Where w{row, ci, dt, shapes_str(c), seed, "build"};
            try {
                Instance inst = instance(draw_inputs(c, dt, seed), false);
                Tensor out = row.build(inst.phs);
                w.check = "reference";
                Array ref = run1(inst, out, "reference");
                if (ref.dtype() != out.dtype() || ref.shape() != out.shape())
                    SJ_HARNESS_FAIL(w) << "the reference returned " << ref.type_str()
                                       << " but the graph's static type is " << out.type_str();
                for (const auto& b : test_backends()) {
                    if (b == "reference")
                        continue;
                    w.check = "backend:" + b;
                    std::string m =
                        compare(run1(inst, out, b), ref, tol_for(row, ref.dtype()), false);
                    if (!m.empty())
                        SJ_HARNESS_FAIL(w) << b << " vs reference: " << m;
                }
                w.check = "eval";
                std::string m = compare(out.eval(givens_of(inst)), ref, {}, true);
                if (!m.empty())
                    SJ_HARNESS_FAIL(w) << "Tensor::eval vs function(): " << m;
                if (row.dynamic && c.dynamic) {
                    w.check = "dynamic";
                    Instance dyn = instance(inst.values, true);
                    Tensor dout = row.build(dyn.phs);
                    m = compare(run1(dyn, dout, "reference"), ref, {}, true);
                    if (!m.empty())
                        SJ_HARNESS_FAIL(w) << "graph on -1 placeholders vs static graph: " << m;
                }
            } catch (const std::exception& e) {
                SJ_HARNESS_FAIL(w) << "threw: " << e.what();
            }
        }
    }
}

// ---- check 3: gradients vs central finite differences ---------------------------------------

namespace {

/// Central differences step: 1e-6 relative (1e-6 absolute near 0). In f64 this balances the
/// truncation error (h^2 f'''/6, ~1e-12) against rounding (eps |cost| / h, ~1e-10 |cost|).
double fd_step(double x) {
    return 1e-6 * std::max(1.0, std::fabs(x));
}

/// At most this many elements of each input are perturbed (evenly spread), to stay fast.
constexpr int64_t kMaxFdElements = 40;

} // namespace

void check_gradients(const OpRow& row) {
    for (size_t ci = 0; ci < row.cases.size(); ++ci) {
        const Case& c = row.cases[ci];
        if (!c.grad)
            continue;
        for (DType dt : row.grad_dtypes) {
            if (!runs_in(c, dt) || !selected(ci, dt))
                continue;
            uint64_t seed = case_seed(row, ci, dt);
            Where w{row, ci, dt, shapes_str(c), seed, "grad-build"};
            try {
                Instance inst = instance(draw_inputs(c, dt, seed), false);
                Tensor out = row.build(inst.phs);
                if (!is_float(out.dtype())) {
                    SJ_HARNESS_FAIL(w)
                        << "row is differentiable but its output is " << out.type_str();
                    continue;
                }
                Array r = random_like(out.shape(), out.dtype(), mix(seed ^ 0x5eed));
                Tensor cost = sum(out * constant(r));
                std::vector<Tensor> wrt;
                std::vector<size_t> wrt_index;
                for (size_t k = 0; k < inst.phs.size(); ++k)
                    if (is_float(inst.phs[k].dtype())) {
                        wrt.push_back(inst.phs[k]);
                        wrt_index.push_back(k);
                    }
                std::vector<Tensor> grads = gradients(cost, wrt);
                std::vector<Tensor> outs{cost, out};
                outs.insert(outs.end(), grads.begin(), grads.end());
                w.check = "grad-run";
                Function f = reference_function(inst.phs, outs);
                std::vector<Array> res = f.call(inst.args());
                for (const auto& b : test_backends()) {
                    if (b == "reference")
                        continue;
                    w.check = "grad-backend:" + b;
                    std::vector<Array> rb = function(inst.phs, outs, {}, on(b)).call(inst.args());
                    for (size_t k = 0; k < rb.size(); ++k) {
                        std::string m = compare(rb[k], res[k], tol_for(row, res[k].dtype()), false);
                        if (!m.empty())
                            SJ_HARNESS_FAIL(w) << b << " output " << k << ": " << m;
                    }
                }
                Function fc = reference_function(inst.phs, {cost});
                // Rounding of the cost: each of its terms out_i r_i carries a relative error of
                // a few eps, so the differences are off by ~eps * sum|out_i r_i| / h.
                double cost_eps = out.dtype() == DType::F64 ? DBL_EPSILON : FLT_EPSILON;
                double scale = abs_sum_product(res[1], r);
                for (size_t j = 0; j < wrt.size(); ++j) {
                    size_t k = wrt_index[j];
                    const Array& g = res[2 + j];
                    w.check = "grad:x" + std::to_string(k);
                    if (g.dtype() != inst.values[k].dtype() ||
                        g.shape() != inst.values[k].shape()) {
                        SJ_HARNESS_FAIL(w) << "gradient is " << g.type_str() << " for input "
                                           << inst.values[k].type_str();
                        continue;
                    }
                    if (row.grad == GradCheck::Zero) {
                        std::string m = compare(g, Array(g.dtype(), g.shape()), {}, true);
                        if (!m.empty())
                            SJ_HARNESS_FAIL(w) << "gradient must be zero: " << m;
                        continue;
                    }
                    int64_t bad = 0;
                    std::ostringstream detail_os;
                    detail_os.precision(10);
                    for (int64_t e : spread(g.size(), kMaxFdElements)) {
                        std::vector<Array> plus = inst.values, minus = inst.values;
                        plus[k] = plus[k].clone();
                        minus[k] = minus[k].clone();
                        double x = get(inst.values[k], e), h = fd_step(x);
                        set(plus[k], e, x + h);
                        set(minus[k], e, x - h);
                        // the step actually taken (x +- h rounded to the input's dtype)
                        double denom = get(plus[k], e) - get(minus[k], e);
                        double cp = fc.call({plus.begin(), plus.end()})[0].at(0);
                        double cm = fc.call({minus.begin(), minus.end()})[0].at(0);
                        double fd = (cp - cm) / denom;
                        double an = g.at(e);
                        // rtol 1e-5: central differences in f64 are good to ~1e-8 relative here,
                        // the margin covers steep spots (tan near its poles, pow near 0); atol:
                        // the cost's rounding error above plus 1e-7 for truncation
                        double atol = 1e-7 + 16 * cost_eps * scale / denom;
                        bool both_nan = std::isnan(an) && std::isnan(fd);
                        if (!both_nan && !(std::fabs(an - fd) <= atol + 1e-5 * std::fabs(fd))) {
                            if (bad++ < 4)
                                detail_os << (bad > 1 ? "; " : "") << "at "
                                          << index_str(g.shape(), e) << " x=" << x
                                          << " analytic=" << an << " numeric=" << fd;
                        }
                    }
                    if (bad)
                        SJ_HARNESS_FAIL(w)
                            << bad << " gradient elements of input " << k
                            << " differ from central differences: " << detail_os.str();
                }
                if (row.dynamic && row.dynamic_grad && c.dynamic) {
                    // the same gradients built on -1 placeholders (the rules must not need
                    // static dims)
                    w.check = "grad-dynamic";
                    Instance dyn = instance(inst.values, true);
                    Tensor dout = row.build(dyn.phs);
                    std::vector<Tensor> dwrt;
                    for (size_t k : wrt_index)
                        dwrt.push_back(dyn.phs[k]);
                    std::vector<Tensor> dgrads = gradients(sum(dout * constant(r)), dwrt);
                    std::vector<Array> dres = reference_function(dyn.phs, dgrads).call(dyn.args());
                    for (size_t j = 0; j < dgrads.size(); ++j) {
                        std::string m =
                            compare(dres[j], res[2 + j], tol_for(row, res[2 + j].dtype()), false);
                        if (!m.empty())
                            SJ_HARNESS_FAIL(w) << "gradient of input " << wrt_index[j]
                                               << " on -1 placeholders vs static: " << m;
                    }
                }
            } catch (const std::exception& e) {
                SJ_HARNESS_FAIL(w) << "threw: " << e.what();
            }
        }
    }
}

// ---- check 4: Hessian-vector products vs differences of the gradient ------------------------

void check_second_order(const OpRow& row) {
    const DType dt = DType::F64;
    for (size_t ci = 0; ci < row.cases.size(); ++ci) {
        const Case& c = row.cases[ci];
        if (!c.grad || !runs_in(c, dt) || !selected(ci, dt))
            continue;
        uint64_t seed = case_seed(row, ci, dt);
        Where w{row, ci, dt, shapes_str(c), seed, "hvp-build"};
        try {
            Instance inst = instance(draw_inputs(c, dt, seed), false);
            Tensor out = row.build(inst.phs);
            Array r = random_like(out.shape(), out.dtype(), mix(seed ^ 0x5eed));
            Tensor cost = sum(out * constant(r));
            std::vector<Tensor> wrt;
            std::vector<size_t> wrt_index;
            std::vector<Array> v;
            for (size_t k = 0; k < inst.phs.size(); ++k)
                if (is_float(inst.phs[k].dtype())) {
                    wrt.push_back(inst.phs[k]);
                    wrt_index.push_back(k);
                    v.push_back(random_like(inst.values[k].shape(), dt, mix(seed ^ (0xd1 + k))));
                }
            std::vector<Tensor> grads = gradients(cost, wrt);
            std::vector<Tensor> hv;
            if (wrt.size() == 1) {
                hv.push_back(hessian_vector_product(cost, wrt[0], constant(v[0])));
            } else {
                // the joint product, cross terms included: d/dX <grad(X), v>
                Tensor s = scalar(0.0, dt);
                for (size_t j = 0; j < wrt.size(); ++j)
                    s = s + sum(grads[j] * constant(v[j]));
                hv = gradients(s, wrt);
            }
            w.check = "hvp-run";
            Function fg = reference_function(inst.phs, grads);
            std::vector<Array> an = reference_function(inst.phs, hv).call(inst.args());
            // h = 1e-5 along v (|v| <= 1): truncation h^2 |g'''| / 6 ~ 2e-11 |g'''|, rounding
            // eps |g| / h ~ 2e-11 |g|; both far below the tolerance below.
            const double h = 1e-5;
            std::vector<Array> plus = inst.values, minus = inst.values;
            for (size_t j = 0; j < wrt.size(); ++j) {
                size_t k = wrt_index[j];
                plus[k] = plus[k].clone();
                minus[k] = minus[k].clone();
                for (int64_t e = 0; e < v[j].size(); ++e) {
                    set(plus[k], e, get(inst.values[k], e) + h * v[j].at(e));
                    set(minus[k], e, get(inst.values[k], e) - h * v[j].at(e));
                }
            }
            std::vector<Array> gp = fg.call({plus.begin(), plus.end()});
            std::vector<Array> gm = fg.call({minus.begin(), minus.end()});
            for (size_t j = 0; j < wrt.size(); ++j) {
                w.check = "hvp:x" + std::to_string(wrt_index[j]);
                if (an[j].shape() != inst.values[wrt_index[j]].shape()) {
                    SJ_HARNESS_FAIL(w) << "Hessian-vector product is " << an[j].type_str();
                    continue;
                }
                double gmax = 0;
                for (int64_t e = 0; e < gp[j].size(); ++e)
                    gmax = std::max(gmax, std::fabs(gp[j].at(e)));
                int64_t bad = 0;
                std::ostringstream os;
                os.precision(10);
                for (int64_t e = 0; e < an[j].size(); ++e) {
                    double fd = (gp[j].at(e) - gm[j].at(e)) / (2 * h);
                    double a = an[j].at(e);
                    // rtol 1e-5; atol 1e-7 relative to the gradient's magnitude (the rounding
                    // and truncation bounds above, with a wide margin)
                    bool both_nan = std::isnan(a) && std::isnan(fd);
                    bool ok =
                        both_nan || std::fabs(a - fd) <= 1e-7 * (1 + gmax) + 1e-5 * std::fabs(fd);
                    if (!ok && bad++ < 4)
                        os << (bad > 1 ? "; " : "") << "at " << index_str(an[j].shape(), e)
                           << " analytic=" << a << " numeric=" << fd;
                }
                if (bad)
                    SJ_HARNESS_FAIL(w)
                        << bad << " elements of the Hessian-vector product for input "
                        << wrt_index[j] << " differ from differences of the gradient: " << os.str();
            }
        } catch (const std::exception& e) {
            SJ_HARNESS_FAIL(w) << "threw: " << e.what();
        }
    }
}

// ---- check 5: golden values from NumPy -------------------------------------------------------

namespace {

using nlohmann::json;

struct Golden {
    std::string error;
    std::map<std::string, std::vector<json>> by_row;
};

std::string data_dir() {
    if (const char* env = std::getenv("SJ_TEST_DATA_DIR"); env && *env)
        return env;
    return SJ_TEST_DATA_DIR;
}

// golden.json holds the first families; each later family has its own golden_<stem>.json (see
// gen_golden.py). Every golden*.json in the directory is read; an entry's index counts within
// its file.
const Golden& golden() {
    static const Golden g = [] {
        Golden out;
        namespace fs = std::filesystem;
        fs::path dir = fs::path(data_dir()) / "ops" / "golden";
        std::vector<fs::path> files;
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(dir, ec)) {
            std::string n = e.path().filename().string();
            if (n.rfind("golden", 0) == 0 && e.path().extension() == ".json")
                files.push_back(e.path());
        }
        std::sort(files.begin(), files.end());
        if (files.empty()) {
            out.error = "no golden*.json in " + dir.string() +
                        " (regenerate them with "
                        "/usr/bin/python3 tests/ops/golden/gen_golden.py)";
            return out;
        }
        for (const auto& path : files) {
            std::ifstream f(path);
            if (!f) {
                out.error = "cannot open " + path.string();
                return out;
            }
            try {
                json j = json::parse(f);
                for (const auto& e : j.at("cases"))
                    out.by_row[e.at("row").get<std::string>()].push_back(e);
            } catch (const std::exception& e) {
                out.error = path.string() + ": " + e.what();
                return out;
            }
        }
        return out;
    }();
    return g;
}

double json_number(const json& v) {
    if (v.is_string()) {
        const std::string& s = v.get_ref<const std::string&>();
        if (s == "nan")
            return NAN;
        if (s == "inf")
            return INFINITY;
        if (s == "-inf")
            return -INFINITY;
        throw std::runtime_error("golden: bad number '" + s + "'");
    }
    return v.get<double>();
}

Array json_array(const json& j) {
    DType d = dtype_from_name(j.at("dtype").get<std::string>());
    Shape s = j.at("shape").get<Shape>();
    const json& data = j.at("data");
    Array a(d, s);
    if (int64_t(data.size()) != a.size())
        throw std::runtime_error("golden: " + std::to_string(data.size()) + " values for " +
                                 a.type_str());
    dispatch(d, [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* p = static_cast<T*>(a.raw());
        for (int64_t i = 0; i < a.size(); ++i) {
            if constexpr (std::is_floating_point_v<T>)
                p[i] = static_cast<T>(json_number(data[i]));
            else if (d == DType::U32)
                p[i] = static_cast<T>(data[i].get<uint64_t>());
            else if (d == DType::Bool)
                p[i] = T(data[i].get<int64_t>() != 0);
            else
                p[i] = static_cast<T>(data[i].get<int64_t>());
        }
    });
    return a;
}

} // namespace

size_t golden_count(const std::string& row) {
    auto it = golden().by_row.find(row);
    return it == golden().by_row.end() ? 0 : it->second.size();
}

std::string golden_load_error() {
    return golden().error;
}

std::vector<std::string> golden_orphans() {
    std::vector<std::string> out;
    for (const auto& [name, entries] : golden().by_row)
        if (!find_row(name))
            out.push_back(name);
    return out;
}

void check_golden(const OpRow& row) {
    ASSERT_EQ(golden_load_error(), "");
    auto it = golden().by_row.find(row.name);
    ASSERT_TRUE(it != golden().by_row.end())
        << "row '" << row.name << "' has no golden entry: add it to tests/ops/golden/gen_golden.py "
        << "and regenerate golden.json";
    for (size_t gi = 0; gi < it->second.size(); ++gi) {
        const json& e = it->second[gi];
        DType dt = dtype_from_name(e.at("dtype").get<std::string>());
        if (!selected(gi, dt))
            continue;
        Case shapes;
        std::vector<Array> values;
        for (const auto& x : e.at("inputs")) {
            values.push_back(json_array(x));
            shapes.inputs.push_back(in(values.back().shape()));
        }
        Where w{row, gi, dt, shapes_str(shapes), 0, "golden"};
        try {
            Array want = json_array(e.at("expected"));
            Instance inst = instance(values, false);
            Tensor out = row.build(inst.phs);
            if (out.dtype() != want.dtype() || out.shape() != want.shape())
                SJ_HARNESS_FAIL(w)
                    << "static type " << out.type_str() << ", NumPy says " << want.type_str();
            for (const auto& b : test_backends()) {
                w.check = "golden:" + b;
                std::string m =
                    compare(run1(inst, out, b), want, tol_for(row, want.dtype()), false);
                if (!m.empty())
                    SJ_HARNESS_FAIL(w) << b << " vs NumPy: " << m;
            }
        } catch (const std::exception& ex) {
            SJ_HARNESS_FAIL(w) << "threw: " << ex.what();
        }
    }
}

// ---- the table -----------------------------------------------------------------------------

const OpRow* find_row(const std::string& name) {
    for (const auto& r : op_table())
        if (r.name == name)
            return &r;
    return nullptr;
}

TableCounts table_counts() {
    TableCounts c;
    std::set<std::string> ops, grad, second;
    std::set<std::pair<std::string, DType>> pairs;
    for (const auto& r : op_table()) {
        ++c.rows;
        ops.insert(r.op);
        if (r.grad != GradCheck::None)
            grad.insert(r.op);
        if (r.second_order)
            second.insert(r.op);
        for (DType d : r.dtypes)
            pairs.insert({r.op, d});
        c.golden_entries += golden_count(r.name);
    }
    c.ops = ops.size();
    c.grad_ops = grad.size();
    c.second_order_ops = second.size();
    c.op_dtype_pairs = pairs.size();
    return c;
}

} // namespace sj::test
