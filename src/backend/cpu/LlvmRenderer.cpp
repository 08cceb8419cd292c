// KernelSpec -> LLVM IR: loads through strided pointers, the expression, stores and reductions.
#include "LlvmRenderer.h"

#include "LlvmMath.h"

#include <symjax/Error.h>
#include <symjax/ir/Node.h>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>

#include <cmath>
#include <functional>
#include <limits>

namespace sj::cpu {

using compiler::KernelSpec;
using compiler::KInst;
using compiler::KOutput;
using compiler::KStride;
using llvm::Value;

namespace {

struct Renderer {
    const KernelSpec& s;
    llvm::LLVMContext& ctx;
    llvm::Module* mod;
    llvm::IRBuilder<> b;
    llvm::Function* fn = nullptr;
    llvm::Type* i64;
    int nload, nout;
    std::vector<Value*> base;                // per operand (loads then outputs)
    std::vector<std::vector<Value*>> stride; // per operand, per loop
    std::vector<Value*> size;                // per loop
    std::vector<llvm::MDNode*> scope, noalias;
    // per reduced output: its accumulator (in the row order an array of s.row of them), and
    // the f32 block accumulator of an f32 sum (Note [f32 sums])
    std::vector<llvm::AllocaInst*> acc, bacc;
    bool blocked = false; // rendering the inside of an f32 block
    // a step kernel's step count and per-operand step strides, and while rendering a step, the
    // carries' values in place of their loads (per load; null: load it)
    Value* nsteps = nullptr;
    std::vector<Value*> step_stride, load_value;

    Renderer(const KernelSpec& spec, llvm::LLVMContext& c, llvm::Module* m)
        : s(spec), ctx(c), mod(m), b(c), i64(llvm::Type::getInt64Ty(c)),
          nload(int(spec.load_dtypes.size())), nout(int(spec.outputs.size())) {}

    /// In-memory type of a dtype (bool is a byte).
    llvm::Type* mem_type(DType t) {
        switch (t) {
        case DType::Bool: case DType::U8: return b.getInt8Ty();
        case DType::I32: case DType::U32: return b.getInt32Ty();
        case DType::I64: return b.getInt64Ty();
        case DType::F32: return b.getFloatTy();
        case DType::F64: return b.getDoubleTy();
        }
        return b.getFloatTy();
    }
    /// Register type: bool is i1.
    llvm::Type* reg_type(DType t) { return t == DType::Bool ? b.getInt1Ty() : mem_type(t); }

    Value* from_mem(Value* v, DType t) { return t == DType::Bool ? b.CreateICmpNE(v, b.getInt8(0)) : v; }
    Value* to_mem(Value* v, DType t) { return t == DType::Bool ? b.CreateZExt(v, b.getInt8Ty()) : v; }

    void annotate(llvm::Instruction* i, int operand) {
        i->setMetadata(llvm::LLVMContext::MD_alias_scope, scope[operand]);
        i->setMetadata(llvm::LLVMContext::MD_noalias, noalias[operand]);
    }

    // Note [Alias scopes]
    // Every access says which operand it touches, so that LLVM may keep loads in registers
    // across stores and vectorise: the operands are distinct buffers. Loads never conflict with
    // loads, so all loaded operands share one scope, and only the outputs get one each: a load
    // is noalias with every output, an output with the loads and the other outputs. With one
    // scope per operand, every access listed all the others, and a kernel of 350 loads (the
    // second-order gradient of 30 residual layer norms) carried 720 KB of metadata in 900 KB of
    // IR, and LLVM's alias queries walked those lists: metadata quadratic in the operands, now
    // quadratic in the outputs only (usually a few). That function's first call (165 kernels
    // compiled) went from 7.9 to 7.0 s; the kernels run as fast as before.
    void setup_alias_scopes() {
        llvm::MDBuilder md(ctx);
        llvm::MDNode* domain = md.createAnonymousAliasScopeDomain("sj");
        llvm::MDNode* in = md.createAnonymousAliasScope(domain);
        std::vector<llvm::MDNode*> outs;
        for (int k = 0; k < nout; ++k)
            outs.push_back(md.createAnonymousAliasScope(domain));
        llvm::MDNode* in_scope = llvm::MDNode::get(ctx, {in});
        llvm::MDNode* in_noalias =
            llvm::MDNode::get(ctx, std::vector<llvm::Metadata*>(outs.begin(), outs.end()));
        for (int k = 0; k < nload; ++k) {
            scope.push_back(in_scope);
            noalias.push_back(in_noalias);
        }
        for (int k = 0; k < nout; ++k) {
            scope.push_back(llvm::MDNode::get(ctx, {outs[k]}));
            std::vector<llvm::Metadata*> others{in};
            for (int j = 0; j < nout; ++j)
                if (j != k)
                    others.push_back(outs[j]);
            noalias.push_back(llvm::MDNode::get(ctx, others));
        }
    }

