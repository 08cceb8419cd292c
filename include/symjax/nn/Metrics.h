// Classification metrics: accuracy and top-k accuracy.
#pragma once

#include <symjax/Tensor.h>

namespace sj::nn::metrics {

/// Fraction (f32 scalar) of examples whose argmax over logits [N, C] equals the integer label [N]
/// (ties go to the first maximum, as argmax).
Tensor accuracy(const Tensor &labels, const Tensor &logits);
/// Per example (f32 [N]): 1 when the label is the argmax, else 0.
Tensor correct(const Tensor &labels, const Tensor &logits);
/// Fraction of examples whose true class is among the k highest logits: fewer than k logits are
/// strictly larger than the true one (ties count in the example's favour).
Tensor top_k_accuracy(const Tensor &labels, const Tensor &logits, int64_t k);

} // namespace sj::nn::metrics
