// Adagrad, PyTorch's formulation (accumulator from initial_accumulator, eps outside the root).
#include <symjax/Ops.h>
#include <symjax/nn/Optim.h>

namespace sj::nn::optim {

Adagrad::Adagrad(LearningRate lr, AdagradOptions options, const std::string &name)
    : Optimizer(std::move(lr), name), o_(options) {
    SJ_CHECK(o_.lr_decay >= 0 && o_.initial_accumulator >= 0 && o_.eps >= 0 && o_.weight_decay >= 0,
             InputError)
        << "nn::optim::Adagrad: lr_decay, initial_accumulator, eps and weight_decay must be >= 0";
}

Tensor Adagrad::update(const Variable &p, const Tensor &grad, const StepContext &ctx,
                       Updates &slots) {
    Tensor g = o_.weight_decay > 0 ? grad + o_.weight_decay * p : grad;
    Variable sum_sq = slot(p, "sum", o_.initial_accumulator);
    Tensor ns = sum_sq + g * g;
    slots.add(sum_sq, ns);
    Tensor lr = o_.lr_decay > 0 ? ctx.lr / (1.0 + (ctx.t - 1.0) * o_.lr_decay) : ctx.lr;
    return p - lr * (g / (sqrt(ns) + o_.eps));
}

} // namespace sj::nn::optim
