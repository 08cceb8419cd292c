// A fused kernel for a GPU: the kernel IR (src/compiler/KernelIR.h) with the way its points map
// onto threads, rendered as LLVM IR for NVPTX (NvptxRenderer.cpp) and compiled to PTX for a
// GPU, or for the host by the emulator (Emulator.cpp).
#pragma once

#include "../../compiler/KernelIR.h"
#include "../../compiler/KernelPlan.h"

#include <cstdint>
#include <string>

namespace sj::cuda {

/// How a kernel's iteration points map onto threads (Note [Thread maps] in NvptxRenderer.cpp).
enum class ThreadMap : uint8_t {
    /// One thread per kept point (the loops no reduction runs over, the row included), in a
    /// grid-stride loop; a thread runs the reduction loops of its point itself. Elementwise
    /// kernels, step kernels, and reductions with many kept points.
    Points,
    /// One block per kept point (grid-stride over blocks): the block's threads split the
    /// reduction loops, then combine in shared memory along a fixed tree. Reductions with few
    /// kept points and many reduced ones.
    Blocks,
};

/// Which part of a reduction a kernel computes (Note [Split reductions] in NvptxRenderer.cpp).
enum class GpuPhase : uint8_t {
    Whole,    // the kernel computes its outputs
    Partials, // a Blocks kernel over (kept point, chunk) pairs: partials into the scratch buffer
    Combine,  // a Points kernel: each kept point's partials combined into the reduced outputs
};

/// The code of one kernel: what it computes and how it is mapped. Everything that changes the
/// generated code is here (sizes, strides and offsets are runtime arguments, as on the cpu).
struct GpuKernel {
    compiler::KernelSpec spec;
    ThreadMap map = ThreadMap::Points;
    /// Threads per block the code is written for (Blocks: the width of the tree). A power of 2.
    int block = 256;
    GpuPhase phase = GpuPhase::Whole;
    /// Partials and Combine: the chunks each kept point's reduction is split into.
    int64_t chunks = 0;
    /// Canonical text of every field above: the key of the in-process and disk kernel caches.
    std::string str() const;
};

/// The limits of a device that launch decisions depend on.
struct DeviceLimits {
    int multiprocessors = 132; // H200
    int max_threads_per_block = 1024;
    int max_grid_x = 2147483647;
};

/// A kernel's launch: its code and grid for one bound step.
struct GpuLaunch {
    GpuKernel kernel;
    int64_t grid = 1; // blocks (grid-stride loops cover any number of points)
    int block = 256;  // threads per block (== kernel.block)
    /// A split reduction (kernel.phase == Partials): the bytes of the scratch buffer both
    /// launches take after the outputs in their buffer table, and the second launch.
    int64_t scratch_bytes = 0;
    GpuKernel combine;
    int64_t combine_grid = 0;
};

/// Chooses the thread map, block and grid for a kernel bound to the shapes of one call (Note
/// [Thread maps]): Blocks when the reduction loops are the contiguous ones and reduce at least
/// a warp's worth of points, else Points; a Blocks reduction with too few kept points to fill
/// the device is split (Note [Split reductions]).
GpuLaunch choose_launch(const compiler::KernelLaunch& l, const DeviceLimits& d);

} // namespace sj::cuda
