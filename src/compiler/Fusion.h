// Pass: fusion. Partitions the (rewritten) graph into groups: generated kernels (elementwise,
// movement and reductions fused together, siblings over one iteration space merged), library
// calls, views and reference-kernel fallbacks. Precondition: canonicalized, specialized graph.
#pragma once

#include "KernelIR.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace sj::compiler {

/// How a fused expression reaches a buffer: the movement steps from the kernel's iteration
/// coordinates to the buffer's coordinates, as (node, input index) edges.
using Chain = std::vector<std::pair<const Node*, int>>;

struct LoadSite {
    NodePtr buffer; // a leaf or a value another group materialises
    int chain = 0;  // index into FusionPlan::chains
};

struct Group {
    /// Kernel: a generated kernel; Dot: a GEMM library call; Window: a convolution or pooling
    /// library call (forward or backward); View: a reshape of a buffer; Fallback: the reference
    /// kernel of one op.
    enum class Kind : uint8_t { Kernel, Dot, Window, View, Fallback };
    Kind kind = Kind::Kernel;
    /// The values this group materialises (outputs of the kernel, or the single op's node).
    std::vector<NodePtr> roots;
    // Kernel groups only:
    NodePtr space;                   // a node whose shape is the iteration space
    std::vector<int64_t> reduce_axes; // reduced axes of the iteration space (sorted)
    std::vector<KInst> insts;        // Load insts index `loads`
    std::vector<LoadSite> loads;
    std::vector<KOutput> outputs;    // one per root, same order
};

struct FusionPlan {
    std::vector<Group> groups; // in execution order
    std::vector<Chain> chains; // chain 0 is the empty chain
    /// Why values were materialised or groups not merged (shown at SJ_DEBUG >= 3).
    std::vector<std::string> decisions;
    size_t kernels() const;
    size_t library_calls() const;
    std::string str() const;
};

/// Largest number of per-point instructions in one fused kernel (larger expressions are split).
inline constexpr size_t kMaxKernelInsts = 512;

/// Most kernels an elementwise value is recomputed in before it is materialised instead.
inline constexpr size_t kMaxRecompute = 4;

/// Partitions the graph under `roots`.
FusionPlan fuse(const std::vector<NodePtr>& roots);

} // namespace sj::compiler
