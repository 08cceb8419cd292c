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
#include "Jit.h"

#include "../../core/Hash.h"
#include "../../core/Debug.h"
#include "LlvmRenderer.h"

#include <symjax/Error.h>

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>

namespace sj::cpu {

namespace {

constexpr uint32_t kSchemaVersion = 3; // 2: one entry per bundle of kernels; 3: row-order kernels
constexpr char kMagic[8] = {'S', 'J', 'K', 'C', 'A', 'C', 'H', 'E'};

struct Jit {
    std::mutex mu;
    std::unique_ptr<llvm::orc::LLJIT> jit;
    std::unique_ptr<llvm::TargetMachine> tm;
    std::string cpu, features, key_prefix;
    std::unordered_map<std::string, KernelFn> memory;
    KernelCacheStats stats; // guarded by mu

    static Jit& get() {
        static Jit* j = new Jit; // never destroyed: kernels may run during static teardown
        return *j;
    }

    Jit() {
        auto t0 = std::chrono::steady_clock::now();
        llvm::InitializeNativeTarget();
        llvm::InitializeNativeTargetAsmPrinter();
        cpu = llvm::sys::getHostCPUName().str();
        llvm::SubtargetFeatures f;
        for (const auto& [name, on] : llvm::sys::getHostCPUFeatures()) f.AddFeature(name, on);
        features = f.getString();
        std::string triple = llvm::sys::getProcessTriple();
        std::string err;
        const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, err);
        SJ_CHECK(target, Error) << "cpu backend: no LLVM target for " << triple << ": " << err;
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
        k << "schema=" << kSchemaVersion << " llvm=" << LLVM_VERSION_STRING << " triple=" << triple
          << " cpu=" << cpu << " features=" << features << " opt=O3 codegen=" << SJ_CODEGEN_HASH << "\n";
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
        llvm::LoopAnalysisManager lam;
        llvm::FunctionAnalysisManager fam;
        llvm::CGSCCAnalysisManager cgam;
        llvm::ModuleAnalysisManager mam;
        llvm::PipelineTuningOptions pto;
        pto.LoopVectorization = true;
        pto.SLPVectorization = true;
        llvm::PassBuilder pb(tm.get(), pto);
        pb.registerModuleAnalyses(mam);
        pb.registerCGSCCAnalyses(cgam);
        pb.registerFunctionAnalyses(fam);
        pb.registerLoopAnalyses(lam);
        pb.crossRegisterProxies(lam, fam, cgam, mam);
        pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(*mod, mam);
        return mod;
    }

    std::string compile_object(const std::vector<const compiler::KernelSpec*>& specs,
                               const std::vector<std::string>& syms) {
        llvm::LLVMContext ctx;
        auto mod = optimised_module(specs, syms, ctx);
        llvm::SmallVector<char, 0> buf;
        llvm::raw_svector_ostream os(buf);
        llvm::legacy::PassManager pm;
        SJ_ASSERT(!tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
            << "cpu backend: the target cannot emit object files";
        pm.run(*mod);
        return std::string(buf.begin(), buf.end());
    }
};

uint64_t checksum(const std::string& s) {
    detail::Hasher h;
    h.add_bytes(s.data(), s.size());
    return h.h;
}

std::string hex(uint64_t v) {
    char b[17];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
    return b;
}

/// The largest entry read: a function's kernels make an object of kilobytes to a few megabytes.
constexpr off_t kMaxEntryBytes = off_t(256) << 20;

/// A present cache entry that cannot be used: a miss (the kernels are compiled), never an error;
/// SJ_DEBUG=1 says why.
std::string miss(const std::string& path, const std::string& why) {
    if (detail::debug_level() >= 1)
        std::fprintf(stderr, "[symjax] kernel cache: %s: %s; compiling instead\n", path.c_str(),
                     why.c_str());
    return "";
}

const char* file_kind(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

/// The bytes of a cache entry, read without following a symbolic link, without blocking (a
/// FIFO), and no more than its size (a device never ends); sets *why on failure.
std::string read_entry_bytes(const std::string& path, bool* present, std::string* why) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *present = errno != ENOENT && errno != ENOTDIR;
        *why = errno == ELOOP ? "a symbolic link (entries are regular files)"
                              : std::string("cannot open (") + std::strerror(errno) + ")";
        return "";
    }
    *present = true;
    std::string data;
    struct stat st;
    if (::fstat(fd, &st) != 0) {
        *why = std::string("cannot stat (") + std::strerror(errno) + ")";
    } else if (!S_ISREG(st.st_mode)) {
        *why = std::string(file_kind(st.st_mode)) + ", expected a regular file";
    } else if (st.st_size > kMaxEntryBytes) {
        *why = std::to_string(st.st_size) + " bytes, more than the " +
               std::to_string(kMaxEntryBytes) + " an entry may have";
    } else {
        data.resize(static_cast<size_t>(st.st_size));
        for (size_t got = 0; got < data.size();) {
            ssize_t r = ::read(fd, data.data() + got, data.size() - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                *why = r == 0 ? "shorter than its size (changed while read)"
                              : std::string("read failed (") + std::strerror(errno) + ")";
                data.clear();
                break;
            }
            got += static_cast<size_t>(r);
        }
    }
    ::close(fd);
    return data;
}

} // namespace

