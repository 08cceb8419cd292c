// RMSprop (optionally centered, with momentum), PyTorch's formulation.
#include <symjax/Ops.h>
#include <symjax/nn/Optim.h>

namespace sj::nn::optim {

RMSprop::RMSprop(LearningRate lr, RMSpropOptions options, const std::string &name)
    : Optimizer(std::move(lr), name), o_(options) {
    SJ_CHECK(o_.alpha >= 0 && o_.alpha < 1 && o_.eps >= 0 && o_.momentum >= 0 &&
                 o_.weight_decay >= 0,
             InputError)
        << "nn::optim::RMSprop: need alpha in [0, 1) and eps, momentum, weight_decay >= 0";
}

Tensor RMSprop::update(const Variable &p, const Tensor &grad, const StepContext &ctx,
                       Updates &slots) {
    Tensor g = o_.weight_decay > 0 ? grad + o_.weight_decay * p : grad;
    Variable sq = slot(p, "square_avg");
    Tensor nsq = o_.alpha * sq + (1.0 - o_.alpha) * (g * g);
    slots.add(sq, nsq);
    Tensor avg;
    if (o_.centered) {
        Variable ga = slot(p, "grad_avg");
        Tensor nga = o_.alpha * ga + (1.0 - o_.alpha) * g;
        slots.add(ga, nga);
        avg = sqrt(nsq - nga * nga);
    } else {
        avg = sqrt(nsq);
    }
    avg = avg + o_.eps; // eps outside the square root, as PyTorch
    if (o_.momentum > 0) {
        Variable buf = slot(p, "momentum");
        Tensor nb = o_.momentum * buf + g / avg;
        slots.add(buf, nb);
        return p - ctx.lr * nb;
    }
    return p - ctx.lr * (g / avg);
}

} // namespace sj::nn::optim
