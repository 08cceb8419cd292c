// ORC LLJIT wrapper: optimise for the host CPU, emit an object file, cache it in memory and on
// disk (atomic writes, validated reads), and hand out function pointers.
//
// Note [One object per function]
// A function's kernels (those not already loaded in this process) are rendered into one LLVM
// module, optimised and compiled once, cached on disk as one entry and linked as one object.
// Loading a cached MLP training step was 16 file reads, 16 JITLink graphs, 16 memory mappings
// (each an mmap + mprotect, which flush TLBs: slow on a VM) and 16 symbol lookups; now it is
// one of each, and a cold compile runs the pass pipelines and the code generator once. The
// disk entry's key is every member's full key (with its symbol) after the common prefix, so a
// different set of kernels is a different entry; within a process each kernel is shared by
// every function through the in-memory map.
//
// Note [Unloading kernels]
// Each object is linked under its own ORC resource tracker, and get_kernels hands its callers a
// hold (a shared_ptr) on every object whose code it returns, a memory hit's included. When the
// last hold on an object goes (the last compiled function using any of its kernels), its code
// is unloaded and its kernels leave the in-memory map; a later function that needs them loads
// them again, from the disk cache as a rule. Objects used to stay for the life of the process:
// each is two or three memory mappings, and Linux allows a process 65,530 (vm.max_map_count),
// so a process that compiled some 25,000 functions with new kernels (a long fuzzing campaign on
// the cuda emulator, whose kernels were kept the same way, reached it at 36,307 kernels) could
// load no more: "Cannot allocate memory", then "Duplicate definition" for every kernel of the
// failed object, since its symbols stayed defined. A failed load now unloads what it added.
// Objects are named by a counter, not by their tracker's address: an object unloaded on the
// get_kernels side (its last hold gone, its destructor waiting for the lock) frees an address
// the next tracker may get. The process itself holds the kRecentObjects objects it used last
// (retain_recent_objects changes the count): a function dropped and made again, as tests and
// notebooks do, finds its code loaded instead of reading it from disk (or compiling it, with
// the disk cache off), and the mappings stay bounded.
#include "Jit.h"
#include "../llvm/KernelCache.h"
#include "../llvm/Unloading.h"

#include "../../core/Debug.h"
#include "../../core/Hash.h"
#include "../llvm/KernelExpr.h"
#include "LlvmRenderer.h"

