// Renders a KernelSpec as an LLVM IR function (a loop nest around the per-point expression).
#pragma once

#include "../../compiler/KernelIR.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <memory>
#include <string>

namespace sj::cpu {

/// Adds to `mod` one function named `symbol` with the kernel signature of KernelSpec (a module
/// may hold many kernels: a function's kernels are compiled and cached as one object).
void render_kernel(const compiler::KernelSpec& spec, const std::string& symbol, llvm::Module& mod);

} // namespace sj::cpu
