// Convolution and pooling (forward and backward) on the CPU through oneDNN.
#pragma once

#include "../../compiler/Fusion.h"

#include <symjax/Array.h>
#include <symjax/ir/Node.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace sj::cpu {

class KeptMemories; // Dnnl.h

/// A oneDNN primitive (with its reorders and workspace pass) for one window op at fixed shapes.
struct WindowPrimitive;

/// The primitive for window op `n` (conv, conv_backward_data/filter, pool, max/avg_pool_backward;
/// f32, 1 to 3 spatial dims) with these concrete input types (the op's inputs in order, `like`
/// included) and output type. Built once per (op, shapes, attrs) and kept in a process-wide
/// LRU cache. Null when oneDNN declines the configuration: the caller runs the reference kernel.
/// A conv's `epilogue` (Note [Epilogue fusion] in src/compiler/Fusion.cpp) is applied inside the
/// call; `out` is then the epilogue's result.
/// `keep_workspace` (max pooling only): the forward runs in training mode and writes the
/// workspace that a paired max_pool_backward reads (Note [Max-pool workspace] in Conv.cpp).
/// `fixed_weights` (conv only): the weights come from variables the function does not update,
/// so a Winograd kernel's weight transform is made once and kept (Note [Winograd convolutions]).
std::shared_ptr<const WindowPrimitive>
window_primitive(const Node& n, const std::vector<TensorType>& in, const TensorType& out,
                 const std::vector<compiler::PostOp>& epilogue = {}, bool keep_workspace = false,
                 bool fixed_weights = false);

/// oneDNN's name for the implementation the primitive runs ("jit_wino_4x3:avx512_core", ...).
std::string window_impl(const WindowPrimitive& p);
/// Whether oneDNN's implementation name is a Winograd kernel's ("jit_wino_4x3:...").
bool winograd_impl(const std::string& impl);

/// How many fixed chunks of the batch conv_backward_filter sums (Note [Thread-count-independent
/// weight gradients] in Conv.cpp): a function of the batch and of the output positions per image
/// (the product of the output's spatial dims) alone.
int64_t filter_chunk_count(int64_t batch, int64_t positions);

/// Whether `backward` (a max_pool_backward primitive) can read the workspace that `forward` (a
/// pool made with keep_workspace) writes: the same argmax layout.
bool shares_workspace(const WindowPrimitive& forward, const WindowPrimitive& backward);

/// Whether the primitive starts the thread team when it runs (not a small pool: Note [Small
/// pools on one thread] in Conv.cpp).
bool runs_on_team(const WindowPrimitive& p);

/// A convolution's weights with an inference batch norm folded in, in the primitive's layout,
/// kept by the call site between calls (Note [Folded weights cache] in Conv.cpp).
struct FoldedWeights {
    /// Set by the caller before each call: the stamp of the variable whose value the weights are
    /// (Note [Variable versions] in src/runtime/Variable.cpp), or 0 when they are not a
    /// variable's value and their bytes are compared instead.
    uint64_t weights_version = 0;
    uint64_t made_from_version = 0;    // the stamp they were made from (0: see source)
    std::vector<unsigned char> source; // else the weights' bytes they were made from
    std::vector<float> scale;          // and the per-output-channel scale
    Array weights;                     // scaled and reordered; undefined until the first call
};

/// Runs the primitive on the op's input values (`in` as for window_primitive; a shape-only
/// input may be empty) into `out`, allocated by the caller with the output type.
/// `post_operands[i]`: the operand of the epilogue's i-th post-op when it is binary.
/// `workspace`: a pool made with keep_workspace writes its workspace there (allocating it); a
/// max-pool backward given a defined one reads it instead of running the forward pass again.
/// `folded`: a conv that scales its weights (batch-norm folding, Note [Affine prefix] in
/// Dnnl.cpp) reuses the scaled weights kept there while their source and scale are unchanged.
/// `kept`: the call site's library arguments, kept between its calls (Note [Call arguments
/// kept] in Dnnl.cpp); null: made for this call.
void run_window(const WindowPrimitive& p, const std::vector<const Array*>& in, Array& out,
                const std::vector<const Array*>& post_operands = {}, Array* workspace = nullptr,
                FoldedWeights* folded = nullptr, KeptMemories* kept = nullptr);

/// Estimated floating-point operations of the op (multiply-adds count 2).
double window_flops(const Node& n, const std::vector<TensorType>& in, const TensorType& out);

/// Primitives in the cache, and how many lookups found theirs (for tests).
struct WindowCacheStats {
    size_t entries = 0, hits = 0, misses = 0;
    /// calls that reused their folded weights, and calls that (re)made them
    size_t folded_hits = 0, folded_misses = 0;
};
WindowCacheStats window_cache_stats();

} // namespace sj::cpu