#include <symjax/Error.h>

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace sj::cpu {

using codegen::cache_checksum;
using codegen::cache_dir;
using codegen::hex64;
using codegen::kCacheSchema;
using codegen::read_cache_entry;
using codegen::write_cache_entry;

namespace {

/// LLVM's target for this process (initialised on first use); sets `triple` to its triple.
const llvm::Target& native_target(std::string& triple) {
    llvm::InitializeNativeTarget();
    triple = llvm::sys::getProcessTriple();
    std::string err;
    const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, err);
    SJ_CHECK(target, Error) << "cpu backend: no LLVM target for " << triple << ": " << err;
    return *target;
}

/// How many of the objects used last the process keeps loaded (Note [Unloading kernels]).
constexpr size_t kRecentObjects = 512;

/// What a hold keeps loaded (Note [Unloading kernels]): one object, by its number.
struct CodeObject {
    uint64_t id;
    explicit CodeObject(uint64_t i) : id(i) {}
    CodeObject(const CodeObject&) = delete;
    CodeObject& operator=(const CodeObject&) = delete;
    ~CodeObject();
};

/// A kernel in the in-memory map: its code, and the object it lives in.
struct Loaded {
    KernelFn fn = nullptr;
    uint64_t object = 0;
    std::weak_ptr<const CodeObject> hold;
};

struct Jit {
    std::mutex mu;
    std::unique_ptr<llvm::orc::LLJIT> jit;
    std::unique_ptr<llvm::TargetMachine> tm;
    std::string cpu, features, key_prefix;
    std::unordered_map<std::string, Loaded> memory;
    struct Object {
        llvm::orc::ResourceTrackerSP tracker;
        std::vector<std::string> keys; // its kernels' keys in `memory`
    };
    std::unordered_map<uint64_t, Object> objects; // the loaded ones
    uint64_t next_object = 0;
    codegen::RecentHolds<KernelHold> recent{kRecentObjects}; // the objects used last
    KernelCacheStats stats; // guarded by mu (so are memory, objects, next_object and recent)

    /// Unloads object `id` if it is loaded (mu held): its kernels leave `memory` and its code
    /// the process.
    void unload(uint64_t id) {
        auto it = objects.find(id);
        if (it == objects.end())
            return;
        for (const auto& k : it->second.keys)
            memory.erase(k);
        llvm::orc::ResourceTrackerSP t = std::move(it->second.tracker);
        objects.erase(it);
        codegen::remove_tracker(t, "cpu backend");
        ++stats.objects_unloaded;
    }

    static Jit& get() {
        static Jit* j = new Jit; // never destroyed: kernels may run during static teardown
        return *j;
    }

    Jit() {
        auto t0 = std::chrono::steady_clock::now();
        std::string triple;
        const llvm::Target* target = &native_target(triple);
        llvm::InitializeNativeTargetAsmPrinter();
        cpu = llvm::sys::getHostCPUName().str();
        llvm::SubtargetFeatures f;
        for (const auto& [name, on] : llvm::sys::getHostCPUFeatures()) f.AddFeature(name, on);
        features = f.getString();
        if (const char* e = std::getenv("SJ_JIT_CPU"); e && *e) {
            check_jit_cpu(e); // Note [Kernels for an older CPU]
            cpu = e;
            features.clear(); // the named CPU's own
        }
        llvm::TargetOptions opts;
        tm.reset(target->createTargetMachine(triple, cpu, features, opts, llvm::Reloc::PIC_, std::nullopt,
                                             llvm::CodeGenOptLevel::Aggressive));
        auto j = llvm::orc::LLJITBuilder().create();
        SJ_CHECK(j, Error) << "cpu backend: cannot start the LLVM JIT: " << llvm::toString(j.takeError());
        jit = std::move(*j);
        auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
            jit->getDataLayout().getGlobalPrefix());
        SJ_CHECK(gen, Error) << "cpu backend: " << llvm::toString(gen.takeError());
        jit->getMainJITDylib().addGenerator(std::move(*gen));
        std::ostringstream k;
        k << "schema=" << kCacheSchema << " llvm=" << LLVM_VERSION_STRING << " triple=" << triple
          << " cpu=" << cpu << " features=" << features << " opt=O3 codegen=" << SJ_CODEGEN_HASH
          << "\n";
        key_prefix = k.str();
        if (detail::debug_level() >= 1)
            std::fprintf(stderr, "[symjax] LLVM JIT started in %.1f ms\n",
                         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }

    std::unique_ptr<llvm::Module> optimised_module(const std::vector<const compiler::KernelSpec*>& specs,
                                                   const std::vector<std::string>& syms, llvm::LLVMContext& ctx) {
        auto mod = std::make_unique<llvm::Module>(syms[0], ctx);
        for (size_t i = 0; i < specs.size(); ++i) render_kernel(*specs[i], syms[i], *mod);
        mod->setDataLayout(tm->createDataLayout());
        mod->setTargetTriple(tm->getTargetTriple().str());
        std::string verr;
        llvm::raw_string_ostream vos(verr);
        SJ_ASSERT(!llvm::verifyModule(*mod, &vos)) << "cpu codegen produced invalid IR: " << verr;
        llvm::PipelineTuningOptions pto;
        pto.LoopVectorization = true;
        pto.SLPVectorization = true;
        codegen::optimise(*mod, tm.get(), llvm::OptimizationLevel::O3, pto);
        return mod;
    }

    std::string compile_object(const std::vector<const compiler::KernelSpec*>& specs,
                               const std::vector<std::string>& syms) {
        llvm::LLVMContext ctx;
        auto mod = optimised_module(specs, syms, ctx);
        return codegen::emit_code(*mod, *tm, llvm::CodeGenFileType::ObjectFile);
    }
};

CodeObject::~CodeObject() {
    Jit& j = Jit::get();
    std::lock_guard<std::mutex> lock(j.mu);
    j.unload(id); // (already done when get_kernels found this object's last hold gone)
}

} // namespace

