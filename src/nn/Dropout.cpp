// Dropout: inverted scaling in training, identity in evaluation.
#include "NnUtil.h"

#include <symjax/Ops.h>
#include <symjax/Random.h>
#include <symjax/nn/Layers.h>

namespace sj::nn {

Dropout::Dropout(double p, DropoutOptions o)
    : p_(p), seed_(o.seed), calls_(std::make_shared<std::atomic<uint64_t>>(0)) {
    SJ_CHECK(p >= 0 && p < 1, InputError)
        << "nn::Dropout: the drop probability must lie in [0, 1), got " << p;
}

Tensor Dropout::forward(const Tensor &x, Mode mode) const {
    if (mode == Mode::Eval || p_ == 0)
        return x;
    SJ_CHECK(is_float(x.dtype()), TypeError)
        << "nn::Dropout: input " << x.name() << " " << x.type_str() << " must be f32 or f64";
    Tensor keep = random::bernoulli_like(x, 1.0 - p_, detail::next_call_seed(seed_, *calls_));
    return where(keep, x * (1.0 / (1.0 - p_)), 0.0);
}

} // namespace sj::nn
