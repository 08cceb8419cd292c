// The host emulator: a Device that runs the cuda backend's kernels on the cpu.
#include "Emulator.h"

#include "../llvm/Unloading.h"
#include "Device.h"
#include "NvptxRenderer.h"

#include <symjax/Error.h>

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/Support/TargetSelect.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include <ucontext.h>

namespace sj::cuda {

// Note [The emulator]
// Without a GPU, the cuda backend's runner and kernels would be checked by nothing but ptxas,
// which says whether PTX is well formed, not whether it computes the right thing. The emulator
// is a Device whose memory is host memory and whose kernels are the same LLVM IR as the PTX
// (render_gpu_module with GpuCode::Host: the special registers, the barrier and shared memory
// come from an EmuContext argument instead of NVPTX intrinsics; nothing else differs), JIT-
// compiled for the host. A launch runs every thread of every block of the grid:
//  - a Points kernel has no barrier, so its threads run one after another;
//  - a Blocks kernel's threads meet at barriers, so each runs on a fiber of its own (ucontext)
//    and a barrier switches to the next thread; a block proceeds in rounds, each running every
//    thread up to its next barrier. A round in which some threads reach a barrier and others
//    finish is a divergent barrier, a bug on a GPU (a hang or undefined behaviour), and the
//    emulator reports it.
// The thread map, the grid-stride loops, the block's tree and the runner's buffer tables and
// params are therefore all exercised by the op harness on machines without a GPU
// (SJ_CUDA_DEVICE=emulator). What it cannot check: the hardware's memory model (threads run
// one at a time, so a missing barrier that a GPU would need can go unnoticed), timing, and the
// driver and library calls themselves. Its limits are small (64 threads a block, 32 blocks) so
// that grid-stride loops go round several times even on test-sized shapes; "emulator-h200" takes
// an H200's limits instead, so that every launch (grid, block width, split chunks) is the one
// the GPU gets.
// With $SJ_CUDA_CHECK_PTX (say "80,90"), every kernel it loads is also compiled to PTX for those
// architectures and assembled by ptxas, so one run of the op harness on the emulator checks
// both what each kernel computes and that a GPU's toolchain accepts it.

namespace {

using HostKernelFn = void (*)(const void* bufs, const void* params, EmuContext* ctx);

/// The emulator's JIT and the kernels it has loaded, shared with the kernels it hands out: a
/// kernel's code is unloaded when its last user goes and it is not among the `recent` kernels
/// used last, as the cpu backend's are (Note [Unloading kernels] in src/backend/cpu/Jit.cpp; a
/// fuzzing campaign of 20,000 graphs in one process reached the system's limit on memory
/// mappings at 36,307 kernels, all kept). The recent ones save the op harness rendering, JIT
/// compiling and assembling a kernel again for each test that makes the same one: 2048 of them,
/// or $SJ_EMU_KEEP_KERNELS (read when the device is made; tests set 0).
struct EmuCode {
    std::mutex mu; // guards everything below
    std::unique_ptr<llvm::orc::LLJIT> jit;
    struct Entry {
        std::weak_ptr<struct EmuKernel> kernel;
        uint64_t id = 0;
    };
    std::unordered_map<std::string, Entry> kernels;                     // by GpuKernel::str
    std::unordered_map<uint64_t, llvm::orc::ResourceTrackerSP> modules; // the loaded ones
    uint64_t next = 0; // module numbers, never reused (symbols are named by them)
    codegen::RecentHolds<std::shared_ptr<struct EmuKernel>> recent{2048}; // by module number

