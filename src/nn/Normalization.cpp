// Normalisation layers: LayerNorm and BatchNorm (whose running statistics are state updates).
#include "../ops/OpDef.h"

#include <symjax/Dist.h>
#include <symjax/Ops.h>
#include <symjax/nn/Layers.h>

namespace sj::nn {

// ---- LayerNorm ----------------------------------------------------------------------------------
LayerNorm::LayerNorm(int64_t dim, LayerNormOptions o) : dim_(dim), eps_(o.eps) {
    const DType dtype = o.dtype;
    SJ_CHECK(dim > 0, ShapeError) << "nn::LayerNorm: dim must be positive, got " << dim;
    open_scope("layer_norm");
    gamma_ = add_variable("gamma", Array::full(dtype, {dim}, 1.0));
    beta_ = add_variable("beta", Array(dtype, {dim}));
}

Tensor LayerNorm::forward(const Tensor& x, Mode) const {
    SJ_CHECK(x.rank() >= 1 && (x.dim(-1) == dim_ || x.dim(-1) == -1), ShapeError)
        << "nn::LayerNorm '" << scope() << "': input " << x.name() << " " << x.type_str()
        << " must end with a dim of " << dim_;
    Tensor mu = mean(x, {-1}, true);
    Tensor v = var(x, {-1}, true);
    return (x - mu) * rsqrt(v + eps_) * gamma_ + beta_;
}

// ---- BatchNorm ----------------------------------------------------------------------------------
BatchNorm::BatchNorm(int64_t features, BatchNormOptions o)
    : features_(features), momentum_(o.momentum), eps_(o.eps), sync_(o.sync) {
    const DType dtype = o.dtype;
    const double momentum = o.momentum;
    SJ_CHECK(features > 0, ShapeError)
        << "nn::BatchNorm: features must be positive, got " << features;
    SJ_CHECK(momentum >= 0 && momentum <= 1, InputError)
        << "nn::BatchNorm: momentum must lie in [0, 1], got " << momentum;
    open_scope("batch_norm");
    gamma_ = add_variable("gamma", Array::full(dtype, {features}, 1.0));
    beta_ = add_variable("beta", Array(dtype, {features}));
    mean_ = add_variable("running_mean", Array(dtype, {features}), false);
    var_ = add_variable("running_var", Array::full(dtype, {features}, 1.0), false);
}

Tensor BatchNorm::forward(const Tensor& x, Mode mode) const {
    SJ_CHECK(x.rank() >= 2 && (x.dim(1) == features_ || x.dim(1) == -1), ShapeError)
        << "nn::BatchNorm '" << scope() << "': input " << x.name() << " " << x.type_str()
        << " must be [N, " << features_ << ", ...]";
    // parameters [F] broadcast against axis 1: [F, 1, ..., 1]
    Shape pshape(x.rank() - 1, 1);
    pshape[0] = features_;
    auto per_feature = [&](const Tensor& p) { return x.rank() == 2 ? p : reshape(p, pshape); };
    Tensor g = per_feature(gamma_), b = per_feature(beta_);
    if (mode == Mode::Eval)
        return (x - per_feature(mean_)) * rsqrt(per_feature(var_) + eps_) * g + b;

    Axes axes{0};
    for (int a = 2; a < x.rank(); ++a)
        axes.push_back(a);
    Tensor mu, v;
    if (sync_) {
        // the global batch's mean, then its variance around it (two passes, as var()); the
        // gradients flow through the all_reduce means to every rank's share
        mu = dist::all_reduce(mean(x, axes, true), dist::ReduceOp::Mean);
        Tensor d = x - mu;
        v = dist::all_reduce(mean(d * d, axes, true), dist::ReduceOp::Mean);
    } else {
        mu = mean(x, axes, true);
        v = var(x, axes, true);
    }
    Tensor y = (x - mu) * rsqrt(v + eps_) * g + b;

    // running statistics; the running variance is unbiased: n / (n - 1) times the batch's. n is
    // the mean's own count (the same node when counted at call time: [1, F, 1...], all equal)
    Tensor n = detail::count_over(x, axes, true, v.dtype());
    if (n.rank() > 0)
        n = reshape(n, {features_})[0];
    if (sync_)
        n = n * double(dist::size()); // the global batch (equal shares)
    Tensor batch_mean = stop_gradient(reshape(mu, {features_}));
    Tensor batch_var = stop_gradient(reshape(v, {features_}) * (n / maximum(n - 1.0, 1.0)));
    DType dt = mean_.dtype();
    Tensor new_mean = momentum_ * mean_ + cast(batch_mean, dt) * (1.0 - momentum_);
    Tensor new_var = momentum_ * var_ + cast(batch_var, dt) * (1.0 - momentum_);
    attach_state_updates(y, Updates{{mean_, new_mean}, {var_, new_var}});
    return y;
}

} // namespace sj::nn
