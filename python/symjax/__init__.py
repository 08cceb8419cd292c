"""symjax: symbolic tensor programming and deep learning, SymJAX's API over a C++ core.

    import numpy as np
    import symjax as sj
    import symjax.tensor as T

    x = T.Placeholder((None, 3), "float32", name="x")   # None: any size, bound at call time
    w = T.Variable(np.array([1.0, 2.0, 3.0], "float32"), name="w")
    cost = T.tanh(x @ w).sum()
    g = sj.gradients(cost, [w])[0]                     # symbolic: more graph
    step = sj.function(x, outputs=cost, updates={w: w - 0.1 * g})
    step(np.ones((2, 3), "float32"))                   # a NumPy array; w is updated

See docs/python.md.
"""
import fnmatch as _fnmatch

from . import _core
from ._core import (
    Error,
    InputError,
    InternalError,
    IOError,
    OutOfMemoryError,
    ParseError,
    ShapeError,
    TypeError,
)

__version__ = "0.1.0"

__all__ = [
    "function", "Function", "gradients", "jacobians", "vjp", "jvp", "hessian_vector_product",
    "Scope", "get_variables", "get_placeholders", "get_ops", "get_updates", "add_updates",
    "reset_variables", "save_variables", "load_variables", "current_graph", "clone",
    "state_updates", "to_text", "to_dot", "available_backends", "manual_seed",
    "Error", "ShapeError", "TypeError", "InputError", "IOError", "ParseError",
    "OutOfMemoryError", "InternalError", "tensor", "nn", "data", "vmap",
]

Function = _core.Function


def _is_tensor(t):
    return isinstance(t, _core.Tensor)


def _update_pairs(updates):
    """Updates as (variable, value) pairs: from a dict, a list of pairs, or None."""
    if updates is None:
        return []
    items = updates.items() if isinstance(updates, dict) else updates
    pairs = []
    for var, value in items:
        if not isinstance(var, _core.Variable) and _is_tensor(var):
            try:
                var = _core.as_variable(var)
            except Error:
                pass
        if not isinstance(var, _core.Variable):
            raise TypeError("symjax.function: %r is not a Variable and cannot be updated" % (var,))
        if not _is_tensor(value):
            value = _core.constant(value, var.dtype)
        pairs.append((var, value))
    return pairs


def function(*inputs, outputs=None, updates=None, backend=None, frozen=False, rng_counter=0,
             nan_guard=False, profile=False, flush_denormals=None):
    """Compiles a function of ``inputs`` (any tensors: placeholders, or variables and
    intermediates to override) returning ``outputs`` and applying ``updates``.

    ``outputs`` is a tensor (the call returns one NumPy array), a list or tuple of tensors (a
    list of arrays), or None (the call returns None). ``updates`` maps variables to their new
    values (a dict, a list of pairs, or what an optimizer's ``minimize`` returns). Outputs and
    update values are all computed from the variables' values before the call; then every update
    is applied at once. ``frozen`` draws the same random numbers on every call. ``backend`` is
    "cpu" (the default) or "reference". ``flush_denormals=True`` treats floats below the normal
    range as zero while the function runs, on every thread (faster when gradients become tiny;
    None: the SJ_FLUSH_DENORMALS environment variable decides, off by default).
    """
    if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
        inputs = tuple(inputs[0])
    for i, t in enumerate(inputs):
        if not _is_tensor(t):
            raise TypeError("symjax.function: input %d (%r) is not a Tensor" % (i, t))
    single = _is_tensor(outputs)
    none = outputs is None
    outs = [outputs] if single else ([] if none else list(outputs))
    nested = any(isinstance(t, (list, tuple)) for t in outs)
    if nested:  # SymJAX's nested outputs ([loss, [g1, g2]]): flattened, regrouped per call
        structure = [len(t) if isinstance(t, (list, tuple)) else None for t in outs]
        outs = [u for t in outs for u in (t if isinstance(t, (list, tuple)) else [t])]
    for i, t in enumerate(outs):
        if not _is_tensor(t):
            outs[i] = _core.constant(t)
    f = _core.compile(list(inputs), outs, _update_pairs(updates), single, none, backend,
                      bool(frozen), int(rng_counter), bool(nan_guard), bool(profile),
                      None if flush_denormals is None else bool(flush_denormals))
    return _Nested(f, structure) if nested else f


