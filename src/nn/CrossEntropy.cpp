// Cross-entropy losses (softmax, sparse softmax, sigmoid) and the KL divergence.
#include "LossUtil.h"

#include <symjax/Ops.h>
#include <symjax/nn/Losses.h>

namespace sj::nn::losses {

Tensor sparse_softmax_crossentropy_logits(const Tensor& labels, const Tensor& logits,
                                          std::optional<int64_t> ignore_index) {
    detail::check_logits(logits, "sparse_softmax_crossentropy_logits");
    detail::check_int_labels(labels, logits, "sparse_softmax_crossentropy_logits");
    int64_t classes = logits.dim(-1);
    // labels are runtime data: a label out of range would pick no class (loss 0, no gradient)
    Tensor checked = check_index(labels, classes, ignore_index,
                                 "nn::losses::sparse_softmax_crossentropy_logits: label");
    // -log_softmax at the label: where() picks it without multiplying the other entries by 0
    Tensor picked = where(one_hot(checked, classes, DType::Bool), log_softmax(logits, -1), 0.0);
    Tensor loss = neg(sum(picked, {-1}));
    // an ignore_index inside [0, C) still picks a class: mask the example out explicitly
    // (compared in i64: the ignore_index need not be representable in the labels' dtype)
    if (ignore_index) {
        Tensor kept = ne(detail::as_dtype(checked, DType::I64),
                         constant(Array::scalar<int64_t>(*ignore_index)));
        loss = where(kept, loss, 0.0);
    }
    return loss;
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
