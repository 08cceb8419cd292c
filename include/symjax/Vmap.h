// vmap: a function of one example turned into a function of a batch, as a graph transformation.
// docs/vmap.md explains the semantics, the batching rules and what falls back to a loop.
#pragma once

#include <symjax/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sj {

using Tensors = std::vector<Tensor>;

/// Which axis of an argument or a result carries the batch (negative: from the end), or
/// `not_mapped`: an argument every batch element shares, or a result that does not depend on
/// the batch.
using BatchAxis = std::optional<int64_t>;
inline constexpr std::nullopt_t not_mapped = std::nullopt;

/// A function of tensors to tensors (the kind vmap takes and returns).
using VmapFn = std::function<Tensors(const Tensors&)>;

struct VmapOptions {
    /// One entry per argument (empty: every argument mapped along axis 0).
    std::vector<BatchAxis> in_axes;
    /// One entry per result, or a single entry for all of them (empty: axis 0).
    std::vector<BatchAxis> out_axes;
    /// Named in errors and in the loops vmap falls back to ("vmap" when empty).
    std::string name;
};

/// JAX's vmap: `fn` written for one example, applied to every slice of the mapped arguments
/// along their batch axes, the results stacked along their out_axes. `fn` is traced once, on
/// placeholders of one example's type; then every op that depends on a mapped argument is
/// rewritten by its batching rule into the op on the whole batch (elementwise ops, reductions,
/// movement, dot_general, conv and pool, random draws: each element draws its own numbers).
/// An op without a rule for its case runs once per element in a `map` loop, which is always
/// right, only slower. Differentiable, nestable, and `fn` may call gradients(): vmap of a
/// gradient gives per-example gradients.
VmapFn vmap(VmapFn fn, VmapOptions options = {});
/// The same for a function of one tensor to one tensor.
std::function<Tensor(const Tensor&)> vmap(std::function<Tensor(const Tensor&)> fn,
                                          BatchAxis in_axis = 0, BatchAxis out_axis = 0);

} // namespace sj