class _Nested:
    """A function whose outputs were nested lists (one level, as SymJAX's examples use)."""

    def __init__(self, fn, structure):
        self.fn, self.structure = fn, structure

    def __call__(self, *args):
        flat, out, k = self.fn(*args), [], 0
        for n in self.structure:
            if n is None:
                out.append(flat[k])
                k += 1
            else:
                out.append(flat[k:k + n])
                k += n
        return out


def gradients(scalar, variables):
    """The gradients of the 0-d float tensor ``scalar`` with respect to each tensor of
    ``variables`` (a list gives a list; one tensor gives one gradient)."""
    if _is_tensor(variables):
        return _core.gradients(scalar, [variables])[0]
    return _core.gradients(scalar, list(variables))


def jacobians(tensor, variables, mode="forward"):
    """The Jacobian of ``tensor`` with respect to each of ``variables``: shape
    tensor.shape + variable.shape. ``mode`` is accepted for SymJAX's signature; sj builds one
    vector-Jacobian product per element of ``tensor`` either way."""
    if mode not in ("forward", "backward"):
        raise ValueError("symjax.jacobians: mode can only be 'forward' or 'backward'")
    if _is_tensor(variables):
        return _core.jacobian(tensor, variables)
    return [_core.jacobian(tensor, v) for v in variables]


vjp = _core.vjp
jvp = _core.jvp
hessian_vector_product = _core.hessian_vector_product
to_text = _core.to_text
to_dot = _core.to_dot
available_backends = _core.available_backends
manual_seed = _core.manual_seed


def clone(tensor, givens=None):
    """``tensor`` rebuilt with each key of ``givens`` replaced by its value."""
    from . import tensor as _T
    return _T.clone(tensor, givens)


class Scope:
    """A name scope, used as a context manager; variables and ops made inside it are named under
    it ("model/dense/W"). A Scope object can be kept and entered again (SymJAX's reattach)::

        with symjax.Scope("model"):
            w = T.Variable(1.0, name="w")       # full_name "model/w"
        scope = symjax.Scope("second")
        with scope:
            ...
        scope.ops, scope.variables(), scope.absolute_name   # "/second/"
    """

    def __init__(self, relative_name=None, absolute_name=None, reattach=False, reuse=False,
                 graph=None):
        if absolute_name is not None:
            self._scope = _core.Scope.at(absolute_name)
        elif relative_name is not None:
            if "/" in relative_name:
                raise ValueError("symjax.Scope: a relative name has no '/': %r" % relative_name)
            self._scope = _core.Scope(relative_name)
        else:
            raise ValueError("symjax.Scope needs a relative_name or an absolute_name")

    def __enter__(self):
        self._scope.__enter__()
        return self

    def __exit__(self, *args):
        self._scope.__exit__(*args)
        return False

    @property
    def name(self):
        return self._scope.name

    @property
    def absolute_name(self):
        return self._scope.absolute_name

    full_name = absolute_name

    @property
    def ops(self):
        return self._scope.ops

    @property
    def placeholders(self):
        return self._scope.placeholders

    def variables(self, trainable=None):
        return self._scope.variables(trainable)

    def __repr__(self):
        return "Scope(%s)" % self.absolute_name


def _split(full):
    """('/model/dense/', 'W') from 'model/dense/W'."""
    if "/" in full:
        s, n = full.rsplit("/", 1)
        return "/" + s + "/", n
    return "/", full


def _match(full, name, scope):
    s, n = _split(full)
    if scope not in ("/", "*", "", None):
        prefix = scope if scope.startswith("/") else "/" + scope
        if not _fnmatch.fnmatchcase(s, prefix + "*"):
            return False
    return _fnmatch.fnmatchcase(n, name) or _core.glob_match(name, full)


def get_variables(name="*", scope="/", trainable=True):
    """Live variables whose name (or full name) matches the glob ``name`` under ``scope``, in
    creation order; ``trainable`` True (SymJAX's default) or False selects by the flag, None
    takes all."""
    return [v for v in _core.get_variables("*", trainable) if _match(v.full_name, name, scope)]


def get_placeholders(name="*", scope="/"):
    """Live placeholders matching ``name`` under ``scope``."""
    return [p for p in _core.get_placeholders("*") if _match(p.name, name, scope)]


def get_ops(name="*", scope="/"):
    """Live op nodes (not leaves) whose full name matches (see Scope)."""
    if scope in ("/", "*", ""):
        return _core.get_ops(name if "/" in name else "*" if name == "*" else "*" + name)
    return _core.Scope.at(scope).ops


