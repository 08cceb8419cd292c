// f32 exp/log/tanh/erf/expm1/log1p as straight-line LLVM IR (Cephes polynomials; erf fitted here).
#include "LlvmMath.h"

#include <llvm/IR/Intrinsics.h>

#include <cmath>
#include <limits>

namespace sj::codegen {

using llvm::Value;

namespace {
Value* c(llvm::IRBuilder<>& b, double v) {
    return llvm::ConstantFP::get(b.getFloatTy(), v);
}
Value* ci(llvm::IRBuilder<>& b, int32_t v) {
    return b.getInt32(static_cast<uint32_t>(v));
}
Value* fma(llvm::IRBuilder<>& b, Value* x, Value* y, Value* z) {
    return b.CreateIntrinsic(llvm::Intrinsic::fma, {x->getType()}, {x, y, z});
}
/// Horner evaluation: ((c0*x + c1)*x + c2)...
Value* horner(llvm::IRBuilder<>& b, Value* x, std::initializer_list<double> cs) {
    auto it = cs.begin();
    Value* p = c(b, *it++);
    for (; it != cs.end(); ++it)
        p = fma(b, p, x, c(b, *it));
    return p;
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

Value* emit_logf(llvm::IRBuilder<>& b, Value* x) {
    // x = m 2^e with m in [sqrt(1/2), sqrt(2)); log(m) by the Cephes logf polynomial.
    // Denormals are scaled by 2^23 first.
    Value* small = b.CreateFCmpOLT(x, c(b, std::numeric_limits<float>::min()));
    Value* xs = b.CreateSelect(small, b.CreateFMul(x, c(b, 8388608.0)), x);
    Value* bits = b.CreateBitCast(xs, b.getInt32Ty());
    Value* e = b.CreateSub(b.CreateLShr(bits, ci(b, 23)), ci(b, 126));
    e = b.CreateSub(e, b.CreateSelect(small, ci(b, 23), ci(b, 0)));
    Value* m = b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, ci(b, 0x007fffff)), ci(b, 0x3f000000)),
                               b.getFloatTy()); // in [0.5, 1)
    Value* lt = b.CreateFCmpOLT(m, c(b, 0.707106781186547524));
    Value* ef = b.CreateSIToFP(b.CreateSub(e, b.CreateZExt(lt, b.getInt32Ty())), b.getFloatTy());
    Value* f = b.CreateFSub(b.CreateSelect(lt, b.CreateFAdd(m, m), m), c(b, 1.0));
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

} // namespace sj::codegen
