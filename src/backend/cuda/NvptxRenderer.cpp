// GpuKernel -> LLVM IR for NVPTX (or for the host emulator), and -> PTX.
#include "NvptxRenderer.h"

#include "../llvm/KernelCache.h"
#include "../llvm/KernelExpr.h"

#include <symjax/Error.h>
#include <symjax/ir/Node.h>

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Linker/Linker.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Transforms/IPO/Internalize.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <type_traits>

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace sj::cuda {

using compiler::KernelSpec;
using compiler::KOutput;
using llvm::Value;

// Note [Thread maps]
// A kernel's iteration space is its kept loops (the loops no reduction runs over, the row loop
// of the row order among them) times its reduction loops. A GPU wants many threads reading
// neighbouring addresses together, so the map follows which loops are contiguous:
//  - Points: one thread per kept point, in a grid-stride loop over the kept points flattened
//    (the innermost kept loop fastest, so neighbouring threads touch neighbouring elements of a
//    contiguous output). The thread runs its point's reduction loops itself, in order. This is
//    every elementwise kernel, and the row order (Note [Row reductions] in KernelPlan.cpp),
//    where the kept row loop is the contiguous one and each thread sums down a column.
//  - Blocks: one block per kept point (a grid-stride loop over blocks, the same for every thread
//    of a block, so that all of them meet at each barrier). The block's threads split the
//    reduction points flattened (innermost fastest: thread t reads element t, then t + width),
//    each keeping a partial; the partials meet in shared memory and combine along a fixed
//    binary tree. This is the usual order's reductions, whose innermost (contiguous) loops are
//    the reduced ones, when they reduce at least a warp's worth of points (choose_launch).
// Both are deterministic: which thread combines which values, in which order, depends only on
// the shapes and the launch, never on timing. f32 sums accumulate in double (acc_type), as the
// cpu's do across blocks; a thread's partial or a column's sum is a sequential sum in double,
// so no blocking is needed for accuracy.

// Note [Split reductions]
// One block per kept point leaves most of a GPU idle when the kept points are few (a full
// reduction has one). Then choose_launch splits each point's reduction into `chunks` pieces:
// the Partials launch runs a block per (kept point, chunk), each storing its tree's result in
// a scratch buffer the runner appends to the buffer table; the Combine launch then runs a
// thread per kept point, which combines its chunks in chunk order and stores the outputs. The
// partials keep the accumulator's type (double for f32 sums), and the order of every
// combination is fixed, so the result is as deterministic as the unsplit one.

namespace {

/// The code generator's view of the machine the kernel runs on: a GPU through NVPTX's
/// intrinsics, or the emulator, which passes the same values in a context argument (Note [The
/// emulator] in Emulator.cpp).
struct Renderer {
    const GpuKernel& k;
    const KernelSpec& s;
    const GpuCode code;
    llvm::LLVMContext& ctx;
    llvm::Module* mod;
    llvm::IRBuilder<> b;
    llvm::Function* fn = nullptr;
    llvm::Type* i64;
    int nload, nout;
    int first;                               // the first reduction loop
    std::vector<Value*> base;                // per operand (loads then outputs)
    std::vector<std::vector<Value*>> stride; // per operand, per loop
    std::vector<Value*> size;                // per loop
    codegen::ExprEmitter ex;

    Renderer(const GpuKernel& kernel, GpuCode c, llvm::LLVMContext& context, llvm::Module* m)
        : k(kernel), s(kernel.spec), code(c), ctx(context), mod(m), b(context),
          i64(llvm::Type::getInt64Ty(context)), nload(int(s.load_dtypes.size())),
          nout(int(s.outputs.size())), first(s.rank - s.reduce_rank - (s.row > 0 ? 1 : 0)),
          ex(b, *m,
             c == GpuCode::Nvptx ? codegen::MathLibrary::Libdevice : codegen::MathLibrary::Libm) {}

    // ---- the machine ----------------------------------------------------------------------
    /// Global memory: addrspace(1) on NVPTX (loads and stores as ld.global/st.global).
    unsigned global_as() const { return code == GpuCode::Nvptx ? 1 : 0; }

    Value* sreg(llvm::Intrinsic::ID nvptx, int host_field) {
        if (code == GpuCode::Nvptx)
            return b.CreateZExt(b.CreateIntrinsic(nvptx, {}, {}), i64);
        Value* p = b.CreateGEP(i64, fn->getArg(2), b.getInt64(host_field));
        return b.CreateLoad(i64, p);
    }
    Value* tid() { return sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, 0); }
    Value* ctaid() { return sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x, 1); }
    Value* ntid() { return sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x, 2); }
    Value* nctaid() { return sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x, 3); }
    void barrier() {
        if (code == GpuCode::Nvptx) {
            b.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
            return;
        }
        // the emulator's context: {tid, ctaid, ntid, nctaid, shared, barrier_fn}
        Value* fp = b.CreateLoad(b.getPtrTy(), b.CreateGEP(i64, fn->getArg(2), b.getInt64(5)));
        auto* ft = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy()}, false);
        b.CreateCall(ft, fp, {fn->getArg(2)});
    }
    /// A shared array of `n` values of type t, at byte `offset` of the block's shared memory.
    Value* shared_array(llvm::Type* t, int64_t n, int64_t offset, const std::string& name) {
        if (code == GpuCode::Nvptx) {
            auto* at = llvm::ArrayType::get(t, uint64_t(n));
            return new llvm::GlobalVariable(*mod, at, false, llvm::GlobalValue::InternalLinkage,
                                            llvm::UndefValue::get(at), name, nullptr,
                                            llvm::GlobalValue::NotThreadLocal, 3);
        }
        Value* sh = b.CreateLoad(b.getPtrTy(), b.CreateGEP(i64, fn->getArg(2), b.getInt64(4)));
        return b.CreateGEP(b.getInt8Ty(), sh, b.getInt64(offset));
    }

    void prologue() {
        codegen::KernelParams kp =
            codegen::read_kernel_params(b, ex, s, fn->getArg(0), fn->getArg(1), global_as());
        size = std::move(kp.size);
        stride = std::move(kp.stride);
        base = std::move(kp.base);
    }

    Value* load_operand(int o, Value* off) {
        const DType t = s.load_dtypes[o];
        llvm::Type* mt = ex.mem_type(t);
        return ex.from_mem(b.CreateLoad(mt, b.CreateGEP(mt, base[o], off)), t);
    }
    void store_output(int o, Value* v, Value* off) {
        const DType t = s.outputs[o].dtype;
        llvm::Type* mt = ex.mem_type(t);
        b.CreateStore(ex.to_mem(v, t), b.CreateGEP(mt, base[nload + o], off));
    }

    // ---- loops ------------------------------------------------------------------------------
    void emit_for(const std::string& name, Value* lo, Value* hi, Value* step,
                  const std::function<void(Value*)>& body) {
        codegen::emit_for(b, fn, name, lo, hi, step, body);
    }

    /// The kept loops, outermost first (the row loop last), and the reduction loops.
    std::vector<int> kept_dims() const {
        std::vector<int> d;
        for (int i = 0; i < first; ++i)
            d.push_back(i);
        if (s.row > 0)
            d.push_back(s.rank - 1);
        return d;
    }
    std::vector<int> reduced_dims() const {
        std::vector<int> d;
        for (int i = first; i < first + s.reduce_rank; ++i)
            d.push_back(i);
        return d;
    }
    Value* count(const std::vector<int>& dims) {
        Value* n = b.getInt64(1);
        for (int d : dims)
            n = b.CreateMul(n, size[d]);
        return n;
    }
    /// offs + the offsets of the flat index `flat` over `dims` (the last fastest).
    std::vector<Value*> offsets_of(Value* flat, const std::vector<int>& dims,
                                   std::vector<Value*> offs) {
        Value* rem = flat;
        for (size_t j = dims.size(); j-- > 0;) {
            int d = dims[j];
            Value* idx = j == 0 ? rem : b.CreateURem(rem, size[d]);
            if (j > 0)
                rem = b.CreateUDiv(rem, size[d]);
            for (size_t o = 0; o < offs.size(); ++o)
                offs[o] = b.CreateAdd(offs[o], b.CreateMul(idx, stride[o][d]));
        }
        return offs;
    }

    /// Stores the non-reduced outputs at a point and returns the expression's values.
    std::vector<Value*> point(const std::vector<Value*>& offs) {
        std::vector<Value*> v = ex.emit_point(s, [&](int l) { return load_operand(l, offs[l]); });
        for (int o = 0; o < nout; ++o)
            if (!s.outputs[o].reduced)
                store_output(o, v[s.outputs[o].value], offs[nload + o]);
        return v;
    }

    /// Accumulates every reduced output over the reduction points [lo, hi) step `step`
    /// (flattened), starting from `acc`, at the kept point `offs`.
    void accumulate(std::vector<llvm::AllocaInst*>& acc, const std::vector<Value*>& offs, Value* lo,
                    Value* hi, Value* step) {
        std::vector<int> red = reduced_dims();
        emit_for("r", lo, hi, step, [&](Value* r) {
            std::vector<Value*> v = point(offsets_of(r, red, offs));
            for (int o = 0; o < nout; ++o) {
                const KOutput& out = s.outputs[o];
                if (!out.reduced)
                    continue;
                Value* a = b.CreateLoad(ex.acc_type(out), acc[o]);
                b.CreateStore(ex.acc_combine(out, a, v[out.value], false), acc[o]);
            }
        });
    }
    Value* final_value(const KOutput& out, Value* a) {
        return a->getType() != ex.reg_type(out.dtype) ? b.CreateFPTrunc(a, ex.reg_type(out.dtype))
                                                      : a;
    }

    void emit_points() {
        std::vector<int> kept = kept_dims();
        std::vector<llvm::AllocaInst*> acc(nout, nullptr);
        for (int o = 0; o < nout; ++o)
            if (s.outputs[o].reduced)
                acc[o] = b.CreateAlloca(ex.acc_type(s.outputs[o]));
        Value* start = b.CreateAdd(b.CreateMul(ctaid(), ntid()), tid());
        Value* stride_all = b.CreateMul(nctaid(), ntid());
        std::vector<Value*> zero(nload + nout, b.getInt64(0));
        emit_for("p", start, count(kept), stride_all, [&](Value* p) {
            std::vector<Value*> offs = offsets_of(p, kept, zero);
            if (s.reduce_rank == 0) {
                point(offs);
                return;
            }
            for (int o = 0; o < nout; ++o)
                if (acc[o])
                    b.CreateStore(ex.acc_init(s.outputs[o]), acc[o]);
            accumulate(acc, offs, b.getInt64(0), count(reduced_dims()), b.getInt64(1));
            for (int o = 0; o < nout; ++o)
                if (acc[o])
                    store_output(
                        o,
                        final_value(s.outputs[o], b.CreateLoad(ex.acc_type(s.outputs[o]), acc[o])),
                        offs[nload + o]);
        });
    }

    /// The scratch buffer of a split reduction (the table's entry after the outputs), and where
    /// reduced output o's partials start in it (kept * chunks values of 8 bytes each).
    Value* scratch(int o, Value* kept) {
        Value* p = b.CreateLoad(b.getPtrTy(),
                                b.CreateGEP(b.getPtrTy(), fn->getArg(0), b.getInt64(nload + nout)));
        if (global_as() != 0)
            p = b.CreateAddrSpaceCast(p, b.getPtrTy(global_as()));
        // each reduced output has kept x chunks slots of 8 bytes (GpuLaunch::scratch_bytes),
        // whatever its accumulator's size: an offset counted in the output's own type put an
        // f32 max's partials (4 bytes) inside the f32 sum's before it (8 bytes, a double)
        int before = 0;
        for (int j = 0; j < o; ++j)
            before += s.outputs[j].reduced;
        Value* off = b.CreateMul(b.CreateMul(kept, b.getInt64(k.chunks)), b.getInt64(8 * before));
        return b.CreateGEP(b.getInt8Ty(), p, off);
    }

    /// Blocks (Note [Thread maps]); with chunks > 0, the Partials phase of a split reduction
    /// (Note [Split reductions]): block j of the flattened (kept point, chunk) pairs reduces its
    /// chunk and stores the partial in the scratch buffer.
    void emit_blocks() {
        std::vector<int> kept = kept_dims();
        const int64_t width = k.block;
        const bool split = k.phase == GpuPhase::Partials;
        std::vector<llvm::AllocaInst*> acc(nout, nullptr);
        std::vector<Value*> tree(nout, nullptr);
        int64_t shared_bytes = 0;
        for (int o = 0; o < nout; ++o) {
            if (!s.outputs[o].reduced)
                continue;
            llvm::Type* t = ex.acc_type(s.outputs[o]);
            acc[o] = b.CreateAlloca(t);
            tree[o] = shared_array(t, width, shared_bytes, "tree" + std::to_string(o));
            shared_bytes += width * 8; // every accumulator type is at most 8 bytes
        }
        Value* t = tid();
        Value* nt = b.getInt64(width); // == ntid: the launch uses the kernel's block
        Value* nkept = count(kept);
        Value* nred = count(reduced_dims());
        Value* chunks = b.getInt64(split ? k.chunks : 1);
        // a chunk's length, rounded up: the last chunk may be short or empty
        Value* len = b.CreateUDiv(b.CreateAdd(nred, b.CreateSub(chunks, b.getInt64(1))), chunks);
        std::vector<Value*> zero(nload + nout, b.getInt64(0));
        emit_for("q", ctaid(), b.CreateMul(nkept, chunks), nctaid(), [&](Value* j) {
            Value* q = split ? b.CreateUDiv(j, chunks) : j;
            Value* c = split ? b.CreateURem(j, chunks) : b.getInt64(0);
            std::vector<Value*> offs = offsets_of(q, kept, zero);
            for (int o = 0; o < nout; ++o)
                if (acc[o])
                    b.CreateStore(ex.acc_init(s.outputs[o]), acc[o]);
            Value* lo = b.CreateMul(c, len);
            Value* hi = split ? b.CreateSelect(b.CreateICmpULT(b.CreateAdd(lo, len), nred),
                                               b.CreateAdd(lo, len), nred)
                              : nred;
            accumulate(acc, offs, b.CreateAdd(lo, t), hi, nt);
            auto slot = [&](int o, Value* i) {
                llvm::Type* ty = ex.acc_type(s.outputs[o]);
                return b.CreateGEP(ty, tree[o], i);
            };
            for (int o = 0; o < nout; ++o)
                if (acc[o])
                    b.CreateStore(b.CreateLoad(ex.acc_type(s.outputs[o]), acc[o]), slot(o, t));
            barrier();
            // the tree: at level w, thread i < w adds in thread i + w's partial
            for (int64_t w = width / 2; w >= 1; w /= 2) {
                llvm::BasicBlock* add =
                    llvm::BasicBlock::Create(ctx, "tree" + std::to_string(w), fn);
                llvm::BasicBlock* done =
                    llvm::BasicBlock::Create(ctx, "tree_done" + std::to_string(w), fn);
                b.CreateCondBr(b.CreateICmpULT(t, b.getInt64(w)), add, done);
                b.SetInsertPoint(add);
                Value* other = b.CreateAdd(t, b.getInt64(w));
                for (int o = 0; o < nout; ++o) {
                    if (!acc[o])
                        continue;
                    llvm::Type* ty = ex.acc_type(s.outputs[o]);
                    Value* mine = b.CreateLoad(ty, slot(o, t));
                    Value* theirs = b.CreateLoad(ty, slot(o, other));
                    b.CreateStore(ex.acc_combine(s.outputs[o], mine, theirs, false), slot(o, t));
                }
                b.CreateBr(done);
                b.SetInsertPoint(done);
                barrier();
            }
            llvm::BasicBlock* store = llvm::BasicBlock::Create(ctx, "store", fn);
            llvm::BasicBlock* stored = llvm::BasicBlock::Create(ctx, "stored", fn);
            b.CreateCondBr(b.CreateICmpEQ(t, b.getInt64(0)), store, stored);
            b.SetInsertPoint(store);
            for (int o = 0; o < nout; ++o) {
                if (!acc[o])
                    continue;
                Value* a = b.CreateLoad(ex.acc_type(s.outputs[o]), slot(o, b.getInt64(0)));
                if (split)
                    b.CreateStore(a, b.CreateGEP(a->getType(), scratch(o, nkept), j));
                else
                    store_output(o, final_value(s.outputs[o], a), offs[nload + o]);
            }
            b.CreateBr(stored);
            b.SetInsertPoint(stored);
            barrier(); // the tree is reused by the block's next kept point
        });
    }

    /// The Combine phase of a split reduction: one thread per kept point combines its chunks'
    /// partials in chunk order and stores the reduced outputs. It reads no load.
    void emit_combine() {
        std::vector<int> kept = kept_dims();
        Value* nkept = count(kept);
        Value* start = b.CreateAdd(b.CreateMul(ctaid(), ntid()), tid());
        Value* stride_all = b.CreateMul(nctaid(), ntid());
        std::vector<Value*> zero(nload + nout, b.getInt64(0));
        emit_for("p", start, nkept, stride_all, [&](Value* q) {
            std::vector<Value*> offs = offsets_of(q, kept, zero);
            for (int o = 0; o < nout; ++o) {
                const KOutput& out = s.outputs[o];
                if (!out.reduced)
                    continue;
                llvm::Type* ty = ex.acc_type(out);
                Value* part =
                    b.CreateGEP(ty, scratch(o, nkept), b.CreateMul(q, b.getInt64(k.chunks)));
                Value* a = ex.acc_init(out);
                for (int64_t c = 0; c < k.chunks; ++c)
                    a = ex.acc_combine(
                        out, a, b.CreateLoad(ty, b.CreateGEP(ty, part, b.getInt64(c))), false);
                store_output(o, final_value(out, a), offs[nload + o]);
            }
        });
    }

    void run() {
        SJ_CHECK(!s.steps, InternalError) << "cuda codegen: step kernels are the cpu runner's";
        SJ_CHECK(k.map == ThreadMap::Points || s.reduce_rank > 0, InternalError)
            << "cuda codegen: a Blocks kernel without reduction loops";
        SJ_CHECK(k.block >= 1 && (k.block & (k.block - 1)) == 0, InternalError)
            << "cuda codegen: block " << k.block << " is not a power of 2";
        SJ_CHECK(k.phase == GpuPhase::Whole ||
                     (k.chunks >= 1 && s.reduce_rank > 0 &&
                      (k.phase == GpuPhase::Combine || k.map == ThreadMap::Blocks)),
                 InternalError)
            << "cuda codegen: a split reduction must be a Blocks kernel over " << k.chunks
            << " chunks";
        auto* ptr = b.getPtrTy();
        std::vector<llvm::Type*> args{ptr, ptr};
        if (code == GpuCode::Host)
            args.push_back(ptr);
        auto* ft = llvm::FunctionType::get(b.getVoidTy(), args, false);
        fn = llvm::Function::Create(ft, llvm::Function::ExternalLinkage, kKernelSymbol, mod);
        fn->addFnAttr(llvm::Attribute::NoUnwind);
        for (unsigned a = 0; a < 2; ++a) {
            fn->addParamAttr(a, llvm::Attribute::NoAlias);
            fn->addParamAttr(a, llvm::Attribute::ReadOnly);
        }
        b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
        prologue();
        if (k.phase == GpuPhase::Combine)
            emit_combine(); // (a Points kernel that reads only the partials)
        else if (k.map == ThreadMap::Points)
            emit_points();
        else
            emit_blocks();
        b.CreateRetVoid();
        if (code == GpuCode::Nvptx) {
            // a kernel entry (.entry), launched with at most k.block threads per block
            llvm::NamedMDNode* ann = mod->getOrInsertNamedMetadata("nvvm.annotations");
            auto md = [&](const char* key, int v) {
                ann->addOperand(llvm::MDNode::get(
                    ctx, {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx, key),
                          llvm::ValueAsMetadata::get(b.getInt32(uint32_t(v)))}));
            };
            md("kernel", 1);
            md("maxntidx", k.block);
        }
    }
};

} // namespace

