// The per-point expression of a kernel as LLVM IR (KernelExpr.h).
#include "KernelExpr.h"

#include "LlvmMath.h"

#include <symjax/Error.h>
#include <symjax/ir/Node.h>

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/Support/raw_ostream.h>

#include <cmath>
#include <limits>

namespace sj::codegen {

using compiler::KernelSpec;
using compiler::KInst;
using compiler::KOutput;
using llvm::Value;

llvm::Type* ExprEmitter::mem_type(DType t) {
    switch (t) {
    case DType::Bool:
    case DType::U8:
        return b.getInt8Ty();
    case DType::I32:
    case DType::U32:
        return b.getInt32Ty();
    case DType::I64:
        return b.getInt64Ty();
    case DType::F32:
        return b.getFloatTy();
    case DType::F64:
        return b.getDoubleTy();
    }
    return b.getFloatTy();
}

Value* ExprEmitter::emit_const(const KInst& k) {
    llvm::Type* t = reg_type(k.dtype);
    if (k.dtype == DType::Bool)
        return b.getInt1(k.value != 0);
    if (is_float(k.dtype))
        return fconst(t, k.value);
    return llvm::ConstantInt::get(t, static_cast<uint64_t>(static_cast<int64_t>(k.value)),
                                  is_signed(k.dtype));
}

Value* ExprEmitter::emit_cast(Value* v, DType from, DType to) {
    if (from == to)
        return v;
    llvm::Type* t = reg_type(to);
    if (to == DType::Bool) {
        if (is_float(from))
            return b.CreateFCmpUNE(v, fconst(v->getType(), 0.0));
        return b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
    }
    if (from == DType::Bool)
        return is_float(to) ? b.CreateUIToFP(v, t) : b.CreateZExt(v, t);
    if (is_float(from) && is_float(to))
        return b.CreateFPCast(v, t);
    if (is_float(from)) // saturating, NaN -> 0: the reference's semantics
        return b.CreateIntrinsic(is_signed(to) ? llvm::Intrinsic::fptosi_sat
                                               : llvm::Intrinsic::fptoui_sat,
                                 {t, v->getType()}, {v});
    if (is_float(to))
        return is_signed(from) ? b.CreateSIToFP(v, t) : b.CreateUIToFP(v, t);
    return b.CreateIntCast(v, t, is_signed(from));
}

/// Integer div (truncating) and mod (the divisor's sign), with the reference's results where
/// the hardware traps: x / 0 = x % 0 = 0, MIN / -1 = MIN (wrapping), MIN % -1 = 0 (Note
/// [Integer arithmetic wraps] in reference/ElementwiseKernels.cpp). Divisors 0 and -1 are
/// replaced by 1 before dividing, then the result is selected.
Value* ExprEmitter::emit_int_div_mod(Op op, Value* x, Value* y, bool sg) {
    llvm::Type* ty = x->getType();
    Value* zero = llvm::ConstantInt::get(ty, 0);
    Value* one = llvm::ConstantInt::get(ty, 1);
    Value* by_zero = b.CreateICmpEQ(y, zero);
    Value* by_minus_one =
        sg ? b.CreateICmpEQ(y, llvm::ConstantInt::getSigned(ty, -1)) : b.getFalse();
    Value* safe = b.CreateSelect(b.CreateOr(by_zero, by_minus_one), one, y);
    if (op == Op::Div) {
        Value* q = sg ? b.CreateSDiv(x, safe) : b.CreateUDiv(x, safe);
        if (sg)
            q = b.CreateSelect(by_minus_one, b.CreateSub(zero, x), q); // no nsw: wraps
        return b.CreateSelect(by_zero, zero, q);
    }
    Value* r = sg ? b.CreateSRem(x, safe) : b.CreateURem(x, safe); // x % 1 == 0 covers 0, -1
    if (!sg)
        return r;
    Value* fix = b.CreateAnd(b.CreateICmpNE(r, zero),
                             b.CreateXor(b.CreateICmpSLT(r, zero), b.CreateICmpSLT(y, zero)));
    return b.CreateSelect(fix, b.CreateAdd(r, y), r);
}

/// One elementwise op on registers: unary ops take x (y is null), binary ops x and y, both of
/// dtype t. An op that breaks out of the switch has no code here (Cast and Where are
/// rendered by emit_point).
Value* ExprEmitter::emit_op(Op op, Value* x, Value* y, DType t) {
    bool f = is_float(t), sg = is_signed(t);
    llvm::Type* ty = x->getType();
    bool f32 = ty->isFloatTy();
    // f32 functions computed inline in double on the cpu (Note [Inline sin and cos] in
    // LlvmMath.cpp); NVPTX keeps libdevice's
    const bool inline_f32 = f32 && lib == MathLibrary::Libm;
    switch (op) {
    // unary
    case Op::Neg:
        return f ? b.CreateFNeg(x) : b.CreateNeg(x);
    case Op::Abs:
        if (f)
            return intrinsic(llvm::Intrinsic::fabs, {x});
        if (!is_signed(t))
            return x;
        return b.CreateIntrinsic(llvm::Intrinsic::abs, {ty}, {x, b.getFalse()});
    case Op::Sign: {
        if (f) {
            Value* one = fconst(ty, 1.0);
            Value* r = b.CreateSelect(
                b.CreateFCmpOGT(x, fconst(ty, 0)), one,
                b.CreateSelect(b.CreateFCmpOLT(x, fconst(ty, 0)), fconst(ty, -1.0), fconst(ty, 0)));
            return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
        }
        Value* zero = llvm::ConstantInt::get(ty, 0);
        Value* pos =
            b.CreateZExt(is_signed(t) ? b.CreateICmpSGT(x, zero) : b.CreateICmpUGT(x, zero), ty);
        if (!is_signed(t))
            return pos;
        return b.CreateSub(pos, b.CreateZExt(b.CreateICmpSLT(x, zero), ty));
    }
    case Op::Exp:
        return f32 ? emit_expf(b, x) : math_call("expf", "exp", {x});
    case Op::Expm1:
        return f32 ? emit_expm1f(b, x) : math_call("expm1f", "expm1", {x});
    case Op::Log:
        return f32 ? emit_logf(b, x) : math_call("logf", "log", {x});
    case Op::Log1p:
        return f32 ? emit_log1pf(b, x) : math_call("log1pf", "log1p", {x});
    case Op::Log2:
        return inline_f32 ? emit_log2f(b, x) : math_call("log2f", "log2", {x});
    case Op::Tanh:
        return f32 ? emit_tanhf(b, x) : math_call("tanhf", "tanh", {x});
    case Op::Erf:
        return f32 ? emit_erff(b, x) : math_call("erff", "erf", {x});
    case Op::Sqrt:
        return intrinsic(llvm::Intrinsic::sqrt, {x});
    case Op::Rsqrt:
        return b.CreateFDiv(fconst(ty, 1.0), intrinsic(llvm::Intrinsic::sqrt, {x}));
    case Op::Reciprocal:
        return b.CreateFDiv(fconst(ty, 1.0), x);
    case Op::Sin:
        return inline_f32 ? emit_trigf(b, x, Trig::Sin) : math_call("sinf", "sin", {x});
    case Op::Cos:
        return inline_f32 ? emit_trigf(b, x, Trig::Cos) : math_call("cosf", "cos", {x});
    case Op::Tan:
        return inline_f32 ? emit_trigf(b, x, Trig::Tan) : math_call("tanf", "tan", {x});
    case Op::Floor:
        return intrinsic(llvm::Intrinsic::floor, {x});
    case Op::Ceil:
        return intrinsic(llvm::Intrinsic::ceil, {x});
    case Op::Round:
        return intrinsic(llvm::Intrinsic::roundeven, {x});
    case Op::LogicalNot:
        return b.CreateNot(x);
    case Op::IsNan:
        return f ? b.CreateFCmpUNO(x, x) : b.getFalse();
    case Op::IsInf:
        return f ? b.CreateFCmpOEQ(intrinsic(llvm::Intrinsic::fabs, {x}), fconst(ty, INFINITY))
                 : b.getFalse();
    case Op::StopGradient:
        return x;
    // binary
    case Op::Add:
        return f ? b.CreateFAdd(x, y) : b.CreateAdd(x, y);
    case Op::Sub:
        return f ? b.CreateFSub(x, y) : b.CreateSub(x, y);
    case Op::Mul:
        return f ? b.CreateFMul(x, y) : b.CreateMul(x, y);
    case Op::Div:
        return f ? b.CreateFDiv(x, y) : emit_int_div_mod(op, x, y, sg);
    case Op::Pow:
        return inline_f32 ? emit_powf(b, x, y) : math_call("powf", "pow", {x, y});
    case Op::Atan2:
        return inline_f32 ? emit_atan2f(b, x, y) : math_call("atan2f", "atan2", {x, y});
    case Op::Hypot:
        return inline_f32 ? emit_hypotf(b, x, y) : math_call("hypotf", "hypot", {x, y});
    case Op::Max:
        if (f)
            return intrinsic(llvm::Intrinsic::maximum, {x, y});
        if (t == DType::Bool)
            return b.CreateOr(x, y);
        return intrinsic(sg ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, {x, y});
    case Op::Min:
        if (f)
            return intrinsic(llvm::Intrinsic::minimum, {x, y});
        if (t == DType::Bool)
            return b.CreateAnd(x, y);
        return intrinsic(sg ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, {x, y});
    case Op::Mod: { // float: fmod, then take the divisor's sign (Python/NumPy)
        if (!f)
            return emit_int_div_mod(op, x, y, sg);
        Value* r = b.CreateFRem(x, y);
        Value* fix = b.CreateAnd(
            b.CreateFCmpONE(r, fconst(ty, 0)),
            b.CreateXor(b.CreateFCmpOLT(r, fconst(ty, 0)), b.CreateFCmpOLT(y, fconst(ty, 0))));
        return b.CreateSelect(fix, b.CreateFAdd(r, y), r);
    }
    case Op::Eq:
        return f ? b.CreateFCmpOEQ(x, y) : b.CreateICmpEQ(x, y);
    case Op::Ne:
        return f ? b.CreateFCmpUNE(x, y) : b.CreateICmpNE(x, y);
    case Op::Lt:
        return f ? b.CreateFCmpOLT(x, y) : sg ? b.CreateICmpSLT(x, y) : b.CreateICmpULT(x, y);
    case Op::Le:
        return f ? b.CreateFCmpOLE(x, y) : sg ? b.CreateICmpSLE(x, y) : b.CreateICmpULE(x, y);
    case Op::Gt:
        return f ? b.CreateFCmpOGT(x, y) : sg ? b.CreateICmpSGT(x, y) : b.CreateICmpUGT(x, y);
    case Op::Ge:
        return f ? b.CreateFCmpOGE(x, y) : sg ? b.CreateICmpSGE(x, y) : b.CreateICmpUGE(x, y);
    case Op::LogicalAnd:
        return b.CreateAnd(x, y);
    case Op::LogicalOr:
        return b.CreateOr(x, y);
    case Op::LogicalXor:
        return b.CreateXor(x, y);
    case Op::Cast:
    case Op::Where:
        break;
#define SJ_CASES_OUTSIDE_Elementwise
#include "ops/OpCasesOutside.inc" // Note [Family switches]
        break;
    }
    SJ_THROW(InternalError) << "codegen: no rule for " << op_name(op);
}

llvm::Type* ExprEmitter::acc_type(const KOutput& o) {
    if (o.dtype == DType::F32 && (o.reduce_op == Op::ReduceSum || o.reduce_op == Op::ReduceProd))
        return b.getDoubleTy();
    return reg_type(o.dtype);
}
Value* ExprEmitter::acc_init(const KOutput& o) {
    llvm::Type* t = acc_type(o);
    bool f = t->isFloatingPointTy();
    switch (o.reduce_op) {
    case Op::ReduceSum:
        return f ? fconst(t, 0.0) : llvm::ConstantInt::get(t, 0);
    case Op::ReduceProd:
        return f ? fconst(t, 1.0) : llvm::ConstantInt::get(t, 1);
    case Op::ReduceAny:
        return b.getFalse();
    case Op::ReduceAll:
        return b.getTrue();
    case Op::ReduceMax:
        if (f)
            return fconst(t, -INFINITY);
        return llvm::ConstantInt::get(
            t, is_signed(o.dtype) ? llvm::APInt::getSignedMinValue(t->getIntegerBitWidth())
                                  : llvm::APInt::getMinValue(t->getIntegerBitWidth()));
    case Op::ReduceMin:
        if (f)
            return fconst(t, INFINITY);
        return llvm::ConstantInt::get(
            t, is_signed(o.dtype) ? llvm::APInt::getSignedMaxValue(t->getIntegerBitWidth())
                                  : llvm::APInt::getMaxValue(t->getIntegerBitWidth()));
#define SJ_CASES_OUTSIDE_Reduce
#include "ops/OpCasesOutside.inc" // Note [Family switches]
        break;
    }
    SJ_THROW(InternalError) << "codegen: bad reduction " << op_name(o.reduce_op);
}
Value* ExprEmitter::acc_combine(const KOutput& o, Value* a, Value* x, bool reassociate) {
    llvm::Type* t = a->getType();
    if (x->getType() != t)
        x = b.CreateFPExt(x, t);
    bool f = t->isFloatingPointTy();
    llvm::IRBuilder<>::FastMathFlagGuard guard(b);
    llvm::FastMathFlags fm;
    if (reassociate)
        fm.setAllowReassoc();
    b.setFastMathFlags(fm);
    switch (o.reduce_op) {
    case Op::ReduceSum:
        return f ? b.CreateFAdd(a, x) : b.CreateAdd(a, x);
    case Op::ReduceProd:
        return f ? b.CreateFMul(a, x) : b.CreateMul(a, x);
    case Op::ReduceAny:
        return b.CreateOr(a, x);
    case Op::ReduceAll:
        return b.CreateAnd(a, x);
    case Op::ReduceMax:
        if (f)
            return intrinsic(llvm::Intrinsic::maximum, {a, x});
        return intrinsic(is_signed(o.dtype) ? llvm::Intrinsic::smax : llvm::Intrinsic::umax,
                         {a, x});
    case Op::ReduceMin:
        if (f)
            return intrinsic(llvm::Intrinsic::minimum, {a, x});
        return intrinsic(is_signed(o.dtype) ? llvm::Intrinsic::smin : llvm::Intrinsic::umin,
                         {a, x});
#define SJ_CASES_OUTSIDE_Reduce
#include "ops/OpCasesOutside.inc" // Note [Family switches]
        break;
    }
    SJ_THROW(InternalError) << "codegen: bad reduction " << op_name(o.reduce_op);
}

Value* ExprEmitter::from_mem(Value* v, DType t) {
    return t == DType::Bool ? b.CreateICmpNE(v, b.getInt8(0)) : v;
}
Value* ExprEmitter::to_mem(Value* v, DType t) {
    return t == DType::Bool ? b.CreateZExt(v, b.getInt8Ty()) : v;
}

Value* ExprEmitter::intrinsic(llvm::Intrinsic::ID id, std::vector<Value*> args) {
    return b.CreateIntrinsic(id, {args[0]->getType()}, args);
}

// Note [Math libraries]
// f32 exp, log, tanh, erf, expm1 and log1p are expanded inline (LlvmMath.cpp) on every target,
// so the cpu and a GPU compute them to the same bits; f32 sin, cos, tan, log2, atan2, pow and
// hypot are expanded inline in double on the cpu only (Note [Inline sin and cos] in
// LlvmMath.cpp).
// The rest call a library by name: the C library's on a cpu (resolved by the JIT in the
// process), NVIDIA's libdevice on NVPTX (its bitcode is linked into the module before
// optimisation, NvptxRenderer.cpp), whose functions are named "__nv_" and the C name.
// Every such call is declared as touching no memory (what clang does under -fno-math-errno):
// the C library's may set errno, which no kernel reads. Declared as writing errno (until
// 2026-12-05), a call could not leave the loop even when its operands do not change in it: an
// Adam update fused with its bias corrections, 1 - beta^t with t the step counter, called powf
// twice per element and, with calls in the loop, was not vectorised either: 10.5 ms for 4M
// parameters against 0.60 ms now, 0.28 against 0.0066 ms for the 18,500 of two 32x32x3x3
// convolutions and a batch norm (AMD EPYC, 2 threads; docs/performance.md, "Library calls out
// of the loop"). As pure functions they are computed once before the loop, and equal calls once.
Value* ExprEmitter::math_call(const char* f32name, const char* f64name, std::vector<Value*> args) {
    llvm::Type* t = args[0]->getType();
    std::string name = t->isFloatTy() ? f32name : f64name;
    if (lib == MathLibrary::Libdevice)
        name = "__nv_" + name;
    std::vector<llvm::Type*> types(args.size(), t);
    auto* ft = llvm::FunctionType::get(t, types, false);
    auto* f = llvm::cast<llvm::Function>(mod.getOrInsertFunction(name, ft).getCallee());
    f->setDoesNotThrow();
    f->setDoesNotAccessMemory(); // (the C library's errno aside: Note [Math libraries])
    f->setWillReturn();
    return b.CreateCall(f, args);
}

std::vector<Value*> ExprEmitter::emit_point(const KernelSpec& s,
                                            const std::function<Value*(int)>& load) {
    std::vector<Value*> v(s.insts.size(), nullptr);
    for (size_t i = 0; i < s.insts.size(); ++i) {
        const KInst& k = s.insts[i];
        switch (k.kind) {
        case KInst::Kind::Load:
            v[i] = emit_cast(load(k.load), s.load_dtypes[k.load], k.dtype);
            break;
        case KInst::Kind::Const:
            v[i] = emit_const(k);
            break;
        case KInst::Kind::Op: {
            DType in0 = s.insts[k.args[0]].dtype;
            if (k.op == Op::Cast)
                v[i] = emit_cast(v[k.args[0]], in0, k.dtype);
            else if (k.op == Op::Where)
                v[i] = b.CreateSelect(v[k.args[0]], v[k.args[1]], v[k.args[2]]);
            else
                v[i] = emit_op(k.op, v[k.args[0]], k.args[1] < 0 ? nullptr : v[k.args[1]], in0);
            break;
        }
        }
    }
    return v;
}

Value* load_param(llvm::IRBuilder<>& b, Value* params, int i) {
    return b.CreateLoad(b.getInt64Ty(), b.CreateGEP(b.getInt64Ty(), params, b.getInt64(i)));
}

KernelParams read_kernel_params(llvm::IRBuilder<>& b, ExprEmitter& ex, const KernelSpec& s,
                                Value* bufs, Value* params, unsigned address_space) {
    KernelParams kp;
    const int R = s.rank;
    for (int d = 0; d < R; ++d) { // the row's width and a short loop's are constants
        int64_t fixed = d == R - 1 ? (s.row > 0 ? s.row : s.inner) : 0;
        if (fixed == 0 && size_t(d) < s.trips.size())
            fixed = s.trips[size_t(d)];
        kp.size.push_back(fixed > 0 ? b.getInt64(fixed) : load_param(b, params, d));
    }
    const int nload = int(s.load_dtypes.size());
    int p = R;
    for (int k = 0; k < s.operands(); ++k) {
        const bool is_load = k < nload;
        const compiler::KStride inner =
            is_load ? s.load_inner[size_t(k)] : s.out_inner[size_t(k - nload)];
        const DType t = is_load ? s.load_dtypes[size_t(k)] : s.outputs[size_t(k - nload)].dtype;
        std::vector<Value*> st;
        const uint64_t zero = size_t(k) < s.zero_strides.size() ? s.zero_strides[size_t(k)] : 0;
        for (int d = 0; d < R; ++d) {
            Value* v = load_param(b, params, p + d);
            if ((zero >> d) & 1)
                v = b.getInt64(0);
            if (d == R - 1 && inner == compiler::KStride::Zero)
                v = b.getInt64(0);
            if (d == R - 1 && inner == compiler::KStride::One)
                v = b.getInt64(1);
            st.push_back(v);
        }
        Value* off = load_param(b, params, p + R);
        p += R + 1;
        Value* ptr = b.CreateLoad(b.getPtrTy(), b.CreateGEP(b.getPtrTy(), bufs, b.getInt64(k)));
        if (address_space != 0)
            ptr = b.CreateAddrSpaceCast(ptr, b.getPtrTy(address_space));
        kp.base.push_back(b.CreateGEP(ex.mem_type(t), ptr, off));
        kp.stride.push_back(std::move(st));
    }
    return kp;
}

std::string emit_code(llvm::Module& mod, llvm::TargetMachine& tm, llvm::CodeGenFileType type) {
    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    SJ_ASSERT(!tm.addPassesToEmitFile(pm, os, nullptr, type))
        << "codegen: " << tm.getTargetTriple().str() << " cannot emit this kind of file";
    pm.run(mod);
    return std::string(buf.begin(), buf.end());
}

void emit_for(llvm::IRBuilder<>& b, llvm::Function* fn, const std::string& name, Value* lo,
              Value* hi, Value* step, const std::function<void(Value*)>& body) {
    llvm::LLVMContext& ctx = b.getContext();
    llvm::BasicBlock* pre = b.GetInsertBlock();
    llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx, name, fn);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx, name + "_done", fn);
    b.CreateCondBr(b.CreateICmpSLT(lo, hi), head, exit);
    b.SetInsertPoint(head);
    llvm::PHINode* i = b.CreatePHI(lo->getType(), 2, name + "_i");
    i->addIncoming(lo, pre);
    body(i);
    Value* next = b.CreateAdd(i, step);
    i->addIncoming(next, b.GetInsertBlock());
    b.CreateCondBr(b.CreateICmpSLT(next, hi), head, exit);
    b.SetInsertPoint(exit);
}

size_t expression_cost(Op op) {
    if (op == Op::Exp || op == Op::Log || op == Op::Tanh)
        return 10;
    if (op == Op::Erf || op == Op::Expm1 || op == Op::Log1p)
        return 20;
    return 1;
}

void optimise(llvm::Module& mod, llvm::TargetMachine* tm, llvm::OptimizationLevel level,
              const llvm::PipelineTuningOptions& tuning) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(tm, tuning);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    pb.buildPerModuleDefaultPipeline(level).run(mod, mam);
}

} // namespace sj::codegen
