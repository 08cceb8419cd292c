// Classification metrics: accuracy and top-k accuracy.
#include "LossUtil.h"

#include <symjax/Ops.h>
#include <symjax/nn/Metrics.h>

#include <limits>

namespace sj::nn::metrics {

Tensor correct(const Tensor &labels, const Tensor &logits) {
    losses::detail::check_logits(logits, "metrics::correct");
    losses::detail::check_int_labels(labels, logits, "metrics::correct");
    return cast(eq(argmax(logits, -1), losses::detail::as_dtype(labels, DType::I64)), DType::F32);
}

Tensor accuracy(const Tensor &labels, const Tensor &logits) {
    return mean(correct(labels, logits));
}

Tensor top_k_accuracy(const Tensor &labels, const Tensor &logits, int64_t k) {
    losses::detail::check_logits(logits, "metrics::top_k_accuracy");
    losses::detail::check_int_labels(labels, logits, "metrics::top_k_accuracy");
    SJ_CHECK(k >= 1, InputError) << "nn::metrics::top_k_accuracy: k must be >= 1, got " << k;
    // no sort needed: the label is in the top k when fewer than k logits beat it strictly
    const double inf = std::numeric_limits<double>::infinity();
    Tensor is_true = one_hot(labels, logits.dim(-1), DType::Bool);
    Tensor true_logit = max(where(is_true, logits, -inf), {-1}, true);
    Tensor larger = sum(cast(logits > true_logit, DType::F32), {-1});
    return mean(cast(larger < double(k), DType::F32));
}

} // namespace sj::nn::metrics
