// Learning-rate schedules: functions of a step tensor returning the rate as a tensor.
#pragma once

#include <symjax/Tensor.h>

#include <cstdint>
#include <vector>

namespace sj::nn::schedules {

// Each schedule takes the step as a 0-d tensor of any numeric dtype (an optimizer's step
// counter, or any expression) and returns a 0-d tensor of `dtype`, computed in f64.

/// values[i] where i is the number of boundaries <= step: values[0] before boundaries[0], values[1]
/// from boundaries[0] on, ... (boundaries increasing; values.size() == boundaries.size() + 1).
Tensor piecewise_constant(const Tensor &step, const std::vector<double> &boundaries,
                          const std::vector<double> &values, DType dtype = DType::F32);
/// init * rate^(step / decay_steps); with staircase, the exponent is floor(step / decay_steps).
Tensor exponential_decay(const Tensor &step, double init, double decay_steps, double rate,
                         bool staircase = false, DType dtype = DType::F32);
/// Linear warm-up from 0 to init over warmup_steps, then a cosine from init down to alpha * init
/// over the next decay_steps, then alpha * init:
///   init * (alpha + (1 - alpha) (1 + cos(pi min(step - warmup, decay) / decay)) / 2).
Tensor cosine_decay(const Tensor &step, double init, double decay_steps, double alpha = 0.0,
                    double warmup_steps = 0, DType dtype = DType::F32);
/// From start to peak linearly over warmup_steps, then peak.
Tensor linear_warmup(const Tensor &step, double peak, double warmup_steps, double start = 0.0,
                     DType dtype = DType::F32);

} // namespace sj::nn::schedules
