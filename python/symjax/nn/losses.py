"""Loss functions: one value per example (take .mean() of the result)."""
from .._core.nn.losses import (
    hinge, huber, kl_divergence, mae, mse, multiclass_hinge, sigmoid_crossentropy_logits,
    softmax_crossentropy_logits, sparse_softmax_crossentropy_logits,
)

# SymJAX's names
squared_differences = mse
absolute_differences = mae
sparse_crossentropy_logits = sparse_softmax_crossentropy_logits
crossentropy_logits = softmax_crossentropy_logits

__all__ = [
    "sparse_softmax_crossentropy_logits", "softmax_crossentropy_logits",
    "sigmoid_crossentropy_logits", "mse", "mae", "huber", "hinge", "multiclass_hinge",
    "kl_divergence", "squared_differences", "absolute_differences", "sparse_crossentropy_logits",
    "crossentropy_logits",
]