    /// Unloads module `id` if it is loaded (mu held).
    void unload(uint64_t id) {
        auto it = modules.find(id);
        if (it == modules.end())
            return;
        llvm::orc::ResourceTrackerSP t = std::move(it->second);
        modules.erase(it);
        codegen::remove_tracker(t, "cuda emulator");
    }
};

struct EmuKernel final : DeviceKernel {
    HostKernelFn fn = nullptr;
    ThreadMap map = ThreadMap::Points;
    int block = 0;
    int64_t shared = 0;
    std::shared_ptr<EmuCode> code;
    uint64_t id = 0;
    ~EmuKernel() override {
        std::lock_guard<std::mutex> lock(code->mu);
        code->unload(id); // (already done when load() found this kernel gone)
    }
};

/// One emulated thread of a Blocks kernel on its own stack.
struct Fiber {
    ucontext_t uc{};
    EmuContext ctx;
    bool at_barrier = false, done = false;
};

struct BlockRun {
    ucontext_t scheduler{};
    std::vector<Fiber> fibers;
    HostKernelFn fn = nullptr;
    const void* bufs = nullptr;
    const void* params = nullptr;
    Fiber* current = nullptr;
};

thread_local BlockRun* t_run = nullptr;

void fiber_barrier(EmuContext*) {
    BlockRun& r = *t_run;
    Fiber* f = r.current;
    f->at_barrier = true;
    swapcontext(&f->uc, &r.scheduler);
}

void fiber_main() {
    BlockRun& r = *t_run;
    Fiber* f = r.current;
    r.fn(r.bufs, r.params, &f->ctx);
    f->done = true;
    // returning switches to uc_link (the scheduler)
}

constexpr size_t kFiberStack = 256 * 1024;

/// The architectures of $SJ_CUDA_CHECK_PTX ("80,90"), empty when unset.
std::vector<int> ptx_check_archs() {
    std::vector<int> sms;
    const char* e = std::getenv("SJ_CUDA_CHECK_PTX");
    if (!e || !*e)
        return sms;
    std::stringstream ss(e);
    for (std::string item; std::getline(ss, item, ',');) {
        char* end = nullptr;
        long sm = std::strtol(item.c_str(), &end, 10);
        SJ_CHECK(end && *end == 0 && sm >= 50 && sm < 1000, InputError)
            << "SJ_CUDA_CHECK_PTX: '" << item << "' is not an architecture (say 80,90)";
        sms.push_back(int(sm));
    }
    return sms;
}

class Emulator final : public Device {
public:
    /// h200: an H200's launch limits (DeviceLimits' defaults) instead of the small ones, so that
    /// choose_launch picks the grids, block widths and split-reduction chunk counts it picks on
    /// that GPU (SJ_CUDA_DEVICE=emulator-h200; slower: every one of those threads runs here).
    explicit Emulator(bool h200) {
        info_.name = h200 ? "emulator-h200" : "emulator";
        info_.sm = 0;
        if (!h200) {
            info_.limits.multiprocessors = 1;
            info_.limits.max_threads_per_block = 64;
        }
        info_.memory = int64_t(1) << 34;
        if (const char* e = std::getenv("SJ_EMU_KEEP_KERNELS"); e && *e) {
            std::vector<std::shared_ptr<EmuKernel>> none; // (nothing is held yet)
            code_->recent.resize(size_t(std::strtoull(e, nullptr, 10)), none);
        }
        llvm::InitializeNativeTarget();
        llvm::InitializeNativeTargetAsmPrinter();
        auto j = llvm::orc::LLJITBuilder().create();
        SJ_CHECK(j, Error) << "cuda emulator: cannot start the LLVM JIT: "
                           << llvm::toString(j.takeError());
        code_->jit = std::move(*j);
        auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
            code_->jit->getDataLayout().getGlobalPrefix());
        SJ_CHECK(gen, Error) << "cuda emulator: " << llvm::toString(gen.takeError());
        code_->jit->getMainJITDylib().addGenerator(std::move(*gen));
    }
    ~Emulator() override {
        { // the recent kernels hold code_, which holds them: the cycle is broken here
            std::vector<std::shared_ptr<EmuKernel>> released; // destroyed after the lock
            std::lock_guard<std::mutex> lock(code_->mu);
            code_->recent.clear(released);
        }
        for (auto& [p, b] : live_)
            std::free(reinterpret_cast<void*>(p - kGuard));
    }

    const DeviceInfo& info() const override { return info_; }

