// f32 exp/log/tanh/erf/expm1/log1p as straight-line LLVM IR (Cephes polynomials; erf fitted here),
// and f32 sin/cos/tan/log2/atan2/pow computed in double (Note [Inline sin and cos]).
#include "LlvmMath.h"

#include <llvm/IR/Intrinsics.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

namespace sj::codegen {

using llvm::Value;

namespace {
Value* c(llvm::IRBuilder<>& b, double v) {
    return llvm::ConstantFP::get(b.getFloatTy(), v);
}
Value* cd(llvm::IRBuilder<>& b, double v) { // a double constant
    return llvm::ConstantFP::get(b.getDoubleTy(), v);
}
Value* ci(llvm::IRBuilder<>& b, int32_t v) {
    return b.getInt32(static_cast<uint32_t>(v));
}
Value* fma(llvm::IRBuilder<>& b, Value* x, Value* y, Value* z) {
    return b.CreateIntrinsic(llvm::Intrinsic::fma, {x->getType()}, {x, y, z});
}
/// Horner evaluation: ((c0*x + c1)*x + c2)..., the constants of x's type (float or double)
Value* horner(llvm::IRBuilder<>& b, Value* x, std::initializer_list<double> cs) {
    auto k = [&](double v) { return llvm::ConstantFP::get(x->getType(), v); };
    auto it = cs.begin();
    Value* p = k(*it++);
    for (; it != cs.end(); ++it)
        p = fma(b, p, x, k(*it));
    return p;
}
/// Whether x's sign bit is set (-0 and negative NaNs included).
Value* signbit(llvm::IRBuilder<>& b, Value* x) {
    return b.CreateICmpSLT(b.CreateBitCast(x, b.getInt32Ty()), b.getInt32(0));
}
Value* fabs(llvm::IRBuilder<>& b, Value* x) {
    return b.CreateIntrinsic(llvm::Intrinsic::fabs, {x->getType()}, {x});
}
Value* isnan(llvm::IRBuilder<>& b, Value* x) {
    return b.CreateFCmpUNO(x, x);
}
} // namespace

Value* emit_expf(llvm::IRBuilder<>& b, Value* x) {
    // x = n ln2 + r, |r| <= ln2/2; exp(r) by a degree-6 polynomial (Cephes expf); 2^n applied in
    // two halves so results down to the denormal range are exact in scaling.
    Value* xc = b.CreateIntrinsic(
        llvm::Intrinsic::maxnum, {b.getFloatTy()},
        {b.CreateIntrinsic(llvm::Intrinsic::minnum, {b.getFloatTy()}, {x, c(b, 88.8f)}),
         c(b, -104.0f)});
    Value* n = b.CreateIntrinsic(llvm::Intrinsic::roundeven, {b.getFloatTy()},
                                 {b.CreateFMul(xc, c(b, 1.44269504088896341))});
    Value* r = fma(b, n, c(b, -0.693359375), xc);
    r = fma(b, n, c(b, 2.12194440e-4), r);
    Value* p = horner(b, r,
                      {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3, 4.1665795894E-2,
                       1.6666665459E-1, 5.0000001201E-1});
    Value* r2 = b.CreateFMul(r, r);
    Value* y = fma(b, p, r2, b.CreateFAdd(r, c(b, 1.0)));
    Value* ni = b.CreateFPToSI(n, b.getInt32Ty());
    Value* n1 = b.CreateAShr(ni, ci(b, 1));
    Value* n2 = b.CreateSub(ni, n1);
    auto pow2 = [&](Value* k) {
        return b.CreateBitCast(b.CreateShl(b.CreateAdd(k, ci(b, 127)), ci(b, 23)), b.getFloatTy());
    };
    y = b.CreateFMul(b.CreateFMul(y, pow2(n1)), pow2(n2));
    y = b.CreateSelect(b.CreateFCmpOGT(x, c(b, 88.72283905206835)), c(b, INFINITY), y);
    y = b.CreateSelect(b.CreateFCmpOLT(x, c(b, -103.97207708)), c(b, 0.0), y);
    return b.CreateSelect(isnan(b, x), x, y);
}

namespace {
/// A positive finite f32 x as m 2^e with m in [sqrt(1/2), sqrt(2)) (exact): {m, e as i32}.
/// Denormals are scaled by 2^23 first.
std::pair<Value*, Value*> split_mantissa(llvm::IRBuilder<>& b, Value* x) {
    Value* small = b.CreateFCmpOLT(x, c(b, std::numeric_limits<float>::min()));
    Value* xs = b.CreateSelect(small, b.CreateFMul(x, c(b, 8388608.0)), x);
    Value* bits = b.CreateBitCast(xs, b.getInt32Ty());
    Value* e = b.CreateSub(b.CreateLShr(bits, ci(b, 23)), ci(b, 126));
    e = b.CreateSub(e, b.CreateSelect(small, ci(b, 23), ci(b, 0)));
    Value* m = b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, ci(b, 0x007fffff)), ci(b, 0x3f000000)),
                               b.getFloatTy()); // in [0.5, 1)
    Value* lt = b.CreateFCmpOLT(m, c(b, 0.707106781186547524));
    return {b.CreateSelect(lt, b.CreateFAdd(m, m), m),
            b.CreateSub(e, b.CreateZExt(lt, b.getInt32Ty()))};
}
} // namespace

