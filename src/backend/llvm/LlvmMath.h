// Vectorisable f32 transcendentals emitted as LLVM IR (polynomials, no library calls).
#pragma once

#include <llvm/IR/IRBuilder.h>

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

} // namespace sj::codegen
