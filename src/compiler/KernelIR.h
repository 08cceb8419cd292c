// The loop-level kernel IR: one fused group as a per-point expression over a loop nest.
#pragma once

#include <symjax/ir/Node.h>

#include <string>
#include <vector>

namespace sj::compiler {

/// The innermost-loop stride of a load or store, known when the kernel is compiled so that the
/// inner loop vectorises; all other strides and sizes are runtime arguments.
enum class KStride : uint8_t { Zero, One, Any };

/// One SSA value of the per-point expression.
struct KInst {
    enum class Kind : uint8_t { Load, Const, Op };
    Kind kind = Kind::Op;
    Op op = Op::Add;         // for Kind::Op
    DType dtype = DType::F32; // result dtype
    int args[3] = {-1, -1, -1};
    int load = -1;     // for Kind::Load: index into the kernel's loads
    double value = 0;  // for Kind::Const
};

/// An output: `value` stored at every point (full) or combined over the reduction loops with
/// `reduce_op` (ReduceSum/Prod/Max/Min/Any/All) and stored once per kept point.
struct KOutput {
    int value = -1;
    bool reduced = false;
    Op reduce_op = Op::ReduceSum;
    DType dtype = DType::F32;
    /// A step kernel's carry output (KernelSpec::steps): >= 0 stores carry `carry` instead of
    /// `value`, at each step the value the step receives (a history row), or once after the
    /// last step when `final`.
    int carry = -1;
    bool final = false;
};

/// Everything that changes the generated code. Sizes, strides and offsets are runtime arguments:
///   void kernel(void* const* bufs, const int64_t* params, int64_t begin, int64_t end)
/// bufs: loads then outputs. params: sizes[rank], then per load and per output
/// strides[rank] and an offset (elements). The outermost loop runs over [begin, end).
/// The last `reduce_rank` loops are reduction loops, unless `row` > 0: then the last loop is a
/// kept loop of exactly `row` trips, contiguous for every operand (stride 0 or 1), and the
/// `reduce_rank` loops before it are the reduction loops, with one accumulator per row element
/// (Note [Row reductions] in KernelPlan.cpp). `inner` > 0: the innermost loop, a kept loop of a
/// kernel in the usual order, has exactly `inner` trips (Note [Short inner loops]). `trips`
/// (empty, or one per loop): a loop d with trips[d] > 0 has exactly that many (Note [Short loops
/// compiled in]).
/// `steps`: a step kernel (Note [Step kernels] in src/backend/cpu/CpuExecutable.cpp): at each
/// point, a sequential loop of params[steps_param()] steps runs the expression, each operand
/// moving by its own step stride (params after the count, in elements); carry c enters the
/// expression where load carry_load[c] is read (that load is read once, before the first
/// step) and leaves it as instruction carry_next[c]. No reductions.
struct KernelSpec {
    int rank = 0;
    int reduce_rank = 0;
    int64_t row = 0;
    int64_t inner = 0;
    std::vector<int64_t> trips;
    std::vector<DType> load_dtypes;
    std::vector<KStride> load_inner;
    std::vector<KStride> out_inner;
    /// Per operand (loads, then outputs): bit d set when its stride along loop d is 0 (Note
    /// [Zero strides compiled in]).
    std::vector<uint64_t> zero_strides;
    std::vector<KInst> insts;
    std::vector<KOutput> outputs;
    bool steps = false;
    std::vector<int> carry_load, carry_next;

    /// Canonical text of the spec: the in-memory and disk cache key, and the debug dump.
    std::string str() const;
    int operands() const { return static_cast<int>(load_dtypes.size() + outputs.size()); }
    /// The index of a step kernel's step count in params (its step strides follow).
    int steps_param() const { return rank + operands() * (rank + 1); }
    int num_params() const { return steps_param() + (steps ? 1 + operands() : 0); }
};

} // namespace sj::compiler