Value* emit_logf(llvm::IRBuilder<>& b, Value* x) {
    // x = m 2^e with m in [sqrt(1/2), sqrt(2)); log(m) by the Cephes logf polynomial.
    auto [m, e] = split_mantissa(b, x);
    Value* ef = b.CreateSIToFP(e, b.getFloatTy());
    Value* f = b.CreateFSub(m, c(b, 1.0));
    Value* z = b.CreateFMul(f, f);
    Value* p = horner(b, f,
                      {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1,
                       1.4249322787E-1, -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1,
                       3.3333331174E-1});
    Value* y = b.CreateFMul(b.CreateFMul(p, f), z);
    y = fma(b, ef, c(b, -2.12194440e-4), y);
    y = fma(b, z, c(b, -0.5), y);
    Value* r = b.CreateFAdd(f, y);
    r = fma(b, ef, c(b, 0.693359375), r);
    r = b.CreateSelect(b.CreateFCmpOEQ(x, c(b, INFINITY)), x, r);
    r = b.CreateSelect(b.CreateFCmpOEQ(x, c(b, 0.0)), c(b, -INFINITY), r);
    r = b.CreateSelect(b.CreateFCmpOLT(x, c(b, 0.0)), c(b, NAN), r);
    return b.CreateSelect(isnan(b, x), x, r);
}

Value* emit_tanhf(llvm::IRBuilder<>& b, Value* x) {
    // |x| < 0.625: odd polynomial (Cephes tanhf); else 1 - 2/(exp(2|x|) + 1) with the sign of x.
    Value* ax = fabs(b, x);
    Value* z = b.CreateFMul(x, x);
    Value* p = horner(b, z,
                      {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2, 1.33314422036E-1,
                       -3.33332819422E-1});
    // |small| <= |x| with x's sign (odd function); copysign also keeps tanh(-0) = -0, which the
    // fma alone turns into +0 (-0 * p z + -0 rounds to +0)
    Value* small = b.CreateIntrinsic(llvm::Intrinsic::copysign, {b.getFloatTy()},
                                     {fma(b, b.CreateFMul(p, z), x, x), x});
    Value* e = emit_expf(b, b.CreateFAdd(ax, ax));
    Value* big = b.CreateFSub(c(b, 1.0), b.CreateFDiv(c(b, 2.0), b.CreateFAdd(e, c(b, 1.0))));
    big = b.CreateIntrinsic(llvm::Intrinsic::copysign, {b.getFloatTy()}, {big, x});
    Value* r = b.CreateSelect(b.CreateFCmpOLT(ax, c(b, 0.625)), small, big);
    return b.CreateSelect(isnan(b, x), x, r);
}

