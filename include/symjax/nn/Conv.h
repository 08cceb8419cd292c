// Convolutional layers: Conv (N-d), Conv1D, Conv2D, Conv2DTranspose, pooling, global average
// pooling and the residual block (augmentation layers live in nn/Augment.h).
#pragma once

#include <symjax/Ops.h>
#include <symjax/nn/Init.h>
#include <symjax/nn/Layers.h>
#include <symjax/nn/Module.h>

#include <cstdint>
#include <memory>

namespace sj::nn {

/// Geometry and parameters of a convolution layer. strides and dilation take one value per
/// spatial dim or one for all (empty: 1).
struct ConvOptions {
    Axes strides = {};
    Padding padding = "VALID";
    Axes dilation = {};
    int64_t groups = 1;
    bool bias = true;
    Initializer init = init::he_uniform();
    DType dtype = DType::F32;
};

/// N-d convolution layer: x [N, in, spatial...] -> [N, out, spatial'...]. The kernel W is
/// [out, in / groups, k...] (OIHW), the bias b is [out]. Variables: <scope>/conv/W, .../b.
class Conv : public Module {
public:
    Conv(int64_t in, int64_t out, const Axes& kernel, ConvOptions options = {});
    Tensor forward(const Tensor& x, Mode mode) const override;
    const Variable& weights() const { return w_; }
    const Variable& bias() const { return b_; }
    const ConvOptions& options() const { return o_; }

protected:
    Conv(int64_t in, int64_t out, const Axes& kernel, ConvOptions options, int spatial,
         const char* kind);

private:
    int64_t in_, out_;
    Axes kernel_;
    ConvOptions o_;
    const char* kind_;
    Variable w_, b_;
};

/// Conv on [N, C, W] inputs.
class Conv1D : public Conv {
public:
    Conv1D(int64_t in, int64_t out, int64_t kernel, ConvOptions options = {});
};

/// Conv on [N, C, H, W] inputs; kernel {kh, kw}, or one size for both.
class Conv2D : public Conv {
public:
    Conv2D(int64_t in, int64_t out, const Axes& kernel, ConvOptions options = {});
    Conv2D(int64_t in, int64_t out, int64_t kernel, ConvOptions options = {});
};

/// Options of a transposed convolution; output_padding as in PyTorch (< stride).
struct ConvTransposeOptions {
    Axes strides = {};
    Padding padding = "VALID";
    Axes dilation = {};
    int64_t groups = 1;
    Axes output_padding = {};
    bool bias = true;
    Initializer init = init::he_uniform();
    DType dtype = DType::F32;
};

/// Transposed 2-d convolution ("deconvolution"), the gradient of a Conv2D with respect to its
/// input: x [N, in, H, W] -> [N, out, H', W'] with H' = (H - 1) * stride - pads + (kh - 1) *
/// dilation + 1 + output_padding ("SAME": H' = H * stride). W is [in, out / groups, kh, kw] as in
/// PyTorch.
class Conv2DTranspose : public Module {
public:
    Conv2DTranspose(int64_t in, int64_t out, const Axes& kernel, ConvTransposeOptions options = {});
    Tensor forward(const Tensor& x, Mode mode) const override;
    const Variable& weights() const { return w_; }
    const Variable& bias() const { return b_; }

private:
    int64_t in_, out_;
    Axes kernel_;
    ConvTransposeOptions o_;
    Variable w_, b_;
};

/// Options of the pooling layers. strides: one per spatial dim or one for all; empty: the window.
struct PoolOptions {
    Axes strides = {};
    Padding padding = "VALID";
    /// Average pooling only: padded positions count in the divisor (PyTorch's default).
    bool count_include_pad = true;
};
/// Max or average pooling over the trailing `window.size()` dims.
class Pool : public Module {
public:
    enum class Kind { Max, Avg };
    Pool(Kind kind, const Axes& window, PoolOptions options = {});
    Tensor forward(const Tensor& x, Mode mode) const override;

private:
    Kind kind_;
    Axes window_;
    PoolOptions o_;
};

class MaxPool1D : public Pool {
public:
    explicit MaxPool1D(int64_t window, PoolOptions options = {});
};
/// window {h, w}, or one size for both.
class MaxPool2D : public Pool {
public:
    explicit MaxPool2D(const Axes& window, PoolOptions options = {});
};
class AvgPool1D : public Pool {
public:
    explicit AvgPool1D(int64_t window, PoolOptions options = {});
};
/// window {h, w}, or one size for both.
class AvgPool2D : public Pool {
public:
    explicit AvgPool2D(const Axes& window, PoolOptions options = {});
};

/// Mean over every spatial dim: [N, C, spatial...] -> [N, C].
class GlobalAvgPool : public Module {
public:
    Tensor forward(const Tensor& x, Mode mode) const override;
};

/// The residual block of the SymJAX library (He et al. 2016):
///   relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)),
/// conv1 3x3 with `stride`, conv2 3x3, both SAME and without bias (batch norm follows); the
/// shortcut is the identity, or a 1x1 conv with `stride` and a batch norm when the shape changes.
struct ResidualBlockOptions {
    int64_t stride = 1;
    DType dtype = DType::F32;
};
class ResidualBlock : public Module {
public:
    ResidualBlock(int64_t in, int64_t out, ResidualBlockOptions options = {});
    Tensor forward(const Tensor& x, Mode mode) const override;

private:
    std::shared_ptr<const Conv2D> conv1_, conv2_, proj_;
    std::shared_ptr<const BatchNorm> bn1_, bn2_, proj_bn_;
};

} // namespace sj::nn
