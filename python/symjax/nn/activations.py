"""Activation functions (functions of a tensor) and activation modules."""
from .._core import log_softmax as _log_softmax, sigmoid, softmax as _softmax, softplus, tanh
from .._core.nn import (
    ELU, GELU, HardSigmoid, HardTanh, LeakyReLU, LogSoftmax, ReLU, ReLU6, SELU, SiLU, Sigmoid,
    Softmax, Softplus, Tanh,
)
from .._core.nn.activations import (
    elu, gelu, hard_sigmoid, hard_tanh, leaky_relu, relu, relu6, selu, silu, swish,
)

Swish = SiLU


def softmax(x, axis=-1):
    return _softmax(x, axis)


def log_softmax(x, axis=-1):
    return _log_softmax(x, axis)


__all__ = [
    "relu", "relu6", "leaky_relu", "elu", "selu", "gelu", "silu", "swish", "hard_tanh",
    "hard_sigmoid", "sigmoid", "softmax", "log_softmax", "softplus", "tanh", "ReLU", "ReLU6",
    "LeakyReLU", "ELU", "SELU", "GELU", "SiLU", "Swish", "Softplus", "Sigmoid", "Tanh", "Softmax",
    "LogSoftmax", "HardTanh", "HardSigmoid",
]
