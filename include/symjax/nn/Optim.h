// Optimizers (SGD, momentum, Nesterov, Adam, AMSGrad, AdamW, RMSprop, Adagrad), gradient
// clipping and exponential moving averages of parameters. Each returns Updates; nothing global.
#pragma once

#include <symjax/Function.h>
#include <symjax/Variable.h>

#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

namespace sj::nn::optim {

/// A learning rate: a number, a 0-d tensor (a placeholder, a variable, any expression), or a
/// schedule: a function of the optimizer's step counter (i64, the number of updates done before
/// this one), e.g. [](const Tensor& s) { return nn::schedules::exponential_decay(s, 0.1, 1000, 0.5); }
class LearningRate {
public:
    LearningRate(double v);                                       // NOLINT: implicit by design
    LearningRate(const Tensor &t);                                // NOLINT
    LearningRate(std::function<Tensor(const Tensor &)> schedule); // NOLINT
    /// Any callable Tensor(const Tensor& step), e.g. a lambda.
    template <class F, class = std::enable_if_t<std::is_invocable_r_v<Tensor, F, const Tensor &>>>
    LearningRate(F schedule) // NOLINT
        : LearningRate(std::function<Tensor(const Tensor &)>(std::move(schedule))) {}
    /// The rate at `step`, as a 0-d tensor of dtype.
    Tensor at(const Tensor &step, DType dtype) const;

private:
    double value_ = 0;
    Tensor tensor_;
    std::function<Tensor(const Tensor &)> schedule_;
};

/// sqrt(sum of the squares of every element of every tensor), computed in f64.
Tensor global_norm(const std::vector<Tensor> &ts);
/// Scales all tensors by max_norm / max(global_norm, max_norm) (only when the norm exceeds it).
std::vector<Tensor> clip_by_global_norm(const std::vector<Tensor> &grads, double max_norm);
/// Clamps every element to [-limit, limit].
std::vector<Tensor> clip_by_value(const std::vector<Tensor> &grads, double limit);

/// The base of the optimizers. An optimizer owns a step counter and per-parameter state
/// ("slots"), all non-trainable Variables named under its scope ("adam/step",
/// "adam/model/dense/W/m"); the scope is the kind ("adam", "sgd", ...) under the current Scope,
/// made unique (adam_1, ...). minimize/apply return the Updates of one step: the parameters, the
/// slots and the counter; compile them into a function. Slots are created on first use and
/// reused when the same parameter is passed again.
///
/// Order of the gradient transformations: clipping (global norm, then by value) on the raw
/// gradients, then the optimizer's weight decay (L2: g + wd * p, as PyTorch; decoupled for AdamW),
/// then the update rule.
class Optimizer {
public:
    virtual ~Optimizer() = default;
    Optimizer(const Optimizer &) = delete;
    Optimizer &operator=(const Optimizer &) = delete;

    /// One step on `loss` (a 0-d float tensor) for `params`.
    Updates minimize(const Tensor &loss, const std::vector<Variable> &params);
    /// One step on `loss` for every trainable float variable it depends on (variables_of(loss,
    /// true), in graph order). Non-trainable variables, integer ones and variables the loss does
    /// not use are not touched; a loss that uses none is an InputError.
    Updates minimize(const Tensor &loss);
    /// One step with the given gradients (grads[i] for params[i]).
    Updates apply(const std::vector<Tensor> &grads, const std::vector<Variable> &params);

    /// Rescales the gradients when their global norm exceeds max_norm (0 disables).
    Optimizer &clip_by_global_norm(double max_norm);
    /// Clamps each gradient element to [-limit, limit] (0 disables).
    Optimizer &clip_by_value(double limit);

