// The random API: seeds, Philox bits, and distributions as composites of primitive ops.
#include <symjax/Ops.h>
#include <symjax/Random.h>
#include <symjax/ir/Node.h>

#include "../ops/OpDef.h"

#include <atomic>
#include <cmath>
#include <limits>

namespace sj::random {
namespace {

/// SplitMix64 (Steele, Lea and Flood 2014): a bijective mixer, used to turn seeds into keys.
uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/// Keeps the second Box-Muller stream independent of the first (any odd constant would do).
constexpr uint64_t kSecondStream = 0xD1B54A32D192ED03ull;

std::atomic<uint64_t> g_seed_state{0};

/// Where a draw's shape comes from: a static shape, or a tensor whose -1 dims bind at call time.
struct Target {
    Shape shape;
    Tensor like; // undefined when shape is static
    const char* op;
};

Target static_target(const Shape& shape, const char* op) {
    for (int64_t d : shape)
        SJ_CHECK(d >= 0, ShapeError) << "random::" << op << ": shape " << shape_str(shape)
                                     << " has unknown dims; use random::" << op
                                     << "_like to take them from a tensor";
    return {shape, Tensor(), op};
}

Target like_target(const Tensor& t, const char* op) {
    SJ_CHECK(t.defined(), Error) << "random::" << op << "_like: undefined Tensor";
    return {t.shape(), is_static(t.shape()) ? Tensor() : t, op};
}

DType like_dtype(const Tensor& t, std::optional<DType> dtype) {
    if (dtype) return *dtype;
    return is_float(t.dtype()) ? t.dtype() : DType::F32;
}

void check_float(DType dtype, const char* op) {
    SJ_CHECK(is_float(dtype), TypeError)
        << "random::" << op << ": dtype must be f32 or f64, got " << dtype_name(dtype);
}

/// The call counter leaf shared by every draw (the runtime binds it; eval uses 0).
Tensor counter() { return Tensor(Node::make(Op::RngCounter, NoAttrs{}, {})); }

/// u32 Philox bits for `key` shaped as the target.
Tensor raw_bits(const Target& t, uint64_t key) {
    if (t.like.defined())
        return detail::make(Op::PhiloxBits, {counter(), t.like}, PhiloxAttrs{key, t.shape});
    return detail::make(Op::PhiloxBits, {counter()}, PhiloxAttrs{key, t.shape});
}

/// Uniform in [0, 1): f32 on the grid k * 2^-24 (exact, at most 1 - 2^-24), f64 as k * 2^-32.
Tensor unit_uniform(const Tensor& bits, DType dtype) {
    Tensor b = cast(bits, DType::F64);
    if (dtype == DType::F64) return b * std::ldexp(1.0, -32);
    return cast(floor(b / 256.0) * std::ldexp(1.0, -24), DType::F32);
}

/// Uniform in the open interval (0, 1): the midpoints of unit_uniform's grid.
Tensor open_unit_uniform(const Tensor& bits, DType dtype) {
    Tensor b = cast(bits, DType::F64);
    if (dtype == DType::F64) return (b + 0.5) * std::ldexp(1.0, -32);
    return cast((floor(b / 256.0) + 0.5) * std::ldexp(1.0, -24), DType::F32);
}

/// The polynomial with coefficients `c` (highest degree first, at least two) at w, by Horner's
/// rule.
Tensor horner(const Tensor& w, std::initializer_list<double> c) {
    auto it = c.begin();
    Tensor p = w * *it++;
    p = p + *it++;
    for (; it != c.end(); ++it) p = p * w + *it;
    return p;
}

/// erf^-1(x) for |x| < 1: Giles' single-precision approximation ("Approximating the erfinv
/// function", GPU Computing Gems, 2011); for f64, refined by two Newton steps on
/// erf(y) - x = 0 (erf'(y) = 2/sqrt(pi) exp(-y^2)), each of which doubles the correct digits.
Tensor erfinv(const Tensor& x) {
    Tensor w = neg(log((1.0 - x) * (1.0 + x)));
    Tensor wc = w - 2.5;
    Tensor central = horner(wc, {2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                                 0.00021858087, -0.00125372503, -0.00417768164, 0.246640727,
                                 1.50140941});
    Tensor wt = sqrt(maximum(w, 5.0)) - 3.0; // only used where w >= 5
    Tensor tail = horner(wt, {-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                              0.00573950773, -0.0076224613, 0.00943887047, 1.00167406,
                              2.83297682});
    Tensor y = where(w < 5.0, central, tail) * x;
    if (x.dtype() == DType::F64) {
        const double two_over_sqrt_pi = 2.0 / std::sqrt(M_PI);
        for (int step = 0; step < 2; ++step)
            y = y - (erf(y) - x) / (two_over_sqrt_pi * exp(neg(y * y)));
    }
    return y;
}

/// The largest value of dtype below v (so a result clamped to it stays < v).
double below(double v, DType dtype) {
    if (dtype == DType::F32) {
        float f = static_cast<float>(v);
        if (static_cast<double>(f) >= v)
            f = std::nextafter(f, -std::numeric_limits<float>::infinity());
        return f;
    }
    return std::nextafter(v, -std::numeric_limits<double>::infinity());
}

Tensor uniform_impl(const Target& t, double lo, double hi, DType dtype, uint64_t seed) {
    check_float(dtype, t.op);
    SJ_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi, InputError)
        << "random::" << t.op << ": need finite lo <= hi, got lo = " << lo << ", hi = " << hi;
    Tensor u = unit_uniform(raw_bits(t, splitmix64(seed)), dtype);
    if (lo == 0 && hi == 1) return u;
    Tensor r = u * (hi - lo) + lo;
    // rounding in lo + (hi - lo) u may reach hi; keep the interval half-open
    return lo < hi ? minimum(r, below(hi, dtype)) : r;
}

Tensor normal_impl(const Target& t, double mean, double stddev, DType dtype, uint64_t seed) {
    check_float(dtype, t.op);
    SJ_CHECK(std::isfinite(mean) && std::isfinite(stddev) && stddev >= 0, InputError)
        << "random::" << t.op << ": need a finite mean and stddev >= 0, got mean = " << mean
        << ", stddev = " << stddev;
    // Box-Muller: u1 in (0, 1] keeps log finite, u2 in [0, 1)
    Tensor u1 = 1.0 - unit_uniform(raw_bits(t, splitmix64(seed)), dtype);
    Tensor u2 = unit_uniform(raw_bits(t, splitmix64(seed ^ kSecondStream)), dtype);
    Tensor z = sqrt(-2.0 * log(u1)) * cos((2.0 * M_PI) * u2);
    if (mean == 0 && stddev == 1) return z;
    return z * stddev + mean;
}

Tensor bernoulli_impl(const Target& t, double p, uint64_t seed) {
    SJ_CHECK(p >= 0 && p <= 1, InputError)
        << "random::" << t.op << ": probability must lie in [0, 1], got " << p;
    // u in [0, 1 - 2^-32]: u < p is never true for p = 0 and always true for p = 1
    Tensor u = unit_uniform(raw_bits(t, splitmix64(seed)), DType::F64);
    return u < p;
}

Tensor truncated_normal_impl(const Target& t, double lo, double hi, DType dtype, uint64_t seed) {
    check_float(dtype, t.op);
    SJ_CHECK(lo < hi && !std::isnan(lo) && !std::isnan(hi), InputError)
        << "random::" << t.op << ": need lo < hi, got lo = " << lo << ", hi = " << hi;
    // x = Phi^-1(u) with u uniform in (Phi(lo), Phi(hi)); Phi^-1(u) = sqrt(2) erfinv(2u - 1)
    // and 2 Phi(x) - 1 = erf(x / sqrt(2)), so draw y = 2u - 1 uniform in
    // (erf(lo / sqrt(2)), erf(hi / sqrt(2))).
    double a = std::erf(lo / M_SQRT2), b = std::erf(hi / M_SQRT2);
    Tensor v = open_unit_uniform(raw_bits(t, splitmix64(seed)), dtype);
    Tensor y = v * (b - a) + a;
    // rounding may reach +-1, where erfinv is infinite
    y = minimum(maximum(y, -below(1.0, dtype)), below(1.0, dtype));
    Tensor x = M_SQRT2 * erfinv(y);
    return minimum(maximum(x, lo), hi);
}

uint64_t seed_or_next(std::optional<uint64_t> seed) { return seed ? *seed : next_seed(); }

} // namespace