    /// Load operand k at element offset `off` (its register value: bool as i1).
    Value* load_operand(int k, Value* off) {
        const DType t = s.load_dtypes[k];
        llvm::Type* mt = mem_type(t);
        auto* ld = b.CreateLoad(mt, b.CreateGEP(mt, base[k], off));
        annotate(ld, k);
        return from_mem(ld, t);
    }
    /// Stores v as output o at element offset `off`.
    void store_output(int o, Value* v, Value* off) {
        const DType t = s.outputs[o].dtype;
        llvm::Type* mt = mem_type(t);
        auto* st = b.CreateStore(to_mem(v, t), b.CreateGEP(mt, base[nload + o], off));
        annotate(st, nload + o);
    }

    Value* param(int i) {
        Value* p = b.CreateGEP(i64, fn->getArg(1), b.getInt64(i));
        return b.CreateLoad(i64, p);
    }

    DType operand_dtype(int k) { return k < nload ? s.load_dtypes[k] : s.outputs[k - nload].dtype; }
    KStride operand_inner(int k) { return k < nload ? s.load_inner[k] : s.out_inner[k - nload]; }

    void prologue() {
        int R = s.rank;
        for (int d = 0; d < R; ++d) { // the row's width and a short inner loop's are constants
            int64_t fixed = d == R - 1 ? (s.row > 0 ? s.row : s.inner) : 0;
            size.push_back(fixed > 0 ? b.getInt64(fixed) : param(d));
        }
        int p = R;
        for (int k = 0; k < nload + nout; ++k) {
            std::vector<Value*> st;
            for (int d = 0; d < R; ++d) {
                Value* v = param(p + d);
                if (d == R - 1) {
                    KStride c = operand_inner(k);
                    if (c == KStride::Zero) v = b.getInt64(0);
                    if (c == KStride::One) v = b.getInt64(1);
                }
                st.push_back(v);
            }
            Value* off = param(p + R);
            p += R + 1;
            Value* ptr = b.CreateLoad(b.getPtrTy(), b.CreateGEP(b.getPtrTy(), fn->getArg(0), b.getInt64(k)));
            base.push_back(b.CreateGEP(mem_type(operand_dtype(k)), ptr, off));
            stride.push_back(std::move(st));
        }
        if (s.steps) {
            nsteps = param(p);
            for (int k = 0; k < nload + nout; ++k)
                step_stride.push_back(param(p + 1 + k));
        }
    }

    // ---- the per-point expression -----------------------------------------------------------
    llvm::Function* libm(const char* name, llvm::Type* t, int arity) {
        std::vector<llvm::Type*> args(arity, t);
        auto* ft = llvm::FunctionType::get(t, args, false);
        auto callee = mod->getOrInsertFunction(name, ft);
        auto* f = llvm::cast<llvm::Function>(callee.getCallee());
        f->setDoesNotThrow();
        f->setOnlyAccessesInaccessibleMemory(); // errno only
        return f;
    }
    Value* call_libm(const char* f32name, const char* f64name, std::vector<Value*> args) {
        llvm::Type* t = args[0]->getType();
        const char* name = t->isFloatTy() ? f32name : f64name;
        return b.CreateCall(libm(name, t, int(args.size())), args);
    }
    Value* intrinsic(llvm::Intrinsic::ID id, std::vector<Value*> args) {
        return b.CreateIntrinsic(id, {args[0]->getType()}, args);
    }
    Value* fconst(llvm::Type* t, double v) { return llvm::ConstantFP::get(t, v); }

    Value* emit_const(const KInst& k) {
        llvm::Type* t = reg_type(k.dtype);
        if (k.dtype == DType::Bool) return b.getInt1(k.value != 0);
        if (is_float(k.dtype)) return fconst(t, k.value);
        return llvm::ConstantInt::get(t, static_cast<uint64_t>(static_cast<int64_t>(k.value)), is_signed(k.dtype));
    }