def reset_variables(name="*", scope="*", trainable=None):
    """Resets every variable matching ``name`` (and ``scope``, ``trainable``) to its initial
    value (re-evaluating an initializer expression)."""
    for v in get_variables(name, scope, trainable):
        v.reset()


def save_variables(path, name="*", scope="*", trainable=None, metadata=None):
    """Saves the matching variables to ``path`` as a safetensors file (keys: full names), written
    atomically. SymJAX wrote .npz; the format here is the C++ library's (docs/checkpoints.md)."""
    vars_ = get_variables(name, scope, trainable)
    if name == "*" and scope in ("*", "/") and trainable is None:
        _core.save_variables(str(path), "*", metadata or {})
        return
    _core.write_safetensors(str(path), {v.full_name: v.value for v in vars_}, metadata or {})


def load_variables(path, name="*", scope="*", trainable=None):
    """Loads the matching variables from a safetensors file written by save_variables. All or
    nothing: the file is validated before any variable changes (symjax.IOError otherwise)."""
    if name == "*" and scope in ("*", "/") and trainable is None:
        _core.load_variables(str(path), "*")
        return
    tensors, _ = _core.read_safetensors(str(path))
    vars_ = get_variables(name, scope, trainable)
    missing = [v.full_name for v in vars_ if v.full_name not in tensors]
    if missing:
        raise IOError("symjax.load_variables: %s has no tensor for %s" % (path, ", ".join(missing)))
    values = [_core.as_array(tensors[v.full_name], v.dtype) for v in vars_]
    for v, a in zip(vars_, values):
        if tuple(a.shape) != tuple(v.shape):
            raise ShapeError("symjax.load_variables: %s holds %s of shape %s, the variable has %s"
                             % (path, v.full_name, a.shape, v.shape))
    for v, a in zip(vars_, values):
        v.update(a)


# Note [Registered updates]
# SymJAX kept one global dict of updates that layers and optimizers added to and that
# get_updates() returned. sj's C++ API has none: optimizers return their updates and layers attach
# state updates to their outputs (state_updates). For SymJAX's idioms the Python package keeps a
# registry that only the SymJAX-style constructors fill (nn.optimizers.Adam(loss, lr),
# nn.schedules.ExponentialMovingAverage, add_updates); get_updates() returns it, plus the state
# updates attached to `outputs` when given. current_graph().reset() empties it.
_registry = {}


def add_updates(updates):
    """Registers updates (a dict or pairs) for get_updates() (Note [Registered updates])."""
    for var, value in _update_pairs(updates):
        _registry[var] = value


def state_updates(outputs):
    """The state updates (batch norm's running statistics) attached to the graph of
    ``outputs``, as a dict {variable: new value}."""
    outs = [outputs] if _is_tensor(outputs) else list(outputs)
    return dict(_core.state_updates(outs))


def get_updates(name="*", scope="/", variables=None, outputs=None):
    """The registered updates (Note [Registered updates]) as a dict, filtered by the updated
    variable's name and scope or restricted to ``variables``; with ``outputs``, also the state
    updates attached to their graph (state_updates)."""
    out = {}
    if variables is not None:
        for v in variables:
            for k, val in _registry.items():
                if k.same(v):
                    out[k] = val
    else:
        for k, val in _registry.items():
            if _match(k.full_name, name, scope):
                out[k] = val
    if outputs is not None:
        for k, val in state_updates(outputs).items():
            out[k] = val
    return out


class _Graph:
    """SymJAX's current_graph(): sj keeps no graph object (graphs are values, hash-consed). This
    gives SymJAX's calls their meaning here: get() evaluates, reset() forgets registered updates,
    and variables/placeholders/ops list the live ones."""

    def get(self, tensor, givens=None):
        from . import tensor as _T
        return _T.get(tensor, givens)

    def reset(self):
        _registry.clear()

    def variables(self, trainable=True):
        return get_variables(trainable=trainable)

    @property
    def placeholders(self):
        return get_placeholders()

    @property
    def ops(self):
        return get_ops()

    @property
    def updates(self):
        return dict(_registry)


_graph = _Graph()


def current_graph():
    return _graph


from . import tensor  # noqa: E402
from .tensor import vmap  # noqa: E402
from . import nn  # noqa: E402
from . import data  # noqa: E402
from . import dist  # noqa: E402
