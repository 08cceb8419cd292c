// Target: what the compiler asks about the machine a program will run on. The passes are
// target-neutral; every choice that depends on a library or an instruction set is a question
// here, answered by the backend's target (src/backend/cpu/CpuTarget.cpp for oneDNN + LLVM on
// x86). Note [Targets] in docs/architecture.md.
#pragma once

#include "Rewrite.h"

#include <symjax/ir/Node.h>

#include <string>
#include <vector>

namespace sj::compiler {

/// The library routines fusion knows how to group: a GEMM-like call (dot_general) and a
/// sliding-window call (convolution, pooling, their backward ops, layout reorders). `None`: the
/// op becomes part of a generated kernel when its class allows, else its reference kernel runs.
enum class LibraryCall : uint8_t { None, Dot, Window };

/// Which elementwise ops after a library call the library applies inside the call (Note
/// [Epilogue fusion] in Fusion.cpp).
struct EpilogueRule {
    /// The dims of the call's result that hold its channels: a binary post-op's operand must be
    /// broadcast along every other dim. Empty: the call takes no epilogue.
    std::vector<size_t> channel_dims;
    /// A chain applies one parameter set per eltwise algorithm (oneDNN 2.6's jit convolution):
    /// a relu or linear step whose parameters differ from an earlier one of its kind ends it.
    bool one_parameter_set_per_eltwise = false;
    /// The call may add its result to a value of the result's shape held in its output buffer
    /// (Note [Accumulating post-op] in Fusion.cpp).
    bool sum = false;
};

class Target {
public:
    virtual ~Target() = default;
    /// The backend this target describes ("cpu", "generic").
    virtual std::string name() const = 0;
    /// Whether a library call computes `n` (asked for every non-leaf node of the final graph).
    virtual LibraryCall library_call(const Node& n) const = 0;
    /// The epilogue a library call computing `n` absorbs (asked only where library_call(n) is
    /// not None).
    virtual EpilogueRule epilogue(const Node& n) const = 0;
    /// The target's own rewrites, run after specialize: layouts its libraries prefer (the cpu
    /// target: channel-blocked convolution chains). Returns the new roots.
    virtual std::vector<NodePtr> lower(const std::vector<NodePtr>& roots,
                                       RewriteStats* stats) const = 0;
    /// f32 lanes the generated kernels' innermost loops are vectorised over (KernelPlan compiles
    /// in the trip count of inner loops shorter than a few vectors).
    virtual int vector_lanes() const = 0;
    /// What one op costs a generated kernel, in simple arithmetic instructions: fusion caps a
    /// kernel's total at kMaxKernelInsts (Note [Kernel size] in Fusion.cpp).
    virtual size_t kernel_cost(Op) const { return 1; }
    /// Whether the library call computing `n` may write its result into the buffer of its input
    /// `i` when that input dies at the call: the call reads all of it before it writes (Note
    /// [Kernel outputs in dying inputs' buffers] in MemoryPlan.cpp). The runner may still give
    /// the result a buffer of its own.
    virtual bool writes_over_input(const Node&, size_t) const { return false; }
    // (How many threads a step runs on is the runner's business: no pass decides by it yet.)
};

/// A target without libraries or lowering: every op is a generated kernel or its reference
/// kernel. For pass tests (sj-opt) and as the plain baseline a new backend starts from.
const Target& generic_target();

} // namespace sj::compiler
