// Accuracy of the cpu backend's f32 transcendentals (src/backend/llvm/LlvmMath.cpp and the libm
// calls of KernelExpr.cpp), in ulp against std:: functions evaluated in long double.
//
// Each function runs as a one-op graph compiled by the cpu backend, so what is measured is the
// vectorised code the kernels really execute. The oracle is the long double (x87, 64-bit
// mantissa) value, which is exact far beyond f32 precision; the error of a result r at input x is
// |r - f(x)| / ulp(f(x)) with ulp taken at the exact value's binade (2^-149 in the denormal
// range), so "0.5 ulp" means correctly rounded. Infinity counts as the value one ulp above
// FLT_MAX, so an overflow one ulp early or late costs about one ulp, not infinitely many.
#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

using namespace sj;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kMin = std::numeric_limits<float>::min();         // smallest normal
constexpr float kDenorm = std::numeric_limits<float>::denorm_min(); // smallest denormal
constexpr float kMax = std::numeric_limits<float>::max();

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }
uint32_t to_bits(float f) { return std::bit_cast<uint32_t>(f); }

/// Runs y = op(x) elementwise on the cpu backend.
std::vector<float> run_cpu(Tensor (*op)(const Tensor&), const std::vector<float>& xs) {
    Placeholder x({-1}, f32, "x");
    FunctionOptions o;
    o.backend = "cpu";
    Function f = function({x}, {op(x)}, {}, o);
    return f(Array(xs))[0].to_vector<float>();
}

/// ulp of the f32 binade holding |y| (y exact, may lie outside the f32 range).
long double ulp_at(long double y) {
    long double a = std::fabs(y);
    if (a < kMin) return std::ldexp(1.0L, -149);
    int e;
    std::frexp(a, &e); // a = m 2^e, m in [0.5, 1)
    if (e > 128) e = 128;
    return std::ldexp(1.0L, e - 1 - 23);
}

/// Error of `got` against the exact value `want`, in ulp (0 when both are the same special value;
/// infinite when one is NaN and the other not).
double ulp_error(float got, long double want) {
    if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got) ? 0 : INFINITY;
    float rounded = float(want); // correctly rounded (round to nearest)
    if (std::isinf(rounded)) {   // the exact value overflows f32: infinity is the right answer
        if (got == rounded) return 0;
        if (std::isinf(got)) return INFINITY;
        return double((std::fabs(want) - std::fabs((long double)got)) / ulp_at(kMax));
    }
    // infinity stands for 2^128, the value one ulp above FLT_MAX
    long double g = std::isinf(got) ? std::copysign(std::ldexp(1.0L, 128), (long double)got) : (long double)got;
    return double(std::fabs(g - want) / ulp_at(want));
}

/// Inputs: every `stride`-th bit pattern of both signs over the finite range, dense windows of
/// `window` consecutive floats on both sides of each point in `centres`, and the smallest
/// denormals and normals.
std::vector<float> sweep(uint32_t stride, const std::vector<float>& centres, int window = 2048) {
    std::vector<float> xs;
    for (uint64_t b = 0; b < 0x7f800000u; b += stride) {
        xs.push_back(from_bits(uint32_t(b)));
        xs.push_back(-from_bits(uint32_t(b)));
    }
    for (uint32_t b = 0; b < 4096; ++b) { // denormals near zero, then the normal boundary
        xs.push_back(from_bits(b));
        xs.push_back(-from_bits(b));
        xs.push_back(from_bits(to_bits(kMin) - 2048 + b));
        xs.push_back(-from_bits(to_bits(kMin) - 2048 + b));
    }
    for (float c : centres) {
        for (int k = -window; k <= window; ++k) {
            int64_t b = int64_t(to_bits(std::fabs(c))) + k;
            if (b < 0 || b >= 0x7f800000) continue;
            float v = from_bits(uint32_t(b));
            xs.push_back(c < 0 ? -v : v);
        }
    }
    xs.push_back(kMax);
    xs.push_back(-kMax);
    return xs;
}

struct Worst {
    double ulp = 0;
    float x = 0, got = 0;
    long double want = 0;
};

/// Max ulp error of op over xs against exact(x); inputs where `skip` holds are left out (the
/// exact value is not representable as a meaningful f32 comparison there, e.g. log of negatives:
/// those are checked as special values).
Worst measure(Tensor (*op)(const Tensor&), long double (*exact)(long double), const std::vector<float>& xs) {
    std::vector<float> got = run_cpu(op, xs);
    Worst w;
    for (size_t i = 0; i < xs.size(); ++i) {
        long double want = exact((long double)xs[i]);
        double e = ulp_error(got[i], want);
        if (e > w.ulp || std::isnan(e)) w = {e, xs[i], got[i], want};
    }
    return w;
}

