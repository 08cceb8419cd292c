"""Optimizers (SGD, Adam, AdamW, RMSprop, Adagrad), gradient clipping and moving averages of
parameters. ``opt.minimize(loss, params=None)`` returns the updates of one step as a dict
{variable: new value} for ``symjax.function(..., updates=...)``; nothing is registered globally.

SymJAX's form, ``Adam(loss, learning_rate, ...)`` (a tensor first), builds the step at once,
keeps its updates in ``opt.updates`` and registers them for ``symjax.get_updates()``
(docs/python.md, Note [Registered updates] in symjax/__init__.py).
"""
from .. import _core
from .._core.nn import optim as _o

global_norm = _o.global_norm
clip_by_global_norm = _o.clip_by_global_norm
clip_by_value = _o.clip_by_value

_RENAMES = {"learning_rate": "lr", "epsilon": "eps"}


def _symjax_style(cls, self, args, kwargs):
    kwargs = {_RENAMES.get(k, k): v for k, v in kwargs.items()}
    if args and isinstance(args[0], _core.Tensor):
        loss, args = args[0], args[1:]
        params = kwargs.pop("params", None)
        cls.__init__(self, *args, **kwargs)
        self.updates = self.minimize(loss, params)
        from .. import add_updates
        add_updates(self.updates)
    else:
        cls.__init__(self, *args, **kwargs)
        self.updates = {}


class _Mixin:
    def minimize(self, loss, params=None):
        """The updates of one step on ``loss`` (a 0-d float tensor) for ``params`` (default:
        every trainable float variable the loss depends on), as a dict."""
        return dict(super().minimize(loss, None if params is None else list(params)))

    def apply(self, grads, params):
        """The updates of one step with the given gradients (grads[i] for params[i])."""
        return dict(super().apply(list(grads), list(params)))


class SGD(_Mixin, _o.SGD):
    """SGD(lr, momentum=0, dampening=0, nesterov=False, weight_decay=0), PyTorch's formulation;
    or SymJAX's SGD(loss, learning_rate, params=None)."""

    def __init__(self, *args, **kwargs):
        _symjax_style(_o.SGD, self, args, kwargs)


class Adam(_Mixin, _o.Adam):
    """Adam(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0, amsgrad=False); or
    SymJAX's Adam(loss, learning_rate, beta1, beta2, epsilon, params=None)."""

    def __init__(self, *args, **kwargs):
        _symjax_style(_o.Adam, self, args, kwargs)


class AdamW(_Mixin, _o.AdamW):
    """AdamW(lr=1e-3, beta1, beta2, eps, weight_decay=0.01, amsgrad=False)."""

    def __init__(self, *args, **kwargs):
        _symjax_style(_o.AdamW, self, args, kwargs)


class RMSprop(_Mixin, _o.RMSprop):
    """RMSprop(lr=1e-2, alpha=0.99, eps=1e-8, momentum=0, centered=False, weight_decay=0)."""

    def __init__(self, *args, **kwargs):
        _symjax_style(_o.RMSprop, self, args, kwargs)


class Adagrad(_Mixin, _o.Adagrad):
    """Adagrad(lr=1e-2, lr_decay=0, initial_accumulator=0, eps=1e-10, weight_decay=0)."""

    def __init__(self, *args, **kwargs):
        _symjax_style(_o.Adagrad, self, args, kwargs)


class ExponentialMovingAverage(_o.ExponentialMovingAverage):
    """Shadow averages of parameters: ``ema.apply(params, after=opt_updates)`` returns the
    updates of the shadows (a dict); ``ema.average(W)`` is W's shadow variable."""

    def apply(self, variables, after=None):
        after = list((after or {}).items()) if isinstance(after, dict) else list(after or [])
        return dict(super().apply(list(variables), after))


__all__ = [
    "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "ExponentialMovingAverage", "global_norm",
    "clip_by_global_norm", "clip_by_value",
]