std::string read_cache_entry(const std::string& path, const std::string& key,
                                     bool* present) {
    *present = false;
    std::string why;
    std::string data;
    try {
        data = read_entry_bytes(path, present, &why);
    } catch (const std::exception& e) { // bad_alloc: an entry's size is at most kMaxEntryBytes
        *present = true;
        return miss(path, e.what());
    }
    if (!*present) return "";
    if (!why.empty()) return miss(path, why);
    size_t need = sizeof kMagic + 4 + 8 + 8 + 8;
    if (data.size() < need || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
        return miss(path, "not a kernel cache entry (no SJKCACHE header)");
    size_t p = sizeof kMagic;
    uint32_t schema;
    uint64_t klen, olen, sum;
    std::memcpy(&schema, data.data() + p, 4), p += 4;
    std::memcpy(&klen, data.data() + p, 8), p += 8;
    if (schema != kSchemaVersion)
        return miss(path, "schema " + std::to_string(schema) + ", expected " +
                              std::to_string(kSchemaVersion));
    if (klen != key.size() || data.size() - p < klen + 16 || data.compare(p, klen, key) != 0)
        return miss(path, "the entry of another key (a hash collision or a damaged key)");
    p += klen;
    std::memcpy(&olen, data.data() + p, 8), p += 8;
    std::memcpy(&sum, data.data() + p, 8), p += 8;
    if (data.size() - p != olen)
        return miss(path, "object of " + std::to_string(data.size() - p) +
                              " bytes, the entry says " + std::to_string(olen));
    std::string obj = data.substr(p);
    if (checksum(obj) != sum) return miss(path, "checksum mismatch (a damaged object)");
    return obj;
}

std::string encode_cache_entry(const std::string& key, const std::string& obj) {
    uint32_t schema = kSchemaVersion;
    uint64_t klen = key.size(), olen = obj.size(), sum = checksum(obj);
    std::string out(kMagic, sizeof kMagic);
    out.append(reinterpret_cast<const char*>(&schema), 4);
    out.append(reinterpret_cast<const char*>(&klen), 8);
    out += key;
    out.append(reinterpret_cast<const char*>(&olen), 8);
    out.append(reinterpret_cast<const char*>(&sum), 8);
    out += obj;
    return out;
}

namespace {

/// Writes a cache entry atomically: a unique temporary file in the same directory, then rename.
/// Returns whether the entry was written.
bool write_entry(const std::string& dir, const std::string& path, const std::string& key,
                 const std::string& obj) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return false; // the cache is an optimisation: an unwritable directory is not an error
    std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                      hex(reinterpret_cast<uintptr_t>(&obj) ^ checksum(obj));
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) return false;
        const std::string bytes = encode_cache_entry(key, obj);
        f.write(bytes.data(), std::streamsize(bytes.size()));
        f.close(); // flushes: a failed final write must not rename a partial file into place
        if (!f) {
            std::remove(tmp.c_str());
            return false;
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) == 0) return true;
    std::remove(tmp.c_str());
    return false;
}

} // namespace

