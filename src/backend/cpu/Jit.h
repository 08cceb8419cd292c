// The CPU code generator's entry point: kernel specs in, callable machine code out.
// (LLVM stays behind this header: nothing outside src/backend/cpu includes LLVM.)
#pragma once

#include "../../compiler/KernelIR.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sj::cpu {

/// void kernel(void* const* bufs, const int64_t* params, int64_t begin, int64_t end)
using KernelFn = void (*)(void* const* bufs, const int64_t* params, int64_t begin, int64_t end);

struct CompileInfo {
    size_t kernels = 0;      // asked for
    size_t memory_hits = 0;  // found in this process's cache
    size_t disk_hits = 0;    // loaded from the disk cache (as one object)
    size_t compiled = 0;     // compiled now (as one module)
    double ms = 0;           // time spent (compiling or loading)
};

/// Keeps loaded the machine code of kernels get_kernels returned: an object's code is unloaded
/// when the last hold on it goes (Note [Unloading kernels] in Jit.cpp).
using KernelHold = std::shared_ptr<const void>;

/// The machine code of each spec: from the in-memory cache; the others as one object, from
/// the disk cache or compiled with LLVM (ORC LLJIT) for the host CPU as one module and stored
/// in both caches (Note [One object per function] in Jit.cpp). Appends to `holds` what keeps
/// the returned code loaded; the caller keeps them as long as it may call the code. Thread-safe.
std::vector<KernelFn> get_kernels(const std::vector<const compiler::KernelSpec*>& specs,
                                  std::vector<KernelHold>& holds, CompileInfo* info = nullptr);

/// The machine code of one spec (get_kernels of one).
KernelFn get_kernel(const compiler::KernelSpec& spec, std::vector<KernelHold>& holds,
                    CompileInfo* info = nullptr);

/// What the kernel caches did since the process started (for tests and debugging).
struct KernelCacheStats {
    int64_t memory_hits = 0;  // kernels found in this process's cache
    int64_t disk_hits = 0;    // kernels loaded from a valid disk entry
    int64_t disk_rejects = 0; // disk entries present but invalid (corrupt, truncated, foreign key)
    int64_t compiles = 0;     // kernels compiled with LLVM
    int64_t disk_writes = 0;  // entries written (renamed into place); an entry holds the kernels
                              // one get_kernels call compiled together
    int64_t objects_loaded = 0;   // objects linked into the process (one per get_kernels call
                                  // that found kernels it had not loaded)
    int64_t objects_unloaded = 0; // objects unloaded after their last hold went
};
KernelCacheStats kernel_cache_stats();

/// How many of the objects used last the process keeps loaded with no function holding them
/// (Note [Unloading kernels] in Jit.cpp; 512 unless changed; for tests).
void retain_recent_objects(size_t n);

/// The LLVM IR (after optimisation) that get_kernel would compile for `spec` (for SJ_DEBUG/dumps).
std::string kernel_llvm_ir(const compiler::KernelSpec& spec);

/// The CPU the kernels are compiled for and its features, as used in cache keys
/// ("skylake-avx512 +avx512f,..."): the host's, or SJ_JIT_CPU's name alone (its own features).
std::string host_cpu_description();

/// Throws InputError unless `name` is a CPU that LLVM knows and whose every ISA feature this
/// host has (what SJ_JIT_CPU accepts, Note [Kernels for an older CPU] in Jit.cpp). Features
/// named in `absent` count as missing on the host (tests check the refusal on any machine).
void check_jit_cpu(const std::string& name, const std::vector<std::string>& absent = {});

} // namespace sj::cpu