std::unique_ptr<llvm::Module> render_gpu_module(const GpuKernel& k, GpuCode code,
                                                llvm::LLVMContext& ctx) {
    auto mod = std::make_unique<llvm::Module>("sj_gpu_kernel", ctx);
    if (code == GpuCode::Nvptx)
        mod->setTargetTriple("nvptx64-nvidia-cuda");
    Renderer r(k, code, ctx, mod.get());
    r.run();
    std::string err;
    llvm::raw_string_ostream os(err);
    SJ_ASSERT(!llvm::verifyModule(*mod, &os)) << "cuda codegen produced invalid IR: " << err;
    return mod;
}

int64_t shared_bytes(const GpuKernel& k) {
    if (k.map != ThreadMap::Blocks)
        return 0;
    int64_t n = 0;
    for (const auto& o : k.spec.outputs)
        if (o.reduced)
            n += int64_t(k.block) * 8;
    return n;
}

std::string libdevice_path() {
    if (const char* e = std::getenv("SJ_LIBDEVICE"); e && *e)
        return e;
#ifdef SJ_LIBDEVICE
    return SJ_LIBDEVICE;
#else
    return "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";
#endif
}

// Note [Assembling PTX in process]
// SJ_CUDA_CHECK_PTX assembles every kernel the emulator loads for each architecture it names, and
// the op harness loads ~1,300 kernels. A ptxas process per kernel and architecture (std::system:
// a shell, then ptxas, forked from a test process of a few hundred MB) took ~80 ms: 193 of the
// 214 s that `cuda_emulator_ops_forward` ran on the 2-core CI machine, the longest test of the
// suite. The toolkit's nvJitLink runs the same assembler inside the process (~7 ms for a small
// kernel): given PTX and "-arch=sm_XX", nvJitLinkComplete assembles it to SASS, and its error
// log is ptxas's. So assemble_ptx uses it when it is there: opened with dlopen, like the driver
// (Note [Loading the driver] in Driver.cpp: the plugin links no CUDA library), from
// $SJ_NVJITLINK, else the toolkit's found at build time. A ptxas process remains the way when
// $SJ_PTXAS names one (the user asked for that binary), $SJ_NVJITLINK is "off", or the library
// is missing or older than this API. The functions are looked up by their plain names, which
// libnvJitLink exports next to the versioned ones its header's inline wrappers call; their C
// signatures (and NVJITLINK_INPUT_PTX = 2, NVJITLINK_SUCCESS = 0) are stable since CUDA 12.0.
namespace {

struct JitLink {
    using Handle = void*;
    int (*create)(Handle*, uint32_t, const char* const*) = nullptr;
    int (*destroy)(Handle*) = nullptr;
    int (*add_data)(Handle, int, const void*, size_t, const char*) = nullptr;
    int (*complete)(Handle) = nullptr;
    int (*error_log_size)(Handle, size_t*) = nullptr;
    int (*error_log)(Handle, char*) = nullptr;
    static constexpr int kInputPtx = 2;