long double ld_exp(long double x) { return std::exp(x); }
long double ld_expm1(long double x) { return std::expm1(x); }
long double ld_log(long double x) { return std::log(x); }
long double ld_log1p(long double x) { return std::log1p(x); }
long double ld_tanh(long double x) { return std::tanh(x); }
long double ld_erf(long double x) { return std::erf(x); }
long double ld_sin(long double x) { return std::sin(x); }
long double ld_cos(long double x) { return std::cos(x); }
long double ld_tan(long double x) { return std::tan(x); }
long double ld_log2(long double x) { return std::log2(x); }
long double ld_sqrt(long double x) { return std::sqrt(x); }
long double ld_rsqrt(long double x) { return 1.0L / std::sqrt(x); }
long double ld_reciprocal(long double x) { return 1.0L / x; }

Tensor op_exp(const Tensor& x) { return sj::exp(x); }
Tensor op_expm1(const Tensor& x) { return sj::expm1(x); }
Tensor op_log(const Tensor& x) { return sj::log(x); }
Tensor op_log1p(const Tensor& x) { return sj::log1p(x); }
Tensor op_tanh(const Tensor& x) { return sj::tanh(x); }
Tensor op_erf(const Tensor& x) { return sj::erf(x); }
Tensor op_sin(const Tensor& x) { return sj::sin(x); }
Tensor op_cos(const Tensor& x) { return sj::cos(x); }
Tensor op_tan(const Tensor& x) { return sj::tan(x); }
Tensor op_log2(const Tensor& x) { return sj::log2(x); }
Tensor op_sqrt(const Tensor& x) { return sj::sqrt(x); }
Tensor op_rsqrt(const Tensor& x) { return sj::rsqrt(x); }
Tensor op_reciprocal(const Tensor& x) { return sj::reciprocal(x); }

/// Positive inputs only (for functions whose negative half is all NaN).
std::vector<float> positive(std::vector<float> xs) {
    std::erase_if(xs, [](float v) { return !(v >= 0); });
    return xs;
}

void expect_within(const char* name, const Worst& w, double bound) {
    std::printf("[ accuracy ] %-10s max %.3f ulp at x = %.9g (bits 0x%08x): got %.9g, exact %.12Lg\n", name,
                w.ulp, double(w.x), to_bits(w.x), double(w.got), w.want);
    EXPECT_LE(w.ulp, bound) << name << "(" << w.x << ") = " << w.got << ", exact " << double(w.want);
}

using BinaryOp = Tensor (*)(const Tensor&, const Tensor&);
using BinaryExact = long double (*)(long double, long double);

/// Runs z = op(a, b) elementwise on the cpu backend.
std::vector<float> run_cpu2(BinaryOp op, const std::vector<float>& a, const std::vector<float>& b) {
    Placeholder pa({-1}, f32, "a"), pb({-1}, f32, "b");
    FunctionOptions o;
    o.backend = "cpu";
    return function({pa, pb}, {op(pa, pb)}, {}, o)(Array(a), Array(b))[0].to_vector<float>();
}

/// Max ulp error of op over the pairs (a[i], b[i]) against exact (Worst::x: the pair's a).
Worst measure2(BinaryOp op, BinaryExact exact, const std::vector<float>& a,
               const std::vector<float>& b) {
    std::vector<float> got = run_cpu2(op, a, b);
    Worst w;
    for (size_t i = 0; i < a.size(); ++i) {
        long double want = exact((long double)a[i], (long double)b[i]);
        double e = ulp_error(got[i], want);
        if (e > w.ulp || std::isnan(e)) w = {e, a[i], got[i], want};
    }
    return w;
}

/// op over every pair of `values`, bit for bit against exact rounded once (signed zeros
/// included; NaN for NaN).
void expect_special_pairs(const char* name, BinaryOp op, BinaryExact exact,
                          const std::vector<float>& values) {
    std::vector<float> a, b;
    for (float u : values)
        for (float v : values) a.push_back(u), b.push_back(v);
    std::vector<float> got = run_cpu2(op, a, b);
    for (size_t i = 0; i < a.size(); ++i) {
        const float want = float(exact((long double)a[i], (long double)b[i]));
        const bool ok = std::isnan(want) ? std::isnan(got[i]) : to_bits(got[i]) == to_bits(want);
        EXPECT_TRUE(ok) << name << "(" << a[i] << ", " << b[i] << ") = " << got[i]
                        << ", expected " << want;
    }
}

