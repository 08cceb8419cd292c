"""symjax.tensor: tensors and the NumPy-named ops (SymJAX's ``symjax.tensor``, imported as T).

Every function builds graph: ``T.exp(x)`` returns a Tensor, evaluated by a compiled
``symjax.function`` or by ``Tensor.get()``. Arguments may be tensors, NumPy arrays or Python
numbers; a number next to a tensor takes the tensor's dtype (as JAX's weakly typed scalars).
"""
import builtins as _builtins
import collections as _collections
import operator as _operator
import sys as _sys
import types as _types

import numpy as _np

from . import _core

Tensor = _core.Tensor
Placeholder = _core.Placeholder
Variable = _core.Variable

__all__ = []  # filled at the end


def _t(x):
    return x if isinstance(x, Tensor) else _core.constant(x)


def _axes(axis):
    if axis is None:
        return None
    if isinstance(axis, (int, _np.integer)):
        return [int(axis)]
    return [int(a) for a in axis]


# ---- creation ----------------------------------------------------------------------------------
def constant(value, dtype=None):
    """A constant tensor holding ``value`` (copied)."""
    return _core.constant(value, dtype)


def _shape(shape):
    if isinstance(shape, (int, _np.integer)):
        return (int(shape),)
    return tuple(shape)


def full(shape, fill_value, dtype="float32"):
    return _core.full(_shape(shape), float(fill_value), dtype)


def zeros(shape, dtype="float32"):
    return full(shape, 0.0, dtype)


def ones(shape, dtype="float32"):
    return full(shape, 1.0, dtype)


def full_like(x, fill_value, dtype=None):
    return _core.full_like(_t(x), float(fill_value), dtype)


def zeros_like(x, dtype=None):
    return full_like(x, 0.0, dtype)


def ones_like(x, dtype=None):
    return full_like(x, 1.0, dtype)


def arange(start, stop=None, step=1, dtype=None):
    """NumPy's arange: [start, stop) by step; integer arguments give int32 (as JAX)."""
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        ints = _builtins.all(isinstance(v, (int, _np.integer)) for v in (start, stop, step))
        dtype = "int32" if ints else "float32"
    return _core.arange(float(start), float(stop), float(step), dtype)


range = arange  # SymJAX's name


def linspace(start, stop, num=50, dtype="float32"):
    return _core.linspace(float(start), float(stop), int(num), dtype)


def eye(N, M=None, k=0, dtype="float32"):
    return _core.eye(int(N), -1 if M is None else int(M), int(k), dtype)


def identity(n, dtype="float32"):
    return eye(n, dtype=dtype)


# ---- elementwise -------------------------------------------------------------------------------
negative = _core.neg
neg = _core.neg
abs = _core.abs
absolute = _core.abs
sign = _core.sign
exp = _core.exp
expm1 = _core.expm1
log = _core.log
log1p = _core.log1p
log2 = _core.log2
sqrt = _core.sqrt
rsqrt = _core.rsqrt
reciprocal = _core.reciprocal
sin = _core.sin
cos = _core.cos
tan = _core.tan
tanh = _core.tanh
erf = _core.erf
floor = _core.floor
ceil = _core.ceil
round = _core.round
around = _core.round
logical_not = _core.logical_not
isnan = _core.isnan
isinf = _core.isinf
stop_gradient = _core.stop_gradient
sigmoid = _core.sigmoid
log_sigmoid = _core.log_sigmoid
softplus = _core.softplus


def log10(x):
    return _core.log(x) / _np.log(10.0)


def square(x):
    x = _t(x)
    return x * x


def isfinite(x):
    x = _t(x)
    return _core.logical_not(_core.logical_or(_core.isnan(x), _core.isinf(x)))


def cast(x, dtype):
    return _core.cast(_t(x), dtype)


astype = cast


def relu(x):
    return _core.maximum(_t(x), 0.0)


add = _core.add
subtract = _core.sub
multiply = _core.mul
power = _core.pow
maximum = _core.maximum
minimum = _core.minimum
mod = _core.mod
remainder = _core.mod
arctan2 = _core.atan2
atan2 = _core.atan2
hypot = _core.hypot
equal = _core.eq
not_equal = _core.ne
less = _core.lt
less_equal = _core.le
greater = _core.gt
greater_equal = _core.ge
logical_and = _core.logical_and
logical_or = _core.logical_or
logical_xor = _core.logical_xor


def divide(a, b):
    """True division (integers divide as float32, as Python's /)."""
    return _t(a) / b if isinstance(a, Tensor) or not isinstance(b, Tensor) else a / b


true_divide = divide


def floor_divide(a, b):
    return _t(a) // b


def where(condition, x, y):
    return _core.where(condition, x, y)


def clip(a, a_min, a_max):
    return _core.clip(_t(a), float(a_min), float(a_max))


# ---- reductions --------------------------------------------------------------------------------
def _reduce(fn):
    def r(x, axis=None, keepdims=False):
        return fn(_t(x), _axes(axis), keepdims)

    r.__name__ = fn.__name__
    return r


sum = _reduce(_core.sum)
prod = _reduce(_core.prod)
max = _reduce(_core.max)
min = _reduce(_core.min)
amax = max
amin = min
any = _reduce(_core.any)
all = _reduce(_core.all)
mean = _reduce(_core.mean)
logsumexp = _reduce(_core.logsumexp)
nansum = _reduce(_core.nansum)
nanmean = _reduce(_core.nanmean)
nanmax = _reduce(_core.nanmax)
nanmin = _reduce(_core.nanmin)


def var(x, axis=None, keepdims=False, ddof=0):
    return _core.var(_t(x), _axes(axis), keepdims, ddof)


def std(x, axis=None, keepdims=False, ddof=0):
    return _core.sqrt(var(x, axis, keepdims, ddof))


def argmax(x, axis=None, keepdims=False):
    x = _t(x)
    if axis is None:
        return _core.argmax(_core.reshape(x, (-1,)), 0, False)
    return _core.argmax(x, int(axis), keepdims)


def argmin(x, axis=None, keepdims=False):
    x = _t(x)
    if axis is None:
        return _core.argmin(_core.reshape(x, (-1,)), 0, False)
    return _core.argmin(x, int(axis), keepdims)


def cumsum(x, axis=None, reverse=False):
    x = _t(x)
    if axis is None:
        return _core.cumsum(_core.reshape(x, (-1,)), 0, reverse)
    return _core.cumsum(x, int(axis), reverse)


def softmax(x, axis=-1):
    return _core.softmax(_t(x), int(axis))


def log_softmax(x, axis=-1):
    return _core.log_softmax(_t(x), int(axis))


# ---- movement ----------------------------------------------------------------------------------
def reshape(x, newshape):
    return _core.reshape(_t(x), _shape(newshape))


def transpose(x, axes=None):
    return _core.transpose(_t(x), _axes(axes) or [])


def broadcast_to(x, shape):
    return _core.broadcast_to(_t(x), _shape(shape))


def expand_dims(x, axis):
    return _core.expand_dims(_t(x), int(axis))


def squeeze(x, axis=None):
    return _core.squeeze(_t(x), _axes(axis) or [])


def flatten(x, start_axis=0):
    return _core.flatten(_t(x), int(start_axis))


def ravel(x):
    return _core.reshape(_t(x), (-1,))


def pad(x, pad_width, mode="constant", constant_values=0):
    """NumPy's pad (mode "constant" only): pad_width is one (before, after) pair per axis, one
    pair for all axes, or one number for all."""
    if mode != "constant":
        raise ValueError("symjax.tensor.pad: only mode='constant' is supported, got %r" % mode)
    x = _t(x)
    pw = _np.broadcast_to(_np.asarray(pad_width, dtype=_np.int64), (x.ndim, 2))
    return _core.pad(x, [int(v) for v in pw[:, 0]], [int(v) for v in pw[:, 1]], [],
                     float(constant_values))


def flip(x, axis=None):
    x = _t(x)
    return _core.flip(x, list(_builtins.range(x.ndim)) if axis is None else _axes(axis))


def fliplr(x):
    return flip(x, 1)


def flipud(x):
    return flip(x, 0)


def concatenate(tensors, axis=0):
    return _core.concat(list(tensors), int(axis))


concat = concatenate


def stack(tensors, axis=0):
    return _core.stack(list(tensors), int(axis))