    // Note [Emulator guards]
    // A GPU's caching allocator hands out blocks that hold whatever their last owner left, side
    // by side in one address space; host memory from aligned_alloc is often fresh zeros with
    // the malloc heap around it. So a kernel that relies on zeroed memory, or writes past its
    // buffer, can pass here and fail on a GPU (a split reduction given another launch's chunk
    // count did, on an H200). The emulator therefore fills each new buffer with 0xff bytes (NaN
    // as a float, -1 as an integer) and surrounds it with guard bytes: kGuard (4 KiB) before, and
    // after it up to kGuard past its 256-byte rounding. A buffer's guards are checked when it is
    // freed and, if it was made since the last synchronize(), at the next one (the runner never
    // writes an older buffer: no in-place updates on cuda); a broken guard makes synchronize()
    // throw, naming the buffer's size and the first byte written out of bounds. A write that
    // lands further away still reaches the host heap (the H200 emulator with the old cache key
    // shows such a one as heap corruption).
    static constexpr size_t kGuard = 4096;
    static constexpr unsigned char kGuardByte = 0xa5;

    /// A buffer's bytes rounded up to 256, as a GPU allocator's alignment would.
    static size_t rounded(size_t bytes) { return (std::max<size_t>(bytes, 1) + 255) / 256 * 256; }

    DevicePtr alloc(size_t bytes) override {
        const size_t n = rounded(bytes);
        auto* base = static_cast<unsigned char*>(std::aligned_alloc(256, n + 2 * kGuard));
        SJ_CHECK(base, Error) << "cuda emulator: out of memory allocating " << bytes << " bytes";
        std::memset(base, kGuardByte, kGuard);
        std::memset(base + kGuard, 0xff, bytes);
        std::memset(base + kGuard + bytes, kGuardByte, n - bytes + kGuard);
        const DevicePtr p = DevicePtr(base + kGuard);
        std::lock_guard<std::mutex> lock(mu_);
        live_[p] = bytes;
        fresh_.push_back(p);
        return p;
    }
    void free(DevicePtr p) override {
        if (!p)
            return;
        std::lock_guard<std::mutex> lock(mu_);
        auto it = live_.find(p);
        SJ_CHECK(it != live_.end(), InternalError)
            << "cuda emulator: free of an address it did not allocate";
        if (broken_.empty())
            broken_ = check_guards(p, it->second);
        live_.erase(it);
        std::free(reinterpret_cast<void*>(p - kGuard));
    }
    void upload(DevicePtr dst, const void* src, size_t bytes) override {
        if (bytes)
            std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
    }
    void download(void* dst, DevicePtr src, size_t bytes) override {
        if (bytes)
            std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    }
    void copy(DevicePtr dst, DevicePtr src, size_t bytes) override {
        if (bytes)
            std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    }
    void synchronize() override {
        std::lock_guard<std::mutex> lock(mu_);
        // the buffers made since the last synchronize: a call's outputs, scratch and uploads are
        // all new ones (the cuda runner writes no older buffer), and freed ones were checked
        for (DevicePtr p : fresh_)
            if (auto it = live_.find(p); it != live_.end() && broken_.empty())
                broken_ = check_guards(p, it->second);
        fresh_.clear();
        if (!broken_.empty()) {
            std::string m = std::move(broken_);
            broken_.clear();
            SJ_THROW(InternalError) << m;
        }
    }

    std::shared_ptr<DeviceKernel> load(const GpuKernel& k) override {
        EmuCode& c = *code_;
        std::vector<std::shared_ptr<EmuKernel>> released; // destroyed after the lock
        std::lock_guard<std::mutex> lock(c.mu);
        std::string key = k.str();
        if (auto it = c.kernels.find(key); it != c.kernels.end()) {
            if (auto e = it->second.kernel.lock()) {
                c.recent.use(e->id, e, released);
                return e;
            }
            c.unload(it->second.id); // its last user went; its destructor waits for mu
        }
        for (int sm : check_archs_)
            if (std::string rejected = assemble_ptx(compile_ptx(k, sm), sm); !rejected.empty())
                SJ_THROW(Error) << "SJ_CUDA_CHECK_PTX: " << rejected << "\nkernel: " << key;
        auto ctx = std::make_unique<llvm::LLVMContext>();
        auto mod = render_gpu_module(k, GpuCode::Host, *ctx);
        const uint64_t id = ++c.next;
        std::string sym = "sj_emu_kernel_" + std::to_string(id);
        mod->getFunction(kKernelSymbol)->setName(sym);
        mod->setDataLayout(c.jit->getDataLayout());
        mod->setTargetTriple(c.jit->getTargetTriple().str());
        auto tracker = c.jit->getMainJITDylib().createResourceTracker();
        c.modules[id] = tracker;
        auto err = c.jit->addIRModule(tracker,
                                      llvm::orc::ThreadSafeModule(std::move(mod), std::move(ctx)));
        auto addr =
            err ? llvm::Expected<llvm::orc::ExecutorAddr>(std::move(err)) : c.jit->lookup(sym);
        if (!addr) { // what the failure added goes too
            std::string why = llvm::toString(addr.takeError());
            c.unload(id);
            SJ_THROW(Error) << "cuda emulator: " << why;
        }
        auto e = std::make_shared<EmuKernel>();
        e->fn = addr->toPtr<HostKernelFn>();
        e->map = k.map;
        e->block = k.block;
        e->shared = shared_bytes(k);
        e->code = code_;
        e->id = id;
        c.kernels[key] = {e, id};
        c.recent.use(e->id, e, released);
        return e;
    }