    Value* emit_cast(Value* v, DType from, DType to) {
        if (from == to) return v;
        llvm::Type* t = reg_type(to);
        if (to == DType::Bool) {
            if (is_float(from)) return b.CreateFCmpUNE(v, fconst(v->getType(), 0.0));
            return b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
        }
        if (from == DType::Bool) return is_float(to) ? b.CreateUIToFP(v, t) : b.CreateZExt(v, t);
        if (is_float(from) && is_float(to)) return b.CreateFPCast(v, t);
        if (is_float(from)) // saturating, NaN -> 0: the reference's semantics
            return b.CreateIntrinsic(is_signed(to) ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat,
                                     {t, v->getType()}, {v});
        if (is_float(to)) return is_signed(from) ? b.CreateSIToFP(v, t) : b.CreateUIToFP(v, t);
        return b.CreateIntCast(v, t, is_signed(from));
    }

    /// Integer div (truncating) and mod (the divisor's sign), with the reference's results where
    /// the hardware traps: x / 0 = x % 0 = 0, MIN / -1 = MIN (wrapping), MIN % -1 = 0 (Note
    /// [Integer arithmetic wraps] in reference/ElementwiseKernels.cpp). Divisors 0 and -1 are
    /// replaced by 1 before dividing, then the result is selected.
    Value* emit_int_div_mod(Op op, Value* x, Value* y, bool sg) {
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
    Value* emit_op(Op op, Value* x, Value* y, DType t) {
        bool f = is_float(t), sg = is_signed(t);
        llvm::Type* ty = x->getType();
        bool f32 = ty->isFloatTy();
        switch (op) {
        // unary
        case Op::Neg: return f ? b.CreateFNeg(x) : b.CreateNeg(x);
        case Op::Abs:
            if (f) return intrinsic(llvm::Intrinsic::fabs, {x});
            if (!is_signed(t)) return x;
            return b.CreateIntrinsic(llvm::Intrinsic::abs, {ty}, {x, b.getFalse()});
        case Op::Sign: {
            if (f) {
                Value* one = fconst(ty, 1.0);
                Value* r = b.CreateSelect(b.CreateFCmpOGT(x, fconst(ty, 0)), one,
                                          b.CreateSelect(b.CreateFCmpOLT(x, fconst(ty, 0)), fconst(ty, -1.0), fconst(ty, 0)));
                return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
            }
            Value* zero = llvm::ConstantInt::get(ty, 0);
            Value* pos = b.CreateZExt(is_signed(t) ? b.CreateICmpSGT(x, zero) : b.CreateICmpUGT(x, zero), ty);
            if (!is_signed(t)) return pos;
            return b.CreateSub(pos, b.CreateZExt(b.CreateICmpSLT(x, zero), ty));
        }
        case Op::Exp: return f32 ? emit_expf(b, x) : call_libm("expf", "exp", {x});
        case Op::Expm1: return f32 ? emit_expm1f(b, x) : call_libm("expm1f", "expm1", {x});
        case Op::Log: return f32 ? emit_logf(b, x) : call_libm("logf", "log", {x});
        case Op::Log1p: return f32 ? emit_log1pf(b, x) : call_libm("log1pf", "log1p", {x});
        case Op::Log2: return call_libm("log2f", "log2", {x});
        case Op::Tanh: return f32 ? emit_tanhf(b, x) : call_libm("tanhf", "tanh", {x});
        case Op::Erf: return f32 ? emit_erff(b, x) : call_libm("erff", "erf", {x});
        case Op::Sqrt: return intrinsic(llvm::Intrinsic::sqrt, {x});
        case Op::Rsqrt: return b.CreateFDiv(fconst(ty, 1.0), intrinsic(llvm::Intrinsic::sqrt, {x}));
        case Op::Reciprocal: return b.CreateFDiv(fconst(ty, 1.0), x);
        case Op::Sin: return call_libm("sinf", "sin", {x});
        case Op::Cos: return call_libm("cosf", "cos", {x});
        case Op::Tan: return call_libm("tanf", "tan", {x});
        case Op::Floor: return intrinsic(llvm::Intrinsic::floor, {x});
        case Op::Ceil: return intrinsic(llvm::Intrinsic::ceil, {x});
        case Op::Round: return intrinsic(llvm::Intrinsic::roundeven, {x});
        case Op::LogicalNot: return b.CreateNot(x);
        case Op::IsNan: return f ? b.CreateFCmpUNO(x, x) : b.getFalse();
        case Op::IsInf:
            return f ? b.CreateFCmpOEQ(intrinsic(llvm::Intrinsic::fabs, {x}), fconst(ty, INFINITY)) : b.getFalse();
        case Op::StopGradient: return x;
        // binary
        case Op::Add: return f ? b.CreateFAdd(x, y) : b.CreateAdd(x, y);
        case Op::Sub: return f ? b.CreateFSub(x, y) : b.CreateSub(x, y);
        case Op::Mul: return f ? b.CreateFMul(x, y) : b.CreateMul(x, y);
        case Op::Div:
            return f ? b.CreateFDiv(x, y) : emit_int_div_mod(op, x, y, sg);
        case Op::Pow: return call_libm("powf", "pow", {x, y});
        case Op::Atan2: return call_libm("atan2f", "atan2", {x, y});
        case Op::Hypot: return call_libm("hypotf", "hypot", {x, y});
        case Op::Max:
            if (f) return intrinsic(llvm::Intrinsic::maximum, {x, y});
            if (t == DType::Bool) return b.CreateOr(x, y);
            return intrinsic(sg ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, {x, y});
        case Op::Min:
            if (f) return intrinsic(llvm::Intrinsic::minimum, {x, y});
            if (t == DType::Bool) return b.CreateAnd(x, y);
            return intrinsic(sg ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, {x, y});
        case Op::Mod: { // float: fmod, then take the divisor's sign (Python/NumPy)
            if (!f)
                return emit_int_div_mod(op, x, y, sg);
            Value* r = b.CreateFRem(x, y);
            Value* fix = b.CreateAnd(b.CreateFCmpONE(r, fconst(ty, 0)),
                                     b.CreateXor(b.CreateFCmpOLT(r, fconst(ty, 0)), b.CreateFCmpOLT(y, fconst(ty, 0))));
            return b.CreateSelect(fix, b.CreateFAdd(r, y), r);
        }
        case Op::Eq: return f ? b.CreateFCmpOEQ(x, y) : b.CreateICmpEQ(x, y);
        case Op::Ne: return f ? b.CreateFCmpUNE(x, y) : b.CreateICmpNE(x, y);
        case Op::Lt: return f ? b.CreateFCmpOLT(x, y) : sg ? b.CreateICmpSLT(x, y) : b.CreateICmpULT(x, y);
        case Op::Le: return f ? b.CreateFCmpOLE(x, y) : sg ? b.CreateICmpSLE(x, y) : b.CreateICmpULE(x, y);
        case Op::Gt: return f ? b.CreateFCmpOGT(x, y) : sg ? b.CreateICmpSGT(x, y) : b.CreateICmpUGT(x, y);
        case Op::Ge: return f ? b.CreateFCmpOGE(x, y) : sg ? b.CreateICmpSGE(x, y) : b.CreateICmpUGE(x, y);
        case Op::LogicalAnd: return b.CreateAnd(x, y);
        case Op::LogicalOr: return b.CreateOr(x, y);
        case Op::LogicalXor: return b.CreateXor(x, y);
        case Op::Cast:
        case Op::Where:
            break;
#define SJ_CASES_OUTSIDE_Elementwise
#include "ops/OpCasesOutside.inc" // Note [Family switches]
            break;
        }
        SJ_THROW(InternalError) << "cpu codegen: no rule for " << op_name(op);
    }

    /// Values of every instruction at the point whose operand offsets are `offs`.
    std::vector<Value*> emit_point(const std::vector<Value*>& offs) {
        std::vector<Value*> v(s.insts.size(), nullptr);
        for (size_t i = 0; i < s.insts.size(); ++i) {
            const KInst& k = s.insts[i];
            switch (k.kind) {
            case KInst::Kind::Load: {
                DType t = s.load_dtypes[k.load];
                if (!load_value.empty() && load_value[k.load]) { // a step kernel's carry
                    v[i] = emit_cast(load_value[k.load], t, k.dtype);
                    break;
                }
                v[i] = emit_cast(load_operand(k.load, offs[k.load]), t, k.dtype);
                break;
            }
            case KInst::Kind::Const: v[i] = emit_const(k); break;
            case KInst::Kind::Op: {
                DType in0 = s.insts[k.args[0]].dtype;
                if (k.op == Op::Cast) v[i] = emit_cast(v[k.args[0]], in0, k.dtype);
                else if (k.op == Op::Where) v[i] = b.CreateSelect(v[k.args[0]], v[k.args[1]], v[k.args[2]]);
                else v[i] = emit_op(k.op, v[k.args[0]], k.args[1] < 0 ? nullptr : v[k.args[1]], in0);
                break;
            }
            }
        }
        return v;
    }

    // ---- reductions -------------------------------------------------------------------------
    /// Accumulators: f32 sums and products accumulate in double across blocks (see Note [f32
    /// sums]), others in their own type.
    llvm::Type* acc_type(const KOutput& o) {
        if (o.dtype == DType::F32 && (o.reduce_op == Op::ReduceSum || o.reduce_op == Op::ReduceProd))
            return b.getDoubleTy();
        return reg_type(o.dtype);
    }
    Value* acc_init(const KOutput& o) {
        llvm::Type* t = acc_type(o);
        bool f = t->isFloatingPointTy();
        switch (o.reduce_op) {
        case Op::ReduceSum: return f ? fconst(t, 0.0) : llvm::ConstantInt::get(t, 0);
        case Op::ReduceProd: return f ? fconst(t, 1.0) : llvm::ConstantInt::get(t, 1);
        case Op::ReduceAny: return b.getFalse();
        case Op::ReduceAll: return b.getTrue();
        case Op::ReduceMax:
            if (f) return fconst(t, -INFINITY);
            return llvm::ConstantInt::get(t, is_signed(o.dtype) ? llvm::APInt::getSignedMinValue(t->getIntegerBitWidth())
                                                                : llvm::APInt::getMinValue(t->getIntegerBitWidth()));
        case Op::ReduceMin:
            if (f) return fconst(t, INFINITY);
            return llvm::ConstantInt::get(t, is_signed(o.dtype) ? llvm::APInt::getSignedMaxValue(t->getIntegerBitWidth())
                                                                : llvm::APInt::getMaxValue(t->getIntegerBitWidth()));
#define SJ_CASES_OUTSIDE_Reduce
#include "ops/OpCasesOutside.inc" // Note [Family switches]
            break;
        }
        SJ_THROW(InternalError) << "cpu codegen: bad reduction " << op_name(o.reduce_op);
    }
    /// f32 sums are accumulated in f32 within a block of the innermost loop (Note [f32 sums]).
    static bool block_sum(const KOutput& o) {
        return o.reduced && o.dtype == DType::F32 && o.reduce_op == Op::ReduceSum;
    }
    Value* acc_combine(const KOutput& o, Value* a, Value* x) {
        llvm::Type* t = a->getType();
        if (x->getType() != t) x = b.CreateFPExt(x, t);
        bool f = t->isFloatingPointTy();
        llvm::IRBuilder<>::FastMathFlagGuard guard(b);
        llvm::FastMathFlags fm;
        // the usual order's sums may be reordered (vectorised partial sums); the row order
        // vectorises over the row and keeps each element's sum sequential (Note [f32 sums])
        if (s.row == 0) fm.setAllowReassoc();
        b.setFastMathFlags(fm);
        switch (o.reduce_op) {
        case Op::ReduceSum: return f ? b.CreateFAdd(a, x) : b.CreateAdd(a, x);
        case Op::ReduceProd: return f ? b.CreateFMul(a, x) : b.CreateMul(a, x);
        case Op::ReduceAny: return b.CreateOr(a, x);
        case Op::ReduceAll: return b.CreateAnd(a, x);
        case Op::ReduceMax:
            if (f) return intrinsic(llvm::Intrinsic::maximum, {a, x});
            return intrinsic(is_signed(o.dtype) ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, {a, x});
        case Op::ReduceMin:
            if (f) return intrinsic(llvm::Intrinsic::minimum, {a, x});
            return intrinsic(is_signed(o.dtype) ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, {a, x});
#define SJ_CASES_OUTSIDE_Reduce
#include "ops/OpCasesOutside.inc" // Note [Family switches]
            break;
        }
        SJ_THROW(InternalError) << "cpu codegen: bad reduction " << op_name(o.reduce_op);
    }
    /// A counted loop over [lo, hi); `body` renders its inside for index i.
    void emit_for(const std::string& name, Value* lo, Value* hi,
                  const std::function<void(Value*)>& body) {
        llvm::BasicBlock* pre = b.GetInsertBlock();
        llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx, name, fn);
        llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx, name + "_done", fn);
        b.CreateCondBr(b.CreateICmpSLT(lo, hi), head, exit);
        b.SetInsertPoint(head);
        llvm::PHINode* i = b.CreatePHI(i64, 2, name + "_i");
        i->addIncoming(lo, pre);
        body(i);
        Value* next = b.CreateAdd(i, b.getInt64(1));
        i->addIncoming(next, b.GetInsertBlock());
        b.CreateCondBr(b.CreateICmpSLT(next, hi), head, exit);
        b.SetInsertPoint(exit);
    }
    /// Renders `body` for every accumulator of the row: once (with a null index) in the usual
    /// order, in a loop over the row's elements in the row order.
    void for_row(const std::string& name, const std::function<void(Value*)>& body) {
        if (s.row == 0) body(nullptr);
        else emit_for(name, b.getInt64(0), b.getInt64(s.row), body);
    }
    /// The accumulator of row element r in `slots` (r null: `slots` is the only one).
    Value* slot(llvm::AllocaInst* slots, Value* r) {
        return r ? b.CreateGEP(slots->getAllocatedType(), slots, {b.getInt64(0), r}) : slots;
    }
    void init_accumulators() {
        for_row("init_row", [&](Value* r) {
            for (int o = 0; o < nout; ++o)
                if (s.outputs[o].reduced) b.CreateStore(acc_init(s.outputs[o]), slot(acc[o], r));
        });
    }
    void store_reduced(const std::vector<Value*>& offs) {
        for_row("store_row", [&](Value* r) {
            for (int o = 0; o < nout; ++o) {
                const KOutput& out = s.outputs[o];
                if (!out.reduced) continue;
                Value* a = b.CreateLoad(acc_type(out), slot(acc[o], r));
                if (a->getType() != reg_type(out.dtype))
                    a = b.CreateFPTrunc(a, reg_type(out.dtype));
                Value* off = offs[nload + o];
                if (r) off = b.CreateAdd(off, b.CreateMul(r, stride[nload + o][s.rank - 1]));
                store_output(o, a, off);
            }
        });
    }

