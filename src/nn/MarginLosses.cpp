// Margin losses: binary hinge and the Crammer-Singer multiclass hinge.
#include "LossUtil.h"

#include <symjax/Ops.h>
#include <symjax/nn/Losses.h>

#include <limits>

namespace sj::nn::losses {

Tensor hinge(const Tensor &labels, const Tensor &scores) {
    detail::check_float(scores, "hinge");
    detail::check_same_shape(labels, scores, "hinge");
    Tensor y = detail::as_dtype(labels, scores.dtype());
    return detail::per_example(maximum(1.0 - y * scores, 0.0));
}

Tensor multiclass_hinge(const Tensor &labels, const Tensor &scores, double margin) {
    detail::check_logits(scores, "multiclass_hinge");
    detail::check_int_labels(labels, scores, "multiclass_hinge");
    const double inf = std::numeric_limits<double>::infinity();
    // a label out of range would pick no true class and score max(0, margin + max s) silently
    Tensor checked =
        check_index(labels, scores.dim(-1), std::nullopt, "nn::losses::multiclass_hinge: label");
    Tensor is_true = one_hot(checked, scores.dim(-1), DType::Bool);
    Tensor true_score = sum(where(is_true, scores, 0.0), {-1});
    Tensor best_other = max(where(is_true, -inf, scores), {-1});
    return maximum(best_other - true_score + margin, 0.0);
}

} // namespace sj::nn::losses