    /// Empty when the PTX assembles for sm_`sm`, else nvJitLink's account of why not.
    std::string assemble(const std::string& ptx, int sm) const {
        const std::string arch = "-arch=sm_" + std::to_string(sm);
        const char* opts[] = {arch.c_str()};
        Handle h = nullptr;
        if (int rc = create(&h, 1, opts); rc != 0)
            return "nvJitLink " + arch + " could not start (error " + std::to_string(rc) + ")";
        int rc = add_data(h, kInputPtx, ptx.data(), ptx.size(), "kernel.ptx");
        if (rc == 0)
            rc = complete(h);
        std::string out;
        if (rc != 0) {
            size_t n = 0;
            if (error_log_size(h, &n) == 0 && n > 0) {
                std::string log(n, '\0');
                if (error_log(h, log.data()) == 0)
                    out = log.c_str();
            }
            out = "nvJitLink (ptxas) " + arch + " rejects the PTX (error " + std::to_string(rc) +
                  "): " + out;
        }
        destroy(&h);
        return out;
    }
};

/// The process's nvJitLink, or null when assemble_ptx runs ptxas (Note [Assembling PTX in
/// process]): $SJ_PTXAS is read at each call, the library opened at the first.
const JitLink* jit_link() {
    if (const char* e = std::getenv("SJ_PTXAS"); e && *e)
        return nullptr;
    static const std::optional<JitLink> lib = []() -> std::optional<JitLink> {
        const char* e = std::getenv("SJ_NVJITLINK");
        std::string path = e && *e ? e : "";
#ifdef SJ_NVJITLINK
        if (path.empty())
            path = SJ_NVJITLINK;
#endif
        if (path.empty() || path == "off")
            return std::nullopt;
        void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!h)
            return std::nullopt;
        JitLink j;
        auto sym = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
            return fn != nullptr;
        };
        if (!(sym(j.create, "nvJitLinkCreate") && sym(j.destroy, "nvJitLinkDestroy") &&
              sym(j.add_data, "nvJitLinkAddData") && sym(j.complete, "nvJitLinkComplete") &&
              sym(j.error_log_size, "nvJitLinkGetErrorLogSize") &&
              sym(j.error_log, "nvJitLinkGetErrorLog"))) {
            dlclose(h);
            return std::nullopt;
        }
        return j; // (the library stays open for the process)
    }();
    return lib ? &*lib : nullptr;
}

