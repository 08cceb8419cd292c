"""symjax.tensor: tensors and the NumPy-named ops (SymJAX's ``symjax.tensor``, imported as T).

Every function builds graph: ``T.exp(x)`` returns a Tensor, evaluated by a compiled
``symjax.function`` or by ``Tensor.get()``. Arguments may be tensors, NumPy arrays or Python
numbers; a number next to a tensor takes the tensor's dtype (as JAX's weakly typed scalars).
"""
import builtins as _builtins
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
    return _core.flip(x, list(range(x.ndim)) if axis is None else _axes(axis))


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
        la = list(range(a.ndim - axes, a.ndim))
        lb = list(range(axes))
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

__all__ = [n for n in dir() if not n.startswith("_")]