Value* emit_erff(llvm::IRBuilder<>& b, Value* x) {
    // Two branches, both computed and selected (vectorisable):
    // |x| < 1: erf(x) = x + x P(x^2), P a degree-6 fit of (erf(x) - x)/x on x^2 in [0, 1]
    //   (error 1.2e-9); the fma rounds once, and keeps tiny and denormal x exact in scaling.
    // 1 <= |x| < 4: erf = 1 - erfc(a), a = |x|, erfc(a) = exp(-a^2) G(1/a) / a, G(t) = a e^(a^2)
    //   erfc(a) a degree-9 fit in t - 5/8 over t in [1/4, 1] (error 2.7e-9). erfc <= 0.16 there, so
    //   its relative error (exp's included) shrinks at least five-fold in the result.
    // |x| >= 4: erf rounds to +-1 in f32. Measured <= 1.3 ulp (TranscendentalAccuracyTest).
    // Coefficients: mpmath.chebyfit of the functions above at 40 digits.
    Value* a = fabs(b, x);
    Value* z = b.CreateFMul(x, x);
    Value* p = horner(b, z,
                      {7.8758750626854883e-5, -8.0168642871658695e-4, 5.189087423433974e-3,
                       -2.6854212010626412e-2, 1.1283594715160218e-1, -3.7612626666720331e-1,
                       1.2837916584835095e-1});
    Value* small = fma(b, x, p, x);
    Value* t = b.CreateFDiv(c(b, 1.0), a);
    Value* g = horner(b, b.CreateFSub(t, c(b, 0.625)),
                      {-4.7822627023530587e-2, 5.4921685076242254e-2, -2.4603800060566103e-2,
                       -1.1232849122343979e-2, 4.9612142239670402e-2, -7.7983364361834357e-2,
                       7.2101930576209976e-2, -1.2954869588571061e-3, -1.7158565139179804e-1,
                       4.8952479028933696e-1});
    Value* erfc = b.CreateFMul(emit_expf(b, b.CreateFNeg(z)), b.CreateFMul(g, t));
    Value* big =
        b.CreateSelect(b.CreateFCmpOGE(a, c(b, 4.0)), c(b, 1.0), b.CreateFSub(c(b, 1.0), erfc));
    big = b.CreateIntrinsic(llvm::Intrinsic::copysign, {b.getFloatTy()}, {big, x});
    Value* r = b.CreateSelect(b.CreateFCmpOLT(a, c(b, 1.0)), small, big);
    return b.CreateSelect(isnan(b, x), x, r);
}

Value* emit_expm1f(llvm::IRBuilder<>& b, Value* x) {
    // Kahan: u = exp(x); expm1 = (u - 1) * x / log(u), exact where u rounds to 1 or overflows.
    Value* u = emit_expf(b, x);
    Value* um1 = b.CreateFSub(u, c(b, 1.0));
    Value* r = b.CreateFMul(um1, b.CreateFDiv(x, emit_logf(b, u)));
    r = b.CreateSelect(b.CreateFCmpOEQ(u, c(b, 1.0)), x, r);
    r = b.CreateSelect(b.CreateFCmpOEQ(um1, c(b, -1.0)), c(b, -1.0), r);
    r = b.CreateSelect(b.CreateFCmpOEQ(u, c(b, INFINITY)), u, r);
    return b.CreateSelect(isnan(b, x), x, r);
}

Value* emit_log1pf(llvm::IRBuilder<>& b, Value* x) {
    // u = 1 + x; log1p = log(u) - ((u - 1) - x) / u, exact where u rounds to 1.
    Value* u = b.CreateFAdd(x, c(b, 1.0));
    Value* corr = b.CreateFDiv(b.CreateFSub(b.CreateFSub(u, c(b, 1.0)), x), u);
    Value* r = b.CreateFSub(emit_logf(b, u), corr);
    r = b.CreateSelect(b.CreateFCmpOEQ(u, c(b, 1.0)), x, r);
    r = b.CreateSelect(b.CreateFCmpOEQ(u, c(b, INFINITY)), u, r);
    r = b.CreateSelect(b.CreateFCmpOEQ(u, c(b, 0.0)), c(b, -INFINITY), r);
    return b.CreateSelect(isnan(b, x), x, r);
}

