// The execution plan: what the compiler hands to a backend. compile(Program, Target) runs the
// pass pipeline, the fusion pass and the memory plan; bind() fixes the shapes of one call.
// A backend is a runner of plan steps (Note [Plans and runners] in ExecPlan.cpp).
#pragma once

#include "../core/NodeMap.h"
#include "../core/Program.h"
#include "KernelPlan.h"
#include "Pipeline.h"
#include "Target.h"

#include <symjax/ir/Node.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace sj::compiler {

/// Where the value of a slot comes from.
enum class SlotSource : uint8_t {
    Input,      // the call's argument `index`
    Variable,   // the value of Program::variables[index] (the call's snapshot)
    Constant,   // the constant node's value
    RngCounter, // the call counter (random ops' stream position)
    Step,       // computed by a step
};

/// A buffer the plan names: a leaf's value or the value a step materialises.
struct Slot {
    const Node* node = nullptr;
    SlotSource source = SlotSource::Step;
    int index = -1; // Input: argument index; Variable: variable index
};

/// What a step does: its fusion group's kind (one step per group, in execution order). Kernel: a
/// generated kernel (Group::insts); Dot: a GEMM library call with its epilogue; Window: a
/// convolution / pooling / reorder library call with its epilogue; View: a reshape of its input's
/// buffer (no copy); Fallback: the reference kernel of one op (or a target's library routine).
using StepKind = Group::Kind;

struct Step {
    StepKind kind = StepKind::Kernel;
    size_t group = 0;           // index into fusion.groups
    std::vector<int> in_slots;  // loads (kernels) or the op's value operands, then post-op operands
    std::vector<int> out_slots; // one per group result
    // The memory plan's decisions (MemoryPlan in MemoryPlan.cpp):
    /// per output: written into this variable slot's buffer (an in-place update), or -1
    std::vector<int> inplace_var;
    /// per output of a kernel: an input slot that dies at this step and whose buffer the output
    /// may take (Note [Kernel outputs in dying inputs' buffers] in MemoryPlan.cpp), or -1
    std::vector<int> donor;
    std::vector<int> free_after; // slots whose last reader is this step
};

/// Options that change the plan's decisions.
struct PlanOptions {
    bool inplace_updates = true; // FunctionOptions::inplace_updates
    bool nan_guard = false;      // a check after every step may throw: no in-place writes
};

struct ExecPlan {
    detail::Program program;
    const Target* target = nullptr;
    PlanOptions options;
    Compiled compiled;              // rewritten roots (outputs, then updates) and fusion plan
    std::vector<const Node*> order; // the rewritten graph in topological order
    std::vector<Slot> slots;
    std::unordered_map<const Node*, int> slot_of;
    std::vector<Step> steps;
    std::vector<int> output_slots; // per program output
    std::vector<int> update_slots; // per program update: the slot holding the new value
    const Group& group(const Step& s) const { return compiled.plan.groups[s.group]; }
    /// The plan as text: slots, steps with their buffers and memory decisions.
    std::string str() const;
};

/// Compiles `p` for `target`: passes, fusion, slots and steps, memory plan.
ExecPlan compile(const detail::Program& p, const Target& target, const PlanOptions& o = {});

/// Orders the steps so that each runs as soon after the steps it reads as it can (Note [Steps
/// follow their inputs]).
void schedule_locality(ExecPlan& plan);
/// Moves the steps that read an all_reduce's result after all others (Note [Collective overlap]).
void schedule_collectives(ExecPlan& plan);

/// The memory plan pass: buffer lifetimes (free_after) and in-place updates (inplace_var).
void plan_memory(ExecPlan& plan);

/// Per slot: the last step that reads it (-1: none).
std::vector<int> last_readers(const ExecPlan& plan);
/// Per slot: whether it outlives the call (a function output or an update's value).
std::vector<bool> kept_slots(const ExecPlan& plan);

/// Checks the plan's invariants (run by compile() when the IR verifier is on: SJ_DEBUG >= 1,
/// SJ_VERIFY=1, the test suite): every step reads only slots that hold a value then (leaves, or
/// results of earlier steps not yet freed); every computed slot is written by one step; a slot
/// is freed once, by its last reader, and never when it is an output or an update's value; an
/// in-place write targets a variable slot of the same type, from a kernel step; a view step
/// reads its source first. Throws
/// InternalError naming the step and the slot.
void verify_plan(const ExecPlan& plan);

/// The shapes of one call, bound to the plan (Note [Plans and runners]).
struct BoundStep {
    KernelLaunch launch; // Kernel steps: loop sizes, strides and the spec to compile
    int64_t bytes = 0;   // bytes its operands and results move
    /// Kernel steps: bytes moved plus kWorkPerOp per arithmetic op and iteration point, what a
    /// target weighs against the cost of starting its threads (Note [Parallel work threshold])
    int64_t work = 0;
};

/// Byte-equivalents of one arithmetic op at one iteration point in BoundStep::work.
inline constexpr int64_t kWorkPerOp = 1;

struct BoundPlan {
    std::vector<TensorType> types;                          // per slot
    detail::NodeMap<TensorType> node_types;                 // every node of the rewritten graph
    std::vector<BoundStep> steps;                           // per step
    int64_t intermediate_bytes = 0, peak_bytes = 0;
};

/// Binds the types of the call's inputs: infers every node's concrete type (checking every op
/// on these shapes: InputError before anything runs), checks each update fits its variable,
/// and plans each kernel's loops. The result depends only on the input types.
BoundPlan bind(const ExecPlan& plan, const std::vector<TensorType>& inputs);

/// Buffers shared by lifetime for one call's types (Note [Buffers shared by lifetime] in
/// MemoryPlan.cpp): per slot, the slot whose buffer (pool entry) it uses, itself when it keeps
/// its own; and the bytes of the buffers the steps' values use after sharing.
struct SharedBuffers {
    std::vector<int> entry;
    int64_t bytes = 0;
};
SharedBuffers share_buffers(const ExecPlan& plan, const std::vector<TensorType>& types);

} // namespace sj::compiler