/// The same check as a ptxas process ($SJ_PTXAS, else the toolkit's found at build time).
std::string assemble_with_ptxas(const std::string& ptx, int sm) {
    const char* e = std::getenv("SJ_PTXAS");
#ifdef SJ_PTXAS
    const std::string ptxas = e && *e ? e : SJ_PTXAS;
#else
    const std::string ptxas = e && *e ? e : "/usr/local/cuda/bin/ptxas";
#endif
    char in[] = "/tmp/sj_ptx_XXXXXX";
    int fd = mkstemp(in);
    SJ_CHECK(fd >= 0, Error) << "assemble_ptx: cannot create a temporary file";
    ::close(fd);
    const std::string log = std::string(in) + ".log";
    std::ofstream(in) << ptx;
    const std::string cmd =
        ptxas + " -arch=sm_" + std::to_string(sm) + " -o /dev/null " + in + " > " + log + " 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream ls(log);
    const std::string out((std::istreambuf_iterator<char>(ls)), std::istreambuf_iterator<char>());
    std::remove(in);
    std::remove(log.c_str());
    if (rc == 0)
        return "";
    return ptxas + " -arch=sm_" + std::to_string(sm) + " rejects the PTX (exit " +
           std::to_string(rc) + "): " + out;
}

} // namespace

