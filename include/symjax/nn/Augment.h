// In-graph data augmentation layers: RandomFlip and RandomCrop, on any axes of any rank, with a
// new draw per example (axis 0 is the batch) and per call.
#pragma once

#include <symjax/Ops.h>
#include <symjax/nn/Module.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace sj::nn {

/// Options of RandomFlip.
struct RandomFlipOptions {
    /// Probability that an example is flipped.
    double p = 0.5;
    /// The axes reversed together (never 0, the batch axis); {-1}: left-right on [N, C, H, W].
    Axes axes = {-1};
    /// Fixes the draws (the k-th graph built from the layer draws from a stream of (seed, k)).
    std::optional<uint64_t> seed;
};

/// Training-time augmentation: reverses `axes` of each example (slices along axis 0) with
/// probability p, one draw per example and per call; all the axes flip together (SymJAX's
/// RandomFlip; stack two layers for independent flips). Identity in eval mode.
class RandomFlip : public Module {
public:
    explicit RandomFlip(RandomFlipOptions options = {});
    Tensor forward(const Tensor& x, Mode mode) const override;
    const RandomFlipOptions& options() const { return o_; }

private:
    RandomFlipOptions o_;
    std::shared_ptr<std::atomic<uint64_t>> calls_;
};

/// Options of RandomCrop. padding and size take one entry per axis of `axes`, or one for all.
struct RandomCropOptions {
    /// Zeros added before and after each of `axes` ({{4, 4}}: torchvision's padding=4).
    std::vector<std::pair<int64_t, int64_t>> padding = {};
    /// The crop's size along each of `axes`; empty: the input's own size.
    Shape size = {};
    /// The cropped axes (never 0, the batch axis); {-2, -1}: H and W of [N, C, H, W].
    Axes axes = {-2, -1};
    /// Fixes the draws (the k-th graph built from the layer draws from a stream of (seed, k)).
    std::optional<uint64_t> seed;
};

/// Training-time augmentation: zero-pads `axes` of x and takes a window of `size` at a random
/// offset per example (uniform over the lo + hi + n - size + 1 positions of each axis) and per
/// call. Eval mode takes the centre window (offset (lo + hi + n - size) / 2, SymJAX's
/// deterministic crop), which is x itself for the default size and symmetric padding. The dims
/// other than the batch must be known when the graph is built.
class RandomCrop : public Module {
public:
    explicit RandomCrop(RandomCropOptions options = {});
    Tensor forward(const Tensor& x, Mode mode) const override;
    const RandomCropOptions& options() const { return o_; }

private:
    RandomCropOptions o_;
    std::shared_ptr<std::atomic<uint64_t>> calls_;
};

} // namespace sj::nn