// Note [Kernels for an older CPU]
// SJ_JIT_CPU=<LLVM CPU name> (x86-64-v3: AVX2 and FMA; x86-64-v2: SSE4.2; haswell, ...) compiles
// the generated kernels for that CPU instead of the host: the same kernel code on every machine
// of a cluster whose CPUs differ (an AVX-512 host's kernels otherwise keep 16-lane partial sums
// where an AVX2 host's keep 8), and the narrower vector code tested on a wider machine (the
// ctest entry jit_cpu_x86_64_v2). Every ISA feature the named CPU implies must be on the host,
// or its kernels would stop on an illegal instruction. The check compares against the host's
// detected features only: a CPU's tuning flags (macro-fusion, slow LEA) are not ISA. The kernel
// cache keys on the CPU name, so entries never mix. Only the generated kernels follow it: the
// convolutions' channel blocks follow SJ_BLOCKED_LAYOUT, and oneDNN picks its own code
// (ONEDNN_MAX_CPU_ISA limits it).
void check_jit_cpu(const std::string& name, const std::vector<std::string>& absent) {
    std::string triple;
    const llvm::Target* target = &native_target(triple);
    // asked of a generic subtarget first: LLVM warns on stderr when made for an unknown CPU
    std::unique_ptr<llvm::MCSubtargetInfo> generic(
        target->createMCSubtargetInfo(triple, "generic", ""));
    SJ_CHECK(generic && generic->isCPUStringValid(name), InputError)
        << "SJ_JIT_CPU=" << name << ": LLVM " << LLVM_VERSION_STRING << " knows no such CPU for "
        << triple << " (x86-64-v2, x86-64-v3, x86-64-v4, haswell, skylake-avx512, znver3, ...)";
    std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(triple, name, ""));
    llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
    for (const std::string& a : absent)
        host[a] = false;
    std::string missing;
    for (const llvm::SubtargetFeatureKV& kv : sti->getAllProcessorFeatures()) {
        auto it = host.find(kv.Key);
        if (sti->getFeatureBits().test(kv.Value) && it != host.end() && !it->second)
            missing += std::string(missing.empty() ? "" : ", ") + kv.Key;
    }
    SJ_CHECK(missing.empty(), InputError)
        << "SJ_JIT_CPU=" << name << " needs " << missing << ", which this CPU ("
        << llvm::sys::getHostCPUName().str() << ") does not have";
}

std::string host_cpu_description() {
    Jit& j = Jit::get();
    return j.cpu + " " + j.features;
}

