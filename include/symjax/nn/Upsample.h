// Upsampling layers: Upsample1D and Upsample2D, torch.nn.Upsample with integer scale factors.
#pragma once

#include <symjax/Interpolation.h>
#include <symjax/nn/Module.h>

namespace sj::nn {

/// Options of Upsample1D and Upsample2D.
struct UpsampleOptions {
    /// Nearest or Linear (torch's "nearest", and "linear" in 1-d, "bilinear" in 2-d).
    interpolation::Method method = interpolation::Method::Nearest;
    /// torch's align_corners (docs/ops.md, "Interpolation").
    bool align_corners = false;
};

/// [N, C, W] -> [N, C, W * scale] by interpolation::resize (torch.nn.Upsample(scale_factor)).
class Upsample1D : public Module {
public:
    explicit Upsample1D(int64_t scale, UpsampleOptions options = {});
    Tensor forward(const Tensor& x, Mode mode) const override;

private:
    int64_t scale_;
    UpsampleOptions o_;
};

/// [N, C, H, W] -> [N, C, H * scale[0], W * scale[1]] by interpolation::resize
/// (torch.nn.Upsample(scale_factor)); one scale for both dims when it has one entry.
class Upsample2D : public Module {
public:
    explicit Upsample2D(Axes scale, UpsampleOptions options = {});
    Tensor forward(const Tensor& x, Mode mode) const override;

private:
    Axes scale_;
    UpsampleOptions o_;
};

} // namespace sj::nn