std::string assemble_ptx(const std::string& ptx, int sm) {
    if (const JitLink* j = jit_link())
        return j->assemble(ptx, sm);
    return assemble_with_ptxas(ptx, sm);
}

bool assembles_in_process() {
    return jit_link() != nullptr;
}

namespace {

// Note [PTX versions]
// LLVM 19's NVPTX target writes PTX up to ISA 8.5. sm_90 needs ISA 7.8, sm_80 7.0; 7.8 serves
// both and every driver of CUDA 12 and later loads it, so the PTX of a kernel is the same text
// for every architecture but its .target line.
constexpr const char* kPtxFeatures = "+ptx78";

const llvm::Target& nvptx_target() {
    static const llvm::Target* t = [] {
        LLVMInitializeNVPTXTargetInfo();
        LLVMInitializeNVPTXTarget();
        LLVMInitializeNVPTXTargetMC();
        LLVMInitializeNVPTXAsmPrinter();
        std::string err;
        const llvm::Target* target = llvm::TargetRegistry::lookupTarget("nvptx64-nvidia-cuda", err);
        SJ_CHECK(target, Error) << "cuda backend: this LLVM has no NVPTX target: " << err;
        return target;
    }();
    return *t;
}

/// libdevice's bitcode, read once (each compile parses its own copy into its context).
const llvm::MemoryBuffer& libdevice_bitcode() {
    static std::unique_ptr<llvm::MemoryBuffer> buf = [] {
        std::string path = libdevice_path();
        auto b = llvm::MemoryBuffer::getFile(path);
        SJ_CHECK(b, Error) << "cuda backend: cannot read libdevice (" << path
                           << "): " << b.getError().message() << "; set SJ_LIBDEVICE to its path";
        return std::move(*b);
    }();
    return *buf;
}

void link_libdevice(llvm::Module& mod) {
    bool needed = false;
    for (const llvm::Function& f : mod)
        needed |= f.isDeclaration() && f.getName().starts_with("__nv_");
    if (!needed)
        return;
    auto lib = llvm::parseBitcodeFile(libdevice_bitcode().getMemBufferRef(), mod.getContext());
    SJ_CHECK(lib, Error) << "cuda backend: libdevice (" << libdevice_path()
                         << ") is not valid bitcode: " << llvm::toString(lib.takeError());
    (*lib)->setTargetTriple(mod.getTargetTriple());
    (*lib)->setDataLayout(mod.getDataLayout());
    SJ_CHECK(!llvm::Linker::linkModules(mod, std::move(*lib), llvm::Linker::LinkOnlyNeeded), Error)
        << "cuda backend: linking libdevice failed";
    // only the kernel is an entry point: the library's functions may be inlined and dropped
    llvm::internalizeModule(
        mod, [](const llvm::GlobalValue& g) { return g.getName() == kKernelSymbol; });
}

} // namespace

