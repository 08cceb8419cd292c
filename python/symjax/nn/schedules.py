"""Learning-rate schedules (functions of a step tensor) and moving averages of tensors.

A schedule is given to an optimizer as a function of its step counter::

    opt = nn.optimizers.SGD(lambda step: nn.schedules.exponential_decay(step, 0.1, 1000, 0.5))
"""
from .._core.nn import schedules as _s

piecewise_constant = _s.piecewise_constant
exponential_decay = _s.exponential_decay
cosine_decay = _s.cosine_decay
linear_warmup = _s.linear_warmup


def _register(updates):
    from .. import add_updates
    add_updates(updates)


def exponential_moving_average(value, alpha, init=None, debias=True, start_at_first=False,
                               decay_min=False, name="ema"):
    """(average including this call, average before it, updates dict, state variables): the
    C++ API's exponential_moving_average (nothing registered)."""
    v, avg, upd, variables = _s.exponential_moving_average(value, alpha, init, debias,
                                                           start_at_first, decay_min, name)
    return v, avg, dict(upd), variables


def simple_moving_average(value, window, name="sma"):
    v, avg, upd, variables = _s.simple_moving_average(value, window, name)
    return v, avg, dict(upd), variables


def ExponentialMovingAverage(value, alpha, init=None, decay_min=False, debias=True,
                             name="ExponentialMovingAverage"):
    """SymJAX's form: returns (ema, var), the average including this call's value and the
    variable holding the previous one, and registers the updates for symjax.get_updates()."""
    v, avg, upd, _ = exponential_moving_average(value, alpha, init, debias, False, decay_min,
                                                name)
    _register(upd)
    return v, avg


def SimpleMovingAverage(value, n, name="SimpleMovingAverage"):
    """SymJAX's form: (sma, var) with the updates registered for symjax.get_updates()."""
    v, avg, upd, _ = simple_moving_average(value, n, name)
    _register(upd)
    return v, avg


def PiecewiseConstant(init, steps_and_values, dtype="float32"):
    """SymJAX's form: (value, step) where step is a new int32 counter variable (update it, e.g.
    {step: step + 1}) and value is init before the first boundary of ``steps_and_values``
    ({boundary: value}), then each value from its boundary on."""
    from .. import tensor as T
    step = T.Variable(0, name="step", trainable=False, dtype="int32")
    bounds = sorted(steps_and_values)
    values = [float(init)] + [float(steps_and_values[b]) for b in bounds]
    return piecewise_constant(step, [float(b) for b in bounds], values, dtype), step


__all__ = ["PiecewiseConstant", 
    "piecewise_constant", "exponential_decay", "cosine_decay", "linear_warmup",
    "exponential_moving_average", "simple_moving_average", "ExponentialMovingAverage",
    "SimpleMovingAverage",
]
