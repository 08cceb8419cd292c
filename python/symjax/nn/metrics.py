"""Classification metrics."""
from .._core.nn.metrics import accuracy, correct, top_k_accuracy

__all__ = ["accuracy", "correct", "top_k_accuracy"]