std::vector<KernelFn> get_kernels(const std::vector<const compiler::KernelSpec*>& specs,
                                  std::vector<KernelHold>& holds, CompileInfo* info) {
    auto t0 = std::chrono::steady_clock::now();
    Jit& j = Jit::get();
    std::vector<std::string> keys;
    for (const auto* spec : specs) keys.push_back(spec->str());
    std::vector<KernelFn> fns(specs.size(), nullptr);
    CompileInfo ci;
    ci.kernels = specs.size();
    std::vector<KernelHold> released; // destroyed after the lock (codegen::RecentHolds)
    std::lock_guard<std::mutex> lock(j.mu);
    // the kernels not loaded yet (each once), in order, with their cache keys and symbols
    std::vector<const compiler::KernelSpec*> todo;
    std::vector<std::string> todo_keys, syms;
    std::unordered_set<std::string> queued;
    std::string bundle_key = j.key_prefix;
    std::vector<std::string> full(specs.size()); // in-memory cache keys
    std::unordered_set<uint64_t> held;           // the objects put in `holds`
    for (size_t i = 0; i < specs.size(); ++i) {
        full[i] = j.key_prefix + keys[i];
        if (auto it = j.memory.find(full[i]); it != j.memory.end()) {
            if (auto hold = it->second.hold.lock()) {
                fns[i] = it->second.fn;
                if (held.insert(it->second.object).second) {
                    j.recent.use(it->second.object, hold, released);
                    holds.push_back(std::move(hold));
                }
                ++ci.memory_hits;
                ++j.stats.memory_hits;
                continue;
            }
            j.unload(it->second.object); // its last hold went; its destructor waits for mu
        }
        if (!queued.insert(full[i]).second) continue;
        todo.push_back(specs[i]);
        todo_keys.push_back(full[i]);
        syms.push_back("sjk_" + hex64(cache_checksum(full[i])));
        bundle_key += "kernel " + syms.back() + "\n" + keys[i];
    }
    if (!todo.empty()) {
        uint64_t h = cache_checksum(bundle_key);
        std::string dir = cache_dir();
        std::string path = dir.empty() ? "" : dir + "/" + hex64(h) + ".sjk";
        bool present = false;
        std::string obj = path.empty() ? "" : read_cache_entry(path, bundle_key, &present);
        bool disk_hit = !obj.empty();
        if (disk_hit) {
            j.stats.disk_hits += int64_t(todo.size());
        } else {
            j.stats.disk_rejects += present;
            obj = j.compile_object(todo, syms);
            j.stats.compiles += int64_t(todo.size());
            if (!path.empty())
                j.stats.disk_writes += write_cache_entry(dir, path, bundle_key, obj);
        }
        // (Note [Unloading kernels]) linked under a tracker of its own; what a failure added
        // is unloaded before the error leaves
        const uint64_t id = ++j.next_object;
        auto tracker = j.jit->getMainJITDylib().createResourceTracker();
        j.objects[id] = {tracker, todo_keys};
        auto fail = [&](const std::string& what, llvm::Error err) {
            std::string why = llvm::toString(std::move(err));
            j.unload(id);
            const bool mappings = why.find("Cannot allocate memory") != std::string::npos;
            SJ_THROW(Error) << "cpu backend: " << what << ": " << why
                            << (mappings
                                    ? " (" + std::to_string(j.objects.size()) +
                                          " objects of kernels are loaded; the process may have "
                                          "reached the system's limit on memory mappings, "
                                          "vm.max_map_count: drop compiled functions that are "
                                          "no longer called)"
                                    : std::string());
        };
        if (auto err =
                j.jit->addObjectFile(tracker, llvm::MemoryBuffer::getMemBufferCopy(obj, syms[0])))
            fail("cannot load kernels " + syms[0] + "...", std::move(err));
        std::vector<KernelFn> code(todo.size());
        for (size_t k = 0; k < todo.size(); ++k) {
            auto addr = j.jit->lookup(syms[k]);
            if (!addr)
                fail("cannot load kernel " + syms[k], addr.takeError()); // (throws)
            else
                code[k] = addr->toPtr<KernelFn>();
        }
        auto hold = std::make_shared<const CodeObject>(id);
        for (size_t k = 0; k < todo.size(); ++k)
            j.memory[todo_keys[k]] = Loaded{code[k], id, hold};
        ++j.stats.objects_loaded;
        (disk_hit ? ci.disk_hits : ci.compiled) = todo.size();
        for (size_t i = 0; i < specs.size(); ++i)
            if (!fns[i])
                fns[i] = j.memory.at(full[i]).fn;
        j.recent.use(id, hold, released);
        holds.push_back(std::move(hold));
    }
    ci.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (info) *info = ci;
    return fns;
}

KernelFn get_kernel(const compiler::KernelSpec& spec, std::vector<KernelHold>& holds,
                    CompileInfo* info) {
    return get_kernels({&spec}, holds, info)[0];
}

void retain_recent_objects(size_t n) {
    Jit& j = Jit::get();
    std::vector<KernelHold> released; // destroyed after the lock
    std::lock_guard<std::mutex> lock(j.mu);
    j.recent.resize(n, released);
}

KernelCacheStats kernel_cache_stats() {
    Jit& j = Jit::get();
    std::lock_guard<std::mutex> lock(j.mu);
    return j.stats;
}

std::string kernel_llvm_ir(const compiler::KernelSpec& spec) {
    Jit& j = Jit::get();
    std::lock_guard<std::mutex> lock(j.mu);
    llvm::LLVMContext ctx;
    auto mod = j.optimised_module({&spec}, {"sjk_dump"}, ctx);
    std::string s;
    llvm::raw_string_ostream os(s);
    mod->print(os, nullptr);
    return s;
}

} // namespace sj::cpu
