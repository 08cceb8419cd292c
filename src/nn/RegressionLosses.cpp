// Regression losses: mean squared error, mean absolute error, Huber.
#include "LossUtil.h"

#include <symjax/Ops.h>
#include <symjax/nn/Losses.h>

namespace sj::nn::losses {

namespace {
Tensor residual(const Tensor &targets, const Tensor &predictions, const char *what) {
    detail::check_float(predictions, what);
    detail::check_same_shape(targets, predictions, what);
    return detail::as_dtype(targets, predictions.dtype()) - predictions;
}
} // namespace

Tensor mse(const Tensor &targets, const Tensor &predictions) {
    Tensor r = residual(targets, predictions, "mse");
    return detail::per_example(r * r);
}

Tensor mae(const Tensor &targets, const Tensor &predictions) {
    return detail::per_example(abs(residual(targets, predictions, "mae")));
}

Tensor huber(const Tensor &targets, const Tensor &predictions, double delta) {
    SJ_CHECK(delta > 0, InputError) << "nn::losses::huber: delta must be positive, got " << delta;
    Tensor r = residual(targets, predictions, "huber");
    Tensor a = abs(r);
    return detail::per_example(where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta)));
}

} // namespace sj::nn::losses
