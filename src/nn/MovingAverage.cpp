// Moving averages of any tensor: state variables plus the Updates of one observation.
#include "NnUtil.h"

#include <symjax/Ops.h>
#include <symjax/nn/MovingAverage.h>

namespace sj::nn {

namespace {
/// Checks the averaged tensor: defined, float, of static shape (its state lives in variables).
void check_value(const Tensor& value, const char* what) {
    SJ_CHECK(value.defined(), InputError) << what << ": undefined value";
    SJ_CHECK(is_float(value.dtype()), TypeError)
        << what << ": only float tensors can be averaged, got " << value.name() << " "
        << value.type_str();
    SJ_CHECK(is_static(value.shape()), ShapeError)
        << what << ": the value " << value.name() << " " << value.type_str()
        << " has unknown (-1) dims; the average's state needs a static shape";
}

/// The starting value: `init` (0-d or of the value's shape) evaluated once, or zeros.
Array initial_value(const Tensor& init, const Tensor& value) {
    if (!init.defined())
        return Array::full(value.dtype(), value.shape(), 0.0);
    SJ_CHECK(init.rank() == 0 || init.shape() == value.shape(), ShapeError)
        << "nn::exponential_moving_average: init " << init.name() << " " << init.type_str()
        << " must be 0-d or have the shape of the value " << value.name() << " "
        << value.type_str();
    return broadcast_to(cast(init, value.dtype()), value.shape()).eval();
}
} // namespace

// Note [Debiased moving averages]
// With ema_0 = init and decays d_1..d_t, ema_t = init * P_t + sum_k w_k value_k where
// P_t = d_1 ... d_t and the weights w_k sum to 1 - P_t. So (ema_t - init * P_t) / (1 - P_t) is
// a weighted mean of the values with weights summing to one: Adam's bias correction, exact
// also when decay_min makes the decay vary (SymJAX used decay^t, exact only for a constant
// decay). P_t is kept in a variable, so the correction costs one scalar per average.
Averaged exponential_moving_average(const Tensor& value, double alpha, const EmaOptions& o) {
    const char* what = "nn::exponential_moving_average";
    check_value(value, what);
    SJ_CHECK(alpha >= 0 && alpha <= 1 && !(o.debias && alpha == 1), InputError)
        << what << ": alpha must lie in [0, 1) (1 only without debias), got " << alpha;
    SJ_CHECK(!(o.debias && o.start_at_first), InputError)
        << what << ": debias and start_at_first exclude each other (starting at the first "
        << "value leaves no bias to correct); set debias = false";
    const DType dt = value.dtype();
    const Array init = initial_value(o.init, value);
    const std::string scope = detail::unique_scope(o.name);

    Averaged r;
    Variable ema_state = detail::make_variable(scope + "/ema", init, false);
    Variable steps = detail::make_variable(scope + "/num_steps", Array::scalar<int64_t>(0), false);
    Tensor n = cast(steps, dt);
    Tensor d = scalar(alpha, dt);
    if (o.decay_min)
        d = minimum(d, (1.0 + n) / (10.0 + n));
    Tensor ema = d * ema_state + (1.0 - d) * value;
    if (o.start_at_first)
        ema = where(eq(steps, scalar(0, DType::I64)), value, ema);
    r.updates.add(ema_state, ema);
    r.updates.add(steps, steps + 1.0);
    r.variables = {ema_state, steps};
    if (!o.debias) {
        r.value = ema;
        r.average = ema_state;
        return r;
    }
    Variable product =
        detail::make_variable(scope + "/decay_product", Array::full(dt, {}, 1.0), false);
    Variable average = detail::make_variable(scope + "/average", init, false);
    Tensor p = product * d;
    r.value = (ema - constant(init) * p) / (1.0 - p);
    r.average = average;
    r.updates.add(product, p);
    r.updates.add(average, r.value);
    r.variables.push_back(product);
    r.variables.push_back(average);
    return r;
}

Averaged simple_moving_average(const Tensor& value, int64_t window, const std::string& name) {
    const char* what = "nn::simple_moving_average";
    check_value(value, what);
    SJ_CHECK(window >= 1, InputError) << what << ": the window must be >= 1, got " << window;
    const DType dt = value.dtype();
    Shape buf_shape{window};
    buf_shape.insert(buf_shape.end(), value.shape().begin(), value.shape().end());
    const std::string scope = detail::unique_scope(name);

    Averaged r;
    // the last `window` values, oldest first; slots not yet filled hold zeros
    Variable buffer =
        detail::make_variable(scope + "/window", Array::full(dt, buf_shape, 0.0), false);
    Variable steps = detail::make_variable(scope + "/num_steps", Array::scalar<int64_t>(0), false);
    Variable average =
        detail::make_variable(scope + "/average", Array::full(dt, value.shape(), 0.0), false);
    Tensor newest = expand_dims(value, 0);
    Tensor shifted = window == 1 ? newest : concat({buffer[sl(1)], newest}, 0);
    Tensor seen = minimum(cast(steps, dt) + 1.0, static_cast<double>(window));
    r.value = sum(shifted, {0}) / seen;
    r.average = average;
    r.updates.add(buffer, shifted);
    r.updates.add(steps, steps + 1.0);
    r.updates.add(average, r.value);
    r.variables = {buffer, steps, average};
    return r;
}

} // namespace sj::nn
