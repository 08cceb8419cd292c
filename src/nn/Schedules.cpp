// Learning-rate schedules as small graphs of the step.
#include <symjax/Ops.h>
#include <symjax/nn/Schedules.h>

#include <cmath>

namespace sj::nn::schedules {

namespace {
/// The step as a 0-d f64 tensor.
Tensor step_f64(const Tensor &step, const char *what) {
    SJ_CHECK(step.defined() && step.rank() == 0, ShapeError)
        << "nn::schedules::" << what << ": the step must be a 0-d tensor, got "
        << (step.defined() ? step.name() + " " + step.type_str() : std::string("undefined"));
    SJ_CHECK(step.dtype() != DType::Bool, TypeError)
        << "nn::schedules::" << what << ": the step must be numeric, got " << step.type_str();
    return step.dtype() == DType::F64 ? step : cast(step, DType::F64);
}

Tensor out(const Tensor &v, DType dtype) {
    return dtype == DType::F64 ? v : cast(v, dtype);
}
} // namespace

Tensor piecewise_constant(const Tensor &step, const std::vector<double> &boundaries,
                          const std::vector<double> &values, DType dtype) {
    SJ_CHECK(values.size() == boundaries.size() + 1, InputError)
        << "nn::schedules::piecewise_constant: " << values.size() << " values for " << boundaries.size()
        << " boundaries (need one more value than boundaries)";
    for (size_t i = 1; i < boundaries.size(); ++i)
        SJ_CHECK(boundaries[i - 1] < boundaries[i], InputError)
            << "nn::schedules::piecewise_constant: boundaries must increase";
    Tensor s = step_f64(step, "piecewise_constant");
    // nested selects, not sums of steps: each value comes out exactly
    Tensor r = scalar(values[0], DType::F64);
    for (size_t i = 0; i < boundaries.size(); ++i)
        r = where(s >= boundaries[i], scalar(values[i + 1], DType::F64), r);
    return out(r, dtype);
}

Tensor exponential_decay(const Tensor &step, double init, double decay_steps, double rate,
                         bool staircase, DType dtype) {
    SJ_CHECK(decay_steps > 0 && rate > 0, InputError)
        << "nn::schedules::exponential_decay: need decay_steps > 0 and rate > 0, got " << decay_steps
        << " and " << rate;
    Tensor e = step_f64(step, "exponential_decay") / decay_steps;
    if (staircase)
        e = floor(e);
    return out(init * pow(scalar(rate, DType::F64), e), dtype);
}

Tensor cosine_decay(const Tensor &step, double init, double decay_steps, double alpha,
                    double warmup_steps, DType dtype) {
    SJ_CHECK(decay_steps > 0 && warmup_steps >= 0, InputError)
        << "nn::schedules::cosine_decay: need decay_steps > 0 and warmup_steps >= 0, got "
        << decay_steps << " and " << warmup_steps;
    Tensor s = step_f64(step, "cosine_decay");
    Tensor progress = clip(s - warmup_steps, 0.0, decay_steps) / decay_steps;
    Tensor cosine = init * (alpha + (1.0 - alpha) * 0.5 * (1.0 + cos(M_PI * progress)));
    if (warmup_steps == 0)
        return out(cosine, dtype);
    Tensor warm = init * s / warmup_steps;
    return out(where(s < warmup_steps, warm, cosine), dtype);
}

Tensor linear_warmup(const Tensor &step, double peak, double warmup_steps, double start,
                     DType dtype) {
    SJ_CHECK(warmup_steps >= 0, InputError)
        << "nn::schedules::linear_warmup: warmup_steps must be >= 0, got " << warmup_steps;
    Tensor s = step_f64(step, "linear_warmup");
    if (warmup_steps == 0)
        return out(full_like(s, peak), dtype);
    Tensor frac = clip(s / warmup_steps, 0.0, 1.0);
    return out(start + (peak - start) * frac, dtype);
}

} // namespace sj::nn::schedules
