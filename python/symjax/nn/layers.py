"""Layers: modules that own named Variables (created with the module, under the current Scope)
and build graph when called: ``y = layer(x, mode="train")`` (or ``deterministic=True`` for eval,
SymJAX's flag). Calling a layer again reuses its variables. Layers that change state in train
mode (BatchNorm) attach their updates to their output: pass ``symjax.state_updates(out)`` to
``symjax.function`` (docs/python.md, "Differences")."""
from .._core.nn import Module
from .._core.nn import (
    BatchNorm, Conv, Conv1D, Conv2D, Conv2DTranspose, Dense, Dropout, Embedding, Flatten,
    GlobalAvgPool, GRU, Lambda, LayerNorm, LSTM, Pool, RandomCrop, RandomFlip, Recurrent,
    ResidualBlock, Sequential, SimpleRNN, Upsample1D, Upsample2D,
)


def MaxPool1D(window, strides=None, padding="VALID"):
    """Max pooling over the last dim of [N, C, W]; strides default to the window."""
    return Pool("max", [window], strides, padding)


def MaxPool2D(window, strides=None, padding="VALID"):
    """Max pooling over H and W of [N, C, H, W]; window (h, w) or one size for both."""
    w = [window, window] if isinstance(window, int) else list(window)
    return Pool("max", w, strides, padding)


def AvgPool1D(window, strides=None, padding="VALID", count_include_pad=True):
    return Pool("avg", [window], strides, padding, count_include_pad)


def AvgPool2D(window, strides=None, padding="VALID", count_include_pad=True):
    w = [window, window] if isinstance(window, int) else list(window)
    return Pool("avg", w, strides, padding, count_include_pad)


# SymJAX's names
BatchNormalization = BatchNorm
Pool1D = MaxPool1D
Pool2D = MaxPool2D
GlobalAveragePooling = GlobalAvgPool
Conv2DTransposed = Conv2DTranspose
RNN = SimpleRNN  # PyTorch's name

__all__ = [
    "Module", "Sequential", "Lambda", "Dense", "Dropout", "Flatten", "Embedding", "LayerNorm",
    "BatchNorm", "BatchNormalization", "Conv", "Conv1D", "Conv2D", "Conv2DTranspose", "Pool",
    "MaxPool1D", "MaxPool2D", "AvgPool1D", "AvgPool2D", "Pool1D", "Pool2D", "GlobalAvgPool",
    "GlobalAveragePooling", "ResidualBlock", "RandomFlip", "RandomCrop", "Upsample1D",
    "Upsample2D", "Recurrent", "SimpleRNN", "RNN", "GRU", "LSTM",
]