    // ---- the loop nest ----------------------------------------------------------------------
    // Note [f32 sums]
    // An f32 sum accumulated in double halves the vector width of the hot loop (8 lanes, and a
    // conversion per element); one plain f32 accumulator loses accuracy over millions of terms.
    // So the innermost reduction loop is cut into blocks: inside a block each f32 sum has an f32
    // accumulator, and the block's sum is added to a double accumulator; across blocks and
    // threads the combination is in double.
    // In the usual order (kept loops, then reduction loops) a block has kSumBlock points and
    // the loop vectoriser may reassociate its f32 accumulator into vector partial sums (16 lanes
    // times its interleave count, each summing at most kSumBlock/16 terms). The error of a
    // block is at most about (kSumBlock/16 + 6) ulps of the sum of |terms| (sequential partial
    // sums, then a tree of lane sums). At 1024 that is ~70 eps = 4e-6 relative to the sum of
    // |terms| in the worst case; the per-block cost (a horizontal add and a conversion) is under
    // 1% of a 1024-point block.
    // In the row order (Note [Row reductions] in KernelPlan.cpp) the vectors run across the row,
    // so each element's f32 accumulator is a plain sequential sum, never reassociated: a block
    // has kRowBlock = 64 points of the innermost reduction loop, which bounds its error by
    // ~64 eps of the sum of |terms|, within the same promise. Its cost is one pass over the
    // row (a conversion and a double add per element) per 64 passes of the hot loop; for a row
    // unrolled into registers, a few vector instructions.
    static constexpr int64_t kSumBlock = 1024;
    static constexpr int64_t kRowBlock = 64;

