// The reference backend: a plain interpreter over every primitive (the oracle for tests).
#pragma once

#include <symjax/Array.h>
#include <symjax/ir/Node.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../../dist/Comm.h"

namespace sj::ref {

/// What a reference kernel sees: the node (op and attributes), its input values, the concrete
/// output type (the op's type rule re-run on the input shapes) and the call counter for RNG.
struct KernelCtx {
    const Node& node;
    const std::vector<Array>& in;
    const TensorType& out;
    uint64_t counter;
    template <class A> const A& attr() const { return node.attr<A>(); }
};
using Kernel = Array (*)(const KernelCtx&);

/// The concrete output type of `node` for these input values (binds -1 dims, checks them).
TensorType concrete_type(const Node& node, const std::vector<Array>& in);
/// The reference kernel of an op (null for leaves).
Kernel kernel_for(Op op);
/// Evaluates one node on concrete inputs. Leaves are not evaluated here (the caller binds them).
Array eval_node(const Node& node, const std::vector<Array>& in, uint64_t counter);

/// Number of matrices in a [..., rows, cols] array.
inline int64_t matrix_count(const Shape& s) {
    int64_t n = 1;
    for (size_t i = 0; i + 2 < s.size(); ++i) n *= s[i];
    return n;
}
/// How a linear-algebra error names its node: "cholesky(M)", or "cholesky L" for a node the user
/// named L (the reference kernels and the cpu backend's LAPACK calls say the same).
inline std::string linalg_where(const Node& n) {
    return n.name().empty() ? n.describe() : std::string(op_name(n.op())) + " " + n.name();
}

/// The InputError of index v, at position k of node's indices (input 1), outside [0, len):
/// gather's, scatter_add's and scatter's, on this backend and in the cpu backend's kernels.
[[noreturn]] void throw_index_out_of_range(const Node& node, int64_t v, int64_t k, int64_t len);
/// check_index node's InputError for value v at flat position k of idx (both backends).
[[noreturn]] void throw_check_index(const Node& node, const Array& idx, int64_t k, int64_t v);
/// dynamic_slice's and dynamic_update_slice's start indices (`starts`, one per dim of `shape`,
/// else an InputError naming the node), each clamped so that a window of `sizes` fits in
/// `shape` (XLA's semantics; both backends).
std::vector<int64_t> dynamic_starts(const Node& node, const Array& starts, const Shape& shape,
                                    const Shape& sizes);

// Each family file fills its rows of the kernel table.
void register_elementwise_kernels(Kernel* table);
void register_reduce_kernels(Kernel* table);
void register_sort_kernels(Kernel* table);
void register_movement_kernels(Kernel* table);
void register_indexing_kernels(Kernel* table);
void register_linalg_kernels(Kernel* table);
void register_conv_kernels(Kernel* table);
void register_random_kernels(Kernel* table);
void register_control_flow_kernels(Kernel* table);

/// all_reduce node c.node into `out` (its type), posted and not yet complete: the cpu backend's
/// overlapped collective (Note [Collective overlap] in src/compiler/ExecPlan.cpp); the
/// reference kernel is the same call, completed at once.
/// `checked`: its signature was checked with the plan's others (dist::detail::check_collectives).
std::shared_ptr<dist::detail::Request> start_all_reduce(const KernelCtx& c, Array& out,
                                                        bool checked);
/// The dist call of all_reduce node n for a result of type `out`.
dist::detail::Call all_reduce_call(const Node& n, const TensorType& out);

/// Runs one body of a region on argument values (0: Region::body, 1: Region::body2): a
/// backend's compiled body, or eval_body. `dests`, when given, has one entry per body result:
/// an array (a row of one of the loop's results) the runner may compute that result into
/// instead of a buffer of its own, or an undefined array (Note [Loop rows in place] in
/// ControlFlowKernels.cpp). A runner is free to ignore them: the loop copies what is not there.
using BodyRunner = std::function<std::vector<Array>(int body, const std::vector<Array>& args,
                                                    const std::vector<Array>* dests)>;
/// Runs the region of `n` (any of its nodes) on the values of its inputs, with `run_body`
/// running its bodies; returns every result, left undefined where `wanted` is false (Note
/// [Structured ops] in src/ops/ControlFlow.cpp). Every backend drives its loops with it.
std::vector<Array> run_region(const Node& n, const std::vector<Array>& in, const std::vector<bool>& wanted,
                              const BodyRunner& run_body);
/// Evaluates body `which` of n's region node by node with the reference kernels.
std::vector<Array> eval_body(const Node& n, int which, const std::vector<Array>& args, uint64_t counter);
void register_collective_kernels(Kernel* table);

/// Philox4x32-10 (Salmon et al., SC'11): 4 words of output for a 128-bit counter and 64-bit key.
void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/// Block q of a philox_bits draw: the 4 words for counter {q, the call's counter} under `key`
/// (element i of a draw is word i % 4 of block i / 4).
void philox_block(const uint32_t key[2], uint64_t counter, uint64_t q, uint32_t words[4]);

} // namespace sj::ref
