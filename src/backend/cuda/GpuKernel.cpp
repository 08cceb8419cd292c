// Launch decisions for GPU kernels (Note [Thread maps] in NvptxRenderer.cpp).
#include "GpuKernel.h"

#include <algorithm>

namespace sj::cuda {

std::string GpuKernel::str() const {
    // every field: the phase and the chunk count change the code as much as the map does (two
    // kernels that differed only in them once shared a cache entry, and a split reduction ran
    // with another one's chunk count, writing past its scratch buffer)
    std::string s =
        spec.str() + (map == ThreadMap::Points ? "|points|" : "|blocks|") + std::to_string(block);
    switch (phase) {
    case GpuPhase::Whole:
        return s;
    case GpuPhase::Partials:
        return s + "|partials|" + std::to_string(chunks);
    case GpuPhase::Combine:
        return s + "|combine|" + std::to_string(chunks);
    }
    return s;
}

namespace {
/// Blocks a grid-stride launch uses at most: enough resident blocks to fill every
/// multiprocessor several times over; more would only add block scheduling.
int64_t max_grid(const DeviceLimits& d) {
    return std::max<int64_t>(1, int64_t(d.multiprocessors) * 32);
}
} // namespace

GpuLaunch choose_launch(const compiler::KernelLaunch& l, const DeviceLimits& d) {
    const compiler::KernelSpec& s = l.spec;
    const int first = s.rank - s.reduce_rank - (s.row > 0 ? 1 : 0);
    int64_t kept = 1, reduced = 1;
    for (int i = 0; i < s.rank; ++i) {
        int64_t n = l.params[size_t(i)];
        bool is_reduced = i >= first && i < first + s.reduce_rank;
        (is_reduced ? reduced : kept) *= n;
    }
    GpuLaunch g;
    g.kernel.spec = s;
    // The reduction loops are innermost in the usual order (row == 0), so they are the
    // contiguous ones: a block's threads split them and read consecutive addresses. In the row
    // order the row is contiguous and kept: one thread per point reads along it together with
    // its neighbours. A reduction of fewer points than a warp is not worth a tree.
    constexpr int64_t kMinTree = 32;
    bool blocks = s.reduce_rank > 0 && s.row == 0 && !s.steps && reduced >= kMinTree;
    if (blocks) {
        int width = 32;
        while (width < 256 && width < reduced)
            width *= 2;
        g.kernel.map = ThreadMap::Blocks;
        g.kernel.block = std::min(width, d.max_threads_per_block);
        g.grid = std::clamp<int64_t>(kept, 1, max_grid(d));
        // Split when the kept points fill fewer than 4 blocks per multiprocessor and each
        // chunk still gives every thread at least 8 points (Note [Split reductions]).
        const int64_t want = int64_t(d.multiprocessors) * 4;
        const int64_t per_chunk = int64_t(g.kernel.block) * 8;
        if (kept < want && reduced >= 2 * per_chunk) {
            int64_t chunks = std::min((want + kept - 1) / kept, reduced / per_chunk);
            int64_t reduced_outputs = 0;
            for (const auto& o : s.outputs)
                reduced_outputs += o.reduced;
            g.kernel.phase = GpuPhase::Partials;
            g.kernel.chunks = chunks;
            g.grid = std::clamp<int64_t>(kept * chunks, 1, max_grid(d));
            g.scratch_bytes = kept * chunks * reduced_outputs * 8;
            g.combine = g.kernel;
            g.combine.map = ThreadMap::Points;
            g.combine.phase = GpuPhase::Combine;
            g.combine.block = std::min(256, d.max_threads_per_block);
            g.combine_grid =
                std::clamp<int64_t>((kept + g.combine.block - 1) / g.combine.block, 1, max_grid(d));
        }
    } else {
        g.kernel.map = ThreadMap::Points;
        g.kernel.block = std::min(256, d.max_threads_per_block);
        g.grid = std::clamp<int64_t>((kept + g.kernel.block - 1) / g.kernel.block, 1, max_grid(d));
    }
    g.grid = std::min<int64_t>(g.grid, d.max_grid_x);
    g.block = g.kernel.block;
    return g;
}

} // namespace sj::cuda
