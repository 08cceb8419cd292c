// KernelSpec -> LLVM IR: loads through strided pointers, the expression, stores and reductions.
#include "LlvmRenderer.h"

#include "../llvm/KernelExpr.h"

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
    // the row order's second accumulators (Note [Two accumulators a row]), rendered into while
    // `second` is set
    std::vector<llvm::AllocaInst*> acc2, bacc2;
    bool second = false;
    // per output: the f64 sum whose accumulator an f32 sum of the same values reads, or -1;
    // whether it is an f32 sum of a constant (Note [Sums that need no accumulator])
    std::vector<int> alias;
    std::vector<bool> const_sum;
    bool blocked = false; // rendering the inside of an f32 block
    // a step kernel's step count and per-operand step strides, and while rendering a step, the
    // carries' values in place of their loads (per load; null: load it)
    Value* nsteps = nullptr;
    std::vector<Value*> step_stride, load_value;

    codegen::ExprEmitter ex;

    Renderer(const KernelSpec& spec, llvm::LLVMContext& c, llvm::Module* m)
        : s(spec), ctx(c), mod(m), b(c), i64(llvm::Type::getInt64Ty(c)),
          nload(int(spec.load_dtypes.size())), nout(int(spec.outputs.size())),
          ex(b, *m, codegen::MathLibrary::Libm) {}

    llvm::Type* mem_type(DType t) { return ex.mem_type(t); }
    llvm::Type* reg_type(DType t) { return ex.reg_type(t); }

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
        return ex.from_mem(ld, t);
    }
    /// Stores v as output o at element offset `off`.
    void store_output(int o, Value* v, Value* off) {
        const DType t = s.outputs[o].dtype;
        llvm::Type* mt = mem_type(t);
        auto* st = b.CreateStore(ex.to_mem(v, t), b.CreateGEP(mt, base[nload + o], off));
        annotate(st, nload + o);
    }

    Value* param(int i) { return codegen::load_param(b, fn->getArg(1), i); }

    void prologue() {
        codegen::KernelParams kp =
            codegen::read_kernel_params(b, ex, s, fn->getArg(0), fn->getArg(1));
        size = std::move(kp.size);
        stride = std::move(kp.stride);
        base = std::move(kp.base);
        const int p = s.rank + s.operands() * (s.rank + 1);
        if (s.steps) {
            nsteps = param(p);
            for (int k = 0; k < nload + nout; ++k)
                step_stride.push_back(param(p + 1 + k));
        }
    }

    // ---- the per-point expression (KernelExpr.cpp) -----------------------------------------
    /// Values of every instruction at the point whose operand offsets are `offs`.
    std::vector<Value*> emit_point(const std::vector<Value*>& offs) {
        return ex.emit_point(s, [&](int k) {
            if (!load_value.empty() && load_value[k]) // a step kernel's carry
                return load_value[k];
            return load_operand(k, offs[k]);
        });
    }
    Value* fconst(llvm::Type* t, double v) { return llvm::ConstantFP::get(t, v); }

    // ---- reductions -------------------------------------------------------------------------
    // ---- reductions -------------------------------------------------------------------------
    /// Accumulators: f32 sums and products accumulate in double across blocks (see Note [f32
    /// sums]), others in their own type.
    llvm::Type* acc_type(const KOutput& o) { return ex.acc_type(o); }
    Value* acc_init(const KOutput& o) { return ex.acc_init(o); }
    /// f32 sums are accumulated in f32 within a block of the innermost loop (Note [f32 sums]).
    static bool block_sum(const KOutput& o) {
        return o.reduced && o.dtype == DType::F32 && o.reduce_op == Op::ReduceSum;
    }
    /// The usual order's sums may be reordered (vectorised partial sums); the row order
    /// vectorises over the row and keeps each element's sum sequential (Note [f32 sums]).
    Value* acc_combine(const KOutput& o, Value* a, Value* x) {
        return ex.acc_combine(o, a, x, s.row == 0);
    }
    /// A counted loop over [lo, hi); `body` renders its inside for index i.
    void emit_for(const std::string& name, Value* lo, Value* hi,
                  const std::function<void(Value*)>& body) {
        codegen::emit_for(b, fn, name, lo, hi, b.getInt64(1), body);
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
    /// Whether reduced output o adds a value at every point (not an alias or a constant's sum).
    bool per_point(int o) const { return s.outputs[o].reduced && alias[o] < 0 && !const_sum[o]; }
    /// Whether the row order's reduction loop alternates two sets of accumulators.
    bool two_sets() const { return s.row > 0 && s.row <= kMaxPairedRow; }

    // Note [Sums that need no accumulator]
    // Two kinds of reduced output cost a chain of adds and nothing is gained by it:
    // - an f32 sum of a constant, a dynamic mean's count (sum of ones over a dim of unknown
    //   size): each f32 block adds c times its length to the double accumulator, exactly (the
    //   block's f32 sum of at most 1024 small integers was exact too);
    // - an f32 sum of v beside an f64 sum of cast(v) over the same loops (the kernel of a
    //   one-pass variance sums an activation for its mean in f32 and for its second moment in
    //   f64): the f32 output is the f64 accumulator rounded once. That is the f32 sum's value
    //   with less rounding than its blocks would have given, and it does not depend on threads.
    void find_shortcuts() {
        alias.assign(size_t(nout), -1);
        const_sum.assign(size_t(nout), false);
        for (int o = 0; o < nout; ++o) {
            const KOutput& out = s.outputs[o];
            if (!block_sum(out))
                continue;
            const KInst& v = s.insts[size_t(out.value)];
            if (v.kind == KInst::Kind::Const && v.dtype == DType::F32) {
                const_sum[o] = true;
                continue;
            }
            for (int q = 0; q < nout; ++q) {
                const KOutput& w = s.outputs[q];
                const KInst& c = s.insts[size_t(w.value)];
                if (w.reduced && w.reduce_op == Op::ReduceSum && w.dtype == DType::F64 &&
                    c.kind == KInst::Kind::Op && c.op == Op::Cast && c.args[0] == out.value) {
                    alias[o] = q;
                    break;
                }
            }
        }
    }

    void init_accumulators() {
        for_row("init_row", [&](Value* r) {
            for (int o = 0; o < nout; ++o) {
                if (!s.outputs[o].reduced)
                    continue;
                b.CreateStore(acc_init(s.outputs[o]), slot(acc[o], r));
                if (acc2[o])
                    b.CreateStore(acc_init(s.outputs[o]), slot(acc2[o], r));
            }
        });
    }
    void store_reduced(const std::vector<Value*>& offs) {
        for_row("store_row", [&](Value* r) {
            for (int o = 0; o < nout; ++o) { // the second set first: an alias reads the sum
                if (!acc2[o])
                    continue;
                const KOutput& out = s.outputs[o];
                Value* p = slot(acc[o], r);
                Value* a = b.CreateLoad(acc_type(out), p);
                b.CreateStore(acc_combine(out, a, b.CreateLoad(acc_type(out), slot(acc2[o], r))),
                              p);
            }
            for (int o = 0; o < nout; ++o) {
                const KOutput& out = s.outputs[o];
                if (!out.reduced)
                    continue;
                const int from = alias[o] >= 0 ? alias[o] : o;
                Value* a = b.CreateLoad(acc_type(s.outputs[from]), slot(acc[from], r));
                if (a->getType() != reg_type(out.dtype))
                    a = b.CreateFPTrunc(a, reg_type(out.dtype));
                Value* off = offs[nload + o];
                if (r)
                    off = b.CreateAdd(off, b.CreateMul(r, stride[nload + o][s.rank - 1]));
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
    // unrolled into registers, a few vector instructions. (A short row alternates two sets of
    // accumulators, Note [Two accumulators a row]: each sums 32 of a block's points, and the
    // block adds both in double.)
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

    // Note [Blocks around short loops]
    // A reduction loop whose trip count is compiled in (Note [Short loops compiled in] in
    // KernelPlan.cpp) is unrolled by LLVM; when it is the innermost one, a block of it is at
    // most its 2-4 points, and every point pays the block's conversion and double add (a 2x2
    // max pool's backward sums over [N, C/16, H/2, 2, W/2, 2, 16] ran at 27 GB/s against 40 for
    // plain sums: three f32 sums, each converted to double every two points). So the blocks are
    // cut on the innermost reduction loop whose count is not compiled in, with the short loops
    // inside them: a block of that loop has block_length / (their trips' product) indices, so it
    // still sums at most kRowBlock (kSumBlock) points in f32 and the error bound of Note [f32
    // sums] holds. The cut depends on the loop bounds alone, not on the threads' ranges.
    struct BlockLoop {
        int d;          // the loop the blocks are cut on
        int64_t inside; // points of the short loops inside it, per index of d
    };
    BlockLoop block_loop() const {
        BlockLoop bl{inner_reduce(), 1};
        while (bl.d > first_reduce() && size_t(bl.d) < s.trips.size() && s.trips[bl.d] > 0)
            bl.inside *= s.trips[size_t(bl.d--)];
        return bl;
    }

    // Note [Two accumulators a row]
    // In the row order each row element's accumulator takes one add per point of the reduction
    // loops, and each add waits for the one before (a row of 16 f32 is one vector register: a
    // chain of dependent vector adds, 3-4 cycles each). A kernel of one sum over data in cache
    // then runs at the adds' latency, not at the loads' rate; a kernel of several (the f64 sums
    // of a one-pass variance: four vector chains a point) even more so. So the innermost
    // reduction loop takes its indices in pairs, the first into the accumulators and the second
    // into a second set, which the block (f32 sums) or the kept point (the others) adds to the
    // first. Each chain waits half as often. A sum's order is fixed by the loop bounds alone,
    // so the bits still do not depend on the thread count; max, min, any and all give the same
    // values in any order. Rows of at most kMaxPairedRow elements only: a row of 64 f32 is four
    // independent chains already, and a longer one lives in L1, not in registers, where a
    // second set only adds traffic (a [128, 512] bias gradient ran at 57-61 GB/s with two sets
    // against 89 with one: bench/symjax_bench reduce_rows).
    static constexpr int64_t kMaxPairedRow = 64;

    /// The loop over dim d from lo to hi (the body: inner loops or the point).
    void emit_loop(int d, const std::vector<Value*>& offs, Value* lo, Value* hi) {
        if (two_sets() && d == inner_reduce()) {
            // index pairs, then the odd one (Note [Two accumulators a row])
            Value* even = b.CreateSub(hi, b.CreateAnd(b.CreateSub(hi, lo), b.getInt64(1)));
            codegen::emit_for(b, fn, "pairs" + std::to_string(d), lo, even, b.getInt64(2),
                              [&](Value* i) {
                                  emit_index(d, offs, i);
                                  second = true;
                                  emit_index(d, offs, b.CreateAdd(i, b.getInt64(1)));
                                  second = false;
                              });
            lo = even;
        }
        emit_for("loop" + std::to_string(d), lo, hi, [&](Value* i) { emit_index(d, offs, i); });
    }

    /// The body of loop d at index i: the inner loops, or the point.
    void emit_index(int d, const std::vector<Value*>& offs, Value* i) {
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
            if (!out.reduced) {
                store_output(o, v[out.value], inner[nload + o]);
                continue;
            }
            if (!per_point(o))
                continue;
            bool in_block = blocked && block_sum(out);
            llvm::AllocaInst* slots =
                in_block ? (second ? bacc2[o] : bacc[o]) : (second ? acc2[o] : acc[o]);
            Value* p = slot(slots, r);
            Value* a = b.CreateLoad(in_block ? b.getFloatTy() : acc_type(out), p);
            b.CreateStore(acc_combine(out, a, v[out.value]), p);
        }
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
        const BlockLoop bl = block_loop();
        if (d == bl.d && d >= first && has_block_sums()) {
            // blocks: f32 partial sums inside, double across (Note [f32 sums], Note [Blocks
            // around short loops])
            int64_t block = std::max<int64_t>(1, (s.row > 0 ? kRowBlock : kSumBlock) / bl.inside);
            emit_blocks(d, lo, hi, block, [&](Value* j, Value* bend) {
                for_row("zero_row", [&](Value* r) {
                    for (int o = 0; o < nout; ++o) {
                        if (!block_sum(s.outputs[o]) || !per_point(o))
                            continue;
                        b.CreateStore(fconst(b.getFloatTy(), 0.0), slot(bacc[o], r));
                        if (bacc2[o])
                            b.CreateStore(fconst(b.getFloatTy(), 0.0), slot(bacc2[o], r));
                    }
                });
                blocked = true;
                emit_loop(d, offs, j, bend);
                blocked = false;
                // a constant's sum over the block: c times its length (Note [Sums that need no
                // accumulator])
                Value* len = b.CreateSIToFP(
                    b.CreateMul(b.CreateSub(bend, j), b.getInt64(bl.inside)), b.getDoubleTy());
                for_row("add_row", [&](Value* r) {
                    for (int o = 0; o < nout; ++o) {
                        if (!block_sum(s.outputs[o]) || alias[o] >= 0)
                            continue;
                        llvm::Type* t = acc_type(s.outputs[o]);
                        Value* part;
                        if (const_sum[o]) {
                            double c = s.insts[size_t(s.outputs[o].value)].value;
                            part = b.CreateFMul(len, fconst(t, double(float(c))));
                        } else {
                            part = b.CreateFPExt(b.CreateLoad(b.getFloatTy(), slot(bacc[o], r)), t);
                            if (bacc2[o])
                                part = b.CreateFAdd(
                                    part, b.CreateFPExt(
                                              b.CreateLoad(b.getFloatTy(), slot(bacc2[o], r)), t));
                        }
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
        find_shortcuts();
        for (int o = 0; o < nout; ++o) {
            const KOutput& out = s.outputs[o];
            acc.push_back(out.reduced ? slots(acc_type(out)) : nullptr);
            bacc.push_back(block_sum(out) ? slots(b.getFloatTy()) : nullptr);
            // the second set: only where the pairs add to it (Note [Two accumulators a row])
            const bool pairs = two_sets() && per_point(o);
            acc2.push_back(pairs && !block_sum(out) ? slots(acc_type(out)) : nullptr);
            bacc2.push_back(pairs && block_sum(out) ? slots(b.getFloatTy()) : nullptr);
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