namespace {
// Note [Inline sin and cos]
// sin and cos of f32 were calls of the C library's sinf and cosf: scalar calls that keep a loop
// from vectorising, 3-3.4x slower than PyTorch's vectorised ones on 4M elements (AMD EPYC, 2
// threads, 2026-12-05). They are emitted here instead, in double precision, which leaves a wide
// margin for f32 results: x = (k + f) pi/2 with k an integer and |f| <= 1/2, then sin or cos of
// f pi/2 (|f pi/2| <= pi/4) by Taylor polynomials whose first omitted terms are below 2^-32 of
// the result, and the quadrant k mod 4 chooses which and its sign.
// The reduction is Payne and Hanek's (as in fdlibm's __rem_pio2f), for every finite x in one
// straight line: x = M 2^E with M < 2^24 an integer and E = exponent - 23, and x 2/pi mod 4 =
// M F mod 4 with F = 2^E 2/pi mod 4, the bits of 2/pi from the one worth 2^(1-E). F is cut at
// fixed binary places into f1 (bits worth 2^1..2^-27), f2 (2^-28..2^-56) and f3 (the next 53):
// M f1 and M f2 are exact in double, M f1 mod 4 is exact, and k, the nearest integer to
// M (f1 + f2), leaves f = ((M f1 - k) + M f2) + M f3, where the difference is exact and any
// cancellation against M f2 is exact too (Sterbenz), so f keeps ~2^-52 relative accuracy down
// to the smallest |f| an f32 input reaches (~2^-30). The bits come from kTwoOverPiBits, 2/pi
// after 25 zero bits (so that E = -24, |x| from 1/2, starts at bit 0; smaller |x| < pi/4 needs
// no reduction), as 64-bit windows: two words chosen by selects and a funnel shift, all vector
// operations. A table of F per exponent read per lane (three gathers, masked off or not for
// small arguments) ran no faster than the libm calls; this runs 1.3-2x faster than them, and
// still ~1.8x slower than PyTorch's vectorised f32 sin, which works on 16 float lanes where
// this works on 8 doubles (docs/performance.md, "Vectorised sin, cos, tan, log2, atan2, pow
// and hypot"). Measured <= 0.5 ulp plus the double rounding (TranscendentalAccuracy.SinCos,
// every binade and the large arguments).
// The words were made by mpmath at 600 bits, checked against F = fmod(ldexp(2 / pi, E), 4) for
// every E (to 2^-108).
constexpr uint64_t kTwoOverPiBits[] = {0x00000028be60db93ull, 0x91054a7f09d5f47dull,
                                       0x4d377036d8a5664full, 0x10e4107f9458eaf7ull,
                                       0xaef1586dc91b8e90ull};
constexpr int kFirstE = -24, kLastE = 104;
} // namespace

