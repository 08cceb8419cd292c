// Convolutional layers, pooling and the residual block.
#include "NnUtil.h"

#include <symjax/Ops.h>
#include <symjax/Scope.h>
#include <symjax/nn/Activations.h>
#include <symjax/nn/Conv.h>

#include <sstream>

namespace sj::nn {

namespace {

/// [C] -> [C, 1, ..., 1] so it broadcasts against [N, C, spatial...].
Tensor per_channel(const Tensor& v, int rank) {
    Shape s(static_cast<size_t>(rank - 1), 1);
    s[0] = v.dim(0);
    return reshape(v, s);
}

void check_input(const Tensor& x, int spatial, int64_t channels, const std::string& who,
                 const std::string& scope) {
    SJ_CHECK(x.rank() == spatial + 2 && (x.dim(1) == channels || x.dim(1) == -1), ShapeError)
        << who << " '" << scope << "': input " << x.name() << " " << x.type_str() << " must be [N, "
        << channels
        << (spatial == 1   ? ", W]"
            : spatial == 2 ? ", H, W]"
                           : ", spatial...]");
}

} // namespace

// ---- Conv ---------------------------------------------------------------------------------------
Conv::Conv(int64_t in, int64_t out, const Axes& kernel, ConvOptions options)
    : Conv(in, out, kernel, std::move(options), static_cast<int>(kernel.size()), "conv") {}

Conv::Conv(int64_t in, int64_t out, const Axes& kernel, ConvOptions options, int spatial,
           const char* kind)
    : in_(in), out_(out), kernel_(kernel), o_(std::move(options)), kind_(kind) {
    SJ_CHECK(in > 0 && out > 0, ShapeError)
        << "nn::" << kind << ": channel counts must be positive, got in = " << in
        << ", out = " << out;
    SJ_CHECK(static_cast<int>(kernel.size()) == spatial && spatial >= 1, ShapeError)
        << "nn::" << kind << ": the kernel " << detail::axes_str(kernel) << " must have " << spatial
        << " size(s)";
    for (int64_t k : kernel)
        SJ_CHECK(k > 0, ShapeError)
            << "nn::" << kind << ": kernel sizes must be positive, got " << detail::axes_str(kernel);
    SJ_CHECK(o_.groups >= 1 && in % o_.groups == 0 && out % o_.groups == 0, ShapeError)
        << "nn::" << kind << ": groups = " << o_.groups << " must divide in = " << in
        << " and out = " << out;
    open_scope(kind);
    Shape wshape{out, in / o_.groups};
    wshape.insert(wshape.end(), kernel.begin(), kernel.end());
    w_ = add_variable("W", o_.init(wshape, o_.dtype));
    if (o_.bias)
        b_ = add_variable("b", Array(o_.dtype, {out}));
}

Tensor Conv::forward(const Tensor& x, Mode) const {
    const int spatial = static_cast<int>(kernel_.size());
    check_input(x, spatial, in_, std::string("nn::") + kind_, scope());
    Tensor y = conv(x, w_, o_.strides, o_.padding, o_.dilation, o_.groups);
    return b_.defined() ? y + per_channel(b_, y.rank()) : y;
}

Conv1D::Conv1D(int64_t in, int64_t out, int64_t kernel, ConvOptions options)
    : Conv(in, out, Axes{kernel}, std::move(options), 1, "conv1d") {}

Conv2D::Conv2D(int64_t in, int64_t out, const Axes& kernel, ConvOptions options)
    : Conv(in, out, kernel.size() == 1 ? Axes{kernel[0], kernel[0]} : kernel, std::move(options), 2,
           "conv2d") {}

Conv2D::Conv2D(int64_t in, int64_t out, int64_t kernel, ConvOptions options)
    : Conv2D(in, out, Axes{kernel, kernel}, std::move(options)) {}

// ---- Conv2DTranspose ----------------------------------------------------------------------------
Conv2DTranspose::Conv2DTranspose(int64_t in, int64_t out, const Axes& kernel,
                                 ConvTransposeOptions options)
    : in_(in), out_(out), kernel_(kernel.size() == 1 ? Axes{kernel[0], kernel[0]} : kernel),
      o_(std::move(options)) {
    SJ_CHECK(in > 0 && out > 0, ShapeError)
        << "nn::Conv2DTranspose: channel counts must be positive, got in = " << in
        << ", out = " << out;
    SJ_CHECK(kernel_.size() == 2 && kernel_[0] > 0 && kernel_[1] > 0, ShapeError)
        << "nn::Conv2DTranspose: the kernel " << detail::axes_str(kernel) << " must be {kh, kw} > 0";
    SJ_CHECK(o_.groups >= 1 && in % o_.groups == 0 && out % o_.groups == 0, ShapeError)
        << "nn::Conv2DTranspose: groups = " << o_.groups << " must divide in = " << in
        << " and out = " << out;
    open_scope("conv2d_transpose");
    // PyTorch's layout [in, out / groups, kh, kw]; the fans are those of the forward conv this
    // layer transposes (out -> in), which is what the initializer's [O, I, k...] reading gives.
    w_ = add_variable("W", o_.init({in, out / o_.groups, kernel_[0], kernel_[1]}, o_.dtype));
    if (o_.bias)
        b_ = add_variable("b", Array(o_.dtype, {out}));
}

Tensor Conv2DTranspose::forward(const Tensor& x, Mode) const {
    check_input(x, 2, in_, "nn::Conv2DTranspose", scope());
    Tensor y =
        conv_transpose(x, w_, o_.strides, o_.padding, o_.dilation, o_.groups, o_.output_padding);
    return b_.defined() ? y + per_channel(b_, y.rank()) : y;
}

// ---- pooling ------------------------------------------------------------------------------------
Pool::Pool(Kind kind, const Axes& window, PoolOptions options)
    : kind_(kind), window_(window), o_(std::move(options)) {
    SJ_CHECK(!window.empty(), ShapeError) << "nn::Pool: the window needs at least one size";
    for (int64_t w : window)
        SJ_CHECK(w > 0, ShapeError)
            << "nn::Pool: window sizes must be positive, got " << detail::axes_str(window);
}

Tensor Pool::forward(const Tensor& x, Mode) const {
    const auto spatial = static_cast<int>(window_.size());
    SJ_CHECK(x.rank() == spatial + 2, ShapeError)
        << "nn::" << (kind_ == Kind::Max ? "MaxPool" : "AvgPool") << spatial << "D: input "
        << x.name() << " " << x.type_str() << " must have rank " << spatial + 2
        << " [N, C, spatial...]";
    return kind_ == Kind::Max ? max_pool(x, window_, o_.strides, o_.padding)
                              : avg_pool(x, window_, o_.strides, o_.padding, o_.count_include_pad);
}

MaxPool1D::MaxPool1D(int64_t window, PoolOptions options)
    : Pool(Kind::Max, {window}, std::move(options)) {}
MaxPool2D::MaxPool2D(const Axes& window, PoolOptions options)
    : Pool(Kind::Max, window.size() == 1 ? Axes{window[0], window[0]} : window,
           std::move(options)) {
    SJ_CHECK(window.size() <= 2, ShapeError)
        << "nn::MaxPool2D: window " << detail::axes_str(window) << " must be {h, w} or one size";
}
AvgPool1D::AvgPool1D(int64_t window, PoolOptions options)
    : Pool(Kind::Avg, {window}, std::move(options)) {}
AvgPool2D::AvgPool2D(const Axes& window, PoolOptions options)
    : Pool(Kind::Avg, window.size() == 1 ? Axes{window[0], window[0]} : window,
           std::move(options)) {
    SJ_CHECK(window.size() <= 2, ShapeError)
        << "nn::AvgPool2D: window " << detail::axes_str(window) << " must be {h, w} or one size";
}

Tensor GlobalAvgPool::forward(const Tensor& x, Mode) const {
    SJ_CHECK(x.rank() >= 3, ShapeError) << "nn::GlobalAvgPool: input " << x.name() << " "
                                        << x.type_str() << " must be [N, C, spatial...]";
    Axes axes;
    for (int a = 2; a < x.rank(); ++a)
        axes.push_back(a);
    return mean(x, axes, false);
}

// ---- residual block -----------------------------------------------------------------------------
ResidualBlock::ResidualBlock(int64_t in, int64_t out, ResidualBlockOptions o) {
    const int64_t stride = o.stride;
    const DType dtype = o.dtype;
    SJ_CHECK(stride >= 1, InputError) << "nn::ResidualBlock: stride must be >= 1, got " << stride;
    open_scope("residual");
    const std::string leaf = scope().substr(scope().rfind('/') + 1);
    Scope inner(leaf);
    ConvOptions c{.strides = {stride}, .padding = "SAME", .bias = false, .dtype = dtype};
    conv1_ = std::make_shared<Conv2D>(in, out, 3, c);
    bn1_ = std::make_shared<BatchNorm>(out, BatchNormOptions{.momentum = 0.9, .dtype = dtype});
    c.strides = {1};
    conv2_ = std::make_shared<Conv2D>(out, out, 3, c);
    bn2_ = std::make_shared<BatchNorm>(out, BatchNormOptions{.momentum = 0.9, .dtype = dtype});
    add_child(conv1_), add_child(bn1_), add_child(conv2_), add_child(bn2_);
    if (stride != 1 || in != out) {
        ConvOptions pc{.strides = {stride}, .padding = "VALID", .bias = false, .dtype = dtype};
        proj_ = std::make_shared<Conv2D>(in, out, 1, pc);
        proj_bn_ = std::make_shared<BatchNorm>(out, BatchNormOptions{.momentum = 0.9, .dtype = dtype});
        add_child(proj_), add_child(proj_bn_);
    }
}

Tensor ResidualBlock::forward(const Tensor& x, Mode mode) const {
    Tensor h = relu((*bn1_)((*conv1_)(x, mode), mode));
    h = (*bn2_)((*conv2_)(h, mode), mode);
    Tensor shortcut = proj_ ? (*proj_bn_)((*proj_)(x, mode), mode) : x;
    return relu(h + shortcut);
}

} // namespace sj::nn