    /// The step counter (i64 scalar): the number of steps applied so far.
    const Variable &step() const { return step_; }
    /// The learning rate at the current step.
    Tensor learning_rate(DType dtype = DType::F32) const;
    /// The counter and every slot created so far.
    std::vector<Variable> variables() const;
    const std::string &scope() const { return scope_; }

protected:
    Optimizer(LearningRate lr, const std::string &kind);
    /// What one step sees: the learning rate and the 1-based step number t, both as 0-d tensors
    /// of the parameter's dtype.
    struct StepContext {
        Tensor lr, t;
    };
    /// The parameter's new value; state changes go into `slots`.
    virtual Tensor update(const Variable &p, const Tensor &g, const StepContext &ctx,
                          Updates &slots) = 0;
    /// The state variable `name` of p (shaped and typed like p, filled with init), created once.
    Variable slot(const Variable &p, const std::string &name, double init = 0.0);

private:
    LearningRate lr_;
    std::string scope_;
    Variable step_;
    double clip_norm_ = 0, clip_value_ = 0;
    std::map<std::string, Variable> slots_; // by full slot name
    std::vector<Variable> slot_order_;
};

// Each optimizer's defaults are PyTorch's, and they live in its own options struct, so that
// naming some options (`{.eps = 1e-7}`) keeps the others; options() returns them. The learning
// rate is the constructor's first argument (SGD has no default, as PyTorch 2.1).

/// Options of SGD (PyTorch's defaults).
struct SGDOptions {
    double momentum = 0;
    /// Scales the new gradient in the momentum buffer by (1 - dampening) (after the first step,
    /// where the buffer is the gradient, as PyTorch).
    double dampening = 0;
    bool nesterov = false;
    double weight_decay = 0;
};
/// Stochastic gradient descent, PyTorch's formulation: g += wd p; with momentum,
/// b = momentum b + (1 - dampening) g and the step is g + momentum b (Nesterov) or b;
/// p -= lr * step.
class SGD : public Optimizer {
public:
    explicit SGD(LearningRate lr, SGDOptions options = {}, const std::string &name = "sgd");
    const SGDOptions &options() const { return o_; }

protected:
    Tensor update(const Variable &p, const Tensor &g, const StepContext &ctx,
                  Updates &slots) override;

private:
    SGDOptions o_;
};

/// Options of Adam (PyTorch's defaults).
struct AdamOptions {
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    /// L2 added to the gradient: g + wd * p.
    double weight_decay = 0;
    /// Reddi et al. (2018): divide by the running maximum of the second moment.
    bool amsgrad = false;
};
/// Options of AdamW (PyTorch's defaults): Adam's, but a decoupled weight decay of 0.01.
struct AdamWOptions {
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    /// Decoupled decay: p -= lr * wd * p before the Adam step.
    double weight_decay = 1e-2;
    bool amsgrad = false;
};
/// Adam (Kingma and Ba 2015), textbook with bias correction:
///   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,
///   p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
class Adam : public Optimizer {
public:
    explicit Adam(LearningRate lr = 1e-3, AdamOptions options = {},
                  const std::string &name = "adam");
    const AdamOptions &options() const { return o_; }

protected:
    Adam(LearningRate lr, AdamOptions options, const std::string &name, bool decoupled);
    Tensor update(const Variable &p, const Tensor &g, const StepContext &ctx,
                  Updates &slots) override;

private:
    AdamOptions o_;
    bool decoupled_ = false;
};
/// AdamW (Loshchilov and Hutter 2019): Adam with decoupled weight decay, p -= lr wd p before the
/// Adam step (default wd 0.01, as PyTorch).
class AdamW : public Adam {
public:
    explicit AdamW(LearningRate lr = 1e-3, AdamWOptions options = {},
                   const std::string &name = "adamw");
    const AdamWOptions &options() const { return ow_; }

private:
    AdamWOptions ow_;
};

/// Options of RMSprop (PyTorch's defaults).
struct RMSpropOptions {
    double alpha = 0.99, eps = 1e-8, momentum = 0;
    /// Divides by the estimated standard deviation sqrt(E[g^2] - E[g]^2) instead.
    bool centered = false;
    double weight_decay = 0;
};
/// RMSprop as PyTorch: s = alpha s + (1 - alpha) g^2, d = sqrt(s) + eps (eps outside the root),
/// with momentum b = momentum b + g / d and p -= lr b, else p -= lr g / d.
class RMSprop : public Optimizer {
public:
    explicit RMSprop(LearningRate lr = 1e-2, RMSpropOptions options = {},
                     const std::string &name = "rmsprop");
    const RMSpropOptions &options() const { return o_; }

protected:
    Tensor update(const Variable &p, const Tensor &g, const StepContext &ctx,
                  Updates &slots) override;

private:
    RMSpropOptions o_;
};

/// Options of Adagrad (PyTorch's defaults).
struct AdagradOptions {
    double lr_decay = 0, initial_accumulator = 0, eps = 1e-10, weight_decay = 0;
};
/// Adagrad (Duchi et al. 2011) as PyTorch: s += g^2, p -= lr / (1 + (t - 1) lr_decay) *
/// g / (sqrt(s) + eps).
class Adagrad : public Optimizer {
public:
    explicit Adagrad(LearningRate lr = 1e-2, AdagradOptions options = {},
                     const std::string &name = "adagrad");
    const AdagradOptions &options() const { return o_; }

protected:
    Tensor update(const Variable &p, const Tensor &g, const StepContext &ctx,
                  Updates &slots) override;

private:
    AdagradOptions o_;
};

/// Exponential moving averages of variables in shadow Variables (non-trainable, named
/// "ema/<variable>", initialised to the variable's value when first seen):
///   shadow <- decay * shadow + (1 - decay) * value
/// With use_num_updates the decay at the n-th update (n from 0) is min(decay, (1 + n) / (10 + n))
/// (TensorFlow's option), counted in the "ema/num_updates" variable.
///
///   Updates opt = adam.minimize(loss, params);
///   Updates upd = opt + ema.apply(params, opt);   // average the values after the step
///   ... evaluate with clone(out, {{W, ema.average(W)}}) ...
class ExponentialMovingAverage {
public:
    explicit ExponentialMovingAverage(double decay, bool use_num_updates = false,
                                      const std::string &name = "ema");
    ExponentialMovingAverage(const ExponentialMovingAverage &) = delete;
    ExponentialMovingAverage &operator=(const ExponentialMovingAverage &) = delete;
    /// Updates of the shadows of `vars`. A variable updated in `after` is averaged at the value
    /// that update gives it (so the shadows follow the parameters after an optimizer step made in
    /// the same call); others at their current value.
    Updates apply(const std::vector<Variable> &vars, const Updates &after = {});
    /// The shadow of v (throws when apply has not seen v).
    Variable average(const Variable &v) const;
    /// Every shadow (and the counter, when used).
    std::vector<Variable> variables() const;
    const std::string &scope() const { return scope_; }

private:
    double decay_;
    bool use_num_updates_;
    std::string scope_;
    Variable num_updates_;
    std::map<std::string, Variable> shadows_; // by variable full name
    std::vector<Variable> order_;
};

} // namespace sj::nn::optim