Value* emit_trigf(llvm::IRBuilder<>& b, Value* x, Trig fn) {
    llvm::Type* f64 = b.getDoubleTy();
    llvm::Type* i64 = b.getInt64Ty();
    Value* ax = fabs(b, x);
    Value* bits = b.CreateBitCast(ax, b.getInt32Ty());
    Value* biased = b.CreateLShr(bits, ci(b, 23));
    Value* md = b.CreateUIToFP(b.CreateOr(b.CreateAnd(bits, ci(b, 0x007fffff)), ci(b, 0x00800000)),
                               f64); // M, exact
    // the first bit of F: E - kFirstE, clamped (|x| < 1/2, infinities and NaN do not use it)
    Value* pos = b.CreateSub(biased, ci(b, 150 + kFirstE));
    pos = b.CreateIntrinsic(llvm::Intrinsic::smax, {b.getInt32Ty()}, {pos, ci(b, 0)});
    pos =
        b.CreateIntrinsic(llvm::Intrinsic::smin, {b.getInt32Ty()}, {pos, ci(b, kLastE - kFirstE)});
    pos = b.CreateZExt(pos, i64);
    // the 111 bits from pos lie in three words: i = pos / 64 in 0..2 and the two after it; two
    // funnel shifts give the bits from pos on, 128 of them
    Value* i = b.CreateLShr(pos, b.getInt64(6));
    Value *i0 = b.CreateICmpEQ(i, b.getInt64(0)), *i1 = b.CreateICmpEQ(i, b.getInt64(1));
    auto word = [&](int j) { // kTwoOverPiBits[i + j]
        return b.CreateSelect(i0, b.getInt64(kTwoOverPiBits[j]),
                              b.CreateSelect(i1, b.getInt64(kTwoOverPiBits[j + 1]),
                                             b.getInt64(kTwoOverPiBits[j + 2])));
    };
    Value *w0 = word(0), *w1 = word(1), *w2 = word(2);
    Value* sh = b.CreateAnd(pos, b.getInt64(63));
    Value* hi = b.CreateIntrinsic(llvm::Intrinsic::fshl, {i64}, {w0, w1, sh}); // bits pos..+63
    Value* lo = b.CreateIntrinsic(llvm::Intrinsic::fshl, {i64}, {w1, w2, sh}); // pos+64..+127
    auto scaled = [&](Value* v, int e) {
        return b.CreateFMul(b.CreateUIToFP(v, f64), cd(b, std::ldexp(1.0, e)));
    };
    Value* f1 = scaled(b.CreateLShr(hi, b.getInt64(35)), -27); // 29 bits
    Value* f2 =
        scaled(b.CreateAnd(b.CreateLShr(hi, b.getInt64(6)), b.getInt64((1u << 29) - 1)), -56);
    Value* f3 = scaled(b.CreateOr(b.CreateShl(b.CreateAnd(hi, b.getInt64(63)), b.getInt64(47)),
                                  b.CreateLShr(lo, b.getInt64(17))),
                       -109); // 53 bits
    Value* p1 = b.CreateFMul(md, f1);
    Value* floor4 =
        b.CreateIntrinsic(llvm::Intrinsic::floor, {f64}, {b.CreateFMul(p1, cd(b, 0.25))});
    p1 = fma(b, floor4, cd(b, -4.0), p1); // M f1 mod 4 (exact)
    Value* p2 = b.CreateFMul(md, f2);
    Value* p3 = b.CreateFMul(md, f3);
    Value* k = b.CreateIntrinsic(llvm::Intrinsic::roundeven, {f64}, {b.CreateFAdd(p1, p2)});
    Value* f = b.CreateFAdd(b.CreateFAdd(b.CreateFSub(p1, k), p2), p3);
    Value* r = b.CreateFMul(f, cd(b, 1.5707963267948966)); // pi/2 (relative error 2^-54)
    // |x| < 0.78125 < pi/4: no reduction
    Value* small = b.CreateFCmpOLT(ax, c(b, 0.78125));
    r = b.CreateSelect(small, b.CreateFPExt(ax, f64), r);
    k = b.CreateSelect(small, cd(b, 0.0), k);
    Value* q = b.CreateFPToSI(k, b.getInt32Ty());
    if (fn == Trig::Cos)
        q = b.CreateAdd(q, ci(b, 1));
    Value* r2 = b.CreateFMul(r, r);
    // sin r = r + r^3 S(r^2), cos r = 1 + r^2 C(r^2): Taylor to r^11 and r^12 (the first terms
    // left out, r^13/13! and r^14/14! at |r| = pi/4, are below 2^-32 of the result)
    Value* sp =
        horner(b, r2, {-1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0});
    Value* sn = fma(b, b.CreateFMul(r, r2), sp, r);
    Value* cp = horner(b, r2, {1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0, -1.0 / 720.0,
                               1.0 / 24.0, -0.5});
    Value* cs = fma(b, r2, cp, cd(b, 1.0));
    Value* odd = b.CreateICmpNE(b.CreateAnd(q, ci(b, 1)), ci(b, 0));
    Value* v;
    if (fn == Trig::Tan) { // tan(k pi/2 + r): tan r for even k, -1 / tan r = -cos r / sin r for odd
        v = b.CreateFDiv(b.CreateSelect(odd, cs, sn), b.CreateSelect(odd, sn, cs)); // one division
        v = b.CreateSelect(odd, b.CreateFNeg(v), v);
    } else {
        Value* neg = b.CreateICmpNE(b.CreateAnd(q, ci(b, 2)), ci(b, 0));
        v = b.CreateSelect(odd, cs, sn);
        v = b.CreateSelect(neg, b.CreateFNeg(v), v);
    }
    Value* y = b.CreateFPTrunc(v, b.getFloatTy());
    if (fn != Trig::Cos) // sin and tan are odd: f(-x) = -f(x), and f(-0) = -0
        y = b.CreateSelect(signbit(b, x), b.CreateFNeg(y), y);
    // infinities and NaN: NaN (inf - inf)
    return b.CreateSelect(b.CreateFCmpOLT(ax, c(b, INFINITY)), y, b.CreateFSub(x, x));
}

