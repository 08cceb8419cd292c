// Vectorisable f32 transcendentals emitted as LLVM IR (polynomials, no library calls).
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <cstdint>

namespace sj::codegen {

/// Each takes and returns a float (scalar) value; the loop vectoriser widens them.
/// Accuracy: at most 1-3 ulp over the whole range, with IEEE special values (measured and
/// bounded per function in tests/unit/TranscendentalAccuracyTest.cpp against long double libm).
llvm::Value* emit_expf(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_logf(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_tanhf(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_erff(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_expm1f(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_log1pf(llvm::IRBuilder<>& b, llvm::Value* x);
/// sin, cos or tan of x, computed in double precision (Note [Inline sin and cos] in
/// LlvmMath.cpp).
enum class Trig : uint8_t { Sin, Cos, Tan };
llvm::Value* emit_trigf(llvm::IRBuilder<>& b, llvm::Value* x, Trig fn);
/// log2 of x, computed in double precision.
llvm::Value* emit_log2f(llvm::IRBuilder<>& b, llvm::Value* x);
/// pow(x, y) with C's special cases, computed in double precision.
llvm::Value* emit_powf(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y);
/// hypot(x, y), computed in double precision.
llvm::Value* emit_hypotf(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y);
/// atan2(y, x), computed in double precision.
llvm::Value* emit_atan2f(llvm::IRBuilder<>& b, llvm::Value* y, llvm::Value* x);

} // namespace sj::codegen
