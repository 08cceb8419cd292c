// Control flow: scan, map, fori_loop, while_loop and cond, with bodies written as C++ functions.
// docs/control-flow.md explains their semantics, gradients and memory.
#pragma once

#include <symjax/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sj {

using Tensors = std::vector<Tensor>;

/// A scan step: (carry, slices of the sequences then the non-sequences) -> (new carry, outputs).
using ScanFn =
    std::function<std::pair<Tensors, Tensors>(const Tensors& carry, const Tensors& args)>;
/// A map step: (slices of the sequences then the non-sequences) -> one output.
using MapFn = std::function<Tensor(const Tensors& args)>;
/// A while_loop condition (a bool scalar) or body (the new loop variables), from
/// (loop variables, non-sequences).
using CondFn = std::function<Tensor(const Tensors& vars, const Tensors& non_sequences)>;
using BodyFn = std::function<Tensors(const Tensors& vars, const Tensors& non_sequences)>;
/// A cond branch: operands -> results (both branches return the same types).
using BranchFn = std::function<Tensors(const Tensors& operands)>;
/// A fori_loop body: (index i, carry) -> new carry.
using ForiFn = std::function<Tensors(const Tensor& i, const Tensors& carry)>;

struct ScanOptions {
    /// The number of steps when there are no sequences (with sequences: their first dim, and
    /// a length given must agree with it).
    std::optional<int64_t> length;
    /// Run from the last slice to the first; stacked outputs stay in the sequences' order.
    bool reverse = false;
    /// Named in errors and in the graph ("scan" when empty).
    std::string name;
    /// k > 0: gradient checkpointing. The backward pass keeps the carry of every k-th step only
    /// and recomputes the k carries of a segment from it when it gets there: memory for carries
    /// falls from length to about length / k + k, for one more forward pass. Built as a scan over
    /// segments of k steps whose body is a scan over the steps (docs/control-flow.md); needs the
    /// number of steps when the graph is built.
    int64_t checkpoint_every = 0;
    /// k > 1: k steps in one iteration of the loop (JAX's unroll): the same results, 1/k of the
    /// iterations, and a body of k steps for fusion to work on. Built as a scan over blocks of k
    /// steps whose body runs the step k times (then the last length % k steps); needs the number
    /// of steps when the graph is built. With checkpoint_every, the scans over a segment unroll.
    int64_t unroll = 1;
};

struct ScanResult {
    Tensors carry;   // the carry after the last step
    Tensors outputs; // each step's outputs, stacked along a new first dim [length, ...]
};

/// Theano's scan, JAX's lax.scan: `fn` runs once per slice of `sequences` (along their first
/// dim), threading the carry from `init`. The body is traced once into a sub-graph; the tensors it
/// uses from outside (non_sequences, variables, placeholders, anything else) become inputs of the
/// loop, so gradients reach them and clone sees them. Differentiable (reverse mode, forward mode
/// and higher order).
ScanResult scan(const ScanFn& fn, const Tensors& init, const Tensors& sequences,
                const Tensors& non_sequences = {}, const ScanOptions& options = {});

/// fn applied to each slice of `sequences` (their first dims agree), the results stacked.
Tensor map(const MapFn& fn, const Tensors& sequences, const Tensors& non_sequences = {});

/// carry = fn(i, carry) for i in [lower, upper): a scan over the index (differentiable).
Tensors fori_loop(int64_t lower, int64_t upper, const ForiFn& fn, const Tensors& init);

struct WhileOptions {
    /// Stop after this many iterations even if the condition still holds. Gradients need it:
    /// the carries the backward pass reads are stored in a buffer of this many rows.
    std::optional<int64_t> max_iterations;
    std::string name; // "while_loop" when empty
};

/// While cond_fn(vars, non_sequences) is true: vars = body_fn(vars, non_sequences). Returns the
/// final loop variables. Differentiable when max_iterations is given: the trip count is recorded
/// and the backward pass runs that many steps.
Tensors while_loop(const CondFn& cond_fn, const BodyFn& body_fn, const Tensors& loop_vars,
                   const Tensors& non_sequences = {}, const WhileOptions& options = {});
/// The number of iterations the while_loop that computed `result` (any of its results) ran.
Tensor trip_count(const Tensor& result);

/// true_fn(operands) when `pred` (a bool scalar) is true, else false_fn(operands). Only the
/// chosen branch runs. Both branches return the same number of tensors with the same types.
Tensors cond(const Tensor& pred, const BranchFn& true_fn, const BranchFn& false_fn,
             const Tensors& operands);

/// branches[index](operands), with `index` an integer scalar clamped to [0, branches.size()).
Tensors switch_(const Tensor& index, const std::vector<BranchFn>& branches,
                const Tensors& operands);

} // namespace sj