namespace {
/// log2 of a positive finite f32 x, in double: x = m 2^e with m in [sqrt(1/2), sqrt(2)), and
/// log2 x = e + 2 atanh(s) / ln 2, s = (m - 1) / (m + 1), |s| <= 0.172: the series to s^13
/// leaves out less than 2^-39 of it. An exact power of two gives m = 1, s = 0 and e exactly.
Value* log2_double(llvm::IRBuilder<>& b, Value* x) {
    llvm::Type* f64 = b.getDoubleTy();
    auto [m, e] = split_mantissa(b, x);
    Value* ed = b.CreateSIToFP(e, f64);
    Value* md = b.CreateFPExt(m, f64); // exact
    Value* sd = b.CreateFDiv(b.CreateFSub(md, cd(b, 1.0)), b.CreateFAdd(md, cd(b, 1.0)));
    Value* s2 = b.CreateFMul(sd, sd);
    Value* p = horner(b, s2, {1.0 / 13, 1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3, 1.0});
    return fma(b, b.CreateFMul(sd, p), cd(b, 2.8853900817779268), ed); // 2 / ln 2 = 2 log2(e)
}
} // namespace

Value* emit_log2f(llvm::IRBuilder<>& b, Value* x) {
    // Note [Inline sin and cos]'s reason, for log2 (a libm call, 2.5x slower than PyTorch's)
    Value* y = b.CreateFPTrunc(log2_double(b, x), b.getFloatTy());
    y = b.CreateSelect(b.CreateFCmpOEQ(x, c(b, INFINITY)), x, y);
    y = b.CreateSelect(b.CreateFCmpOEQ(x, c(b, 0.0)), c(b, -INFINITY), y);
    y = b.CreateSelect(b.CreateFCmpOLT(x, c(b, 0.0)), c(b, NAN), y);
    return b.CreateSelect(isnan(b, x), x, y);
}