    bool has_block_sums() const {
        for (const auto& o : s.outputs)
            if (block_sum(o)) return true;
        return false;
    }
    /// The first reduction loop and the innermost one (the row loop, if any, is inside them).
    int first_reduce() const { return s.rank - s.reduce_rank - (s.row > 0 ? 1 : 0); }
    int inner_reduce() const { return s.rank - 1 - (s.row > 0 ? 1 : 0); }

    /// The loop over dim d from lo to hi (the body: inner loops or the point).
    void emit_loop(int d, const std::vector<Value*>& offs, Value* lo, Value* hi) {
        emit_for("loop" + std::to_string(d), lo, hi, [&](Value* i) {
            std::vector<Value*> inner(offs.size());
            for (size_t k = 0; k < offs.size(); ++k)
                inner[k] = b.CreateAdd(offs[k], b.CreateMul(i, stride[k][d]));
            if (d + 1 < s.rank) {
                emit_loops(d + 1, inner);
                return;
            }
            if (s.steps) {
                emit_steps(inner);
                return;
            }
            Value* r = s.row > 0 ? i : nullptr; // the row element of this point
            std::vector<Value*> v = emit_point(inner);
            for (int o = 0; o < nout; ++o) {
                const KOutput& out = s.outputs[o];
                if (out.reduced) {
                    bool in_block = blocked && block_sum(out);
                    Value* p = slot(in_block ? bacc[o] : acc[o], r);
                    Value* a = b.CreateLoad(in_block ? b.getFloatTy() : acc_type(out), p);
                    b.CreateStore(acc_combine(out, a, v[out.value]), p);
                } else {
                    store_output(o, v[out.value], inner[nload + o]);
                }
            }
        });
    }