    void launch(const DeviceKernel& dk, int64_t grid, int block, DevicePtr bufs,
                DevicePtr params) override {
        const auto& k = static_cast<const EmuKernel&>(dk);
        SJ_CHECK(grid >= 1 && block >= 1 && block <= info_.limits.max_threads_per_block,
                 InternalError)
            << "cuda emulator: launch of " << grid << " blocks of " << block << " threads";
        SJ_CHECK(k.map == ThreadMap::Points || block == k.block, InternalError)
            << "cuda emulator: a Blocks kernel written for " << k.block << " threads launched with "
            << block;
        const void* b = reinterpret_cast<const void*>(bufs);
        const void* p = reinterpret_cast<const void*>(params);
        if (k.map == ThreadMap::Points) {
            EmuContext c;
            c.ntid = block;
            c.nctaid = grid;
            for (c.ctaid = 0; c.ctaid < grid; ++c.ctaid)
                for (c.tid = 0; c.tid < block; ++c.tid)
                    k.fn(b, p, &c);
            return;
        }
        std::vector<uint64_t> shared(size_t(k.shared + 7) / 8);
        // one stack per thread of a block, reused by every block of the launch (uninitialised:
        // a fiber writes its stack before it reads it)
        std::unique_ptr<char[]> stacks(new char[size_t(block) * kFiberStack]);
        for (int64_t blk = 0; blk < grid; ++blk)
            run_block(k, blk, grid, block, b, p, shared.data(), stacks.get());
    }

    /// The reference kernels on host memory: what cuDNN computes on a GPU, so that the runner's
    /// window path is tested here (Note [Window ops on cuDNN] in WindowCall.cpp).
    void window(const WindowCall& c, DevicePtr a, DevicePtr b, DevicePtr out) override {
        run_window_on_host(c, reinterpret_cast<const float*>(a), reinterpret_cast<const float*>(b),
                           reinterpret_cast<float*>(out));
    }

    void gemm(const GemmArgs& g) override {
        SJ_CHECK(g.dtype == DType::F32 || g.dtype == DType::F64, InternalError)
            << "cuda emulator: gemm of " << dtype_name(g.dtype);
        if (g.dtype == DType::F32)
            gemm_typed<float>(g);
        else
            gemm_typed<double>(g);
    }

private:
    DeviceInfo info_;
    std::vector<int> check_archs_ = ptx_check_archs();
    std::shared_ptr<EmuCode> code_ = std::make_shared<EmuCode>();
    std::mutex mu_;                              // guards the buffers below
    std::unordered_map<DevicePtr, size_t> live_; // buffer -> the bytes asked for
    std::vector<DevicePtr> fresh_;               // allocated since the last synchronize()
    /// The first broken guard found and not yet reported (Note [Emulator guards]).
    std::string broken_;