long double ld_atan2(long double y, long double x) { return std::atan2(y, x); }
long double ld_pow(long double x, long double y) { return std::pow(x, y); }
long double ld_hypot(long double x, long double y) { return std::hypot(x, y); }
Tensor op_atan2(const Tensor& y, const Tensor& x) { return sj::atan2(y, x); }
Tensor op_pow(const Tensor& x, const Tensor& y) { return sj::pow(x, y); }
Tensor op_hypot(const Tensor& x, const Tensor& y) { return sj::hypot(x, y); }

constexpr uint32_t kStride = 4099; // ~2 x 520k bit patterns over the finite range (odd: all binade positions)

} // namespace

// exp: Cephes range reduction with a two-constant ln2 (exact n*ln2_hi) and a degree-6 polynomial
// with fma, then an exact scaling by 2^n in two halves. The reduction error is below 2^-32
// relative and the polynomial's is below 1 ulp on [-ln2/2, ln2/2], so the result is within the
// 0.5 ulp of the final rounding plus ~1 ulp: bound 2. The window centres are the overflow
// threshold, the underflow-to-zero threshold, the start of the denormal range and 0.
TEST(TranscendentalAccuracy, Exp) {
    auto xs = sweep(kStride, {88.7228394f, -103.972076f, -87.3365448f, 1.0f, -1.0f, 1e-7f});
    expect_within("exp", measure(op_exp, ld_exp, xs), 2.0);
}

// expm1 = (u - 1) * x / log(u) with u = exp(x) (Kahan's trick): exact where u rounds to 1; the
// errors of exp and log partly cancel in the ratio. Three roundings plus the errors of our exp and
// log (each <= 2 ulp, tested here): bound 3. Centres: 0 (cancellation), ln 2, the saturation at
// -17 (u - 1 rounds to -1) and the overflow threshold.
TEST(TranscendentalAccuracy, Expm1) {
    auto xs = sweep(kStride, {1e-3f, -1e-3f, 0.693147f, -0.693147f, -17.0f, 88.7228394f, 0.35f, -0.35f});
    expect_within("expm1", measure(op_expm1, ld_expm1, xs), 3.0);
}

// log: Cephes logf (mantissa folded to [sqrt(1/2), sqrt(2)), degree-8 polynomial, exponent
// added with a two-part ln2). The polynomial is accurate to < 1 ulp; where the result is near 0
// (x near 1) all terms are small and the absolute error stays below an ulp of the result. Bound 2.
// Centres: 1 (result crosses zero), sqrt(1/2) and sqrt(2) (the fold), FLT_MIN (denormal scaling).
TEST(TranscendentalAccuracy, Log) {
    auto xs = positive(sweep(kStride, {1.0f, 0.70710678f, 1.41421356f, kMin, 2.0f, 0.5f}));
    expect_within("log", measure(op_log, ld_log, xs), 2.0);
}

// log1p = log(u) - ((u - 1) - x) / u with u = 1 + x: the correction term recovers the rounding of
// u exactly (Sterbenz), so the error is our log's (<= 2 ulp) plus two roundings: bound 3. Centres:
// 0, -1 (pole), and the points where 1 + x stops being exact.
TEST(TranscendentalAccuracy, Log1p) {
    auto xs = sweep(kStride, {-0.999999f, -0.5f, -0.29f, 1e-7f, 6e-8f, 1.0f, 0.41421356f});
    std::erase_if(xs, [](float v) { return !(v >= -1.0f); });
    expect_within("log1p", measure(op_log1p, ld_log1p, xs), 3.0);
}

// tanh: odd Cephes polynomial below |x| = 0.625 (< 1 ulp); above, 1 - 2 / (exp(2|x|) + 1), where
// the result is >= 0.55 so the quotient's few-ulp error shrinks by half relative to the result;
// plus two roundings: bound 3. Centres: the branch switch at 0.625 and the saturation at 9.
TEST(TranscendentalAccuracy, Tanh) {
    auto xs = sweep(kStride, {0.625f, -0.625f, 9.01f, -9.01f, 1e-4f, 0.3f});
    expect_within("tanh", measure(op_tanh, ld_tanh, xs), 3.0);
}