    /// A step kernel's point (Note [Step kernels] in CpuExecutable.cpp): the carries loaded
    /// once, then a sequential loop of steps, each running the expression with the carries in
    /// registers and storing its per-step outputs, then the final carries stored.
    void emit_steps(const std::vector<Value*>& at) {
        const size_t nc = s.carry_load.size();
        std::vector<Value*> init(nc), next(nc);
        for (size_t c = 0; c < nc; ++c)
            init[c] = load_operand(s.carry_load[c], at[s.carry_load[c]]);
        llvm::BasicBlock* pre = b.GetInsertBlock();
        llvm::BasicBlock* latch = nullptr;
        std::vector<llvm::PHINode*> phi(nc);
        emit_for("step", b.getInt64(0), nsteps, [&](Value* t) {
            for (size_t c = 0; c < nc; ++c) {
                phi[c] = b.CreatePHI(init[c]->getType(), 2, "carry" + std::to_string(c));
                phi[c]->addIncoming(init[c], pre);
            }
            std::vector<Value*> offs(at.size());
            for (size_t k = 0; k < at.size(); ++k)
                offs[k] = b.CreateAdd(at[k], b.CreateMul(t, step_stride[k]));
            load_value.assign(size_t(nload), nullptr);
            for (size_t c = 0; c < nc; ++c)
                load_value[size_t(s.carry_load[c])] = phi[c];
            std::vector<Value*> v = emit_point(offs);
            load_value.clear();
            for (int o = 0; o < nout; ++o) {
                const KOutput& out = s.outputs[o];
                if (out.final)
                    continue;
                store_output(o, out.carry >= 0 ? phi[size_t(out.carry)] : v[out.value],
                             offs[nload + o]);
            }
            for (size_t c = 0; c < nc; ++c)
                next[c] = v[s.carry_next[c]];
            latch = b.GetInsertBlock();
            for (size_t c = 0; c < nc; ++c)
                phi[c]->addIncoming(next[c], latch);
        });
        // (the exit block's phis first: the carries after the last step, or as they came in)
        std::vector<Value*> fin(nc);
        for (size_t c = 0; c < nc; ++c) {
            llvm::PHINode* f = b.CreatePHI(init[c]->getType(), 2, "final" + std::to_string(c));
            f->addIncoming(init[c], pre);
            f->addIncoming(next[c], latch);
            fin[c] = f;
        }
        for (int o = 0; o < nout; ++o)
            if (s.outputs[o].final)
                store_output(o, fin[size_t(s.outputs[o].carry)], at[nload + o]);
    }

