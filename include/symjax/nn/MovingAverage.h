// Moving averages of any tensor (SymJAX's ExponentialMovingAverage and SimpleMovingAverage),
// returned with the Updates that advance them: nothing is registered globally.
#pragma once

#include <symjax/Function.h>
#include <symjax/Variable.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sj::nn {

/// A moving average of a tensor. Compile `updates` into the function that feeds the tensor; each
/// call of that function observes one value and advances the average.
struct Averaged {
    /// The average including this call's observation.
    Tensor value;
    /// The average as of the previous call (a variable, initially `init` or 0): what `value` was
    /// at the last call. Read it without the updates to use a frozen estimate (SymJAX's second
    /// return value).
    Variable average;
    /// The state updates of one observation; pass them to function().
    Updates updates;
    /// Every state variable (all non-trainable), `average` included.
    std::vector<Variable> variables;
};

/// Options of exponential_moving_average (SymJAX's defaults).
struct EmaOptions {
    /// The starting value of the average: a tensor without placeholders, of the value's shape or
    /// 0-d (broadcast); undefined means zeros.
    Tensor init;
    /// Debias as Adam does: (ema - init * prod(decays)) / (1 - prod(decays)), so the first
    /// average is the first value whatever init is.
    bool debias = true;
    /// The first call's average is the first value itself (instead of decay * init + ...).
    /// Excludes debias, which would correct a bias this start does not have.
    bool start_at_first = false;
    /// Decay min(alpha, (1 + n) / (10 + n)) at the n-th observation (n from 0), TensorFlow's
    /// num_updates option: a short memory early on.
    bool decay_min = false;
    /// The scope of the state variables (made unique: "ema", "ema_1", ...).
    std::string name = "ema";
};

/// The exponential moving average of `value` (a float tensor of static shape):
///   ema_t = d * ema_{t-1} + (1 - d) * value_t,   ema_0 = init,  d = alpha (or decay_min's),
/// debiased by default (EmaOptions::debias). `alpha` lies in [0, 1).
Averaged exponential_moving_average(const Tensor& value, double alpha,
                                    const EmaOptions& options = {});

/// The mean of the last `window` values of `value` (a float tensor of static shape), or of all
/// the values seen while fewer were: a buffer of `window` values shifted by one each call.
Averaged simple_moving_average(const Tensor& value, int64_t window,
                               const std::string& name = "sma");

} // namespace sj::nn