    /// "" when the guards around buffer p of `bytes` bytes are intact; else what broke them
    /// (and the guards are rewritten, so that one stray write is reported once).
    static std::string check_guards(DevicePtr p, size_t bytes) {
        const size_t n = rounded(bytes);
        auto* base = reinterpret_cast<unsigned char*>(p - kGuard);
        auto first_bad = [](const unsigned char* a, size_t len) -> int64_t {
            for (size_t i = 0; i < len; ++i)
                if (a[i] != kGuardByte)
                    return int64_t(i);
            return -1;
        };
        std::ostringstream os;
        if (int64_t i = first_bad(base, kGuard); i >= 0)
            os << "cuda emulator: a kernel or copy wrote before the start of a device buffer of "
               << bytes << " bytes (" << kGuard - size_t(i) << " bytes before it)";
        else if (int64_t j = first_bad(base + kGuard + bytes, n - bytes + kGuard); j >= 0)
            os << "cuda emulator: a kernel or copy wrote past the end of a device buffer of "
               << bytes << " bytes (at byte " << bytes + size_t(j) << ")";
        if (os.tellp() > 0) { // (intact guards need no rewrite)
            std::memset(base, kGuardByte, kGuard);
            std::memset(base + kGuard + bytes, kGuardByte, n - bytes + kGuard);
        }
        return os.str();
    }

    void run_block(const EmuKernel& k, int64_t blk, int64_t grid, int block, const void* bufs,
                   const void* params, void* shared, char* stacks) {
        BlockRun r;
        r.fn = k.fn;
        r.bufs = bufs;
        r.params = params;
        r.fibers.resize(size_t(block));
        for (int t = 0; t < block; ++t) {
            Fiber& f = r.fibers[size_t(t)];
            f.ctx.tid = t;
            f.ctx.ctaid = blk;
            f.ctx.ntid = block;
            f.ctx.nctaid = grid;
            f.ctx.shared = shared;
            f.ctx.barrier = fiber_barrier;
            getcontext(&f.uc);
            f.uc.uc_stack.ss_sp = stacks + size_t(t) * kFiberStack;
            f.uc.uc_stack.ss_size = kFiberStack;
            f.uc.uc_link = &r.scheduler;
            makecontext(&f.uc, fiber_main, 0);
        }
        BlockRun* saved = t_run;
        t_run = &r;
        bool all_done = false;
        std::string divergent;
        while (!all_done) {
            int at_barrier = 0, done = 0;
            for (Fiber& f : r.fibers) {
                if (f.done) {
                    ++done;
                    continue;
                }
                f.at_barrier = false;
                r.current = &f;
                swapcontext(&r.scheduler, &f.uc);
                (f.at_barrier ? at_barrier : done) += 1;
            }
            all_done = done == block;
            if (!all_done && at_barrier != block) {
                divergent = std::to_string(at_barrier) + " of " + std::to_string(block) +
                            " threads at a barrier, the others finished";
                break;
            }
        }
        t_run = saved;
        SJ_CHECK(divergent.empty(), InternalError)
            << "cuda emulator: divergent barrier in block " << blk << ": " << divergent;
    }

    template <class T> void gemm_typed(const GemmArgs& g) {
        for (int64_t i = 0; i < g.batch; ++i) {
            const T* a = reinterpret_cast<const T*>(g.a) + i * g.stride_a;
            const T* b = reinterpret_cast<const T*>(g.b) + i * g.stride_b;
            T* c = reinterpret_cast<T*>(g.c) + i * g.stride_c;
            for (int64_t col = 0; col < g.n; ++col)
                for (int64_t row = 0; row < g.m; ++row) {
                    double s = 0;
                    for (int64_t l = 0; l < g.k; ++l) {
                        double x = g.trans_a ? a[l + row * g.lda] : a[row + l * g.lda];
                        double y = g.trans_b ? b[col + l * g.ldb] : b[l + col * g.ldb];
                        s += x * y;
                    }
                    T& out = c[row + col * g.ldc];
                    out = T(g.alpha * s + (g.beta == 0 ? 0.0 : g.beta * double(out)));
                }
        }
    }
};

} // namespace

std::shared_ptr<Device> make_emulator() {
    static std::shared_ptr<Device> d = std::make_shared<Emulator>(false);
    return d;
}
std::shared_ptr<Device> make_emulator_h200() {
    static std::shared_ptr<Device> d = std::make_shared<Emulator>(true);
    return d;
}

} // namespace sj::cuda