def hstack(tensors):
    tensors = [_t(t) for t in tensors]
    return concatenate(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    return concatenate([t if _t(t).ndim > 1 else _core.expand_dims(_t(t), 0) for t in tensors], 0)


def slice(x, start, stop, step=None):
    return _core.slice(_t(x), list(start), list(stop), list(step or []))


# ---- indexing ----------------------------------------------------------------------------------
class _IndexExp:
    """SymJAX's T.index (NumPy's index_exp): T.index[1:3, 0] is the tuple (slice(1, 3), 0)."""

    def __getitem__(self, key):
        return key if isinstance(key, tuple) else (key,)


index = _IndexExp()
index_exp = index


def take(x, indices, axis=None):
    x = _t(x)
    if axis is None:
        return _core.gather(_core.reshape(x, (-1,)), indices, 0)
    return _core.gather(x, indices, int(axis))


gather = take

_SCATTER_MODES = {"set": 0, "add": 1, "mul": 2, "min": 3, "max": 4}


def scatter(x, indices, updates, axis=0, mode="set"):
    return _core.scatter(x, indices, updates, int(axis), _SCATTER_MODES[mode])


def scatter_add(x, indices, updates, axis=0):
    return scatter(x, indices, updates, axis, "add")


def _index_op(mode):
    def f(x, idx, y):
        return _core.index_apply(_t(x), idx, y, _SCATTER_MODES[mode])

    return f


index_update = _index_op("set")
index_add = _index_op("add")
index_mul = _index_op("mul")
index_multiply = index_mul
index_min = _index_op("min")
index_max = _index_op("max")


def dynamic_slice(x, start_indices, slice_sizes):
    return _core.dynamic_slice(x, start_indices, _shape(slice_sizes))


def dynamic_update_slice(x, update, start_indices):
    return _core.dynamic_update_slice(x, update, start_indices)


def one_hot(indices, depth, dtype="float32"):
    return _core.one_hot(indices, int(depth), dtype)


def check_index(indices, depth, ignore=None, what=""):
    return _core.check_index(indices, int(depth), ignore, what)


def diagonal(x, offset=0, axis1=0, axis2=1):
    return _core.diagonal(x, int(offset), int(axis1), int(axis2))


def diag(x, k=0):
    return _core.diag(x, int(k))


def trace(x, offset=0, axis1=0, axis2=1):
    return _core.trace(x, int(offset), int(axis1), int(axis2))


# ---- linear algebra ----------------------------------------------------------------------------
matmul = _core.matmul


def dot(a, b):
    """NumPy's dot for 1-d and 2-d operands (matmul; scalars multiply)."""
    a, b = _t(a), _t(b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return _core.matmul(a, b)


def inner(a, b):
    return _core.sum(_t(a) * b, [-1], False)


def outer(a, b):
    return _core.reshape(_t(a), (-1, 1)) * _core.reshape(_t(b), (1, -1))


def tensordot(a, b, axes=2):
    a, b = _t(a), _t(b)
    if isinstance(axes, int):
        la = list(_builtins.range(a.ndim - axes, a.ndim))
        lb = list(_builtins.range(axes))
    else:
        la, lb = _axes(axes[0]), _axes(axes[1])
    return _core.dot_general(a, b, [], [], la, lb)


def dot_general(a, b, lhs_contract, rhs_contract, lhs_batch=(), rhs_batch=()):
    return _core.dot_general(_t(a), _t(b), list(lhs_batch), list(rhs_batch), list(lhs_contract),
                             list(rhs_contract))


# ---- convolution and pooling (NCHW, OIHW) -------------------------------------------------------
def convNd(input, filter, strides=1, padding="VALID", dilation=1, groups=1):
    return _core.conv(input, filter, _axes(strides) or [], padding, _axes(dilation) or [],
                      int(groups))


conv = convNd


def conv_transpose(input, filter, strides=1, padding="VALID", dilation=1, groups=1,
                   output_padding=None):
    return _core.conv_transpose(input, filter, _axes(strides) or [], padding,
                                _axes(dilation) or [], int(groups), _axes(output_padding) or [])


def poolNd(input, window_shape, reducer="MAX", strides=None, padding="VALID",
           count_include_pad=True):
    window = _axes(window_shape)
    strides = _axes(strides) or []
    if reducer.upper() == "MAX":
        return _core.max_pool(input, window, strides, padding)
    if reducer.upper() in ("AVG", "MEAN"):
        return _core.avg_pool(input, window, strides, padding, count_include_pad)
    raise ValueError("symjax.tensor.poolNd: reducer must be 'MAX' or 'AVG', got %r" % reducer)


# ---- SymJAX's methods and helpers -----------------------------------------------------------------
def Tuple(*tensors):
    """SymJAX's T.Tuple: a plain tuple of tensors here."""
    return tuple(tensors)


Tensor.dot = lambda self, other: dot(self, other)
Tensor.matmul = lambda self, other: _core.matmul(self, other)
Tensor.std = lambda self, axis=None, keepdims=False, ddof=0: std(self, axis, keepdims, ddof)
Tensor.repeat = lambda self, repeats, axis=None: _repeat(self, repeats, axis)


def _repeat(x, repeats, axis=None):
    x = _t(x)
    if axis is None:
        x, axis = _core.reshape(x, (-1,)), 0
    axis = axis % x.ndim
    e = _core.expand_dims(x, axis + 1)
    shape = list(e.shape)
    shape[axis + 1] = int(repeats)
    out = _core.broadcast_to(e, [-1 if s is None else s for s in shape])
    new = list(x.shape)
    new[axis] = None if new[axis] is None else new[axis] * int(repeats)
    return _core.reshape(out, [-1 if s is None else s for s in new])


repeat = _repeat


# ---- graphs ------------------------------------------------------------------------------------
def clone(tensor, givens=None):
    """The graph of ``tensor`` rebuilt with each key of ``givens`` replaced by its value."""
    if isinstance(tensor, (list, tuple)):
        return _core.clone(list(tensor), givens)
    return _core.clone([tensor], givens)[0]


def get(tensor, givens=None):
    """The value of ``tensor`` (a NumPy array), computed by the reference interpreter."""
    if isinstance(tensor, (list, tuple)):
        return [get(t, givens) for t in tensor]
    return _core.eval(_t(tensor), givens)


# ---- control flow ------------------------------------------------------------------------------
# Note [Python control flow]
# The C++ constructs (include/symjax/ControlFlow.h, docs/control-flow.md) take flat lists of
# tensors; these wrappers add SymJAX's (and JAX's) conventions: a carry, an output or a branch
# result may be a tensor or any nesting of tuples, lists and dicts of tensors (a pytree), and the
# body's arguments are unpacked (``fn(carry, *slices, *non_sequences)``). The body is called
# once, from C++, while the loop is traced; numbers and arrays it returns become constants (a
# number returned for a carry takes the carry's dtype).


class _Leaf:
    pass


_LEAF = _Leaf()


def _flatten(tree):
    """The leaves of a pytree (tensors, numbers, arrays) and its structure."""
    if isinstance(tree, (tuple, list)):
        leaves, defs = [], []
        for x in tree:
            l, d = _flatten(x)
            leaves += l
            defs.append(d)
        return leaves, (type(tree), tuple(defs))
    if isinstance(tree, dict):
        keys = sorted(tree)
        leaves, defs = [], []
        for k in keys:
            l, d = _flatten(tree[k])
            leaves += l
            defs.append(d)
        return leaves, (dict, tuple(keys), tuple(defs))
    if tree is None:
        return [], None
    return [tree], _LEAF


def _unflatten(treedef, leaves):
    it = iter(leaves)

    def build(d):
        if d is _LEAF:
            return next(it)
        if d is None:
            return None
        if d[0] is dict:
            return {k: build(c) for k, c in zip(d[1], d[2])}
        items = [build(c) for c in d[1]]
        return d[0](*items) if hasattr(d[0], "_fields") else d[0](items)  # namedtuples

    return build(treedef)


def _describe(treedef):
    if treedef is _LEAF:
        return "a tensor"
    if treedef is None:
        return "None"
    if treedef[0] is dict:
        items = ("%r: %s" % (k, _describe(c)) for k, c in zip(treedef[1], treedef[2]))
        return "{%s}" % ", ".join(items)
    inner = ", ".join(_describe(c) for c in treedef[1])
    if not issubclass(treedef[0], tuple):
        return "[%s]" % inner
    return ("(%s,)" if len(treedef[1]) == 1 else "(%s)") % inner


def _leaf_tensor(x, where, like=None):
    """A body's result leaf as a tensor: numbers take ``like``'s dtype (a carry's)."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, int, float, _np.generic, _np.ndarray)):
        return _core.constant(x, None if like is None or not _np.isscalar(x) else like.dtype)
    raise _core.TypeError("%s returned %r, which is not a tensor or a number" % (where, x))


def _tensor_list(x, what):
    """Sequences, non-sequences or operands: a list or tuple (or one tensor, or None)."""
    if x is None:
        return []
    if isinstance(x, (list, tuple)):
        return [_t(v) for v in x]
    if isinstance(x, (Tensor, _np.ndarray)):
        return [_t(x)]
    raise _core.TypeError("%s must be a list or tuple of tensors, got %r" % (what, x))


def _loose(treedef):
    """A structure with lists read as tuples: SymJAX turned list arguments into tuples, so a body
    may return a tuple for a list of loop variables (and the reverse)."""
    if treedef is _LEAF or treedef is None:
        return treedef
    if treedef[0] is dict:
        return (dict, treedef[1], tuple(_loose(c) for c in treedef[2]))
    return (tuple, tuple(_loose(c) for c in treedef[1]))


def _same_structure(loop, what, got, want, want_what):
    """TypeError unless pytree structures ``got`` (what ``what`` returned) and ``want`` (that of
    ``want_what``) are the same, lists and tuples alike."""
    if _loose(got) != _loose(want):
        raise _core.TypeError("%s: %s returns %s, but %s is %s"
                              % (loop, what, _describe(got), want_what, _describe(want)))


def scan(fn, init, sequences, non_sequences=(), length=None, reverse=False, name=None,
         checkpoint_every=0, unroll=1):
    """SymJAX's scan (JAX's ``lax.scan``, Theano's ``scan``): for each slice of ``sequences``
    along their first dim, ``carry, y = fn(carry, *slices, *non_sequences)``.

    ``init`` is the first carry: a tensor, a number or a pytree (tuples, lists, dicts) of them;
    ``fn`` receives the carry in that structure and returns ``(new_carry, y)`` with the new carry
    in the same structure, dtypes and shapes (else ``symjax.TypeError``), and ``y`` a tensor, a
    pytree of tensors or None. Returns ``(final_carry, ys)``, ``ys`` being the ``y`` of every
    step stacked along a new first dim (in the sequences' order, also with ``reverse``).
    ``length`` gives the number of steps when there are no sequences. ``fn`` is called once, to
    trace the body; any tensor it uses from outside (variables, placeholders) becomes an input of
    the loop, so gradients reach it. ``name`` names the loop in errors. ``checkpoint_every=k``
    makes the backward pass store every k-th carry only and recompute the others (less memory,
    one more forward pass; docs/control-flow.md). ``unroll=k`` (JAX's) runs k steps per
    iteration of the loop, with the same results (``fn`` is then called k times to trace).
    """
    loop = name or "scan"
    init_leaves, init_def = _flatten(init)
    init_leaves = [_t(x) for x in init_leaves]
    seqs = _tensor_list(sequences, loop + ": sequences")
    ns = _tensor_list(non_sequences, loop + ": non_sequences")
    out_def = []

    def body(carry, args):
        r = fn(_unflatten(init_def, carry), *args)
        if not isinstance(r, (tuple, list)) or len(r) != 2:
            raise _core.TypeError("%s: the body must return a pair (new_carry, output), got %r"
                                  % (loop, r))
        new_leaves, new_def = _flatten(r[0])
        _same_structure(loop, "the body's new carry", new_def, init_def, "the carry (init)")
        ys, y_def = _flatten(r[1])
        out_def.append(y_def)
        carries = [_leaf_tensor(x, loop + "'s body", like)
                   for x, like in zip(new_leaves, init_leaves)]
        return carries, [_leaf_tensor(y, loop + "'s body") for y in ys]

    carry, outs = _core.scan(body, init_leaves, seqs, ns,
                             None if length is None else int(length), bool(reverse),
                             name or "", int(checkpoint_every), int(unroll))
    return _unflatten(init_def, carry), _unflatten(out_def[0], outs)


def map(f, sequences, non_sequences=()):
    """SymJAX's map: ``f(*slices, *non_sequences)`` for each slice of ``sequences`` (along their
    first dim, which they share), the results stacked along a new first dim. ``f`` returns a
    tensor or a pytree of tensors; the result has that structure."""
    seqs = _tensor_list(sequences, "map: sequences")
    if not seqs:
        raise _core.ShapeError("map: no sequences to map over")
    return scan(lambda carry, *args: (carry, f(*args)), (), seqs, non_sequences, name="map")[1]


def vmap(fun, in_axes=0, out_axes=0, name=None):
    """JAX's vmap: ``fun`` written for one example, applied to a batch. Returns a function that
    takes the same arguments with a batch axis added and returns ``fun``'s results stacked along
    ``out_axes``.

    ``in_axes`` is an axis (or None: not mapped, shared by every example) for all arguments, or a
    list/tuple with one entry per positional argument (an argument may be a pytree: its entry
    applies to all its leaves). ``out_axes`` is an axis or None for all results, or one entry per
    result leaf. ``fun`` is traced once, on placeholders of one example's type, and the graph is
    rewritten op by op (docs/vmap.md); ops without a batching rule loop over the batch. Random
    draws made inside ``fun`` differ per example; ``fun`` may call ``gradients`` (per-example
    gradients)."""
    what = name or "vmap"

    def batched(*args):
        if isinstance(in_axes, (list, tuple)):
            if len(in_axes) != len(args):
                raise _core.TypeError("%s: %d in_axes for %d arguments" % (what, len(in_axes), len(args)))
            axes = list(in_axes)
        else:
            axes = [in_axes] * len(args)
        leaves, leaf_axes, defs = [], [], []
        for a, ax in zip(args, axes):
            l, d = _flatten(a)
            leaves += [_t(x) for x in l]
            leaf_axes += [None if ax is None else int(ax)] * len(l)
            defs.append((d, len(l)))
        out_def = []

        def body(per_example):
            it = iter(per_example)
            rebuilt = [_unflatten(d, [next(it) for _ in range(n)]) for d, n in defs]
            flat, d = _flatten(fun(*rebuilt))
            out_def.append(d)
            return [_leaf_tensor(y, what + "'s function") for y in flat]

        if isinstance(out_axes, (list, tuple)):
            oa = [None if ax is None else int(ax) for ax in out_axes]
        else:
            oa = [None if out_axes is None else int(out_axes)]
        outs = _core.vmap(body, leaves, leaf_axes, oa, name or "")
        return _unflatten(out_def[0], outs)

    return batched


def fori_loop(lower, upper, body_fun, init_val):
    """JAX's fori_loop: ``val = body_fun(i, val)`` for i in [lower, upper) (an int64 scalar
    tensor), returning the last ``val`` (a tensor or a pytree, like ``init_val``). The bounds are
    Python integers: the number of steps is fixed when the graph is built."""
    init_leaves, init_def = _flatten(init_val)
    init_leaves = [_t(x) for x in init_leaves]

    def body(i, carry):
        new_leaves, new_def = _flatten(body_fun(i, _unflatten(init_def, carry)))
        _same_structure("fori_loop", "the body", new_def, init_def, "init_val")
        return [_leaf_tensor(x, "fori_loop's body", like)
                for x, like in zip(new_leaves, init_leaves)]

    return _unflatten(init_def, _core.fori_loop(int(lower), int(upper), body, init_leaves))


def while_loop(cond_fun, body_fun, loop_vars, non_sequences=(), max_iterations=None,
               non_sequences_cond=None, non_sequences_body=None, name=None):
    """While ``cond_fun(vars, *non_sequences)`` is true: ``vars = body_fun(vars,
    *non_sequences)``; returns the final ``vars`` (a tensor or a pytree, like ``loop_vars``).

    ``cond_fun`` returns a bool scalar tensor (else ``symjax.TypeError``); ``body_fun`` returns
    the variables in the same structure, dtypes and shapes. SymJAX's ``non_sequences_cond`` and
    ``non_sequences_body`` pass extra arguments to one function only (after ``non_sequences``).
    ``max_iterations`` stops the loop after that many iterations; gradients through the loop need
    it (the carries are stored for the backward pass). ``trip_count(result)`` is the number of
    iterations run."""
    loop = name or "while_loop"
    var_leaves, var_def = _flatten(loop_vars)
    var_leaves = [_t(x) for x in var_leaves]
    ns = _tensor_list(non_sequences, loop + ": non_sequences")
    nsc = _tensor_list(non_sequences_cond, loop + ": non_sequences_cond")
    nsb = _tensor_list(non_sequences_body, loop + ": non_sequences_body")
    n, nc = len(ns), len(nsc)

    def condition(vars, extra):
        r = cond_fun(_unflatten(var_def, vars), *extra[:n], *extra[n:n + nc])
        return r if isinstance(r, Tensor) else _leaf_tensor(r, loop + "'s condition")

    def body(vars, extra):
        new_leaves, new_def = _flatten(body_fun(_unflatten(var_def, vars), *extra[:n],
                                                *extra[n + nc:]))
        _same_structure(loop, "the body", new_def, var_def, "loop_vars")
        return [_leaf_tensor(x, loop + "'s body", like) for x, like in zip(new_leaves, var_leaves)]

    out = _core.while_loop(condition, body, var_leaves, ns + nsc + nsb,
                           None if max_iterations is None else int(max_iterations), name or "")
    return _unflatten(var_def, out)


def trip_count(result):
    """The number of iterations (an int64 scalar) of the while_loop that returned ``result``
    (any of its loop variables)."""
    return _core.trip_count(result)


def _branch(fn, what, defs):
    def run(operands):
        leaves, d = _flatten(fn(*operands))
        defs.append((what, d))
        return [_leaf_tensor(x, what) for x in leaves]

    return run


def _branch_results(construct, defs, leaves):
    first_what, first = defs[0]
    for what, d in defs[1:]:
        _same_structure(construct, what, d, first, "what %s returns" % first_what)
    return _unflatten(first, leaves)


def cond(pred, true_fun, false_fun, true_inputs=(), false_inputs=(), operands=None):
    """SymJAX's cond: ``true_fun(*true_inputs)`` when ``pred`` (a bool scalar) is true, else
    ``false_fun(*false_inputs)``. Only the chosen branch runs. Both return the same structure
    (a tensor or a pytree) of tensors with the same dtypes and shapes. ``operands=(...)`` passes
    the same arguments to both (JAX's form) instead of ``true_inputs``/``false_inputs``."""
    if operands is not None:
        if _tensor_list(true_inputs, "cond") or _tensor_list(false_inputs, "cond"):
            raise ValueError("cond: give operands, or true_inputs and false_inputs, not both")
        ops = _tensor_list(operands, "cond: operands")
        t_in, f_in = ops, ops
        all_ops, nt = ops, len(ops)
        split = False
    else:
        t_in = _tensor_list(true_inputs, "cond: true_inputs")
        f_in = _tensor_list(false_inputs, "cond: false_inputs")
        all_ops, nt = t_in + f_in, len(t_in)
        split = True
    defs = []
    tf = _branch(true_fun, "the true branch", defs)
    ff = _branch(false_fun, "the false branch", defs)
    if split:
        out = _core.cond(pred, lambda o: tf(o[:nt]), lambda o: ff(o[nt:]), all_ops)
    else:
        out = _core.cond(pred, tf, ff, all_ops)
    return _branch_results("cond", defs, out)


def switch(index, branches, *operands):
    """JAX's switch: ``branches[index](*operands)``, ``index`` an integer scalar clamped to
    [0, len(branches)). Only the chosen branch runs; all return the same structure of tensors."""
    defs = []
    fns = [_branch(b, "branch %d" % k, defs) for k, b in enumerate(branches)]
    out = _core.switch(_t(index), fns, [_t(o) for o in operands])
    return _branch_results("switch", defs, out)


# ---- submodules: random, linalg, interpolation --------------------------------------------------
def _submodule(name, doc):
    mod = _types.ModuleType(__name__ + "." + name, doc)
    _sys.modules[mod.__name__] = mod
    return mod


random = _submodule("random", "Random draws (counter-based Philox; a new draw on every call).")


def _seed(seed):
    return None if seed is None else int(seed)


def _normal(shape=(), dtype="float32", mean=0.0, std=1.0, seed=None):
    return _core.random.normal(_shape(shape), float(mean), float(std), dtype, _seed(seed))


def _uniform(shape=(), dtype="float32", minval=0.0, maxval=1.0, seed=None):
    return _core.random.uniform(_shape(shape), float(minval), float(maxval), dtype, _seed(seed))


def _bernoulli(p=0.5, shape=(), seed=None):
    return _core.random.bernoulli(_shape(shape), float(p), _seed(seed))


def _truncated_normal(lower=-2.0, upper=2.0, shape=(), dtype="float32", seed=None):
    return _core.random.truncated_normal(_shape(shape), float(lower), float(upper), dtype,
                                         _seed(seed))


def _randint(shape, minval, maxval, dtype="int32", seed=None):
    u = _core.random.uniform(_shape(shape), float(minval), float(maxval), "float64", _seed(seed))
    return _core.cast(_core.floor(u), dtype)


def _bits(shape=(), seed=None):
    return _core.random.bits(_shape(shape), _seed(seed))


random.normal = random.randn = _normal
random.uniform = random.rand = _uniform
random.bernoulli = _bernoulli
random.truncated_normal = _truncated_normal
random.randint = _randint
random.bits = _bits
random.seed = random.manual_seed = _core.random.manual_seed

linalg = _submodule("linalg", "Linear algebra (cholesky, triangular solves, norms).")


def _norm(x, ord=2, axis=None, keepdims=False):
    x = _t(x)
    if ord in (2, None, "fro"):
        return _core.sqrt(sum(x * x, axis, keepdims))
    if ord == 1:
        return sum(_core.abs(x), axis, keepdims)
    if ord in (_np.inf, "inf"):
        return max(_core.abs(x), axis, keepdims)
    raise ValueError("symjax.tensor.linalg.norm: ord must be 1, 2, 'fro' or inf, got %r" % (ord,))


def _solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False):
    """SciPy's solve_triangular(a, b, trans, lower): solves op(a) x = b."""
    return _core.triangular_solve(a, b, True, bool(lower), trans in (1, "T"), bool(unit_diagonal))


def _triangular_solve(a, b, left_side=True, lower=True, transpose_a=False, unit_diagonal=False):
    return _core.triangular_solve(a, b, bool(left_side), bool(lower), bool(transpose_a),
                                  bool(unit_diagonal))


def _cho_solve(c_and_lower, b):
    c, lower = c_and_lower
    y = _core.triangular_solve(c, b, True, bool(lower), not lower, False)
    return _core.triangular_solve(c, y, True, bool(lower), bool(lower), False)


linalg.cholesky = _core.cholesky
linalg.norm = _norm
linalg.solve_triangular = _solve_triangular
linalg.triangular_solve = _triangular_solve
linalg.cho_solve = _cho_solve
linalg.matmul = _core.matmul
linalg.trace = trace
linalg.diagonal = diagonal

interpolation = _submodule("interpolation", "Sampling at fractional coordinates and resizing.")


def _map_coordinates(input, coordinates, order=1, mode="constant", cval=0.0):
    return _core.interpolation.map_coordinates(input, coordinates, int(order), mode, float(cval))


_BOUNDARY = {"periodic": "wrap", "continuous": "nearest", "mirror": "mirror",
             "symmetric": "reflect", "constant": "constant", "nearest": "nearest",
             "wrap": "wrap", "reflect": "reflect"}


def _upsample_1d(tensor, repeat, axis=-1, mode="constant", value=0.0,
                 boundary_condition="periodic"):
    """SymJAX's upsample_1d: `repeat` new samples after each sample along `axis`. mode:
    "constant", "nearest" (SymJAX's "repeat") or "linear"; boundary_condition ("periodic",
    "continuous", "mirror", ...) fixes the sample after the last one for "linear"."""
    if boundary_condition not in _BOUNDARY:
        raise ValueError("upsample_1d: unknown boundary_condition %r" % (boundary_condition,))
    return _core.interpolation.upsample_1d(tensor, int(repeat), int(axis), mode, float(value),
                                           _BOUNDARY[boundary_condition])


def _upsample_2d(tensor, repeat, axis=(-2, -1), mode="constant", value=0.0,
                 boundary_condition="periodic"):
    repeats = _axes(repeat)
    return _core.interpolation.upsample_2d(tensor, repeats, list(axis), mode, float(value),
                                           _BOUNDARY[boundary_condition])


def _resize(x, shape, method="linear", align_corners=False):
    return _core.interpolation.resize(x, _shape(shape), method, bool(align_corners))


interpolation.map_coordinates = _map_coordinates
interpolation.upsample_1d = _upsample_1d
interpolation.upsample_2d = _upsample_2d
interpolation.resize = _resize

# ---- more of NumPy's names (composites of the ops above) ---------------------------------------
# Each follows NumPy's definition, checked against NumPy in python/tests/test_numpy_names.py.
# Formulas are chosen for float32: no overflow before the true result does, no cancellation near
# 0, and finite derivatives in both branches of every where (so gradients stay finite).
_LN2 = float(_np.log(2.0))


def _like(v, x):
    """The number v as a 0-d constant of x's dtype."""
    return _core.full((), float(v), x.dtype.name)


_END = _np.iinfo(_np.int64).max  # a stop past the end (C++'s Index::kEnd)


def _slice_axis(x, axis, start, stop):
    return _core.slice_axis(x, axis, int(start), int(stop), 1)


def _float(x):
    x = _t(x)
    return x if x.dtype.kind == "f" else _core.cast(x, "float32")


def arctan(x):
    x = _float(x)
    return _core.atan2(x, ones_like(x))


def arcsin(x):
    x = _float(x)
    one = ones_like(x)
    return _core.atan2(x, _core.sqrt((one - x) * (one + x)))


def arccos(x):
    x = _float(x)
    one = ones_like(x)
    return _core.atan2(_core.sqrt((one - x) * (one + x)), x)


def sinh(x):
    # small |x|: (e^x - e^-x) / 2 by expm1, exact near 0; large: e^(|x| - ln 2), finite up to
    # where sinh itself overflows
    x = _float(x)
    a = _core.abs(x)
    small = a < 1.0
    a_small = _core.where(small, x, zeros_like(x))
    near = (_core.expm1(a_small) - _core.expm1(-a_small)) * 0.5
    a_big = _core.where(small, ones_like(x), a)
    far = _core.sign(x) * (_core.exp(a_big - _LN2) - _core.exp(-a_big) * 0.5)
    return _core.where(small, near, far)


def cosh(x):
    x = _float(x)
    a = _core.abs(x)
    return _core.exp(a - _LN2) + _core.exp(-a) * 0.5


def arcsinh(x):
    # log1p(x + x^2 / (1 + sqrt(1 + x^2))) for |x| < 1 (exact near 0, with the gradient 1 there);
    # beyond, the same of |x| with x's sign (no cancellation for x < 0), and past 1e8
    # log|x| + ln 2 (x^2 overflows)
    x = _float(x)
    one = ones_like(x)
    a = _core.abs(x)
    small = a < one
    s = _core.where(small, x, zeros_like(x))
    near = _core.log1p(s + s * s / (one + _core.sqrt(one + s * s)))
    big = a > 1e8
    m = _core.where(_core.logical_or(small, big), one, a)
    mid = _core.log1p(m + m * m / (one + _core.sqrt(one + m * m)))
    huge = _core.log(_core.where(big, a, one)) + _LN2
    far = _core.where(big, huge, mid)
    near = _core.where(x == zeros_like(x), x, near)  # -0.0 stays -0.0
    return _core.where(small, near, _core.where(x < zeros_like(x), -far, far))


def arccosh(x):
    # log1p(t + sqrt(t (t + 2))) with t = x - 1: exact near 1; past 1e8, log x + ln 2
    x = _float(x)
    big = x > 1e8
    t = _core.where(big, zeros_like(x), x - 1.0)
    near = _core.log1p(t + _core.sqrt(t * (t + 2.0)))
    x_big = _core.where(big, x, ones_like(x))
    return _core.where(big, _core.log(x_big) + _LN2, near)


def arctanh(x):
    # (log1p(x) - log1p(-x)) / 2: log1p forms 1 + x exactly near -1 and 1
    x = _float(x)
    return (_core.log1p(x) - _core.log1p(-x)) * 0.5


def cbrt(x):
    x = _float(x)
    r = power(_core.abs(x), _like(1.0 / 3.0, x))
    return _core.where(signbit(x), -r, r)


def exp2(x):
    x = _float(x)
    return power(_like(2.0, x), x)


def trunc(x):
    x = _t(x)
    if x.dtype.kind != "f":
        return x
    return _core.where(x < zeros_like(x), _core.ceil(x), _core.floor(x))


fix = trunc
rint = round
fabs = abs


def positive(x):
    return _t(x)


def signbit(x):
    """True where x is negative, -0.0 included (NaN's sign is not read: False)."""
    x = _t(x)
    zero = zeros_like(x)
    if x.dtype.kind != "f":
        return x < zero
    inv = _core.reciprocal(_core.where(x == zero, x, ones_like(x)))
    return _core.logical_or(x < zero, _core.logical_and(x == zero, inv < zero))


def copysign(x1, x2):
    x1 = _float(x1)
    x2 = _t(x2)
    m = _core.abs(x1)
    return _core.where(signbit(x2), -m, m)


def fmod(x1, x2):
    """C's fmod: the remainder with the sign of x1 (mod's has the sign of x2)."""
    x1, x2 = _t(x1), _t(x2)
    r = _core.mod(x1, x2)
    zero = zeros_like(r)
    off = _core.logical_and(r != zero, _core.logical_xor(r < zero, x1 < zeros_like(x1)))
    return _core.where(off, r - x2, r)


def deg2rad(x):
    x = _float(x)
    return x * (_np.pi / 180.0)


def rad2deg(x):
    x = _float(x)
    return x * (180.0 / _np.pi)


radians = deg2rad
degrees = rad2deg


def logaddexp(x1, x2):
    """log(exp(x1) + exp(x2)) without overflow: max + log1p(exp(-|x1 - x2|)); equal infinities
    give themselves."""
    x1, x2 = _float(x1), _float(x2)
    same = x1 == x2
    d = _core.where(same, zeros_like(x1 - x2), x1 - x2)
    return _core.maximum(x1, x2) + _core.log1p(_core.exp(-_core.abs(d)))


def logaddexp2(x1, x2):
    x1, x2 = _float(x1), _float(x2)
    return logaddexp(x1 * _LN2, x2 * _LN2) / _LN2


def heaviside(x1, x2):
    """0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0 (NaN stays NaN)."""
    x1 = _float(x1)
    zero = zeros_like(x1)
    at0 = zero + _core.cast(_t(x2), x1.dtype.name)
    out = _core.where(x1 > zero, ones_like(x1), _core.where(x1 < zero, zero, at0))
    return _core.where(_core.isnan(x1), x1, out)


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    x = _t(x)
    if x.dtype.kind != "f":
        return x
    fi = _np.finfo(x.dtype)
    hi = float(fi.max) if posinf is None else float(posinf)
    lo = float(fi.min) if neginf is None else float(neginf)
    zero = zeros_like(x)
    x = _core.where(_core.isnan(x), _like(nan, x), x)
    return _core.where(_core.isinf(x), _core.where(x > zero, _like(hi, x), _like(lo, x)), x)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = _float(a), _float(b)
    close = _core.abs(a - b) <= _core.abs(b) * float(rtol) + float(atol)
    both_inf = _core.logical_and(_core.isinf(a), a == b)
    out = _core.logical_or(_core.logical_and(close, _core.logical_not(_core.isinf(b))), both_inf)
    if equal_nan:
        out = _core.logical_or(out, _core.logical_and(_core.isnan(a), _core.isnan(b)))
    return out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return _core.all(isclose(a, b, rtol, atol, equal_nan), None, False)


def isposinf(x):
    x = _t(x)
    return _core.logical_and(_core.isinf(x), x > zeros_like(x))


def isneginf(x):
    x = _t(x)
    return _core.logical_and(_core.isinf(x), x < zeros_like(x))


def fmax(x1, x2):
    """maximum that ignores a NaN when the other is a number."""
    x1, x2 = _t(x1), _t(x2)
    m = _core.maximum(x1, x2)
    return _core.where(_core.isnan(x2), x1, _core.where(_core.isnan(x1), x2, m))


def fmin(x1, x2):
    x1, x2 = _t(x1), _t(x2)
    m = _core.minimum(x1, x2)
    return _core.where(_core.isnan(x2), x1, _core.where(_core.isnan(x1), x2, m))


def float_power(x1, x2):
    """power in float64 (NumPy's float_power)."""
    return power(_core.cast(_t(x1), "float64"), _core.cast(_t(x2), "float64"))


def sinc(x):
    """sin(pi x) / (pi x), 1 at 0 (with a finite gradient there)."""
    x = _float(x)
    zero = x == zeros_like(x)
    px = _core.where(zero, ones_like(x), x) * _np.pi
    return _core.where(zero, ones_like(x), _core.sin(px) / px)


# shapes
def _axis(a, n):
    a = int(a)
    if not -n <= a < n:
        raise ValueError("symjax.tensor: axis %d is out of bounds for a tensor of rank %d" % (a, n))
    return a % n


def moveaxis(x, source, destination):
    x = _t(x)
    n = x.ndim
    src = [_axis(a, n) for a in (_axes(source))]
    dst = [_axis(a, n) for a in (_axes(destination))]
    if len(src) != len(dst):
        raise ValueError("moveaxis: source %r and destination %r need the same number of axes"
                         % (source, destination))
    order = [a for a in _builtins.range(n) if a not in src]
    for d, s_ in sorted(zip(dst, src)):
        order.insert(d, s_)
    return _core.transpose(x, order)


def swapaxes(x, axis1, axis2):
    x = _t(x)
    perm = list(_builtins.range(x.ndim))
    a, b = _axis(axis1, x.ndim), _axis(axis2, x.ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return _core.transpose(x, perm)


def atleast_1d(*xs):
    out = [_core.reshape(x, (1,)) if x.ndim == 0 else x for x in map(_t, xs)]
    return out[0] if len(out) == 1 else out


def atleast_2d(*xs):
    out = []
    for x in xs:
        x = _t(x)
        out.append(_core.reshape(x, (1, 1)) if x.ndim == 0 else
                   _core.expand_dims(x, 0) if x.ndim == 1 else x)
    return out[0] if len(out) == 1 else out


def atleast_3d(*xs):
    out = []
    for x in xs:
        x = _t(x)
        if x.ndim == 0:
            x = _core.reshape(x, (1, 1, 1))
        elif x.ndim == 1:
            x = _core.expand_dims(_core.expand_dims(x, 0), 2)
        elif x.ndim == 2:
            x = _core.expand_dims(x, 2)
        out.append(x)
    return out[0] if len(out) == 1 else out


def _known(x, axis, what):
    d = x.shape[axis]
    if d is None:
        raise ValueError("symjax.tensor.%s: axis %d of %s has a size unknown until the call; "
                         "it needs a known size" % (what, axis, x.name))
    return d


def tile(x, reps):
    x = _t(x)
    reps = [int(r) for r in ((reps,) if isinstance(reps, (int, _np.integer)) else reps)]
    n = _builtins.max(x.ndim, len(reps))
    reps = [1] * (n - len(reps)) + reps
    x = _core.reshape(x, (1,) * (n - x.ndim) + tuple(-1 if d is None else d for d in x.shape)) \
        if x.ndim < n else x
    dims = [_known(x, i, "tile") if reps[i] != 1 else x.shape[i] for i in _builtins.range(n)]
    spread = []
    target = []
    for r, d in zip(reps, dims):
        spread += [1, -1 if d is None else d]
        target += [r, -1 if d is None else d]
    y = _core.broadcast_to(_core.reshape(x, tuple(spread)), tuple(target))
    return _core.reshape(y, tuple(-1 if d is None else r * d for r, d in zip(reps, dims)))


def roll(x, shift, axis=None):
    x = _t(x)
    if axis is None:
        return _core.reshape(roll(ravel(x), shift, 0), tuple(-1 if d is None else d
                                                              for d in x.shape))
    shifts = _axes(shift)
    axes = _axes(axis)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    for s_, a in zip(shifts, axes):
        a = _axis(a, x.ndim)
        n = _known(x, a, "roll")
        k = s_ % n if n else 0
        if k:
            x = _core.concat([_slice_axis(x, a, n - k, n),
                              _slice_axis(x, a, 0, n - k)], a)
    return x


def array_split(x, indices_or_sections, axis=0):
    x = _t(x)
    a = _axis(axis, x.ndim)
    n = _known(x, a, "array_split")
    if isinstance(indices_or_sections, (int, _np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError("array_split: the number of sections must be > 0, got %d" % k)
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        bounds = [int(v) for v in _np.cumsum([0] + sizes)]
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [n]
    return [_slice_axis(x, a, bounds[i], _builtins.max(bounds[i], bounds[i + 1]))
            for i in _builtins.range(len(bounds) - 1)]


def split(x, indices_or_sections, axis=0):
    x = _t(x)
    if isinstance(indices_or_sections, (int, _np.integer)):
        n = _known(x, _axis(axis, x.ndim), "split")
        if n % int(indices_or_sections):
            raise ValueError("split: axis %d of size %d does not split into %d equal sections "
                             "(array_split allows unequal ones)" % (axis, n,
                                                                   int(indices_or_sections)))
    return array_split(x, indices_or_sections, axis)


def hsplit(x, indices_or_sections):
    return split(x, indices_or_sections, 0 if _t(x).ndim == 1 else 1)


def vsplit(x, indices_or_sections):
    return split(x, indices_or_sections, 0)


def dsplit(x, indices_or_sections):
    return split(x, indices_or_sections, 2)


def dstack(tensors):
    return concatenate([atleast_3d(t) for t in tensors], 2)


def append(arr, values, axis=None):
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([_t(arr), _t(values)], int(axis))


def diff(x, n=1, axis=-1):
    x = _t(x)
    a = _axis(axis, x.ndim)
    for _ in _builtins.range(int(n)):
        x = _slice_axis(x, a, 1, _END) - _slice_axis(x, a, 0, -1)
    return x


def tri(N, M=None, k=0, dtype="float32"):
    M = N if M is None else M
    rows = _core.reshape(arange(int(N), dtype="int64"), (int(N), 1))
    cols = _core.reshape(arange(int(M), dtype="int64"), (1, int(M)))
    return _core.cast(cols - rows <= int(k), dtype)


def _tri_mask(x, k, lower):
    x = _t(x)
    if x.ndim < 2:
        raise ValueError("tril/triu: need a tensor of rank >= 2, got %s" % (x.shape,))
    n, m = _known(x, x.ndim - 2, "tril"), _known(x, x.ndim - 1, "tril")
    mask = tri(n, m, k, "bool")
    if not lower:
        mask = _core.logical_not(tri(n, m, k - 1, "bool"))
    return _core.where(mask, x, zeros_like(x))


def tril(x, k=0):
    return _tri_mask(x, int(k), True)


def triu(x, k=0):
    return _tri_mask(x, int(k), False)


def meshgrid(*xs, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ValueError("meshgrid: indexing must be 'xy' or 'ij', got %r" % (indexing,))
    xs = [ravel(x) for x in xs]
    n = len(xs)
    sizes = [_known(x, 0, "meshgrid") for x in xs]
    if indexing == "xy" and n >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, x in enumerate(xs):
        axis = i
        if indexing == "xy" and n >= 2 and i < 2:
            axis = 1 - i
        shape = [1] * n
        shape[axis] = -1
        out.append(_core.broadcast_to(_core.reshape(x, tuple(shape)), tuple(sizes)))
    return out


def take_along_axis(arr, indices, axis):
    """NumPy's take_along_axis: out[..., j, ...] = arr[..., indices[..., j, ...], ...] along
    `axis` (negative indices count from the end; out of range is an error when the function
    runs). Dims of unknown size are fine."""
    arr, indices = _t(arr), _t(indices)
    if axis is None:
        return _core.take_along_axis(ravel(arr), ravel(indices), 0)
    a = _axis(axis, arr.ndim)
    if indices.ndim != arr.ndim:
        raise ValueError("take_along_axis: indices of rank %d for a tensor of rank %d"
                         % (indices.ndim, arr.ndim))
    return _core.take_along_axis(arr, indices, a)


def kron(a, b):
    a, b = _t(a), _t(b)
    n = _builtins.max(a.ndim, b.ndim)
    a = _core.reshape(a, (1,) * (n - a.ndim) + tuple(a.shape)) if a.ndim < n else a
    b = _core.reshape(b, (1,) * (n - b.ndim) + tuple(b.shape)) if b.ndim < n else b
    sa = [_known(a, i, "kron") for i in _builtins.range(n)]
    sb = [_known(b, i, "kron") for i in _builtins.range(n)]
    ai, bi = [], []
    for da, db in zip(sa, sb):
        ai += [da, 1]
        bi += [1, db]
    prod_ = _core.reshape(a, tuple(ai)) * _core.reshape(b, tuple(bi))
    return _core.reshape(prod_, tuple(da * db for da, db in zip(sa, sb)))


def vdot(a, b):
    return _core.sum(ravel(a) * ravel(b), None, False)


def average(x, axis=None, weights=None, returned=False):
    x = _t(x)
    if weights is None:
        avg = mean(x, axis)
        return (avg, sum(ones_like(avg if axis is None else x), axis)) if returned else avg
    w = _t(weights)
    if w.ndim == 1 and x.ndim > 1:
        if axis is None:
            raise ValueError("average: 1-d weights for an n-d tensor need an axis")
        shape = [1] * x.ndim
        shape[_axis(axis, x.ndim)] = -1
        w = _core.reshape(w, tuple(shape))
    scl = sum(_core.broadcast_to(w, tuple(-1 if d is None else d for d in x.shape))
              if w.ndim == x.ndim else w, axis)
    avg = sum(x * w, axis) / scl
    return (avg, scl) if returned else avg


def ptp(x, axis=None, keepdims=False):
    return max(x, axis, keepdims) - min(x, axis, keepdims)


def count_nonzero(x, axis=None, keepdims=False):
    x = _t(x)
    nz = x != zeros_like(x) if x.dtype.kind != "b" else x
    return _core.sum(_core.cast(nz, "int64"), _axes(axis), keepdims)


def diagflat(v, k=0):
    return _core.diag(ravel(v), int(k))


def cov(m, y=None, rowvar=True, bias=False, ddof=None):
    m = _float(m)
    if m.ndim == 1:
        m = _core.expand_dims(m, 0)
    if not rowvar:
        m = _core.transpose(m, [1, 0])
    if y is not None:
        y = _float(y)
        y = _core.expand_dims(y, 0) if y.ndim == 1 else y
        m = concatenate([m, y if rowvar else _core.transpose(y, [1, 0])], 0)
    n = _known(m, 1, "cov")
    dd = (0 if bias else 1) if ddof is None else int(ddof)
    c = m - mean(m, 1, True)
    out = _core.matmul(c, _core.transpose(c, [1, 0])) / float(n - dd)
    return _core.squeeze(out, []) if out.shape == (1, 1) else out


def corrcoef(x, y=None, rowvar=True):
    c = cov(x, y, rowvar)
    if c.ndim == 0:
        return c / c
    d = _core.sqrt(_core.diagonal(c, 0, 0, 1))
    return c / _core.reshape(d, (-1, 1)) / _core.reshape(d, (1, -1))


def trapz(y, x=None, dx=1.0, axis=-1):
    y = _float(y)
    a = _axis(axis, y.ndim)
    avg = (_slice_axis(y, a, 1, _END) + _slice_axis(y, a, 0, -1)) * 0.5
    if x is None:
        return _core.sum(avg, [a], False) * float(dx)
    x = _float(x)
    if x.ndim == 1:
        shape = [1] * y.ndim
        shape[a] = -1
        d = _core.reshape(diff(x), tuple(shape))
    else:
        d = diff(x, axis=a)
    return _core.sum(avg * d, [a], False)


def polyval(p, x):
    """p[0] x^(n-1) + ... + p[n-1] by Horner's rule (p a sequence or a 1-d tensor of known size)."""
    x = _float(x)
    if isinstance(p, Tensor):
        coeffs = [p[i] for i in _builtins.range(_known(p, 0, "polyval"))]
    else:
        coeffs = list(p)
    out = zeros_like(x)
    for c in coeffs:
        out = out * x + (c if isinstance(c, Tensor) else float(c))
    return out


def vander(x, N=None, increasing=False):
    x = _t(x)
    n = _known(x, 0, "vander")
    N = n if N is None else int(N)
    cols = [ones_like(x)]
    for _ in _builtins.range(1, N):
        cols.append(cols[-1] * x)
    if not increasing:
        cols = cols[::-1]
    return stack(cols, 1) if N else _core.reshape(zeros_like(x), (n, 0))


def einsum(subscripts, *operands):
    """NumPy's einsum without '...': letters repeated inside one operand take its diagonal, letters
    missing from the output are summed, and each pair of operands contracts as one dot_general
    (left to right)."""
    if "." in subscripts:
        raise ValueError("einsum: '...' (ellipsis) subscripts are not supported: %r" % subscripts)
    spec = subscripts.replace(" ", "")
    if "->" in spec:
        ins, out = spec.split("->")
    else:
        ins = spec
        letters = ins.replace(",", "")
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    ins = ins.split(",")
    if len(ins) != len(operands):
        raise ValueError("einsum: %d operands for subscripts %r" % (len(operands), subscripts))
    for c in out + "".join(ins):
        if not c.isalpha():
            raise ValueError("einsum: bad subscript character %r in %r" % (c, subscripts))
    ops = []
    for term, x in zip(ins, operands):
        x = _t(x)
        if len(term) != x.ndim:
            raise ValueError("einsum: subscripts %r for operand of rank %d" % (term, x.ndim))
        term = list(term)
        # repeated letters: the diagonal (diagonal() puts it last)
        while len(set(term)) < len(term):
            c = next(c for c in term if term.count(c) > 1)
            i = term.index(c)
            j = term.index(c, i + 1)
            x = _core.diagonal(x, 0, i, j)
            term = [t for k, t in enumerate(term) if k not in (i, j)] + [c]
        ops.append((x, term))

    def needed_after(k):
        s = set(out)
        for _, t in ops[k + 1:]:
            s |= set(t)
        return s

    # letters in one operand only and not wanted later: summed first
    def sum_private(x, term, keep):
        drop = [i for i, c in enumerate(term) if c not in keep]
        if drop:
            x = _core.sum(x, drop, False)
            term = [c for i, c in enumerate(term) if i not in drop]
        return x, term

    x, term = sum_private(*ops[0], needed_after(0))
    for k in _builtins.range(1, len(ops)):
        y, ty = ops[k]
        later = needed_after(k)
        y, ty = sum_private(y, ty, later | set(term))
        batch = [c for c in term if c in ty and c in later]
        contract = [c for c in term if c in ty and c not in later]
        x = _core.dot_general(x, y, [term.index(c) for c in batch], [ty.index(c) for c in batch],
                              [term.index(c) for c in contract], [ty.index(c) for c in contract])
        term = batch + [c for c in term if c not in ty] + [c for c in ty if c not in term]
    x, term = sum_private(x, term, set(out))
    for c in out:
        if c not in term:
            raise ValueError("einsum: output subscript %r is in no operand (%r)" % (c, subscripts))
    perm = [term.index(c) for c in out]
    return _core.transpose(x, perm) if perm != list(_builtins.range(len(perm))) else x


def array(object, dtype=None):
    """A constant tensor of object (a tensor passes through, cast to dtype if given)."""
    if isinstance(object, Tensor):
        return object if dtype is None else _core.cast(object, _np.dtype(dtype).name)
    return constant(object, dtype)


asarray = array


def empty(shape, dtype="float32"):
    """zeros: a graph has no uninitialised memory."""
    return zeros(shape, dtype)


def empty_like(x, dtype=None):
    return zeros_like(x, dtype)


def real(x):
    return _t(x)  # tensors are real


conj = real
conjugate = real


def broadcast_arrays(*xs):
    xs = [_t(x) for x in xs]
    n = _builtins.max(x.ndim for x in xs)
    shape = []
    for i in _builtins.range(n):
        dims = [x.shape[x.ndim - n + i] for x in xs if x.ndim - n + i >= 0]
        known = [d for d in dims if d is not None and d != 1]
        if _builtins.any(d is None for d in dims) and not known:
            raise ValueError("broadcast_arrays: dim %d is unknown until the call" % i)
        shape.append(known[0] if known else 1)
    return [_core.broadcast_to(x, tuple(shape)) for x in xs]


def cross(a, b, axis=-1):
    """The cross product of 3-vectors along axis."""
    a, b = _t(a), _t(b)
    ax_a, ax_b = _axis(axis, a.ndim), _axis(axis, b.ndim)
    if a.shape[ax_a] != 3 or b.shape[ax_b] != 3:
        raise ValueError("cross: axis %d must have size 3, got %s and %s"
                         % (axis, a.shape, b.shape))
    ai = [_slice_axis(a, ax_a, i, i + 1) for i in _builtins.range(3)]
    bi = [_slice_axis(b, ax_b, i, i + 1) for i in _builtins.range(3)]
    c = [ai[1] * bi[2] - ai[2] * bi[1], ai[2] * bi[0] - ai[0] * bi[2],
         ai[0] * bi[1] - ai[1] * bi[0]]
    return concatenate(c, ax_a if a.ndim >= b.ndim else ax_b)


def logspace(start, stop, num=50, base=10.0, dtype="float32"):
    return power(full((), float(base), dtype), linspace(start, stop, num, dtype))


def rot90(x, k=1, axes=(0, 1)):
    x = _t(x)
    a, b = _axis(axes[0], x.ndim), _axis(axes[1], x.ndim)
    k = int(k) % 4
    if k == 0:
        return x
    if k == 2:
        return _core.flip(x, [a, b])
    perm = list(_builtins.range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    if k == 1:
        return _core.transpose(_core.flip(x, [b]), perm)
    return _core.flip(_core.transpose(x, perm), [b])


def ediff1d(x):
    return diff(ravel(x))


def nanprod(x, axis=None, keepdims=False):
    x = _t(x)
    return prod(_core.where(_core.isnan(x), ones_like(x), x), axis, keepdims)


def nancumsum(x, axis=None):
    x = _t(x)
    return cumsum(_core.where(_core.isnan(x), zeros_like(x), x), axis)


def nanvar(x, axis=None, keepdims=False, ddof=0):
    """The variance of the non-NaN entries (NaN where fewer than ddof + 1)."""
    x = _float(x)
    ok = _core.logical_not(_core.isnan(x))
    n = sum(_core.cast(ok, x.dtype.name), axis, True)
    m = sum(_core.where(ok, x, zeros_like(x)), axis, True) / n
    d = _core.where(ok, x - m, zeros_like(x))
    out = sum(d * d, axis, True) / (n - float(ddof))
    return out if keepdims else (_core.squeeze(out, _axes(axis) or []) if axis is not None
                                 else _core.reshape(out, ()))


def nanstd(x, axis=None, keepdims=False, ddof=0):
    return _core.sqrt(nanvar(x, axis, keepdims, ddof))



# ---- sorting (one primitive, Note [Sort] in src/ops/Sort.cpp; docs/python.md, "Sorting") --------
# Every sort is stable: kind= and stable= are accepted for NumPy's and JAX's signatures and change
# nothing. NaN sorts last (first when descending), as in NumPy.

def _sort_args(x, axis, order, what):
    if order is not None:
        raise ValueError("symjax.tensor.%s: order= (structured arrays) is not supported" % what)
    x = _t(x)
    if axis is None:
        return ravel(x), 0
    return x, _axis(axis, x.ndim)


def sort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """a sorted along axis (flattened first when axis is None)."""
    x, ax = _sort_args(a, axis, order, "sort")
    return _core.sort(x, ax, bool(descending))


def argsort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """The int64 indices that sort a along axis: take_along_axis(a, argsort(a), axis) == sort(a)."""
    x, ax = _sort_args(a, axis, order, "argsort")
    return _core.argsort(x, ax, bool(descending))


def sort_by_key(keys, values, axis=-1, descending=False):
    """values reordered along axis as sorting keys reorders them (lax.sort_key_val's values)."""
    keys, values = _t(keys), _t(values)
    return _core.sort_by_key(keys, values, _axis(axis, keys.ndim), bool(descending))


def top_k(x, k):
    """The k largest entries along the last axis, largest first, and their int64 indices
    (lax.top_k): equal entries in their order, NaN counted as the largest."""
    return _core.top_k(_t(x), int(k))


def partition(a, kth, axis=-1, kind=None, order=None):
    """NumPy's partition: the element at each kth in its sorted place, smaller ones before it,
    larger ones after. Returns the whole sort, which meets that contract."""
    x, ax = _sort_args(a, axis, order, "partition")
    return _core.sort(x, ax, False)


def argpartition(a, kth, axis=-1, kind=None, order=None):
    """NumPy's argpartition; the whole argsort, which meets its contract (see partition)."""
    x, ax = _sort_args(a, axis, order, "argpartition")
    return _core.argsort(x, ax, False)


def msort(a):
    return sort(a, 0)


_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(a, q, axis, method, keepdims, what, skip_nan):
    """The C++ quantile and nanquantile (include/symjax/Search.h), with q of any shape."""
    if method not in _QUANTILE_METHODS:
        raise ValueError("symjax.tensor.%s: method %r is not one of %s"
                         % (what, method, ", ".join(_QUANTILE_METHODS)))
    qs = _np.asarray(q, dtype=_np.float64)
    if qs.size and not (qs.min() >= 0.0 and qs.max() <= 1.0):
        raise ValueError("symjax.tensor.%s: quantiles must lie in [0, 1] (percentiles in "
                         "[0, 100]), got %s" % (what, q))
    x = _t(a)
    if axis is None:
        ax = None
        flat = ravel(x)
        n = _known(flat, 0, what)
    else:
        ax = _axis(axis, x.ndim)
        n = _known(x, ax, what)
    if n == 0:
        raise ValueError("symjax.tensor.%s: axis %d of %s is empty" % (what, ax or 0, x.name))
    r = _core.quantile(x, qs.ravel().tolist(), qs.ndim == 0, ax, method, bool(keepdims),
                       skip_nan)
    if qs.ndim > 1:
        r = _core.reshape(r, tuple(qs.shape) + tuple(r.shape[1:]))
    return r


def quantile(a, q, axis=None, method="linear", keepdims=False):
    """NumPy's quantile for q in [0, 1] (a number or a sequence of numbers: the result then has
    q's dims first); methods linear, lower, higher, midpoint and nearest. The axis needs a
    known size. A NaN in a line makes its quantiles NaN."""
    return _quantile(a, q, axis, method, keepdims, "quantile", False)


def percentile(a, q, axis=None, method="linear", keepdims=False):
    return _quantile(a, _np.asarray(q, dtype=_np.float64) / 100.0, axis, method, keepdims,
                     "percentile", False)


def median(a, axis=None, keepdims=False):
    return _quantile(a, 0.5, axis, "linear", keepdims, "median", False)


def nanquantile(a, q, axis=None, method="linear", keepdims=False):
    """quantile of the non-NaN entries of each line (NaN for a line of NaNs only)."""
    return _quantile(a, q, axis, method, keepdims, "nanquantile", True)


def nanpercentile(a, q, axis=None, method="linear", keepdims=False):
    return _quantile(a, _np.asarray(q, dtype=_np.float64) / 100.0, axis, method, keepdims,
                     "nanpercentile", True)


def nanmedian(a, axis=None, keepdims=False):
    return _quantile(a, 0.5, axis, "linear", keepdims, "nanmedian", True)


def searchsorted(a, v, side="left", sorter=None, *, method=None):
    """Where v's entries would go in the sorted 1-d a (NaN sorted last, as NumPy): int64 of
    v's shape. A binary search of log2(len(a)) gathers when a's length is known; otherwise it
    compares every entry of v with every entry of a. `method` (JAX's) is accepted and ignored."""
    if side not in ("left", "right"):
        raise ValueError("symjax.tensor.searchsorted: side must be 'left' or 'right', got %r"
                         % (side,))
    a = _t(a)
    if sorter is not None:
        a = _core.gather(a, _core.cast(_t(sorter), "int64"), 0)
    return _core.searchsorted(a, _t(v), side == "right")


def digitize(x, bins, right=False):
    """NumPy's digitize: the index of the bin of each element of x; bins 1-d, of known length,
    increasing or decreasing (otherwise an error when the function runs)."""
    return _core.digitize(_t(x), _t(bins), bool(right))


# ---- results whose length depends on the values: the caller gives it (JAX's size=) ----------

def _static_size(size, what, arg="size"):
    if size is None:
        raise ValueError("symjax.tensor.%s: %s= is needed: the length of the result depends on "
                         "the values, and a graph's shapes are fixed when it is built (JAX's "
                         "rule under jit)" % (what, arg))
    return _operator.index(size)


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None, sorted=True):
    """jnp.unique with a static `size`: the `size` smallest unique values of ar (flattened),
    padded with fill_value (by default the smallest value). NaNs are one value when equal_nan.
    With return_index, return_inverse, return_counts: NumPy's extra results, in its order."""
    if axis is not None:
        raise ValueError("symjax.tensor.unique: axis= (unique slices) is not supported")
    size = _static_size(size, "unique")
    values, index, inverse, counts = _core.unique_all(
        _t(ar), size, None if fill_value is None else float(fill_value), bool(equal_nan))
    extra = [r for r, want in ((index, return_index), (inverse, return_inverse),
                               (counts, return_counts)) if want]
    return tuple([values] + extra) if extra else values


UniqueAllResult = _collections.namedtuple("UniqueAllResult",
                                          "values indices inverse_indices counts")
UniqueCountsResult = _collections.namedtuple("UniqueCountsResult", "values counts")
UniqueInverseResult = _collections.namedtuple("UniqueInverseResult", "values inverse_indices")


def unique_all(x, *, size=None, fill_value=None):
    size = _static_size(size, "unique_all")
    r = _core.unique_all(_t(x), size, None if fill_value is None else float(fill_value), True)
    return UniqueAllResult(*r)


def unique_counts(x, *, size=None, fill_value=None):
    r = unique_all(x, size=size, fill_value=fill_value)
    return UniqueCountsResult(r.values, r.counts)


def unique_inverse(x, *, size=None, fill_value=None):
    r = unique_all(x, size=size, fill_value=fill_value)
    return UniqueInverseResult(r.values, r.inverse_indices)


def unique_values(x, *, size=None, fill_value=None):
    return unique_all(x, size=size, fill_value=fill_value).values


def nonzero(a, *, size=None, fill_value=None):
    """jnp.nonzero with a static `size`: a tuple of int64 [size] coordinates, one per dim, of the
    first `size` non-zero entries in row-major order, then fill_value (0)."""
    return _core.nonzero(_t(a), _static_size(size, "nonzero"),
                         0 if fill_value is None else _operator.index(fill_value))


def argwhere(a, *, size=None, fill_value=None):
    return _core.argwhere(_t(a), _static_size(size, "argwhere"),
                          0 if fill_value is None else _operator.index(fill_value))


def flatnonzero(a, *, size=None, fill_value=None):
    return _core.flatnonzero(_t(a), _static_size(size, "flatnonzero"),
                             0 if fill_value is None else _operator.index(fill_value))


def lexsort(keys, axis=-1):
    """NumPy's lexsort: int64 indices sorting by the last key, then the one before it..."""
    if isinstance(keys, Tensor):
        keys = [keys[i] for i in range(_known(keys, 0, "lexsort"))]
    return _core.lexsort([_t(k) for k in keys], int(axis))


def bincount(x, weights=None, minlength=0, *, length=None):
    """jnp.bincount with a static `length`: counts (int64) or summed weights of each value of
    the 1-d integer x below length; larger values are left out, negative ones are an error
    when the function runs."""
    length = _static_size(length, "bincount", "length")
    return _core.bincount(_t(x), length, None if weights is None else _t(weights))


def histogram(a, bins=10, range=None, weights=None, density=None):
    """NumPy's histogram: (hist, bin_edges). bins is a number of equal bins over range (by
    default a's min and max) or the increasing edges."""
    bins = int(bins) if isinstance(bins, (int, _np.integer)) else _t(bins)
    r = None if range is None else (float(range[0]), float(range[1]))
    return _core.histogram(_t(a), bins, r, None if weights is None else _t(weights),
                           bool(density))

__all__ = [n for n in dir() if not n.startswith("_")]