// erf: below |x| = 1, x + x P(x^2) with one fma rounding and a fit error of 1.2e-9 (~0.6 ulp
// measured); above, 1 - exp(-x^2) G(1/x) / x where erfc <= 0.16 shrinks the errors of exp, G and
// the products five-fold: ~1.3 ulp measured in an f32 emulation. Bound 2. Centres: 0 and the
// denormal range (slope 2/sqrt(pi)), the branch switch at 1, the saturation to 1 near 3.9.
TEST(TranscendentalAccuracy, Erf) {
    auto xs = sweep(kStride, {1e-20f, 1e-38f, 0.5f, 1.0f, -1.0f, 2.5f, 3.9f, 4.0f, -4.0f});
    expect_within("erf", measure(op_erf, ld_erf, xs), 2.0);
}

// sin, cos and tan are computed in double (Note [Inline sin and cos] in LlvmMath.cpp): the
// reduction by pi/2 keeps ~2^-52 of the reduced argument and the polynomials leave out less than
// 2^-32 of the result, so the f32 result is the correctly rounded one up to a double rounding:
// bound 0.51 (0.5 would fail on a value within 2^-32 ulp of a halfway point). Centres: 0, pi/2,
// pi, the switch to no reduction (0.78125), the first exponent of the reduction's bits (0.5),
// large arguments (1e6, 1e29) and the largest finite.
TEST(TranscendentalAccuracy, SinCos) {
    auto xs = sweep(kStride, {1.5707964f, 3.1415927f, 1e-4f, 0.78125f, 0.5f, 1e6f, 1e29f, kMax});
    expect_within("sin", measure(op_sin, ld_sin, xs), 0.51);
    expect_within("cos", measure(op_cos, ld_cos, xs), 0.51);
    expect_within("tan", measure(op_tan, ld_tan, xs), 0.51);
}

// log2 in double: x = m 2^e and e + 2 atanh((m - 1) / (m + 1)) / ln 2, the series leaving out
// less than 2^-37: the correctly rounded result up to a double rounding, bound 0.51. Centres: 1
// (cancellation), sqrt(1/2) and sqrt(2) (the switch of m), powers of two, the denormal range.
TEST(TranscendentalAccuracy, Log2) {
    auto xs =
        positive(sweep(kStride, {1.0f, 0.70710677f, 1.4142135f, 2.0f, 1024.0f, kMin, 1e-40f}));
    expect_within("log2", measure(op_log2, ld_log2, xs), 0.51);
    // exact powers of two give their exponent exactly
    std::vector<float> pw;
    for (int e = -149; e <= 127; ++e) pw.push_back(std::ldexp(1.0f, e));
    std::vector<float> got = run_cpu(op_log2, pw);
    for (size_t i = 0; i < pw.size(); ++i)
        EXPECT_EQ(got[i], float(int(i) - 149)) << "log2(2^" << int(i) - 149 << ")";
}

// atan2 in double (emit_atan2f in LlvmMath.cpp): t = min / max of |y| and |x|, one reduction
// by pi/4 and a fit with relative error 1.1e-13, then pi/2 - a and pi - a: the correctly rounded
// result up to a double rounding, bound 0.51. Pairs: every 64th point of the one-dimensional
// sweep for y against 64 values of x of both signs across the range (the ratios cover every
// binade), and pairs near the diagonal |y| = |x| and the reduction's switch |y| = tan(pi/8)|x|.
TEST(TranscendentalAccuracy, Atan2) {
    std::vector<float> ys, xs;
    std::vector<float> one = sweep(kStride * 64, {1.0f, 0.41421357f});
    const std::vector<float> dens = {1e-30f, 1e-10f, 1e-3f, 0.1f, 0.41421357f, 0.5f, 1.0f,
                                     1.5f, 2.0f, 3.0f, 7.0f, 1e3f, 1e10f, 1e30f, kMin, kMax};
    for (float y : one)
        for (float x : dens) {
            ys.push_back(y), xs.push_back(x);
            ys.push_back(y), xs.push_back(-x);
        }
    for (int k = -2000; k <= 2000; ++k) { // |y| = |x| and |y| = tan(pi/8)|x|, nudged
        const float x = 1.0f + float(k) * 1e-4f;
        for (float y : {std::nextafter(x, 0.0f), x, std::nextafter(x, 2.0f), 0.41421357f * x})
            for (float sx : {1.0f, -1.0f}) {
                ys.push_back(y), xs.push_back(sx * x);
                ys.push_back(-y), xs.push_back(sx * x);
            }
    }
    expect_within("atan2", measure2(op_atan2, ld_atan2, ys, xs), 0.51); // (x: the worst y)
    // C's special cases (zeros and infinities of both signs, NaN, and finite values beside
    // them), against the long double atan2 rounded once
    expect_special_pairs("atan2", op_atan2, ld_atan2,
                         {0.0f, -0.0f, kInf, -kInf, kNaN, 1.0f, -1.0f, kDenorm, -kMax});
}

