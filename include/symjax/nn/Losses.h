// Loss functions: cross-entropies, regression and margin losses. All return per-example losses.
#pragma once

#include <symjax/Tensor.h>

#include <cstdint>
#include <optional>

namespace sj::nn::losses {

// Every loss returns one value per example, of shape [N] for a batch of N (take mean() of it).
// The elementwise losses (sigmoid cross-entropy, mse, mae, huber, hinge) average over all axes but
// the first; a rank-1 input is already one value per example. The categorical losses (the
// softmax cross-entropies, multiclass hinge, KL) reduce the class axis, the last one: logits
// [N, C] give [N], [N, T, C] give [N, T].

/// -log softmax(logits)[label]: labels are integer class indices [N] (i32 or i64) and logits
/// [N, C] (C known when the graph is built). Computed from log_softmax, so finite and with
/// correct gradients for logits of any magnitude. A label outside [0, C) is an InputError when
/// the function runs (naming the label and its position; no variable is updated), except one
/// equal to `ignore_index` (PyTorch's option; none by default), whose example gets loss 0 and
/// zero gradient. mean() of the result counts ignored examples: PyTorch's reduction='mean'
/// divides by the number of the others, sum(loss) / sum(labels != ignore_index).
Tensor sparse_softmax_crossentropy_logits(const Tensor& labels, const Tensor& logits,
                                          std::optional<int64_t> ignore_index = std::nullopt);
/// -sum_c labels[c] log softmax(logits)[c], with labels a distribution [N, C] over classes.
Tensor softmax_crossentropy_logits(const Tensor &labels, const Tensor &logits);
/// Binary cross-entropy from logits x with targets z in [0, 1], in the stable form
/// max(x, 0) - x z + log1p(exp(-|x|)).
Tensor sigmoid_crossentropy_logits(const Tensor &labels, const Tensor &logits);
/// (target - prediction)^2.
Tensor mse(const Tensor &targets, const Tensor &predictions);
/// |target - prediction|.
Tensor mae(const Tensor &targets, const Tensor &predictions);
/// r^2 / 2 for |r| <= delta, delta (|r| - delta / 2) beyond, with r = target - prediction.
Tensor huber(const Tensor &targets, const Tensor &predictions, double delta = 1.0);
/// max(0, 1 - y x) with labels y in {-1, +1} and scores x.
Tensor hinge(const Tensor &labels, const Tensor &scores);
/// Crammer-Singer multiclass hinge max(0, margin + max_{j != y} x_j - x_y), with integer labels
/// [N] and scores [N, C]; a label outside [0, C) is an InputError when the function runs.
Tensor multiclass_hinge(const Tensor &labels, const Tensor &scores, double margin = 1.0);
/// KL(p || q) = sum_c p_c (log p_c - log q_c) between categorical distributions given as
/// probabilities [N, C]; terms with p_c = 0 count 0.
Tensor kl_divergence(const Tensor &p, const Tensor &q);

} // namespace sj::nn::losses