    void emit_loops(int d, std::vector<Value*> offs) {
        int first = first_reduce();
        bool per_kept_point = d == first && s.reduce_rank > 0 && d > 0;
        if (per_kept_point) init_accumulators();
        Value* lo = d == 0 ? static_cast<Value*>(fn->getArg(2)) : b.getInt64(0);
        Value* hi = d == 0 ? static_cast<Value*>(fn->getArg(3)) : size[d];
        if (d == inner_reduce() && d >= first && has_block_sums()) {
            // blocks: f32 partial sums inside, double across (Note [f32 sums])
            int64_t block = s.row > 0 ? kRowBlock : kSumBlock;
            emit_blocks(d, lo, hi, block, [&](Value* j, Value* bend) {
                for_row("zero_row", [&](Value* r) {
                    for (int o = 0; o < nout; ++o)
                        if (block_sum(s.outputs[o]))
                            b.CreateStore(fconst(b.getFloatTy(), 0.0), slot(bacc[o], r));
                });
                blocked = true;
                emit_loop(d, offs, j, bend);
                blocked = false;
                for_row("add_row", [&](Value* r) {
                    for (int o = 0; o < nout; ++o) {
                        if (!block_sum(s.outputs[o])) continue;
                        llvm::Type* t = acc_type(s.outputs[o]);
                        Value* f = b.CreateLoad(b.getFloatTy(), slot(bacc[o], r));
                        Value* part = b.CreateFPExt(f, t);
                        Value* p = slot(acc[o], r);
                        b.CreateStore(b.CreateFAdd(b.CreateLoad(t, p), part), p);
                    }
                });
            });
        } else {
            emit_loop(d, offs, lo, hi);
        }
        if (per_kept_point) store_reduced(offs);
    }