// pow in double (emit_powf in LlvmMath.cpp): 2^(y log2|x|) with y log2|x| within 2^-31 wherever
// the result is a finite nonzero f32: the correctly rounded result up to a double rounding, bound
// 0.51. Pairs: positive x over the one-dimensional sweep against exponents of both signs (small,
// integer, and ones that reach overflow and the denormal range), negative x with integer
// exponents (odd and even), and x near 1 with large exponents.
TEST(TranscendentalAccuracy, Pow) {
    std::vector<float> xs, ys;
    std::vector<float> base = positive(sweep(kStride * 32, {1.0f, 2.0f}));
    for (float x : base)
        for (float y : {0.5f, -0.5f, 1.0f, -1.0f, 2.0f, 3.0f, -3.0f, 0.1f, 1.5f, -2.5f, 7.0f})
            xs.push_back(x), ys.push_back(y);
    for (int k = -300; k <= 300; ++k) { // x near 1 and exponents to the edges of the range
        const float x = 1.0f + float(k) * 3e-3f;
        for (float y : {100.0f, -100.0f, 1000.0f, 12345.5f, -4567.25f, 0.001f})
            xs.push_back(x), ys.push_back(y);
    }
    for (int k = 1; k <= 200; ++k) // negative bases with integer exponents
        for (float y : {1.0f, 2.0f, 3.0f, 5.0f, -1.0f, -2.0f, -3.0f, 13.0f, 16777217.0f})
            xs.push_back(-0.37f * float(k)), ys.push_back(y);
    for (float x : {2.0f, 0.5f, 10.0f, 1.1f}) // results through overflow and the denormals
        for (float y = -160.0f; y <= 160.0f; y += 0.37f)
            xs.push_back(x), ys.push_back(y);
    expect_within("pow", measure2(op_pow, ld_pow, xs, ys), 0.51); // (x: the worst pair's base)
    // C's special cases (C11 F.10.4.4): zeros, ones and infinities of both signs, NaN, odd and
    // even integers and a fraction, against the long double pow rounded once
    expect_special_pairs("pow", op_pow, ld_pow,
                         {0.0f, -0.0f, 1.0f, -1.0f, kInf, -kInf, kNaN, 3.0f, -3.0f, 2.0f, -2.0f,
                          0.5f, -0.5f, 16777216.0f});
}

// hypot in double: x^2 + y^2 exact but for one rounding, then sqrt: the correctly rounded
// result up to a double rounding, bound 0.51. Pairs: the sweep against magnitudes across the
// range (overflow of the f32 squares, denormals), and C's special cases (an infinity beats NaN).
TEST(TranscendentalAccuracy, Hypot) {
    std::vector<float> xs, ys;
    for (float x : sweep(kStride * 64, {1.0f}))
        for (float y : {0.0f, kDenorm, 1e-30f, 0.5f, 1.0f, 3.0f, 1e20f, kMax, -2.0f})
            xs.push_back(x), ys.push_back(y);
    expect_within("hypot", measure2(op_hypot, ld_hypot, xs, ys), 0.51);
    expect_special_pairs("hypot", op_hypot, ld_hypot,
                         {0.0f, -0.0f, kInf, -kInf, kNaN, 1.0f, -3.0f, kDenorm, kMax});
}

// sqrt is the IEEE intrinsic (correctly rounded: 0.5 ulp); reciprocal is one division: 0.5.
// rsqrt is 1/sqrt(x): two correctly rounded steps, but the sqrt's half ulp is relative to its own
// binade, and when sqrt(x) has a mantissa near 1 its result 1/sqrt(x) has one near 2 (ulp half
// as large relative to the value): 2 * 0.5 + 0.5 = 1.5 ulp (measured 1.47).
TEST(TranscendentalAccuracy, SqrtRsqrtReciprocal) {
    auto xs = positive(sweep(kStride, {1.0f, kMin, 4.0f}));
    expect_within("sqrt", measure(op_sqrt, ld_sqrt, xs), 0.5);
    expect_within("rsqrt", measure(op_rsqrt, ld_rsqrt, xs), 1.5);
    expect_within("reciprocal", measure(op_reciprocal, ld_reciprocal, sweep(kStride, {1.0f, kMin, 4.0f})), 0.5);
}

