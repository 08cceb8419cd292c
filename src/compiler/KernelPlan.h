// Binding a fused group to concrete shapes: loop sizes, strides and the kernel spec to compile.
#pragma once

#include "Fusion.h"

#include <symjax/ir/Node.h>

#include <functional>

namespace sj::compiler {

/// A kernel group bound to the shapes of one call: the spec (the code) and its runtime params.
struct KernelLaunch {
    KernelSpec spec;
    std::vector<int64_t> params;   // see KernelSpec
    std::vector<Shape> out_shapes; // one per output
    int64_t outer = 0;             // trip count of loop 0 (what threads split)
    int64_t points = 0;            // iteration points in total
    bool split_reduce = false;     // loop 0 is a reduction loop: threads write partial results
    /// the first reduction loop when loop 0 is kept (a batch norm's statistics: loop 0 the
    /// channel blocks, then the batch), else -1; the cpu runner may cut it into fixed chunks
    /// (Note [Reductions split along the batch] in src/backend/cpu/CpuExecutable.cpp)
    int first_reduce = -1;
};

using ShapeOf = std::function<const Shape&(const Node*)>;

/// Computes the launch of kernel group `g` for the concrete shapes given by `shape_of`:
/// composes the movement chains into affine strides, orders loops (kept dims, then reduced
/// dims; or the last kept loop innermost, Note [Row reductions] in KernelPlan.cpp), collapses
/// contiguous dims and classifies the inner strides. `vector_lanes`: the target's f32 lanes
/// (inner loops shorter than 4 vectors get their trip count compiled in).
KernelLaunch plan_kernel(const Group& g, const FusionPlan& plan, const ShapeOf& shape_of, int vector_lanes);

} // namespace sj::compiler
