// Renders a KernelSpec as an LLVM IR function (a loop nest around the per-point expression).
#pragma once

#include "../../compiler/KernelIR.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <memory>
#include <string>

namespace sj::cpu {

/// A module holding one function named `symbol` with the kernel signature of KernelSpec.
std::unique_ptr<llvm::Module> render_kernel(const compiler::KernelSpec& spec, const std::string& symbol,
                                            llvm::LLVMContext& ctx);

} // namespace sj::cpu