// IEEE special values (C99 Annex F), which must be exact, including the sign of zero; NaN in,
// NaN out. Checked bitwise for zeros and infinities.
TEST(TranscendentalAccuracy, SpecialValues) {
    struct Row {
        const char* name;
        Tensor (*op)(const Tensor&);
        std::vector<std::pair<float, float>> cases; // x -> exact f(x)
    };
    const float n = kNaN;
    std::vector<Row> rows = {
        {"exp", op_exp, {{-kInf, 0}, {kInf, kInf}, {n, n}, {0, 1}, {-0.0f, 1}, {89.0f, kInf}, {-104.0f, 0},
                         {1000.0f, kInf}, {-1000.0f, 0}, {kDenorm, 1}, {-kDenorm, 1}}},
        {"expm1", op_expm1, {{-kInf, -1}, {kInf, kInf}, {n, n}, {0, 0}, {-0.0f, -0.0f}, {kDenorm, kDenorm},
                             {-kDenorm, -kDenorm}, {89.0f, kInf}, {-104.0f, -1}, {-1000.0f, -1}}},
        {"log", op_log, {{0, -kInf}, {-0.0f, -kInf}, {-1, n}, {-kInf, n}, {kInf, kInf}, {n, n}, {1, 0},
                         {-kDenorm, n}}},
        {"log1p", op_log1p, {{-1, -kInf}, {-2, n}, {-kInf, n}, {kInf, kInf}, {n, n}, {0, 0}, {-0.0f, -0.0f},
                             {kDenorm, kDenorm}, {-kDenorm, -kDenorm}}},
        {"tanh", op_tanh, {{kInf, 1}, {-kInf, -1}, {n, n}, {0, 0}, {-0.0f, -0.0f}, {kDenorm, kDenorm},
                           {-kDenorm, -kDenorm}, {20.0f, 1}, {-20.0f, -1}}},
        {"erf", op_erf, {{kInf, 1}, {-kInf, -1}, {n, n}, {0, 0}, {-0.0f, -0.0f}, {10.0f, 1}, {-10.0f, -1}}},
        {"sqrt", op_sqrt, {{0, 0}, {-0.0f, -0.0f}, {kInf, kInf}, {-1, n}, {n, n}}},
        {"rsqrt", op_rsqrt, {{0, kInf}, {-0.0f, -kInf}, {kInf, 0}, {-1, n}, {n, n}}},
        {"reciprocal", op_reciprocal, {{0, kInf}, {-0.0f, -kInf}, {kInf, 0}, {-kInf, -0.0f}, {n, n}}},
        {"sin", op_sin, {{0, 0}, {-0.0f, -0.0f}, {kInf, n}, {-kInf, n}, {n, n}, {kDenorm, kDenorm},
                         {-kDenorm, -kDenorm}}},
        {"cos", op_cos, {{0, 1}, {-0.0f, 1}, {kInf, n}, {-kInf, n}, {n, n}, {kDenorm, 1}}},
        {"tan", op_tan, {{0, 0}, {-0.0f, -0.0f}, {kInf, n}, {-kInf, n}, {n, n}, {kDenorm, kDenorm},
                         {-kDenorm, -kDenorm}}},
        {"log2", op_log2, {{0, -kInf}, {-0.0f, -kInf}, {-1, n}, {-kInf, n}, {kInf, kInf}, {n, n},
                           {1, 0}, {-kDenorm, n}, {kDenorm, -149}, {8, 3}}},
    };
    for (const auto& r : rows) {
        std::vector<float> xs;
        for (const auto& c : r.cases) xs.push_back(c.first);
        // the vectorised loop and its scalar remainder both see every case
        std::vector<float> big;
        for (int rep = 0; rep < 5; ++rep) big.insert(big.end(), xs.begin(), xs.end());
        std::vector<float> got = run_cpu(r.op, big);
        for (size_t i = 0; i < big.size(); ++i) {
            float want = r.cases[i % xs.size()].second;
            float g = got[i];
            bool ok = std::isnan(want) ? std::isnan(g) : to_bits(g) == to_bits(want);
            EXPECT_TRUE(ok) << r.name << "(" << big[i] << ") = " << g << ", expected " << want
                            << " (bits 0x" << std::hex << to_bits(g) << " vs 0x" << to_bits(want) << ")";
        }
    }
}