// Note [PTX cache]
// Rendering a kernel, linking libdevice and running LLVM's O3 and NVPTX code generation is the
// slow part of loading a GPU kernel (the driver's own ptxas step is cached by the driver, in
// ~/.nv/ComputeCache, keyed by the PTX text). So the PTX is kept in the cpu backend's disk
// kernel cache, in entries of the same format (src/backend/llvm/KernelCache.h: atomic writes,
// bounded and checked reads, every failure a logged miss). The key holds everything the PTX
// depends on: the kernel (GpuKernel::str, which the device's in-memory table also keys by), the
// architecture, LLVM's version, the PTX features, libdevice's path and size, and a hash of the
// GPU code generator's source (SJ_GPU_CODEGEN_HASH, computed by CMake), so an edit to the
// renderer or a new toolkit never reads an old entry. Schema 2: GpuKernel::str names the phase
// and chunk count of a split reduction (schema 1 entries could hold another phase's code).
std::string cached_ptx(const GpuKernel& k, int sm, PtxCacheStats* stats) {
    PtxCacheStats local;
    PtxCacheStats& st = stats ? *stats : local;
    const std::string dir = codegen::cache_dir();
    if (dir.empty()) { // SJ_CACHE_DIR=off: no key to build, no file to look at
        ++st.compiles;
        return compile_ptx(k, sm);
    }
    const std::string libdevice = libdevice_path();
    std::error_code ec;
    const auto libdevice_bytes = std::filesystem::file_size(libdevice, ec);
    const std::string key =
        "cuda-ptx schema=2 llvm=" LLVM_VERSION_STRING " sm=" + std::to_string(sm) +
        " features=" + kPtxFeatures + " libdevice=" + libdevice + ":" +
        std::to_string(ec ? 0 : libdevice_bytes) + " codegen=" SJ_GPU_CODEGEN_HASH "\n" + k.str();
    const std::string path = dir + "/ptx-sm" + std::to_string(sm) + "-" +
                             codegen::hex64(codegen::cache_checksum(key)) + ".sjk";
    bool present = false;
    std::string ptx = codegen::read_cache_entry(path, key, &present);
    if (!ptx.empty()) {
        ++st.disk_hits;
        return ptx;
    }
    st.disk_rejects += present;
    ptx = compile_ptx(k, sm);
    ++st.compiles;
    st.disk_writes += codegen::write_cache_entry(dir, path, key, ptx);
    return ptx;
}

