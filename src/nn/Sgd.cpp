// SGD with optional momentum (heavy ball or Nesterov), dampening and L2 weight decay.
#include <symjax/Ops.h>
#include <symjax/nn/Optim.h>

namespace sj::nn::optim {

SGD::SGD(LearningRate lr, SGDOptions options, const std::string &name)
    : Optimizer(std::move(lr), name), o_(options) {
    SJ_CHECK(o_.momentum >= 0 && o_.weight_decay >= 0, InputError)
        << "nn::optim::SGD: momentum and weight_decay must be >= 0";
    SJ_CHECK(!o_.nesterov || (o_.momentum > 0 && o_.dampening == 0), InputError)
        << "nn::optim::SGD: Nesterov momentum needs momentum > 0 and no dampening";
}

Tensor SGD::update(const Variable &p, const Tensor &grad, const StepContext &ctx, Updates &slots) {
    Tensor g = o_.weight_decay > 0 ? grad + o_.weight_decay * p : grad;
    if (o_.momentum == 0)
        return p - ctx.lr * g;
    Variable buf = slot(p, "momentum");
    Tensor nb = o_.momentum * buf + (1.0 - o_.dampening) * g;
    // PyTorch starts the buffer at the first gradient itself (undamped)
    if (o_.dampening != 0)
        nb = where(ctx.t <= 1.0, g, nb);
    slots.add(buf, nb);
    Tensor d = o_.nesterov ? g + o_.momentum * nb : nb;
    return p - ctx.lr * d;
}

} // namespace sj::nn::optim
