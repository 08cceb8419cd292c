// GpuKernel -> LLVM IR with NVPTX's conventions (thread ids, barriers, shared memory), and that
// IR -> PTX through LLVM's NVPTX target with libdevice linked.
#pragma once

#include "GpuKernel.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <memory>
#include <string>

namespace sj::cuda {

/// The kernel's name in its module and PTX.
inline constexpr const char* kKernelSymbol = "sj_kernel";

/// Who runs the code: a GPU (NVPTX), or the host emulator (Note [The emulator] in Emulator.cpp).
enum class GpuCode : uint8_t { Nvptx, Host };

/// The kernel as an LLVM module: one function `kKernelSymbol`,
///   void sj_kernel(ptr bufs, ptr params)              (Nvptx)
///   void sj_kernel(ptr bufs, ptr params, ptr ctx)     (Host)
/// bufs: the operands' addresses (loads then outputs), params: KernelSpec's int64 params.
/// On NVPTX, thread and block ids are read with llvm.nvvm.read.ptx.sreg.*, a block's threads
/// meet at llvm.nvvm.barrier0, and a Blocks kernel's tree lives in addrspace(3) (shared
/// memory). On the host, ctx points at an EmuContext (Emulator.h) that holds the same values.
/// The two differ in nothing else.
std::unique_ptr<llvm::Module> render_gpu_module(const GpuKernel& k, GpuCode code,
                                                llvm::LLVMContext& ctx);

/// Bytes of shared memory a block of the kernel uses (the Blocks trees).
int64_t shared_bytes(const GpuKernel& k);

/// PTX for compute capability `sm` (80 for sm_80): the module rendered, libdevice linked,
/// optimised at O3 by LLVM's NVPTX target.
std::string compile_ptx(const GpuKernel& k, int sm);

/// What the PTX disk cache did (Note [PTX cache] in NvptxRenderer.cpp).
struct PtxCacheStats {
    int64_t compiles = 0;     // kernels compiled by LLVM
    int64_t disk_hits = 0;    // kernels read from the disk cache
    int64_t disk_rejects = 0; // entries present but unreadable, of another key, or damaged
    int64_t disk_writes = 0;  // entries written
};

/// compile_ptx through the disk kernel cache ($SJ_CACHE_DIR, the cpu backend's; off when it is
/// "off"): the entry is keyed by the kernel, the architecture, LLVM's version, libdevice and the
/// GPU code generator's source. Adds to *stats when given.
std::string cached_ptx(const GpuKernel& k, int sm, PtxCacheStats* stats = nullptr);

/// What ptxas says when it assembles `ptx` for sm_`sm`: empty when it accepts it, else the error
/// and its log. The toolkit's nvJitLink assembles it inside the process when it is there, else
/// a ptxas process runs (`$SJ_PTXAS`, else the toolkit's found at build time): Note [Assembling
/// PTX in process]. For the emulator's SJ_CUDA_CHECK_PTX and the tests; a GPU's driver
/// assembles PTX itself.
std::string assemble_ptx(const std::string& ptx, int sm);

/// Whether assemble_ptx runs inside the process (nvJitLink) rather than a ptxas process.
bool assembles_in_process();

/// Where libdevice's bitcode is read from: $SJ_LIBDEVICE, else the toolkit's found at build time.
std::string libdevice_path();

} // namespace sj::cuda