Value* emit_powf(llvm::IRBuilder<>& b, Value* x, Value* y) {
    // Note [Inline sin and cos]'s reason, for pow, in double: |x|^y = 2^(y log2 |x|), log2 as
    // log2_double (relative error below 2^-39, so y log2|x| within 2^-31 absolutely wherever the
    // result is a finite nonzero f32), 2^v = 2^n 2^f with n the nearest integer and 2^f by the
    // Taylor series of exp(f ln 2) to degree 11 (|f| <= 1/2, the rest below 2^-47); rounding the
    // double to f32 gives denormals and overflow their correct rounding. A negative x with an odd
    // integer y gives the negative result. Then C's special cases (C11 F.10.4.4), in order.
    llvm::Type* f64 = b.getDoubleTy();
    llvm::Type* ft = b.getFloatTy();
    Value* ax = fabs(b, x);
    Value* ay = fabs(b, y);
    Value* v = b.CreateFMul(b.CreateFPExt(y, f64), log2_double(b, ax));
    v = b.CreateIntrinsic(
        llvm::Intrinsic::maxnum, {f64},
        {b.CreateIntrinsic(llvm::Intrinsic::minnum, {f64}, {v, cd(b, 300.0)}), cd(b, -300.0)});
    Value* n = b.CreateIntrinsic(llvm::Intrinsic::roundeven, {f64}, {v});
    Value* g = b.CreateFMul(b.CreateFSub(v, n), cd(b, 0.6931471805599453)); // f ln 2, |g| <= 0.347
    Value* p = horner(b, g,
                      {1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
                       1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0,
                       1.0});
    Value* scale = b.CreateBitCast( // 2^n, n in [-300, 300]
        b.CreateShl(b.CreateAdd(b.CreateFPToSI(n, b.getInt64Ty()), b.getInt64(1023)),
                    b.getInt64(52)),
        f64);
    Value* r = b.CreateFPTrunc(b.CreateFMul(p, scale), ft);
    // y an integer, and an odd one (every f32 of magnitude 2^24 or more is even)
    Value* y_int = b.CreateFCmpOEQ(b.CreateIntrinsic(llvm::Intrinsic::floor, {ft}, {y}), y);
    Value* y_odd =
        b.CreateAnd(b.CreateAnd(y_int, b.CreateFCmpOLT(ay, c(b, 16777216.0))),
                    b.CreateICmpNE(b.CreateAnd(b.CreateFPToSI(b.CreateSelect(y_int, y, c(b, 0.0)),
                                                              b.getInt32Ty()),
                                               ci(b, 1)),
                                   ci(b, 0)));
    Value* flip = b.CreateAnd(signbit(b, x), y_odd); // the result takes x's sign
    auto signed_by_x = [&](Value* mag) { return b.CreateSelect(flip, b.CreateFNeg(mag), mag); };
    r = signed_by_x(r);
    Value* inf = c(b, INFINITY);
    Value* y_neg = b.CreateFCmpOLT(y, c(b, 0.0));
    // a negative finite x and a finite non-integer y: NaN
    Value* bad = b.CreateAnd(b.CreateAnd(b.CreateFCmpOLT(x, c(b, 0.0)), b.CreateFCmpOLT(ax, inf)),
                             b.CreateAnd(b.CreateFCmpOLT(ay, inf), b.CreateNot(y_int)));
    r = b.CreateSelect(bad, c(b, NAN), r);
    // x = +-0 or +-inf: 0 or inf by y's sign (swapped for inf), x's sign for odd integer y
    Value* zero_x = b.CreateFCmpOEQ(ax, c(b, 0.0));
    r = b.CreateSelect(zero_x, signed_by_x(b.CreateSelect(y_neg, inf, c(b, 0.0))), r);
    r = b.CreateSelect(b.CreateFCmpOEQ(ax, inf), signed_by_x(b.CreateSelect(y_neg, c(b, 0.0), inf)),
                       r);
    // y = +-inf: 1 for |x| = 1, else 0 or inf by whether |x| < 1 and y's sign agree
    Value* y_inf = b.CreateFCmpOEQ(ay, inf);
    Value* to_inf = b.CreateICmpEQ(b.CreateFCmpOLT(ax, c(b, 1.0)), y_neg);
    r = b.CreateSelect(y_inf,
                       b.CreateSelect(b.CreateFCmpOEQ(ax, c(b, 1.0)), c(b, 1.0),
                                      b.CreateSelect(to_inf, inf, c(b, 0.0))),
                       r);
    // NaN operands give NaN, except pow(x, +-0) = 1 and pow(1, y) = 1
    r = b.CreateSelect(b.CreateOr(isnan(b, x), isnan(b, y)), b.CreateFAdd(x, y), r);
    return b.CreateSelect(b.CreateOr(b.CreateFCmpOEQ(ay, c(b, 0.0)), b.CreateFCmpOEQ(x, c(b, 1.0))),
                          c(b, 1.0), r);
}

