// Upsampling layers: Upsample1D and Upsample2D, torch.nn.Upsample with integer scale factors.
#pragma once

#include <symjax/Interpolation.h>
#include <symjax/nn/Module.h>

namespace sj::nn {

/// Options of Upsample1D.
struct Upsample1DOptions {
    /// Nearest or Linear (torch's "nearest" / "linear").
    interpolation::Method method = interpolation::Method::Nearest;
    /// torch's align_corners (docs/ops.md, "Interpolation").
    bool align_corners = false;
};

/// [N, C, W] -> [N, C, W * scale] by interpolation::resize (torch.nn.Upsample(scale_factor)).
class Upsample1D : public Module {
public:
    explicit Upsample1D(int64_t scale, Upsample1DOptions options = {});
    Tensor forward(const Tensor& x, Mode mode) const override;

private:
    int64_t scale_;
    Upsample1DOptions o_;
};

/// Options of Upsample2D.
struct Upsample2DOptions {
    /// Nearest or Linear (torch's "nearest" / "bilinear").
    interpolation::Method method = interpolation::Method::Nearest;
    /// torch's align_corners (docs/ops.md, "Interpolation").
    bool align_corners = false;
};

/// [N, C, H, W] -> [N, C, H * scale[0], W * scale[1]] by interpolation::resize
/// (torch.nn.Upsample(scale_factor)); one scale for both dims when it has one entry.
class Upsample2D : public Module {
public:
    explicit Upsample2D(Axes scale, Upsample2DOptions options = {});
    Tensor forward(const Tensor& x, Mode mode) const override;

private:
    Axes scale_;
    Upsample2DOptions o_;
};

} // namespace sj::nn
