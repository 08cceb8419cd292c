// oneDNN plumbing shared by the cpu backend's library calls: the engine, the thread count and
// the post-ops of fused epilogues.
#pragma once

#include "../../compiler/Fusion.h"

#include <dnnl.hpp>

#include <string>
#include <unordered_map>

namespace sj::cpu {

/// The CPU engine (one per process).
const dnnl::engine& dnnl_engine();

/// Gives oneDNN's OpenMP regions started from the calling thread as many threads as our pool
/// has (SJ_NUM_THREADS, else the hardware threads), so a library call and our kernels use the
/// same cores and SJ_NUM_THREADS limits both. Cheap: sets the count once per calling thread.
void match_dnnl_threads();

/// While alive, oneDNN primitives created on the calling thread plan their work for one thread
/// (oneDNN reads the OpenMP thread count when a primitive is made), and GEMM-based ones run on
/// one. Such a primitive may run inside our parallel regions, where oneDNN's parallel() runs one
/// thread: a jit convolution planned for two hangs there at its reduction's barrier (Note
/// [Thread-count-independent weight gradients] in Conv.cpp). Restores the previous count when
/// destroyed.
class OneDnnlThread {
public:
    OneDnnlThread();
    ~OneDnnlThread();
    OneDnnlThread(const OneDnnlThread&) = delete;
    OneDnnlThread& operator=(const OneDnnlThread&) = delete;

private:
    int previous_;
};

/// Where a library call's result holds its channels, for the operands of its post-ops: the
/// logical rank of the result as oneDNN sees it, the channel dim and the channel count.
struct ChannelDim {
    int rank = 0, dim = 0;
    int64_t channels = 0;
};

/// `attr` with the epilogue's post-ops from `first` on (Note [Epilogue fusion] in
/// src/compiler/Fusion.cpp; the ones before are the call's bias and weight scales: Note [Affine
/// prefix]).
void set_post_ops(dnnl::primitive_attr& attr, const std::vector<compiler::PostOp>& epilogue,
                  const ChannelDim& c, size_t first = 0);

/// How many leading post-ops are per-channel affine steps (add, sub, mul by a per-channel or
/// one value; linear), the ones that only shift (no mul, linear with alpha 1) when !scale.
size_t affine_prefix(const std::vector<compiler::PostOp>& epilogue, bool scale);

/// The first n post-ops as y = scale[c] * x + shift[c], computed from their operands.
void affine_of(const std::vector<compiler::PostOp>& epilogue, size_t n,
               const std::vector<const Array*>& operands, int64_t channels, float* scale,
               float* shift);

/// The post-ops' part of a primitive cache key.
std::string post_ops_key(const std::vector<compiler::PostOp>& epilogue);

/// Adds the binary post-ops' operands (`operands[i]` for epilogue[i]; null for the others) to a
/// primitive's execution arguments.
void add_post_op_args(std::unordered_map<int, dnnl::memory>& args,
                      const std::vector<compiler::PostOp>& epilogue,
                      const std::vector<const Array*>& operands, const ChannelDim& c,
                      size_t first = 0);

} // namespace sj::cpu