std::string compile_ptx(const GpuKernel& k, int sm) {
    SJ_CHECK(sm >= 50 && sm < 1000, Error) << "cuda backend: no such architecture sm_" << sm;
    const llvm::Target& target = nvptx_target();
    static std::mutex mu; // the target machine and the pass pipeline are per call; LLVM's
    std::lock_guard<std::mutex> lock(mu); // global option state is not
    llvm::TargetOptions opts;
    std::unique_ptr<llvm::TargetMachine> tm(target.createTargetMachine(
        "nvptx64-nvidia-cuda", "sm_" + std::to_string(sm), kPtxFeatures, opts, std::nullopt,
        std::nullopt, llvm::CodeGenOptLevel::Aggressive));
    SJ_CHECK(tm, Error) << "cuda backend: LLVM cannot target sm_" << sm;
    llvm::LLVMContext ctx;
    auto mod = render_gpu_module(k, GpuCode::Nvptx, ctx);
    mod->setDataLayout(tm->createDataLayout());
    // libdevice reads these flags through __nvvm_reflect: no flush of denormals (the cpu's and
    // the reference's semantics), precise division and square roots
    mod->addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t(0));
    link_libdevice(*mod);
    codegen::optimise(*mod, tm.get(), llvm::OptimizationLevel::O3);
    return codegen::emit_code(*mod, *tm, llvm::CodeGenFileType::AssemblyFile);
}

} // namespace sj::cuda