void manual_seed(uint64_t seed) { g_seed_state.store(seed); }

uint64_t next_seed() { return splitmix64(g_seed_state.fetch_add(1)); }

Tensor bits(const Shape& shape, std::optional<uint64_t> seed) {
    return raw_bits(static_target(shape, "bits"), splitmix64(seed_or_next(seed)));
}
Tensor uniform(const Shape& shape, double lo, double hi, DType dtype,
               std::optional<uint64_t> seed) {
    return uniform_impl(static_target(shape, "uniform"), lo, hi, dtype, seed_or_next(seed));
}
Tensor normal(const Shape& shape, double mean, double stddev, DType dtype,
              std::optional<uint64_t> seed) {
    return normal_impl(static_target(shape, "normal"), mean, stddev, dtype, seed_or_next(seed));
}
Tensor bernoulli(const Shape& shape, double p, std::optional<uint64_t> seed) {
    return bernoulli_impl(static_target(shape, "bernoulli"), p, seed_or_next(seed));
}
Tensor truncated_normal(const Shape& shape, double lo, double hi, DType dtype,
                        std::optional<uint64_t> seed) {
    return truncated_normal_impl(static_target(shape, "truncated_normal"), lo, hi, dtype,
                                 seed_or_next(seed));
}

Tensor bits_like(const Tensor& t, std::optional<uint64_t> seed) {
    return raw_bits(like_target(t, "bits"), splitmix64(seed_or_next(seed)));
}
Tensor uniform_like(const Tensor& t, double lo, double hi, std::optional<DType> dtype,
                    std::optional<uint64_t> seed) {
    return uniform_impl(like_target(t, "uniform"), lo, hi, like_dtype(t, dtype),
                        seed_or_next(seed));
}
Tensor normal_like(const Tensor& t, double mean, double stddev, std::optional<DType> dtype,
                   std::optional<uint64_t> seed) {
    return normal_impl(like_target(t, "normal"), mean, stddev, like_dtype(t, dtype),
                       seed_or_next(seed));
}
Tensor bernoulli_like(const Tensor& t, double p, std::optional<uint64_t> seed) {
    return bernoulli_impl(like_target(t, "bernoulli"), p, seed_or_next(seed));
}
Tensor truncated_normal_like(const Tensor& t, double lo, double hi, std::optional<DType> dtype,
                             std::optional<uint64_t> seed) {
    return truncated_normal_impl(like_target(t, "truncated_normal"), lo, hi,
                                 like_dtype(t, dtype), seed_or_next(seed));
}

} // namespace sj::random