    /// A loop over blocks of `block` indices of [lo, hi): `body` gets each block's bounds.
    void emit_blocks(int d, Value* lo, Value* hi, int64_t block,
                     const std::function<void(Value*, Value*)>& body) {
        llvm::BasicBlock* pre = b.GetInsertBlock();
        llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx, "block" + std::to_string(d), fn);
        llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx, "blocks_done" + std::to_string(d), fn);
        b.CreateCondBr(b.CreateICmpSLT(lo, hi), head, exit);
        b.SetInsertPoint(head);
        llvm::PHINode* j = b.CreatePHI(i64, 2, "blk" + std::to_string(d));
        j->addIncoming(lo, pre);
        Value* jn = b.CreateAdd(j, b.getInt64(block));
        body(j, b.CreateSelect(b.CreateICmpSLT(jn, hi), jn, hi));
        j->addIncoming(jn, b.GetInsertBlock());
        b.CreateCondBr(b.CreateICmpSLT(jn, hi), head, exit);
        b.SetInsertPoint(exit);
    }

    llvm::Function* run(const std::string& symbol) {
        auto* ptr = b.getPtrTy();
        auto* ft = llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, i64, i64}, false);
        fn = llvm::Function::Create(ft, llvm::Function::ExternalLinkage, symbol, mod);
        fn->addFnAttr(llvm::Attribute::NoUnwind);
        fn->addFnAttr("prefer-vector-width", "512");
        fn->addFnAttr("min-legal-vector-width", "512");
        for (unsigned a = 0; a < 2; ++a) {
            fn->addParamAttr(a, llvm::Attribute::NoAlias);
            fn->addParamAttr(a, llvm::Attribute::ReadOnly);
        }
        auto* entry = llvm::BasicBlock::Create(ctx, "entry", fn);
        b.SetInsertPoint(entry);
        setup_alias_scopes();
        auto slots = [&](llvm::Type* t) {
            if (s.row > 0) return b.CreateAlloca(llvm::ArrayType::get(t, s.row));
            return b.CreateAlloca(t);
        };
        for (int o = 0; o < nout; ++o) {
            acc.push_back(s.outputs[o].reduced ? slots(acc_type(s.outputs[o])) : nullptr);
            bacc.push_back(block_sum(s.outputs[o]) ? slots(b.getFloatTy()) : nullptr);
        }
        prologue();
        // no kept loop outside the reductions: accumulate over this thread's range of loop 0
        bool whole_range = first_reduce() == 0;
        if (whole_range) init_accumulators();
        std::vector<Value*> offs(nload + nout, b.getInt64(0));
        emit_loops(0, offs);
        if (whole_range) store_reduced(offs);
        b.CreateRetVoid();
        return fn;
    }
};

} // namespace

void render_kernel(const KernelSpec& spec, const std::string& symbol, llvm::Module& mod) {
    Renderer r(spec, mod.getContext(), &mod);
    r.run(symbol);
}

} // namespace sj::cpu
