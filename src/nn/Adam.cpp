// Adam, AMSGrad and AdamW.
#include <symjax/Ops.h>
#include <symjax/nn/Optim.h>

namespace sj::nn::optim {

Adam::Adam(LearningRate lr, AdamOptions options, const std::string &name)
    : Adam(std::move(lr), options, name, false) {}

Adam::Adam(LearningRate lr, AdamOptions options, const std::string &name, bool decoupled)
    : Optimizer(std::move(lr), name), o_(options), decoupled_(decoupled) {
    SJ_CHECK(o_.beta1 >= 0 && o_.beta1 < 1 && o_.beta2 >= 0 && o_.beta2 < 1, InputError)
        << "nn::optim::Adam: betas must lie in [0, 1), got " << o_.beta1 << ", " << o_.beta2;
    SJ_CHECK(o_.eps >= 0 && o_.weight_decay >= 0, InputError)
        << "nn::optim::Adam: eps and weight_decay must be >= 0";
}

AdamW::AdamW(LearningRate lr, AdamWOptions options, const std::string &name)
    : Adam(std::move(lr),
           AdamOptions{.beta1 = options.beta1,
                       .beta2 = options.beta2,
                       .eps = options.eps,
                       .weight_decay = options.weight_decay,
                       .amsgrad = options.amsgrad},
           name, true),
      ow_(options) {}

Tensor Adam::update(const Variable &p, const Tensor &grad, const StepContext &ctx, Updates &slots) {
    Tensor g = (!decoupled_ && o_.weight_decay > 0) ? grad + o_.weight_decay * p : grad;
    Variable m = slot(p, "m"), v = slot(p, "v");
    Tensor nm = o_.beta1 * m + (1.0 - o_.beta1) * g;
    Tensor nv = o_.beta2 * v + (1.0 - o_.beta2) * (g * g);
    slots.add(m, nm);
    slots.add(v, nv);
    Tensor second = nv;
    if (o_.amsgrad) {
        Variable vmax = slot(p, "v_max");
        second = maximum(vmax, nv);
        slots.add(vmax, second);
    }
    // bias corrections 1 - beta^t; the step is lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)
    Tensor bc1 = 1.0 - pow(scalar_like(o_.beta1, ctx.t), ctx.t);
    Tensor bc2 = 1.0 - pow(scalar_like(o_.beta2, ctx.t), ctx.t);
    Tensor denom = sqrt(second) / sqrt(bc2) + o_.eps;
    Tensor base = p;
    if (decoupled_ && o_.weight_decay > 0)
        base = p * (1.0 - ctx.lr * o_.weight_decay);
    return base - (ctx.lr / bc1) * (nm / denom);
}

} // namespace sj::nn::optim
