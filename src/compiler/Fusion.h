// Pass: fusion. Partitions the (rewritten) graph into groups: generated kernels (elementwise,
// movement and reductions fused together, siblings over one iteration space merged), library
// calls, views and reference-kernel fallbacks. Precondition: canonicalized, specialized graph.
#pragma once

#include "KernelIR.h"
#include "Target.h"

#include <symjax/ir/Node.h>

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

/// One elementwise op of a library call's epilogue, applied inside the call (oneDNN post-ops;
/// Note [Epilogue fusion] in Fusion.cpp). The chain value (the call's result after the earlier
/// post-ops) is the op's first operand.
struct PostOp {
    /// Binary: chain `op` operand (add, sub, mul, max, min), the operand a per-channel vector
    /// or one value in a buffer; Relu: x >= 0 ? x : alpha * x; Linear: alpha * x + beta;
    /// Sum: x + alpha * operand, the operand a value of the result's shape that the call's
    /// output buffer holds before the call (Note [Accumulating post-op] in Fusion.cpp).
    enum class Kind : uint8_t { Binary, Relu, Linear, Sum };
    Kind kind = Kind::Binary;
    Op op = Op::Add;
    /// Binary: the buffer of the operand's values: the channels' values in channel order
    /// (per_channel) or one value. A leaf or a value another group materialises.
    NodePtr operand;
    bool per_channel = false;
    double alpha = 1, beta = 0;
    /// The graph node whose value this post-op gives (a where for a leaky relu).
    NodePtr node;
    std::string str() const;
};

/// The epilogue's accumulating post-op (one at most: Note [Accumulating post-op] in Fusion.cpp),
/// or null.
const PostOp* sum_post_op(const std::vector<PostOp>& epilogue);

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
    // Dot and Window groups: elementwise ops after the call applied inside it; the group then
    // materialises the last one's value in place of the call's own result.
    std::vector<PostOp> epilogue;
    /// The node whose value the group's k-th buffer holds.
    const NodePtr& result(size_t k) const {
        return k == 0 && !epilogue.empty() ? epilogue.back().node : roots[k];
    }
};

/// "kernel", "dot", "window", "view", "reference": how plans and dumps name a group's kind.
const char* kind_name(Group::Kind k);

struct FusionPlan {
    std::vector<Group> groups; // in execution order
    std::vector<Chain> chains; // chain 0 is the empty chain
    /// Why values were materialised or groups not merged (shown at SJ_DEBUG >= 3).
    std::vector<std::string> decisions;
    /// Pairs of kernel groups sibling merging looked at (at most kSiblingCandidates per group).
    size_t sibling_pairs = 0;
    size_t kernels() const;
    size_t library_calls() const;
    /// Elementwise ops applied inside library calls (Note [Epilogue fusion]).
    size_t post_ops() const;
    std::string str() const;
};

/// Largest cost of one fused kernel's per-point ops, in simple arithmetic instructions
/// (Target::kernel_cost; larger expressions are split: Note [Kernel size] in Fusion.cpp).
inline constexpr size_t kMaxKernelInsts = 512;

/// Largest number of operands (loaded values and outputs) of a kernel made by merging groups: a
/// multi-output kernel of hundreds of optimizer updates of one shape has a thousand, and LLVM's
/// schedulers compare every pair of its memory accesses through alias scopes of that length
/// (Note [Compile scaling] in Fusion.cpp).
inline constexpr size_t kMaxKernelOperands = 64;

/// Most kernels an elementwise value is recomputed in before it is materialised instead
/// (kernels over one space with the same reduced axes counted once: they usually merge).
inline constexpr size_t kMaxRecompute = 4;

/// Most kernels an elementwise value is recomputed in, however many merge or how cheap it is:
/// a bound on the work recomputation adds, since a value recomputed in k kernels recomputes
/// there whatever it reads inline too (Note [Bounded recomputation] in Fusion.cpp).
inline constexpr size_t kMaxRecomputeKernels = 8;

/// Candidates sibling merging looks at for each kernel group (the next ones over its iteration
/// space, in group order): a chain of G kernels of one space had G^2/2 pairs to look at (Note
/// [Compile scaling] in Fusion.cpp). Ordinary networks have far fewer kernels of one space.
inline constexpr size_t kSiblingCandidates = 256;

/// Work the merging phases may spend on dependency walks and candidate pairs: a base that no
/// ordinary network reaches, plus a share per node, so that fusion stays linear in graph size
/// (Note [Compile scaling] in Fusion.cpp).
inline constexpr int64_t kMergeWorkBase = int64_t(1) << 22;
inline constexpr int64_t kMergeWorkPerNode = 64;

/// Partitions the graph under `roots` for `target` (which ops its libraries run, which
/// epilogues they absorb).
FusionPlan fuse(const std::vector<NodePtr>& roots, const Target& target);

} // namespace sj::compiler
