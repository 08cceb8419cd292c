// Cross-entropy losses (softmax, sparse softmax, sigmoid) and the KL divergence.
#include "LossUtil.h"

#include <symjax/Ops.h>
#include <symjax/nn/Losses.h>

namespace sj::nn::losses {

Tensor sparse_softmax_crossentropy_logits(const Tensor &labels, const Tensor &logits) {
    detail::check_logits(logits, "sparse_softmax_crossentropy_logits");
    detail::check_int_labels(labels, logits, "sparse_softmax_crossentropy_logits");
    // -log_softmax at the label: where() picks it without multiplying the other entries by 0
    Tensor picked =
        where(one_hot(labels, logits.dim(-1), DType::Bool), log_softmax(logits, -1), 0.0);
    return neg(sum(picked, {-1}));
}

Tensor softmax_crossentropy_logits(const Tensor &labels, const Tensor &logits) {
    detail::check_logits(logits, "softmax_crossentropy_logits");
    detail::check_same_shape(labels, logits, "softmax_crossentropy_logits");
    return neg(sum(detail::as_dtype(labels, logits.dtype()) * log_softmax(logits, -1), {-1}));
}

Tensor sigmoid_crossentropy_logits(const Tensor &labels, const Tensor &logits) {
    detail::check_float(logits, "sigmoid_crossentropy_logits");
    detail::check_same_shape(labels, logits, "sigmoid_crossentropy_logits");
    Tensor z = detail::as_dtype(labels, logits.dtype());
    // log(1 + exp(-x)) + x (1 - z) rearranged so no exp overflows: exp(-|x|) <= 1
    Tensor l = maximum(logits, 0.0) - logits * z + log1p(exp(neg(abs(logits))));
    return detail::per_example(l);
}

Tensor kl_divergence(const Tensor &p, const Tensor &q) {
    detail::check_logits(q, "kl_divergence");
    detail::check_same_shape(p, q, "kl_divergence");
    Tensor pp = detail::as_dtype(p, q.dtype());
    Tensor pos = pp > 0.0;
    // substitute 1 where p = 0 so the dropped branch and its gradient stay finite (0 log 0 = 0)
    Tensor safe_p = where(pos, pp, 1.0), safe_q = where(pos, q, 1.0);
    return sum(where(pos, pp * (log(safe_p) - log(safe_q)), 0.0), {-1});
}

} // namespace sj::nn::losses