std::string cache_dir() {
    if (const char* d = std::getenv("SJ_CACHE_DIR")) return std::string(d) == "off" ? "" : d;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/symjax";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/symjax";
    return "";
}

std::string host_cpu_description() {
    Jit& j = Jit::get();
    return j.cpu + " " + j.features;
}

std::vector<KernelFn> get_kernels(const std::vector<const compiler::KernelSpec*>& specs, CompileInfo* info) {
    auto t0 = std::chrono::steady_clock::now();
    Jit& j = Jit::get();
    std::vector<std::string> keys;
    for (const auto* spec : specs) keys.push_back(spec->str());
    std::vector<KernelFn> fns(specs.size(), nullptr);
    CompileInfo ci;
    ci.kernels = specs.size();
    std::lock_guard<std::mutex> lock(j.mu);
    // the kernels not loaded yet (each once), in order, with their cache keys and symbols
    std::vector<const compiler::KernelSpec*> todo;
    std::vector<std::string> todo_keys, syms;
    std::unordered_set<std::string> queued;
    std::string bundle_key = j.key_prefix;
    std::vector<std::string> full(specs.size()); // in-memory cache keys
    for (size_t i = 0; i < specs.size(); ++i) {
        full[i] = j.key_prefix + keys[i];
        if (auto it = j.memory.find(full[i]); it != j.memory.end()) {
            fns[i] = it->second;
            ++ci.memory_hits;
            ++j.stats.memory_hits;
            continue;
        }
        if (!queued.insert(full[i]).second) continue;
        todo.push_back(specs[i]);
        todo_keys.push_back(full[i]);
        syms.push_back("sjk_" + hex(checksum(full[i])));
        bundle_key += "kernel " + syms.back() + "\n" + keys[i];
    }
    if (!todo.empty()) {
        uint64_t h = checksum(bundle_key);
        std::string dir = cache_dir();
        std::string path = dir.empty() ? "" : dir + "/" + hex(h) + ".sjk";
        bool present = false;
        std::string obj = path.empty() ? "" : read_cache_entry(path, bundle_key, &present);
        bool disk_hit = !obj.empty();
        if (disk_hit) {
            j.stats.disk_hits += int64_t(todo.size());
        } else {
            j.stats.disk_rejects += present;
            obj = j.compile_object(todo, syms);
            j.stats.compiles += int64_t(todo.size());
            if (!path.empty()) j.stats.disk_writes += write_entry(dir, path, bundle_key, obj);
        }
        auto err = j.jit->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(obj, syms[0]));
        SJ_CHECK(!err, Error) << "cpu backend: cannot load kernels " << syms[0] << "...: "
                              << llvm::toString(std::move(err));
        for (size_t k = 0; k < todo.size(); ++k) {
            auto addr = j.jit->lookup(syms[k]);
            SJ_CHECK(addr, Error) << "cpu backend: kernel " << syms[k]
                                  << " not found: " << llvm::toString(addr.takeError());
            j.memory.emplace(todo_keys[k], addr->toPtr<KernelFn>());
        }
        (disk_hit ? ci.disk_hits : ci.compiled) = todo.size();
        for (size_t i = 0; i < specs.size(); ++i)
            if (!fns[i]) fns[i] = j.memory.at(full[i]);
    }
    ci.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (info) *info = ci;
    return fns;
}

KernelFn get_kernel(const compiler::KernelSpec& spec, CompileInfo* info) {
    return get_kernels({&spec}, info)[0];
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
