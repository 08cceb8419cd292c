// The per-point expression of a KernelSpec as LLVM IR: constants, casts, elementwise ops and
// reduction accumulators. Shared by every target that renders kernels through LLVM (the cpu's
// loop nests, src/backend/cpu/LlvmRenderer.cpp; the GPU's thread maps,
// src/backend/cuda/NvptxRenderer.cpp): the same instructions give the same bits on both, and
// only the loops around them and the library a call goes to differ.
#pragma once

#include "../../compiler/KernelIR.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/Passes/OptimizationLevel.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Target/TargetMachine.h>

#include <functional>
#include <vector>

namespace sj::codegen {

/// Where the functions with no inline expansion (f64 exp, sin, pow, ...) come from: the C
/// library ("sinf", "sin") on a cpu, NVIDIA's libdevice ("__nv_sinf", "__nv_sin") on NVPTX.
enum class MathLibrary : uint8_t { Libm, Libdevice };

class ExprEmitter {
public:
    ExprEmitter(llvm::IRBuilder<>& builder, llvm::Module& module, MathLibrary library)
        : b(builder), mod(module), lib(library) {}

    /// In-memory type of a dtype (bool is a byte).
    llvm::Type* mem_type(DType t);
    /// Register type: bool is i1.
    llvm::Type* reg_type(DType t) { return t == DType::Bool ? b.getInt1Ty() : mem_type(t); }
    llvm::Value* from_mem(llvm::Value* v, DType t);
    llvm::Value* to_mem(llvm::Value* v, DType t);

    llvm::Value* emit_const(const compiler::KInst& k);
    llvm::Value* emit_cast(llvm::Value* v, DType from, DType to);
    /// One elementwise op on registers: unary ops take x (y is null), binary ops x and y, both of
    /// dtype t (Cast and Where are emit_point's).
    llvm::Value* emit_op(Op op, llvm::Value* x, llvm::Value* y, DType t);
    /// The values of every instruction of `s` at one point; `load(k)` renders load k (as its
    /// register value, in the load's dtype).
    std::vector<llvm::Value*> emit_point(const compiler::KernelSpec& s,
                                         const std::function<llvm::Value*(int)>& load);

    /// A reduced output's accumulator type: f32 sums and products accumulate in double (Note
    /// [f32 sums] in LlvmRenderer.cpp), others in their own type.
    llvm::Type* acc_type(const compiler::KOutput& o);
    llvm::Value* acc_init(const compiler::KOutput& o);
    /// a (op) x, x converted to the accumulator's type; `reassociate`: a sum or product may be
    /// reordered (vectorised partial sums).
    llvm::Value* acc_combine(const compiler::KOutput& o, llvm::Value* a, llvm::Value* x,
                             bool reassociate);

private:
    llvm::IRBuilder<>& b;
    llvm::Module& mod;
    MathLibrary lib;

    llvm::Value* math_call(const char* f32name, const char* f64name,
                           std::vector<llvm::Value*> args);
    llvm::Value* intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args);
    llvm::Value* fconst(llvm::Type* t, double v) { return llvm::ConstantFP::get(t, v); }
    llvm::Value* emit_int_div_mod(Op op, llvm::Value* x, llvm::Value* y, bool sg);
};

/// A kernel's loop sizes and its operands' strides and base addresses, read from the kernel's
/// arguments as KernelSpec lays them out (sizes[rank], then per operand strides[rank] and an
/// offset), with the sizes and inner strides the spec compiles in as constants.
struct KernelParams {
    std::vector<llvm::Value*> size;                // per loop
    std::vector<std::vector<llvm::Value*>> stride; // per operand (loads then outputs), per loop
    std::vector<llvm::Value*> base;                // per operand: its address plus its offset
};
/// params[i] (an int64 array).
llvm::Value* load_param(llvm::IRBuilder<>& b, llvm::Value* params, int i);
/// Reads `s`'s params from `params` and its operands' addresses from `bufs` (an array of
/// pointers); the operands are accessed in `address_space` (1: NVPTX's global memory).
KernelParams read_kernel_params(llvm::IRBuilder<>& b, ExprEmitter& ex,
                                const compiler::KernelSpec& s, llvm::Value* bufs,
                                llvm::Value* params, unsigned address_space = 0);

/// for (i = lo; i < hi; i += step) body(i), at the builder's insertion point in function `fn`;
/// the loop's blocks are named after `name`. The builder is left after the loop.
void emit_for(llvm::IRBuilder<>& b, llvm::Function* fn, const std::string& name, llvm::Value* lo,
              llvm::Value* hi, llvm::Value* step, const std::function<void(llvm::Value*)>& body);

/// What an op costs a kernel rendered with ExprEmitter, in simple instructions (Target::
/// kernel_cost): the inline f32 expansions of LlvmMath.cpp are 30-40 IR instructions for exp,
/// log and tanh, an exp or log and as much again for erf, expm1 and log1p (Note [Kernel size]
/// in src/compiler/Fusion.cpp).
size_t expression_cost(Op op);

/// `mod` as `type` (an object file, PTX assembly) by `tm`'s code generator.
std::string emit_code(llvm::Module& mod, llvm::TargetMachine& tm, llvm::CodeGenFileType type);

/// Runs LLVM's default module pipeline at `level` for `tm`'s target over `mod`.
void optimise(llvm::Module& mod, llvm::TargetMachine* tm, llvm::OptimizationLevel level,
              const llvm::PipelineTuningOptions& tuning = {});

} // namespace sj::codegen