Value* emit_atan2f(llvm::IRBuilder<>& b, Value* y, Value* x) {
    // Note [Inline sin and cos]'s reason, for atan2 (a libm call, 7.9x slower than PyTorch's), in
    // double: t = min(|x|, |y|) / max(|x|, |y|) in [0, 1]; above tan(pi/8), atan t = pi/4 +
    // atan u with u = (t - 1) / (t + 1), so |u| <= tan(pi/8) and atan u = u + u^3 P(u^2), P a
    // degree-7 fit (mpmath.chebyfit of (atan(s) - s) / s^3 at 40 digits, s = sqrt(z), z in
    // [0, tan(pi/8)^2]; relative error 1.1e-13); then pi/2 - a when |y| > |x|, pi - a when x is
    // negative (or -0), and y's sign. The C library's special cases follow: both infinite give
    // t = 1 (pi/4, 3pi/4), both zero t = 0 (+-0, +-pi), one infinite or zero t = 0.
    llvm::Type* f64 = b.getDoubleTy();
    Value* ay = b.CreateFPExt(fabs(b, y), f64);
    Value* ax = b.CreateFPExt(fabs(b, x), f64);
    Value* mx = b.CreateIntrinsic(llvm::Intrinsic::maxnum, {f64}, {ax, ay});
    Value* mn = b.CreateIntrinsic(llvm::Intrinsic::minnum, {f64}, {ax, ay});
    Value* t = b.CreateFDiv(mn, mx);
    Value* inf = cd(b, INFINITY);
    t = b.CreateSelect(b.CreateAnd(b.CreateFCmpOEQ(ax, inf), b.CreateFCmpOEQ(ay, inf)), cd(b, 1.0),
                       t);
    t = b.CreateSelect(b.CreateFCmpOEQ(mx, cd(b, 0.0)), cd(b, 0.0), t);
    Value* far = b.CreateFCmpOGT(t, cd(b, 0.41421356237309503)); // tan(pi/8)
    Value* u = b.CreateSelect(
        far, b.CreateFDiv(b.CreateFSub(t, cd(b, 1.0)), b.CreateFAdd(t, cd(b, 1.0))), t);
    Value* z = b.CreateFMul(u, u);
    Value* p = horner(b, z,
                      {0.03295679541870136, -0.06027307460946675, 0.07604800046078292,
                       -0.09084101895346429, 0.11110819716745676, -0.142857081103604,
                       0.19999999949854794, -0.33333333333266196});
    Value* a = fma(b, b.CreateFMul(u, z), p, u);
    a = b.CreateSelect(far, b.CreateFAdd(a, cd(b, 0.7853981633974483)), a);
    a = b.CreateSelect(b.CreateFCmpOGT(ay, ax), b.CreateFSub(cd(b, 1.5707963267948966), a), a);
    a = b.CreateSelect(signbit(b, x), b.CreateFSub(cd(b, 3.141592653589793), a), a);
    Value* r = b.CreateIntrinsic(llvm::Intrinsic::copysign, {b.getFloatTy()},
                                 {b.CreateFPTrunc(a, b.getFloatTy()), y});
    return b.CreateSelect(b.CreateOr(isnan(b, x), isnan(b, y)), b.CreateFAdd(x, y), r);
}

Value* emit_hypotf(llvm::IRBuilder<>& b, Value* x, Value* y) {
    // Note [Inline sin and cos]'s reason, for hypot, in double: x^2 and y^2 are exact there and
    // never overflow or underflow for f32 operands, so sqrt(x^2 + y^2) rounds twice in double and
    // once to f32. An infinity wins over NaN (C11 F.10.4.3).
    llvm::Type* f64 = b.getDoubleTy();
    Value* xd = b.CreateFPExt(x, f64);
    Value* yd = b.CreateFPExt(y, f64);
    Value* r =
        b.CreateIntrinsic(llvm::Intrinsic::sqrt, {f64}, {fma(b, xd, xd, b.CreateFMul(yd, yd))});
    Value* inf = b.CreateOr(b.CreateFCmpOEQ(fabs(b, x), c(b, INFINITY)),
                            b.CreateFCmpOEQ(fabs(b, y), c(b, INFINITY)));
    return b.CreateSelect(inf, c(b, INFINITY), b.CreateFPTrunc(r, b.getFloatTy()));
}
} // namespace sj::codegen
