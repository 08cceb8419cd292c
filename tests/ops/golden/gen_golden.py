#!/usr/bin/python3
# Generates golden.json: expected forward values, computed with NumPy, for every row of the op
# table.
#
# Run with Debian's Python (it has NumPy):  /usr/bin/python3 tests/ops/golden/gen_golden.py
# Each entry names a row of tests/ops/OpTableTest.cpp (which fixes the op's attributes), gives
# its inputs and the expected output. The C++ side builds the row on placeholders of those
# shapes and dtypes and checks the reference backend (and any other) against the expected value.
# Float results are computed in float64 from the (rounded) inputs and rounded once to the
# output dtype; integer results are computed in int64 and wrapped to the output width.
# Non-finite floats are written as the strings "nan", "inf" and "-inf" (JSON has no literal).
import json
import math
import os
import sys
import warnings
import zlib

import numpy as np

warnings.simplefilter("ignore")  # NumPy warns on empty means and 0/0; NaN is what we expect

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden.json")
MAX_BYTES = 204_800

NP = {"bool": np.bool_, "u8": np.uint8, "i32": np.int32, "i64": np.int64, "u32": np.uint32,
      "f32": np.float32, "f64": np.float64}
NAME = {np.dtype(v): k for k, v in NP.items()}
FLOATS = ("f32", "f64")
INTS = ("u8", "i32", "i64", "u32")
NUMERIC = INTS + FLOATS
ALL = ("bool",) + NUMERIC
SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e30, -1e-30, 3.0]

rng = np.random.default_rng(20240611)
ENTRIES = []


# ---- inputs ----------------------------------------------------------------------------------

def arr(values, dtype, shape=None):
    a = np.array(values, dtype=np.float64)
    if shape is not None:
        a = a.reshape(shape)
    return a.astype(NP[dtype]) if dtype != "bool" else (a != 0)


def rand(shape, dtype, lo=-3.0, hi=3.0, kind="any"):
    """Floats uniform in [lo, hi]; ints in a small range; bools 50/50."""
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == "bool":
        v = rng.integers(0, 2, n)
    elif dtype in FLOATS:
        v = rng.uniform(lo, hi, n)
        if kind == "nonzero":
            v = np.where(np.abs(v) < 0.5, np.sign(v + 1e-9) * 0.5 + v, v)
    else:
        unsigned = dtype in ("u8", "u32")
        ilo = max(int(math.ceil(lo)), 0) if unsigned else int(math.ceil(lo))
        v = rng.integers(ilo, int(math.floor(hi)) + 1, n)
        if kind == "nonzero":
            v = np.where(v == 0, 1, v)
    return arr(v, dtype, shape)


def specials(dtype, rot=0):
    # input `rot` of an op visits the specials in another order (strides coprime with 12)
    v = [SPECIALS[(i * (1, 5, 7, 11)[rot % 4] + 3 * rot) % 12] for i in range(12)]
    return arr(v, dtype)


def ties(shape, dtype):
    pool = [-1, 0, 0.5, 1, 2] if dtype in FLOATS else [0, 1, 2]
    return arr(rng.choice(pool, int(np.prod(shape, dtype=np.int64))), dtype, shape)


# ---- helpers mirroring the library's documented semantics ------------------------------------

def out_as(x, dtype):
    """Casts a float64 / int64 result to the output dtype (ints wrap, as fixed-width C++)."""
    x = np.asarray(x)
    if dtype == "bool":
        return x != 0
    if dtype in FLOATS:
        return x.astype(NP[dtype])
    return x.astype(np.int64).astype(NP[dtype]) if x.dtype.kind != "u" else x.astype(NP[dtype])


def wide(x):
    """float64 for floats, int64 for ints and bools (exact for our small values)."""
    x = np.asarray(x)
    if x.dtype.kind == "f":
        return x.astype(np.float64)
    return x.astype(np.int64)


def cast(x, to):
    """Library cast: to bool is x != 0; float to int truncates, NaN -> 0, saturates; int to int
    wraps; otherwise the C++ conversion."""
    x = np.asarray(x)
    if to == "bool":
        return x != 0
    if x.dtype.kind == "f" and to not in FLOATS:
        info = np.iinfo(NP[to])
        f = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=np.inf, neginf=-np.inf))
        out = np.empty(x.shape, dtype=NP[to])
        lo, hi = float(info.min), float(info.max)
        for i, v in np.ndenumerate(f):
            out[i] = info.min if v <= lo else info.max if v >= hi else int(v)
        return out
    if x.dtype.kind in "biu" and to not in FLOATS:
        return x.astype(np.int64).astype(NP[to])
    return x.astype(NP[to])


def trunc_div(a, b):
    a, b = wide(a), wide(b)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x) if x.size else x.astype(np.float64)


def pad_interior(x, lo, hi, interior, value):
    shape = [l + h + n + max(n - 1, 0) * it for l, h, n, it in zip(lo, hi, x.shape, interior)]
    out = np.full(shape, value, dtype=x.dtype)
    idx = tuple(slice(l, l + max(n - 1, 0) * (it + 1) + 1 if n else l, it + 1)
                for l, n, it in zip(lo, x.shape, interior))
    out[idx] = x
    return out


def pad_value(v, dtype):
    # Array::full: bool is v != 0; ints truncate (static_cast); floats keep v
    if dtype == "bool":
        return v != 0
    return NP[dtype](int(v)) if dtype not in FLOATS else NP[dtype](v)


def dot_general(a, b, lb, rb, lc, rc):
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    la = [None] * a.ndim
    ra = [None] * b.ndim
    for i, j in zip(lb, rb):
        la[i] = ra[j] = next(letters)
    for i, j in zip(lc, rc):
        la[i] = ra[j] = next(letters)
    for i in range(a.ndim):
        la[i] = la[i] or next(letters)
    for j in range(b.ndim):
        ra[j] = ra[j] or next(letters)
    out = [la[i] for i in lb]
    out += [la[i] for i in range(a.ndim) if i not in lb and i not in lc]
    out += [ra[j] for j in range(b.ndim) if j not in rb and j not in rc]
    spec = "".join(la) + "," + "".join(ra) + "->" + "".join(out)
    return np.einsum(spec, wide(a), wide(b))


def cholesky(a):
    a = a.astype(np.float64)
    if a.size == 0:
        return a
    return np.linalg.cholesky(a)


def tri_solve(a, b, left, lower, trans, unit):
    """op(A) X = B (left) or X op(A) = B by forward/back substitution, reading one triangle."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    n = a.shape[-1]
    mask = np.tril(np.ones((n, n)), -1) if lower else np.triu(np.ones((n, n)), 1)
    t = a * mask + (np.eye(n) if unit else a * np.eye(n))
    m = np.swapaxes(t, -1, -2) if trans else t  # op(A)
    if not left:  # X m = B  <=>  m^T X^T = B^T
        m = np.swapaxes(m, -1, -2)
        b = np.swapaxes(b, -1, -2)
    m_lower = lower != (trans != (not left))
    x = np.zeros_like(b)
    order = range(n) if m_lower else range(n - 1, -1, -1)
    for i in order:
        acc = b[..., i, :].copy()
        for j in range(n):
            if (j < i) if m_lower else (j > i):
                acc -= m[..., i, j][..., None] * x[..., j, :]
        x[..., i, :] = acc / m[..., i, i][..., None]
    if x.size and n:
        check = m @ x
        assert np.allclose(check, b, rtol=1e-9, atol=1e-9), "substitution self-check"
    return np.swapaxes(x, -1, -2) if not left else x


# ---- Philox4x32-10 (Salmon et al., SC'11) and SplitMix64, in Python integers -----------------

M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF


def philox4x32_10(ctr, key):
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(10):
        if r:
            k0 = (k0 + 0x9E3779B9) & M32
            k1 = (k1 + 0xBB67AE85) & M32
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32,
                          ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32)
    return [c0, c1, c2, c3]


# Known-answer vectors of Random123 (kat_vectors): the Python implementation must match them.
assert philox4x32_10([0, 0, 0, 0], [0, 0]) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
assert philox4x32_10([M32] * 4, [M32, M32]) == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
assert philox4x32_10([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
                     [0xA4093822, 0x299F31D0]) == [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def philox_bits(shape, seed, counter=0):
    """random::bits(shape, seed): key = splitmix64(seed); element i is word i % 4 of the block
    for counter {i / 4 (64 bits), call counter (64 bits)}."""
    key = splitmix64(seed)
    k = [key & M32, key >> 32]
    n = int(np.prod(shape, dtype=np.int64))
    out = []
    for block in range((n + 3) // 4):
        out += philox4x32_10([block & M32, block >> 32, counter & M32, counter >> 32], k)
    return np.array(out[:n], dtype=np.uint32).reshape(shape)


# ---- composites ------------------------------------------------------------------------------

def logsumexp(x, axis, keepdims=False):
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        m = np.max(x, axis=axis, keepdims=True)
        shift = np.where(np.isinf(m), 0.0, m)
        s = np.log(np.sum(np.exp(x - shift), axis=axis, keepdims=True)) + shift
    return s if keepdims else np.squeeze(s, axis=axis)


def softmax(x, axis):
    x = x.astype(np.float64)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def sigmoid(x):
    x = x.astype(np.float64)
    z = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + z), z / (1 + z))


def softplus(x):
    return np.logaddexp(0.0, x.astype(np.float64))


def as_float(x):
    return x if x.dtype.kind == "f" else x.astype(np.float32)


# ---- entries ---------------------------------------------------------------------------------

def add(row, inputs, expected):
    inputs = [np.asarray(x) for x in inputs]
    expected = np.asarray(expected)
    dt = NAME[inputs[0].dtype] if inputs else NAME[expected.dtype]
    ENTRIES.append((row, dt, inputs, expected))


def each(row, fn, cases):
    """cases: list of input lists; expected = fn(*inputs)."""
    with np.errstate(all="ignore"):
        for inputs in cases:
            add(row, inputs, fn(*inputs))


def fout(fn):
    """An elementwise float op computed in float64, rounded to the first input's dtype."""
    return lambda x, *r: out_as(fn(wide(x), *[wide(y) for y in r]), NAME[np.asarray(x).dtype])


def gen_unary():
    domain = {"exp": (-3, 3), "expm1": (-3, 3), "log": (0.5, 3), "log1p": (-0.9, 3),
              "sqrt": (0.5, 3), "rsqrt": (0.5, 3), "reciprocal": (-3, 3), "sin": (-3, 3),
              "cos": (-3, 3), "tan": (-1.2, 1.2), "tanh": (-3, 3), "erf": (-3, 3),
              "floor": (-3, 3), "ceil": (-3, 3), "round": (-3, 3), "isnan": (-3, 3),
              "isinf": (-3, 3)}
    fns = {"exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "sqrt": np.sqrt,
           "rsqrt": lambda x: 1 / np.sqrt(x), "reciprocal": lambda x: 1 / x, "sin": np.sin,
           "cos": np.cos, "tan": np.tan, "tanh": np.tanh, "erf": erf, "floor": np.floor,
           "ceil": np.ceil, "round": np.round}
    for name, (lo, hi) in domain.items():
        if name in ("isnan", "isinf"):
            f = np.isnan if name == "isnan" else np.isinf
        else:
            f = fout(fns[name])
        cases = [[rand((2, 3), dt, lo, hi)] for dt in FLOATS] + [[specials(dt)] for dt in FLOATS]
        if name == "round":
            cases.append([arr([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.4999999, -3.5], "f32")])
            cases.append([arr([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999999999999994], "f64")])
        each(name, f, cases)
    wrap = lambda f: (lambda x: out_as(f(wide(x)), NAME[x.dtype]))
    for name, f in (("neg", np.negative), ("abs", np.abs), ("sign", np.sign)):
        cases = [[arr([0, 1, 2, 200, 255, 7], "u8")], [arr([0, 1, 7, 4294967295], "u32")],
                 [arr([-5, 0, 3, -2147483647], "i32")], [arr([-5, 0, 3], "i64")],
                 [rand((2, 3), "f32")], [rand((4,), "f64")], [specials("f32")]]
        each(name, wrap(f), cases)
    each("logical_not", np.logical_not, [[rand((6,), "bool")], [arr(1, "bool")]])
    each("stop_gradient", lambda x: x, [[rand((4,), dt)] for dt in ALL] + [[specials("f64")]])
    for to in ALL:
        cases = [[arr([-3.7, -0.5, 0.5, 2.9, 255.5, 300.5, 2.5e9, -2.5e9], dt)] for dt in FLOATS]
        cases += [[specials(dt)] for dt in FLOATS]
        cases += [[arr([-3, 0, 1, 255, 256, 300, -129, 70000], dt)] for dt in ("i32", "i64")]
        cases += [[arr([0, 1, 255, 7], "u8")], [arr([0, 1, 300, 4294967295], "u32")],
                  [arr([0, 1, 1, 0], "bool")]]
        each("cast_to_" + to, lambda x, to=to: cast(x, to), cases)


def gen_binary():
    def ew(f):
        def g(a, b):
            dt = NAME[a.dtype]
            return out_as(f(wide(a), wide(b)), dt)
        return g

    def pairs(dts, a_kind="any", b_kind="any", a_lo=-3, a_hi=3, b_lo=-3, b_hi=3):
        cases = []
        for dt in dts:
            if dt in ("u8", "u32") or dt == "bool":
                lo_a, lo_b = 0, 0
            else:
                lo_a, lo_b = a_lo, b_lo
            a = rand((3, 1), dt, lo_a, a_hi if dt in FLOATS else max(a_hi, 9), a_kind)
            b = rand((1, 4), dt, lo_b, b_hi if dt in FLOATS else max(b_hi, 9), b_kind)
            cases.append([a, b])
        return cases

    sp = [[specials(dt, 0), specials(dt, 1)] for dt in FLOATS]
    u8_wrap = [[arr([200, 255, 3, 0], "u8"), arr([100, 2, 7, 1], "u8")]]
    each("add", ew(np.add), pairs(NUMERIC) + sp + u8_wrap)
    each("sub", ew(np.subtract), pairs(NUMERIC) + sp + u8_wrap)
    each("mul", ew(np.multiply), pairs(NUMERIC) + sp + u8_wrap)
    ints_div = [[arr([-7, 7, -7, 7, 0, 9], dt), arr([2, 2, -2, -2, 3, 4], dt)]
                for dt in ("i32", "i64")]
    # where hardware traps, NumPy's results: x // 0 == x % 0 == 0, MIN // -1 wraps to MIN and
    # MIN % -1 == 0 (computed by NumPy in the dtype itself, not widened)
    def traps(dt):
        lo, hi = np.iinfo(NP[dt]).min, np.iinfo(NP[dt]).max
        return [np.array([lo, lo, 7, -7, 0, hi, lo], NP[dt]),
                np.array([-1, 0, 0, 0, 0, -1, 1], NP[dt])]
    traps_cases = [traps(dt) for dt in ("i32", "i64")] + [
        [np.array([7, 0, 255], NP[dt]), np.array([0, 0, 0], NP[dt])] for dt in ("u8", "u32")]

    def div(a, b):
        if a.dtype.kind == "f":
            return out_as(a.astype(np.float64) / b, NAME[a.dtype])
        trap = (b == 0) | (b == -1) if a.dtype.kind == "i" else b == 0
        return np.where(trap, np.floor_divide(a, b),
                        out_as(trunc_div(a, np.where(trap, 1, b)), NAME[a.dtype]))

    each("div", div, pairs(NUMERIC, b_kind="nonzero") + sp + ints_div +
         [[arr([200, 9], "u8"), arr([7, 2], "u8")]] + traps_cases)
    each("pow", ew(np.power), pairs(FLOATS, a_lo=0.5, b_lo=-2, b_hi=2) + sp)
    for name, f in (("max", np.maximum), ("min", np.minimum)):
        each(name, lambda a, b, f=f: f(a, b), pairs(ALL) + sp)
    ints_mod = [[arr([-7, 7, -7, 7, 0, 9], dt), arr([2, 2, -2, -2, 3, 4], dt)]
                for dt in ("i32", "i64")]
    each("mod", lambda a, b: np.mod(a, b) if a.dtype.kind in "iu" else ew(np.mod)(a, b),
         pairs(NUMERIC, b_kind="nonzero") + sp + ints_mod +
         [[arr([5.5, -5.5, 5.5, -5.5], "f64"), arr([2, 2, -2, -2], "f64")]] + traps_cases)
    each("atan2", ew(np.arctan2), pairs(FLOATS) + sp)
    for name, f in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                    ("gt", np.greater), ("ge", np.greater_equal)):
        cases = [[ties((3, 1), dt), ties((1, 4), dt)] for dt in ALL] + sp
        each(name, f, cases)
    for name, f in (("logical_and", np.logical_and), ("logical_or", np.logical_or),
                    ("logical_xor", np.logical_xor)):
        each(name, f, [[rand((3, 1), "bool"), rand((1, 4), "bool")]])
    each("where", np.where,
         [[rand((3, 1), "bool"), rand((3, 4), dt), rand((4,), dt)] for dt in ALL] +
         [[rand((12,), "bool"), specials("f32", 0), specials("f32", 1)]])


def gen_reduce():
    def red(dts, shape, **kw):
        return [[rand(shape, dt, **kw)] for dt in dts]

    def s(x, axis=None, keepdims=False):
        r = np.sum(wide(x), axis=axis, keepdims=keepdims)
        return out_as(r, "i64" if x.dtype == np.bool_ else NAME[x.dtype])

    sum_dts = ("bool", "u8", "i32", "f32", "f64")
    big_u8 = [[arr(np.full((2, 3, 4), 200), "u8")]]  # wraps
    each("sum_axis1", lambda x: s(x, 1),
         red(sum_dts, (2, 3, 4)) + big_u8 + [[rand((2, 0, 3), "f32")]])
    each("sum_all", lambda x: s(x), red(sum_dts, (7,)) + [[rand((), "i64")], [rand((0,), "f32")],
                                                            [specials("f64")]])
    each("sum_keepdims", lambda x: s(x, (0, 2), True),
         red(sum_dts, (2, 3, 4)) + [[rand((0, 2, 3), "i32")]])

    def p(x, axis=None):
        return out_as(np.prod(wide(x), axis=axis), NAME[x.dtype])

    zeros = [[arr([0, 2, 3, 0, 0, 1, 1, 2, -1], dt, (3, 3))] for dt in ("i32", "f32", "f64")]
    each("prod_axis1", lambda x: p(x, 1),
         [[rand((3, 4), dt, -2, 2)] for dt in NUMERIC] + zeros + [[rand((4, 0), "f32")]])
    each("prod_all", p, [[rand((6,), dt, -2, 2)] for dt in ("u8", "i64", "f64")] +
         [[rand((0,), "i32")], [specials("f32")]])
    for base, f, af in (("max", np.max, np.argmax), ("min", np.min, np.argmin)):
        nan_row = arr([[1, math.nan, 3], [2, 1, 0]], "f32")
        each(base + "_axis1", lambda x, f=f: f(x, axis=1),
             [[rand((3, 4), dt)] for dt in NUMERIC] +
             [[nan_row], [arr([[250, 3], [0, 255]], "u8")]])
        each(base + "_all_keepdims", lambda x, f=f: f(x, keepdims=True) if x.ndim else x,
             [[rand((2, 3), dt)] for dt in ("u8", "i32", "f64")] +
             [[rand((), "f32")], [specials("f32")]])
        arg = "argmax" if base == "max" else "argmin"
        each(arg + "_axis1", lambda x, af=af: af(x, axis=1),
             [[ties((3, 5), dt)] for dt in NUMERIC] + [[nan_row]])
        each(arg + "_axis0_keepdims", lambda x, af=af: np.expand_dims(af(x, axis=0), 0),
             [[ties((5,), dt)] for dt in ("u8", "i64", "f32")] +
             [[specials("f64")], [ties((3, 4), "i32")]])
    tb = lambda x: x if x.dtype == np.bool_ else cast(x, "bool")
    for name, f in (("any", np.any), ("all", np.all)):
        cases = [[ties((3, 4), dt)] for dt in ALL] + [[rand((2, 0), "bool")],
                                                      [specials("f32").reshape(3, 4)]]
        each(name + "_axis1", lambda x, f=f: f(tb(x), axis=1), cases)
        each(name + "_all", lambda x, f=f: f(tb(x)),
             [[ties((7,), "bool")], [rand((0,), "i32")], [arr(0.0, "f32")], [specials("f64")]])

    def cs(x, axis, reverse=False):
        w = wide(x)
        if reverse:
            w = np.flip(w, axis)
        r = np.cumsum(w, axis=axis)
        if reverse:
            r = np.flip(r, axis)
        return out_as(r, NAME[x.dtype])

    each("cumsum_axis1", lambda x: cs(x, 1),
         [[rand((2, 4), dt)] for dt in NUMERIC] + [[arr([[200, 100, 7], [1, 2, 3]], "u8")]])
    each("cumsum_reverse", lambda x: cs(x, 0, True),
         [[rand((5,), dt)] for dt in ("i32", "f32", "f64")] +
         [[rand((3, 2), "u32")], [specials("f64")]])


def gen_movement():
    def two(shape):
        return [[rand(shape, "f32")], [rand(shape, "u8")], [rand(shape, "bool")]]

    each("reshape", lambda x: x.reshape(5, -1), two((2, 5)) + [[rand((0, 5), "i64")]])
    each("permute", lambda x: np.transpose(x, (2, 0, 1)), two((2, 3, 4)))
    each("broadcast_to", lambda x: np.broadcast_to(x, (2, 3, 5)),
         two((3, 1)) + [[rand((), "i32")], [rand((5,), "f64")]])
    each("broadcast_to_empty", lambda x: np.broadcast_to(x, (0, 3)), two((3,)))
    each("slice_step", lambda x: x[1::2, 0:5:2, -5:], two((2, 5, 6)) + [[rand((4, 6, 8), "i32")]])
    each("slice_negative", lambda x: x[..., -4:-1], two((3, 5)) + [[rand((2,), "f64")]])
    for dt in ("f32", "u8", "bool", "i32"):
        x = rand((3, 4), dt)
        add("pad_lohi", [x], np.pad(x, ((1, 2), (0, 1)), constant_values=pad_value(3.5, dt)))
        y = rand((2, 3), dt)
        add("pad_interior", [y], pad_interior(y, (0, 1), (1, 0), (1, 2), pad_value(2.5, dt)))
    each("flip", lambda x: np.flip(x, (0, 2)), two((2, 3, 4)))
    each("concat_axis1", lambda a, b, c: np.concatenate([a, b, c], 1),
         [[rand((2, 3, 2), dt), rand((2, 0, 2), dt), rand((2, 1, 2), dt)]
          for dt in ("f32", "bool", "i64")])
    each("concat_axis0", lambda a, b: np.concatenate([a, b], 0),
         [[rand((3,), dt), rand((4,), dt)] for dt in ("f64", "u8")])


def gen_indexing():
    def take(axis):
        return lambda x, i: np.take(x, i.astype(np.int64), axis=axis)

    each("gather_axis0", take(0),
         [[rand((5, 3), "f32"), arr([4, 0, 4, 2], "i64")],
          [rand((5, 3), "i32"), arr([[1, 0], [3, 3]], "i32")],
          [rand((5,), "bool"), arr(2, "i64")],
          [rand((4, 2), "u8"), arr([3, 1, 0], "u8")]])
    each("gather_axis1", take(1),
         [[rand((2, 4, 3), "f64"), arr([3, 0, 3], "i64")],
          [rand((2, 4), "u32"), arr([[1, 2], [0, 0]], "u8")]])

    def scatter(axis):
        def f(x, i, u):
            out = wide(x).copy()
            ii = i.astype(np.int64).reshape(-1)
            shape = x.shape[:axis] + (ii.size,) + x.shape[axis + 1:]
            uu = np.moveaxis(wide(u).reshape(shape), axis, 0)
            o = np.moveaxis(out, axis, 0)
            for k, j in enumerate(ii):
                o[j] += uu[k]
            if x.dtype == np.bool_:  # adding into a bool is a logical or
                return out != 0
            return out_as(out, NAME[x.dtype])
        return f

    idx = arr([1, 3, 1, 0, 1, 4], "i64")
    each("scatter_add_axis0", scatter(0),
         [[rand((5, 3), dt), idx, rand((6, 3), dt)] for dt in ("f32", "i32", "bool")] +
         [[arr(np.full((5, 2), 250), "u8"), idx, arr(np.full((6, 2), 3), "u8")],
          [rand((3, 2), "f64"), arr([[2, 2], [0, 2]], "i32"), rand((2, 2, 2), "f64")]])
    each("scatter_add_axis1", scatter(1),
         [[rand((2, 4), "f64"), arr([3, 0, 3], "u8"), rand((2, 3), "f64")],
          [rand((2, 4), "i64"), arr([1, 1], "i64"), rand((2, 2), "i64")]])

    def clamp(starts, shape, sizes):
        return [min(max(int(s), 0), n - k) for s, n, k in zip(starts, shape, sizes)]

    def dslice(sizes):
        def f(x, s):
            st = clamp(s, x.shape, sizes)
            return x[tuple(slice(a, a + k) for a, k in zip(st, sizes))]
        return f

    each("dynamic_slice", dslice((2, 3)),
         [[rand((4, 5), "f32"), arr([3, -1], "i64")], [rand((3, 7), "i32"), arr([1, 10], "i64")],
          [rand((4, 5), "bool"), arr([0, 2], "i32")]])
    each("dynamic_slice_empty", dslice((0, 2)), [[rand((3, 4), "f64"), arr([2, 3], "i64")]])

    def dus(x, u, s):
        st = clamp(s, x.shape, u.shape)
        out = x.copy()
        out[tuple(slice(a, a + k) for a, k in zip(st, u.shape))] = u
        return out

    each("dynamic_update_slice", dus,
         [[rand((4, 5), "f32"), rand((2, 3), "f32"), arr([5, -2], "i64")],
          [rand((4, 5), "u8"), rand((2, 3), "u8"), arr([1, 1], "i32")],
          [rand((4,), "bool"), rand((1,), "bool"), arr([3], "u8")]])
    for depth, out, name in ((4, np.float32, "one_hot_f32"), (3, np.bool_, "one_hot_bool")):
        each(name, lambda i, depth=depth, out=out:
             (wide(i)[..., None] == np.arange(depth)).astype(out),
             [[arr([-1, 0, 3, 4, 2], "i32")], [arr([[0, 1], [2, 5]], "u8")], [arr(1, "i64")],
              [arr([2, 0], "u32")]])
    each("check_index", lambda i: i, [[arr([0, 4, 1, 3], "i32")], [arr([[0], [4]], "u8")],
                                      [arr(2, "i64")], [arr([4, 0], "u32")]])
    each("check_index_ignore", lambda i: i, [[arr([-1, 2, 0, -1], "i64")], [arr([1, -1], "i32")]])


def gen_linalg():
    def dot(lb, rb, lc, rc):
        return lambda a, b: out_as(dot_general(a, b, lb, rb, lc, rc), NAME[a.dtype])

    def pairs(sa, sb, dts=("f32", "f64", "i32", "u8")):
        return [[rand(sa, dt), rand(sb, dt)] for dt in dts]

    each("dot_matmul", dot((), (), (1,), (0,)),
         pairs((3, 4), (4, 2)) + pairs((2, 0), (0, 3), ("f32",)))
    each("dot_batch", dot((0,), (0,), (2,), (1,)), pairs((2, 3, 2), (2, 2, 2)))
    each("dot_multi_contract", dot((), (), (1, 2), (1, 0)), pairs((2, 3, 2), (2, 3, 2)))
    each("dot_outer", dot((), (), (), ()), pairs((3,), (2,)) + pairs((), (), ("i64",)))
    each("dot_batch_middle", dot((1,), (1,), (2,), (0,)), pairs((3, 2, 2), (2, 2, 1)))

    def spd(shape, dt):
        m = rng.uniform(-1, 1, shape)
        n = shape[-1]
        a = m @ np.swapaxes(m, -1, -2) + n * np.eye(n)
        return a.astype(NP[dt])

    cases = [[spd((3, 3), "f64")], [spd((2, 3, 3), "f32")], [spd((1, 1), "f64")]]
    each("cholesky", lambda a: out_as(cholesky(a), NAME[a.dtype]), cases)

    def skew(a):  # adds an antisymmetric part, removed by the row's symmetrisation
        k = rng.uniform(-0.3, 0.3, a.shape)
        return (a + k - np.swapaxes(k, -1, -2)).astype(a.dtype)

    sym = lambda a: 0.5 * (a.astype(np.float64) + np.swapaxes(a.astype(np.float64), -1, -2))
    each("cholesky_sym", lambda a: out_as(cholesky(sym(a)), NAME[a.dtype]),
         [[skew(c[0])] for c in cases[:2]])

    def triangular(shape, dt):
        a = rng.uniform(-0.5, 0.5, shape)
        n = shape[-1]
        d = rng.uniform(2, 3, shape[:-1]) * rng.choice([-1, 1], shape[:-1])
        a = a * (1 - np.eye(n)) + np.eye(n) * d[..., None]
        return a.astype(NP[dt])

    for left in (True, False):
        for lower in (True, False):
            for trans in (False, True):
                for unit in (False, True):
                    name = "trsolve_%s%s%s%s" % ("L" if left else "R", "lo" if lower else "up",
                                                 "T" if trans else "N", "u" if unit else "d")
                    f = lambda a, b, l=left, lo=lower, t=trans, u=unit: out_as(
                        tri_solve(a, b, l, lo, t, u), NAME[b.dtype])
                    bs = (3, 2) if left else (2, 3)
                    bb = (2, 3, 2) if left else (2, 2, 3)
                    each(name, f, [[triangular((3, 3), "f64"), rand(bs, "f64")],
                                   [triangular((2, 3, 3), "f32"), rand(bb, "f32")]])


def gen_random():
    # bits_like(x, seed = 7): x only gives the shape
    for shape in ((3, 5), (2, 3), (7,), ()):
        add("philox_bits", [np.zeros(shape, np.uint32)], philox_bits(shape, 7))


def gen_composites():
    f = lambda g: (lambda x: out_as(g(x), NAME[x.dtype]))
    big = lambda dt, shape: arr([1000, 1000, -1000, -math.inf, 0, 1], dt, shape)
    each("softmax", f(lambda x: softmax(x, -1)),
         [[rand((3, 4), dt)] for dt in FLOATS] + [[big("f32", (2, 3))]])
    each("log_softmax", f(lambda x: x.astype(np.float64) - logsumexp(x, 1, True)),
         [[rand((3, 4), dt)] for dt in FLOATS] + [[big("f64", (3, 2))]])
    each("logsumexp", f(lambda x: logsumexp(x, 1)),
         [[rand((3, 4), dt)] for dt in FLOATS] +
         [[arr([-math.inf, -math.inf, 0, -math.inf, 1000, 1000, math.inf, 1], "f32", (4, 2))]])
    each("logsumexp__all", f(lambda x: logsumexp(x, None)),
         [[rand((2, 3), "f64")], [rand((), "f32")], [specials("f32")],
          [arr([-math.inf, -math.inf], "f64")], [arr([math.inf, -math.inf, 1], "f64")]])
    wide_vals = lambda dt: arr([-1000, -40, -20, 0, 20, 40, 1000], dt)
    for name, g in (("softplus", softplus), ("sigmoid", sigmoid),
                    ("log_sigmoid", lambda x: -softplus(-x.astype(np.float64)))):
        each(name, f(g), [[rand((2, 3), dt, -8, 8)] for dt in FLOATS] +
             [[wide_vals(dt)] for dt in FLOATS] + [[specials("f32")]])
    mean = lambda x: out_as(np.mean(wide(as_float(x)), axis=1), NAME[as_float(x).dtype])
    each("mean", mean, [[rand((3, 4), dt)] for dt in ("bool", "u8", "i32", "f32", "f64")] +
         [[rand((2, 0), "f32")]])
    var = lambda ddof, keep, axis: (lambda x: out_as(
        np.var(wide(as_float(x)), axis=axis, ddof=ddof, keepdims=keep), NAME[as_float(x).dtype]))
    each("var", var(0, False, 0), [[rand((5, 3), dt)] for dt in ("u8", "i32", "f32", "f64")] +
         [[rand((0, 2), "f64")]])
    each("var__ddof1", var(1, True, 1), [[rand((3, 5), dt)] for dt in ("i64", "f64")] +
         [[rand((2, 1), "f32")]])
    clip = lambda x: out_as(np.minimum(np.maximum(wide(x), -1), 2), NAME[x.dtype])
    each("clip", clip, [[arr([0, 1, 2, 3, 255], "u8")], [arr([0, 1, 2, 3, 4294967295], "u32")],
                        [arr([-3, -1, 0, 2, 5], "i32")], [rand((2, 3), "f64")], [specials("f32")]])
    mm = lambda a, b: out_as(np.matmul(wide(a), wide(b)), NAME[a.dtype])
    each("matmul", mm,
         [[rand((3, 4), "f64"), rand((4, 2), "f64")], [rand((4,), "f32"), rand((4, 2), "f32")],
          [rand((3, 4), "i32"), rand((4,), "i32")], [rand((4,), "f64"), rand((4,), "f64")],
          [rand((2, 1, 2, 3), "f32"), rand((3, 3, 2), "f32")],
          [rand((1, 2, 3), "u8"), rand((2, 3, 2), "u8")]])
    each("expand_dims", lambda x: np.expand_dims(x, -1),
         [[rand((2, 3), "f32")], [rand((), "bool")]])
    each("squeeze", np.squeeze,
         [[rand((1, 3, 1), "i32")], [rand((1,), "f64")], [rand((2, 1, 3), "bool")]])
    each("stack", lambda a, b, c: np.stack([a, b, c], -1),
         [[rand((2, 3), "f32"), rand((2, 3), "f32"), rand((2, 3), "f32")],
          [rand((), "u8"), rand((), "u8"), rand((), "u8")]])
    each("flatten", lambda x: x.reshape(x.shape[:1] + (-1,)),
         [[rand((2, 3, 4), "f64")], [rand((3, 1), "bool")], [rand((4, 1, 1), "i32")]])
    each("subscripts", lambda x: x[1, ::2], [[rand((3, 5, 2), "f32")], [rand((2, 4), "i64")]])
    each("subscripts__negative", lambda x: x[:, -1],
         [[rand((2, 3), "f64")], [rand((4, 5, 1), "u8")]])


# ---- convolution and pooling (N-d, layout [N, C, spatial...]) ---------------------------------
# Written from the definitions (einsum over window offsets on zero-padded inputs), not from the
# library's loops. Attributes are those of the rows in OpTableTest.cpp (pads already resolved).

def window_slices(kk, dil, strides, out):
    return tuple(slice(k * d, k * d + (o - 1) * s + 1, s) for k, d, s, o in zip(kk, dil, strides, out))


def conv_out(insp, k, strides, lo, hi, dil):
    return [(i + l + h - (kk - 1) * d - 1) // s + 1 for i, kk, s, l, h, d in zip(insp, k, strides, lo, hi, dil)]


def np_conv(x, w, strides, lo, hi, dil, groups):
    x, w = wide(x), wide(w)
    O, I, k = w.shape[0], w.shape[1], w.shape[2:]
    out = conv_out(x.shape[2:], k, strides, lo, hi, dil)
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(lo, hi)))
    y = np.zeros((x.shape[0], O) + tuple(out))
    og = O // groups
    for kk in np.ndindex(*k):
        patch = xp[(slice(None), slice(None)) + window_slices(kk, dil, strides, out)]
        for g in range(groups):
            wg = w[(slice(g * og, (g + 1) * og), slice(None)) + kk]
            y[:, g * og:(g + 1) * og] += np.einsum("ni...,oi->no...", patch[:, g * I:(g + 1) * I], wg)
    return y


def np_conv_backward_data(dy, w, src, strides, lo, hi, dil, groups):
    dy, w = wide(dy), wide(w)
    O, I, k = w.shape[0], w.shape[1], w.shape[2:]
    out = dy.shape[2:]
    dxp = np.zeros((dy.shape[0], I * groups) + tuple(s + l + h for s, l, h in zip(src, lo, hi)))
    og = O // groups
    for kk in np.ndindex(*k):
        sl = (slice(None), slice(None)) + window_slices(kk, dil, strides, out)
        for g in range(groups):
            wg = w[(slice(g * og, (g + 1) * og), slice(None)) + kk]
            dxp[:, g * I:(g + 1) * I][sl] += np.einsum(
                "no...,oi->ni...", dy[:, g * og:(g + 1) * og], wg)
    return dxp[(slice(None), slice(None)) + tuple(slice(l, l + s) for l, s in zip(lo, src))]


def np_conv_backward_filter(x, dy, k, strides, lo, hi, dil, groups):
    x, dy = wide(x), wide(dy)
    O, out = dy.shape[1], dy.shape[2:]
    I = x.shape[1] // groups
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(lo, hi)))
    dw = np.zeros((O, I) + tuple(k))
    og = O // groups
    for kk in np.ndindex(*k):
        patch = xp[(slice(None), slice(None)) + window_slices(kk, dil, strides, out)]
        for g in range(groups):
            dg = dy[:, g * og:(g + 1) * og].reshape(dy.shape[0], og, -1)
            pg = patch[:, g * I:(g + 1) * I].reshape(x.shape[0], I, -1)
            dw[(slice(g * og, (g + 1) * og), slice(None)) + kk] = np.einsum("nop,nip->oi", dg, pg)
    return dw


def pool_patches(x, window, strides, lo, hi, fill):
    """[K, N, C, out...]: the window offsets of the padded x stacked on a leading axis."""
    x = wide(x)
    ones = [1] * len(window)
    out = conv_out(x.shape[2:], window, strides, lo, hi, ones)
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(lo, hi)), constant_values=fill)
    return np.stack([xp[(slice(None), slice(None)) + window_slices(kk, ones, strides, out)]
                     for kk in np.ndindex(*window)]), out


def np_max_pool(x, window, strides, lo, hi):
    return pool_patches(x, window, strides, lo, hi, -np.inf)[0].max(axis=0)


def avg_divisor(shape, window, strides, lo, hi, count_include_pad):
    if count_include_pad:
        return float(np.prod(window))
    return pool_patches(np.ones(shape), window, strides, lo, hi, 0.0)[0].sum(axis=0)


def np_avg_pool(x, window, strides, lo, hi, cip):
    p = pool_patches(x, window, strides, lo, hi, 0.0)[0]
    return p.sum(axis=0) / avg_divisor(np.shape(x), window, strides, lo, hi, cip)


def scatter_windows(shape, window, strides, lo, hi, per_offset):
    """The adjoint of pool_patches: per_offset(index of the offset) -> [N, C, out...] values."""
    ones = [1] * len(window)
    out = conv_out(shape[2:], window, strides, lo, hi, ones)
    dxp = np.zeros(tuple(shape[:2]) + tuple(s + l + h for s, l, h in zip(shape[2:], lo, hi)))
    for j, kk in enumerate(np.ndindex(*window)):
        dxp[(slice(None), slice(None)) + window_slices(kk, ones, strides, out)] += per_offset(j)
    return dxp[(slice(None), slice(None)) + tuple(slice(l, l + s) for l, s in zip(lo, shape[2:]))]


def np_max_pool_backward(x, dy, window, strides, lo, hi):
    p, _ = pool_patches(x, window, strides, lo, hi, -np.inf)
    first = p.argmax(axis=0)  # the first maximum
    return scatter_windows(np.shape(x), window, strides, lo, hi,
                           lambda j: np.where(first == j, wide(dy), 0.0))


def np_avg_pool_backward(dy, src, window, strides, lo, hi, cip):
    shape = tuple(np.shape(dy)[:2]) + tuple(src)
    g = wide(dy) / avg_divisor(shape, window, strides, lo, hi, cip)
    return scatter_windows(shape, window, strides, lo, hi, lambda j: g)


def gen_conv():
    f = lambda fn: (lambda *xs: out_as(fn(*xs), NAME[xs[0].dtype]))
    def cases(*shapes_list, dts=("f32",)):
        return [[rand(s, dt) for s in shapes] for shapes in shapes_list for dt in dts]
    def distinct(shape, dt):
        n = int(np.prod(shape))
        return arr((rng.permutation(n) - n // 2) * 0.37 + rng.uniform(0, 0.05, n), dt, shape)

    conv = lambda st, lo, hi, dl, g: f(lambda x, w: np_conv(x, w, st, lo, hi, dl, g))
    each("conv1d", conv([1], [0], [0], [1], 1), cases(((2, 2, 5), (3, 2, 2)), dts=("f32", "f64")))
    each("conv1d_stride2_pad", conv([2], [1], [2], [1], 1), cases(((1, 2, 8), (2, 2, 3))))
    each("conv1d_dilation2", conv([1], [2], [2], [2], 1), cases(((1, 2, 6), (2, 2, 3))))
    each("conv2d", conv([1, 1], [0, 0], [0, 0], [1, 1], 1), cases(((1, 2, 4, 3), (2, 2, 2, 2))))
    # SAME, stride 2 on 5 x 4 with a 3 x 3 filter: out 3 x 2, total pads 2 and 1
    each("conv2d_same_stride2", conv([2, 2], [1, 0], [1, 1], [1, 1], 1),
         cases(((1, 2, 5, 4), (2, 2, 3, 3))))
    each("conv2d_groups2", conv([1, 1], [1, 1], [1, 1], [1, 1], 2), cases(((1, 4, 3, 3), (2, 2, 2, 2))))
    each("conv2d_depthwise", conv([2, 2], [1, 0], [0, 1], [1, 1], 3), cases(((1, 3, 4, 4), (6, 1, 2, 2))))
    each("conv2d_dilation2", conv([2, 1], [2, 1], [1, 2], [2, 2], 1), cases(((1, 1, 5, 5), (2, 1, 2, 2))))
    each("conv3d", conv([1, 1, 1], [0] * 3, [0] * 3, [1] * 3, 1), cases(((1, 1, 3, 3, 2), (2, 1, 2, 2, 2))))
    each("conv4d", conv([1, 2, 1, 1], [1] * 4, [1] * 4, [1] * 4, 1),
         cases(((1, 1, 2, 2, 1, 2), (1, 1, 2, 2, 1, 2))))

    bd = lambda src, st, lo, hi, dl, g: f(lambda dy, w: np_conv_backward_data(dy, w, src, st, lo, hi, dl, g))
    each("conv_backward_data1d", bd([8], [2], [1], [2], [1], 1), cases(((1, 2, 5), (2, 1, 3)), dts=("f32", "f64")))
    each("conv_backward_data2d_groups2", bd([7, 6], [2, 2], [1, 0], [1, 1], [1, 2], 2),
         cases(((1, 2, 4, 3), (2, 1, 3, 2))))
    bf = lambda k, st, lo, hi, dl, g: f(lambda x, dy: np_conv_backward_filter(x, dy, k, st, lo, hi, dl, g))
    each("conv_backward_filter1d", bf([3], [2], [1], [2], [1], 1), cases(((1, 2, 8), (1, 1, 5)), dts=("f32", "f64")))
    each("conv_backward_filter2d_depthwise", bf([2, 3], [1, 2], [0, 1], [1, 1], [2, 1], 3),
         cases(((1, 3, 4, 4), (1, 3, 3, 2))))
    # conv_transpose: out = (in - 1) s - lo - hi + (k - 1) d + 1 + output_padding
    each("conv_transpose2d", bd([4, 3], [2, 2], [1, 1], [1, 1], [1, 1], 1),  # in 2 x 2, k 3, op (1, 0)
         cases(((1, 2, 2, 2), (2, 1, 3, 3))))
    each("conv_transpose2d_groups2_dilation2", bd([4, 6], [1, 2], [1, 0], [0, 1], [2, 1], 2),
         cases(((1, 2, 3, 3), (2, 1, 2, 3))))
    each("conv_transpose1d_same", bd([6], [2], [1], [1], [1], 1), cases(((1, 1, 3), (1, 2, 4))))

    mp = lambda wd, st, lo, hi: lambda x: out_as(np_max_pool(x, wd, st, lo, hi), NAME[x.dtype])
    each("max_pool1d_overlap", mp([3], [2], [0], [0]), [[distinct((1, 2, 7), "f32")], [distinct((1, 1, 5), "f64")]])
    each("max_pool2d", mp([2, 2], [2, 2], [0, 0], [0, 0]), [[distinct((1, 2, 4, 4), "f32")]])
    each("max_pool2d_overlap_pad", mp([3, 3], [1, 2], [1, 2], [1, 0]), [[distinct((1, 1, 3, 4), "f32")]])
    # SAME, window 3, stride 2 on 5 x 6: out 3 x 3, pads (1, 1) and (0, 1)
    each("max_pool2d_same", mp([3, 3], [2, 2], [1, 0], [1, 1]), [[distinct((1, 1, 5, 6), "f32")]])
    each("max_pool3d", mp([2, 1, 2], [1, 1, 2], [0] * 3, [0] * 3), [[distinct((1, 1, 3, 2, 4), "f32")]])
    each("max_pool4d", mp([2, 2, 1, 2], [1] * 4, [0] * 4, [0] * 4), [[distinct((1, 1, 2, 3, 1, 2), "f32")]])
    ap = lambda wd, st, lo, hi, cip: lambda x: out_as(np_avg_pool(x, wd, st, lo, hi, cip), NAME[x.dtype])
    each("avg_pool2d_include_pad", ap([3, 2], [2, 1], [1, 1], [1, 1], True), cases(((1, 1, 3, 2),), dts=("f32", "f64")))
    each("avg_pool2d_exclude_pad", ap([3, 2], [2, 1], [1, 1], [1, 1], False), cases(((1, 1, 3, 2),), dts=("f32", "f64")))
    # SAME, window 3, stride 2 on 7: out 4, total pad 2
    each("avg_pool1d_same_exclude_pad", ap([3], [2], [1], [1], False), cases(((1, 2, 7),)))
    each("avg_pool3d", ap([2] * 3, [2] * 3, [0] * 3, [0] * 3, True), cases(((1, 1, 2, 4, 2),)))

    mpb = lambda wd, st, lo, hi: lambda x, dy: out_as(np_max_pool_backward(x, dy, wd, st, lo, hi), NAME[x.dtype])
    each("max_pool_backward2d", mpb([3, 3], [1, 2], [1, 2], [1, 0]),
         [[distinct((1, 1, 3, 3), "f32"), rand((1, 1, 3, 2), "f32")]])
    each("max_pool_backward1d", mpb([3], [2], [0], [0]),
         [[distinct((1, 2, 7), "f64"), rand((1, 2, 3), "f64")]])
    apb = lambda src, wd, st, lo, hi, cip: lambda dy: out_as(
        np_avg_pool_backward(dy, src, wd, st, lo, hi, cip), NAME[dy.dtype])
    each("avg_pool_backward2d_include_pad", apb([5, 4], [3, 2], [2, 1], [1, 1], [1, 1], True), cases(((1, 1, 3, 5),)))
    each("avg_pool_backward2d_exclude_pad", apb([5, 4], [3, 2], [2, 1], [1, 1], [1, 1], False), cases(((1, 1, 3, 5),)))

    # channel blocking: [N, C, s...] <-> [N, C / 16, s..., 16] (AVX-512's width; AVX2's 8: the
    # "layouts" family); small integers keep the file short
    blk = lambda x, B: np.moveaxis(x.reshape((x.shape[0], x.shape[1] // B, B) + x.shape[2:]), 2, -1)
    unblk = lambda b: np.moveaxis(b, -1, 2).reshape((b.shape[0], b.shape[1] * b.shape[-1]) + b.shape[2:-1])
    each("block_channels", lambda x: blk(x, 16), [[arr(np.arange(32), "f32", (1, 16, 2, 1))]])
    each("unblock_channels", lambda b: unblk(b), [[arr(np.arange(32), "f32", (1, 1, 2, 1, 16))]])


# ---- output ----------------------------------------------------------------------------------

def number(v, dt):
    if dt in FLOATS:
        v = float(v)
        if math.isnan(v):
            return '"nan"'
        if math.isinf(v):
            return '"inf"' if v > 0 else '"-inf"'
        if dt == "f32":
            return str(np.float32(v))  # the shortest repr that round-trips the float32
        return repr(v)
    return str(int(v))


def tensor(a):
    a = np.asarray(a)
    dt = NAME[a.dtype]
    data = ",".join(number(v, dt) for v in a.reshape(-1))
    shape = json.dumps(list(a.shape), separators=(",", ":"))
    return '{"dtype":"%s","shape":%s,"data":[%s]}' % (dt, shape, data)


def gen_later_ops():
    """Ops added after the first release of this file: their draws come last, so that the
    entries above stay as they were."""
    f64 = lambda f: lambda *xs: out_as(f(*[wide(x) for x in xs]), NAME[xs[0].dtype])
    each("log2", f64(np.log2), [[rand((2, 2), dt, 0.25, 8)] for dt in FLOATS] +
         [[specials(dt)] for dt in FLOATS])
    each("hypot", f64(np.hypot), [[rand((2, 1), dt), rand((1, 2), dt)] for dt in FLOATS] +
         [[specials(dt, 0), specials(dt, 1)] for dt in FLOATS])


# Families added later write their own file, golden_<stem>.json, with their own generator seeded
# from the stem: adding a family never changes another file's draws, and no file grows past the
# limit. Register one with @family("stem"); the loader (tests/ops/OpHarness.cpp) reads
# golden*.json.
FAMILIES = []


def family(stem):
    def register(fn):
        FAMILIES.append((stem, fn))
        return fn
    return register


@family("layouts")
def gen_layouts():
    """Channel blocks of AVX2's width: [N, C, s...] <-> [N, C / 8, s..., 8]."""
    blk = lambda x: np.moveaxis(x.reshape((x.shape[0], x.shape[1] // 8, 8) + x.shape[2:]), 2, -1)
    unblk = lambda b: np.moveaxis(b, -1, 2).reshape((b.shape[0], b.shape[1] * 8) + b.shape[2:-1])
    each("block_channels8", blk, [[arr(np.arange(32), "f32", (1, 16, 2, 1))]])
    each("unblock_channels8", unblk, [[arr(np.arange(32), "f32", (1, 2, 2, 1, 8))]])


@family("indexing_updates")
def gen_indexing_updates():
    """scatter, x.at(idx).set/add/mul/min/max, tensor subscripts, diagonals, nan reductions."""
    def combine(mode, dst, src, is_bool):
        if mode == "set":
            return src
        if mode == "add":
            return (dst or src) if is_bool else dst + src
        if mode == "mul":
            return (dst and src) if is_bool else dst * src
        if math.isnan(float(dst)) or math.isnan(float(src)):
            return math.nan
        return min(dst, src) if mode == "min" else max(dst, src)

    def at(x, key, v, mode):
        """x with v combined in at x[key], one element at a time in NumPy's index order (repeated
        indices accumulate; for set the last one wins, as the reference kernel writes)."""
        dt = NAME[x.dtype]
        is_bool = dt == "bool"
        out = wide(x).astype(np.float64 if dt in FLOATS else np.int64).copy()
        pos = np.arange(x.size).reshape(x.shape)[key]
        vals = np.broadcast_to(wide(v), pos.shape)
        flat = out.reshape(-1)
        for p, u in zip(pos.reshape(-1), vals.reshape(-1)):
            flat[p] = combine(mode, flat[p], u, is_bool)
        return out_as(out, dt) if not is_bool else out != 0

    def key(*parts):
        return tuple(p.astype(np.int64) if isinstance(p, np.ndarray) else p for p in parts)

    def scatter(axis, mode):
        def f(x, i, u):
            ii = i.astype(np.int64)
            # updates u[o, k..., in] land on x[o, i[k...], in]
            sel = (slice(None),) * axis + (ii,)
            return at(x, sel, u, mode)
        return f

    for name, mode, axis in (("scatter_set", "set", 0), ("scatter_mul", "mul", 0),
                             ("scatter_min", "min", 0)):
        each(name, scatter(axis, mode),
             [[rand((5, 3), dt), arr([1, 3, 1, 0, 1, 4], "i64"), rand((6, 3), dt)]
              for dt in ("f32", "i32", "bool")] +
             [[rand((3, 2), "f64"), arr([[2, 2], [0, 2]], "i32"), rand((2, 2, 2), "f64")]])
    for name, mode in (("scatter_set_axis1", "set"), ("scatter_max_axis1", "max")):
        each(name, scatter(1, mode),
             [[rand((2, 4), "f64"), arr([3, 0, 3], "u8"), rand((2, 3), "f64")],
              [rand((2, 4), "u8"), arr([1, 1, 2], "u8"), rand((2, 3), "u8")]])
    each("scatter_max_axis1", scatter(1, "max"),
         [[arr([[1, math.nan, 0, 2]], "f32"), arr([1, 0, 3], "i64"), arr([[5, 1, math.nan]], "f32")]])
    each("scatter_mul_zeros", scatter(0, "mul"),
         [[rand((3,), "f64"), arr([0, 0, 1, 2], "i64"), arr([0, 2, 0, 0], "f64")]])
    each("scatter_max_ties", scatter(0, "max"),
         [[arr([1, 2, 0], "f32"), arr([0, 0, 2], "i64"), arr([1, 1, 0], "f32")]])

    each("index_update__box", lambda x, v: at(x, (slice(1, -1), slice(None, None, 2)), v, "set"),
         [[rand((4, 5), dt), rand((2, 3), dt)] for dt in ("f32", "i64", "bool")] +
         [[rand((3, 3), "f64"), rand((), "f64")]])
    each("index_add__int", lambda x, v: at(x, (-1, slice(1, 3)), v, "add"),
         [[rand((3, 4), dt), rand((2,), dt)] for dt in ("f32", "u8", "bool")] +
         [[rand((2, 5, 2), "i32"), rand((2, 2), "i32")]])
    each("index_mul__box", lambda x, v: at(x, (slice(None, None, 2),), v, "mul"),
         [[rand((5, 2), dt), rand((2,), dt)] for dt in ("f64", "i32", "bool")])
    each("index_min__box", lambda x, v: at(x, (slice(None), 2), v, "min"),
         [[rand((3, 4), dt), rand((3,), dt)] for dt in ("f32", "u32", "bool")] +
         [[arr([[1, 2, math.nan], [0, 1, 2]], "f64"), arr([math.nan, 1], "f64")]])
    each("index_max__box", lambda x, v: at(x, (slice(1, 3),), v, "max"),
         [[rand((4, 3), dt), rand((2, 3), dt)] for dt in ("f32", "i64", "bool")])

    each("index_update__tensor", lambda x, i, v: at(x, key(i), v, "set"),
         [[rand((5, 3), "f32"), arr([-1, 2, 4, 0], "i64"), rand((4, 3), "f32")],
          [rand((4,), "i32"), arr([[3, -1], [0, -4]], "i32"), rand((2, 2), "i32")],
          [rand((5, 3), "bool"), arr([1, -4, 3, 0], "i64"), rand((3,), "bool")]])
    each("index_add__tensor", lambda x, i, v: at(x, key(slice(None), i), v, "add"),
         [[rand((3, 5), "f64"), arr([-1, 4, 0, 4], "i64"), rand((3, 4), "f64")],
          [rand((2, 3), "u8"), arr([[2, -1], [0, 0]], "i32"), rand((2,), "u8")],
          [rand((2, 3), "bool"), arr([[2, -1], [0, 0]], "i32"), rand((2,), "bool")]])
    for name, mode in (("index_mul__tensor", "mul"), ("index_min__tensor", "min"),
                       ("index_max__tensor", "max")):
        each(name, lambda x, i, v, mode=mode: at(x, key(i), v, mode),
             [[rand((4, 2), "f32"), arr([-1, 3, 0, -4, 1], "i64"), rand((5, 2), "f32")],
              [rand((4, 2), "i32"), arr([2, 2, -2, 1, 1], "i64"), rand((5, 2), "i32")]])
    each("index_add__tensors", lambda x, i, j, v: at(x, key(i, slice(0, 2), j), v, "add"),
         [[rand((3, 3, 4), "f32"), arr([0, 2, 0], "i64"), arr([-1, 3, 3], "i64"), rand((3, 2), "f32")],
          [rand((3, 2, 4), "i64"), arr([[-3], [2]], "i64"), arr([0, 1, 0], "i32"), rand((2,), "i64")]])
    each("index_update__mixed", lambda x, i, v: at(x, key(slice(0, 2), i, 1), v, "set"),
         [[rand((3, 4, 2), "f64"), arr([-4, 2], "i64"), rand((2, 2), "f64")],
          [rand((2, 4, 3), "u8"), arr([3, 0, 1], "i64"), rand((3,), "u8")]])
    each("subscripts__tensor", lambda x, i: x[i.astype(np.int64)],
         [[rand((5, 3), "f32"), arr([[-5, 4], [0, 2]], "i64")],
          [rand((4,), "bool"), arr([3, -1, -4], "i32")], [rand((4, 2), "u32"), arr(3, "u8")]])
    each("subscripts__tensors", lambda x, i: x[1, :, i.astype(np.int64)],
         [[rand((3, 2, 4), "f64"), arr([[0, -1], [3, -4]], "i64")],
          [rand((2, 3, 5), "i32"), arr([4, 0, 2], "i64")]])

    each("diagonal", lambda x: np.diagonal(x, 1).copy(),
         [[rand((3, 4), "f32")], [rand((4, 3), "i32")], [rand((2, 5, 1), "bool")],
          [rand((1, 0), "f64")]])
    each("diagonal__axes", lambda x: np.diagonal(x, -1, 2, 0).copy(),
         [[rand((3, 2, 4), "f64")], [rand((2, 3, 5, 2), "u8")]])
    each("diag", lambda x: np.diag(x, 1), [[rand((3,), "f32")], [rand((1,), "bool")],
                                            [rand((0,), "i64")]])
    each("diag__matrix", lambda x: np.diag(x, -1).copy(), [[rand((3, 4), "f64")],
                                                           [rand((2, 2), "u32")]])
    each("diag__vector_below", lambda x: np.diag(x, -2), [[rand((3,), "i32")], [rand((2,), "f32")]])
    tr = lambda *a: lambda x: out_as(np.trace(wide(x), *a), NAME[x.dtype])
    each("trace", tr(), [[rand((3, 3), "f32")], [rand((2, 4), "u8")], [rand((4, 2, 3), "f64")]])
    each("trace__axes", tr(1, 1, 2), [[rand((2, 3, 4), "i32")], [rand((1, 3, 3), "f32")]])

    each("eye__offset", lambda x: out_as(wide(x) + np.eye(3, 4, 1), NAME[x.dtype]),
         [[rand((3, 4), "f32")], [rand((3, 4), "u8")]])
    each("eye__below", lambda x: out_as(wide(x) + np.eye(4, 4, -2), NAME[x.dtype]),
         [[rand((4, 4), "i64")], [rand((1, 4), "f64")]])

    def nan_values(shape, dt, frac=0.3):
        a = rand(shape, dt)
        mask = rng.uniform(0, 1, a.shape) < frac
        a[mask] = np.nan
        return a

    red = lambda f, *a, **k: lambda x: out_as(f(wide(x), *a, **k), NAME[x.dtype])
    for name, f in (("nansum", np.nansum), ("nanmean", np.nanmean), ("nanmax", np.nanmax),
                    ("nanmin", np.nanmin)):
        each(name, red(f, axis=0),
             [[nan_values((3, 4), "f32")], [nan_values((4, 2), "f64")],
              [arr([[math.nan, 1], [math.nan, 2]], "f64")]])
    each("nansum__all_keepdims", red(np.nansum, axis=None, keepdims=True),
         [[nan_values((2, 3), "f64")], [rand((4,), "i32")]])

    # negative steps (rows of tests/ops/OpTableTest.cpp)
    each("subscripts__reverse", lambda x: x[::-1, 3:0:-2],
         [[rand((3, 5), "f32")], [rand((2, 4, 2), "i64")], [rand((0, 4), "f64")]])
    each("subscripts__reverse_tail", lambda x: x[..., -1:-5:-2],
         [[rand((7,), "f64")], [rand((2, 3), "i32")], [rand((3, 6), "bool")]])


def write(path, entries):
    lines = []
    for row, dt, inputs, expected in entries:
        lines.append('{"row":"%s","dtype":"%s","inputs":[%s],"expected":%s}' % (
            row, dt, ",".join(tensor(x) for x in inputs), tensor(expected)))
    text = '{"generator":"tests/ops/golden/gen_golden.py","numpy":"%s","cases":[\n%s\n]}\n' % (
        np.__version__, ",\n".join(lines))
    json.loads(text.replace('"nan"', "0"))  # well-formed
    if len(text) > MAX_BYTES:
        sys.exit("%s would be %d bytes (limit %d): shrink the cases or start a new family"
                 % (path, len(text), MAX_BYTES))
    with open(path, "w") as f:
        f.write(text)
    print("wrote %s: %d entries, %d bytes" % (path, len(entries), len(text)))


# ---- interpolation (include/symjax/Interpolation.h) ------------------------------------------

def np_bound(i, n, mode):
    """The boundary rule of map_coordinates on integer indices; -1 where Constant leaves the grid."""
    if mode == "constant":
        return np.where((i >= 0) & (i < n), i, -1)
    if mode == "nearest":
        return np.clip(i, 0, n - 1)
    if mode == "wrap":
        return np.mod(i, n)
    if mode == "reflect":
        m = np.mod(i, 2 * n)
        return np.where(m >= n, 2 * n - 1 - m, m)
    if n == 1:  # mirror
        return np.zeros_like(i)
    m = np.mod(i, 2 * n - 2)
    return np.where(m >= n, 2 * n - 2 - m, m)


def np_map_coordinates(x, coords, order, mode, cval):
    """scipy.ndimage.map_coordinates for order 0/1, with scipy's grid-constant and grid-wrap
    conventions for "constant" and "wrap" (what JAX calls constant and wrap)."""
    xd, c = wide(x), np.asarray(coords, np.float64)
    r = x.ndim

    def sample(idx):
        b = [np_bound(idx[k], x.shape[k], mode) for k in range(r)]
        valid = np.all([bk >= 0 for bk in b], axis=0)
        v = xd[tuple(np.where(bk < 0, 0, bk) for bk in b)]
        return np.where(valid, v, cval)

    if order == 0:
        return sample([np.floor(c[k] + 0.5).astype(np.int64) for k in range(r)])
    f = np.floor(c)
    t = c - f
    out = np.zeros(c.shape[1:])
    for corner in range(1 << r):
        bits = [(corner >> (r - 1 - k)) & 1 for k in range(r)]
        w = np.prod([t[k] if bits[k] else 1 - t[k] for k in range(r)], axis=0)
        out = out + w * sample([f[k].astype(np.int64) + bits[k] for k in range(r)])
    return out


def np_nearest_align_corners(x, size):
    """resize(Nearest, align_corners=true): index round(j (n - 1) / (m - 1)), halves up."""
    for a, m in enumerate(size, start=2):
        n = x.shape[a]
        idx = np.array([0 if m == 1 else (2 * j * (n - 1) + (m - 1)) // (2 * (m - 1))
                        for j in range(m)])
        x = np.take(x, idx, axis=a)
    return x


def np_upsample_1d(x, repeat, axis, mode, value, boundary):
    n, k = x.shape[axis], repeat + 1
    if mode == "constant":
        shape = list(x.shape)
        shape[axis] = n * k
        out = np.full(shape, value, dtype=np.float64)
        sl = [slice(None)] * x.ndim
        sl[axis] = slice(0, None, k)
        out[tuple(sl)] = x
        return out
    i0 = np.arange(n * k) // k
    if mode == "nearest":
        return np.take(wide(x), i0, axis=axis)
    ext = np.concatenate([wide(x), np.full_like(np.take(wide(x), [0], axis=axis), value)], axis)
    i1 = np_bound(i0 + 1, n, boundary)
    i1 = np.where(i1 < 0, n, i1)
    shape = [1] * x.ndim
    shape[axis] = n * k
    w1 = ((np.arange(n * k) % k) / k).reshape(shape)
    return np.take(ext, i0, axis=axis) * (1 - w1) + np.take(ext, i1, axis=axis) * w1


@family("interpolation")
def gen_interpolation():
    import torch  # Debian's python3-torch: the reference for resize

    def coords(shape_in, n_points, lo=-1.5, hi=1.5):
        """Coordinates [rank, n_points] spread over the grid and up to 1.5 cells beyond it."""
        return np.stack([rng.uniform(lo, d - 1 + hi, n_points) for d in shape_in])

    for order, mode, cval in ((1, "constant", 0.5), (1, "nearest", 0.0), (1, "wrap", 0.0),
                              (1, "reflect", 0.0), (1, "mirror", 0.0), (0, "constant", -1.0),
                              (0, "reflect", 0.0)):
        row = "map_coordinates__%s_%s" % ("linear" if order else "order0", mode)
        for dt in FLOATS:
            x, c = rand((4, 5), dt), coords((4, 5), 12, -3, 3).astype(NP[dt])
            add(row, [x, c], out_as(np_map_coordinates(x, c, order, mode, cval), dt))
    for dt in FLOATS:
        x, c = rand((2, 3, 4), dt), coords((2, 3, 4), 10).reshape(3, 2, 5).astype(NP[dt])
        add("map_coordinates__linear_3d", [x, c],
            out_as(np_map_coordinates(x, c, 1, "constant", 0.0), dt))

    def torch_resize(x, size, mode, align):
        t = torch.from_numpy(np.ascontiguousarray(x))
        kw = {} if mode == "nearest" else {"align_corners": align}
        return torch.nn.functional.interpolate(t, size=tuple(size), mode=mode, **kw).numpy()

    resize_rows = [  # row, input shape, size, torch mode, align_corners
        ("resize__nearest_1d", (2, 2, 5), (8,), "nearest", False),
        ("resize__nearest_2d", (1, 2, 3, 4), (7, 3), "nearest", False),
        ("resize__linear_1d", (2, 1, 4), (9,), "linear", False),
        ("resize__linear_1d_align", (2, 1, 4), (9,), "linear", True),
        ("resize__bilinear", (1, 2, 3, 4), (5, 7), "bilinear", False),
        ("resize__bilinear_down", (1, 1, 6, 7), (4, 3), "bilinear", False),
        ("resize__bilinear_align", (1, 2, 3, 4), (5, 7), "bilinear", True),
        ("resize__trilinear", (1, 1, 2, 3, 3), (3, 5, 2), "trilinear", False),
        ("resize__trilinear_align", (1, 1, 2, 3, 3), (3, 5, 2), "trilinear", True)]
    for row, shape, size, mode, align in resize_rows:
        for dt in FLOATS:
            x = rand(shape, dt)
            add(row, [x], torch_resize(x, size, mode, align))
    for dt in FLOATS:
        x = rand((1, 2, 2, 3), dt)
        add("resize__nearest_2d_align", [x], np_nearest_align_corners(x, (4, 7)))

    up_rows = [  # row, input shape, repeat, axis, mode, value, boundary
        ("upsample_1d__constant", (2, 3), 2, -1, "constant", 0.0, "nearest"),
        ("upsample_1d__constant_value", (3, 2), 1, 0, "constant", 1.5, "nearest"),
        ("upsample_1d__nearest", (2, 3), 2, 1, "nearest", 0.0, "nearest"),
        ("upsample_1d__linear", (2, 4), 3, -1, "linear", 0.0, "nearest"),
        ("upsample_1d__linear_wrap", (4, 2), 1, 0, "linear", 0.0, "wrap"),
        ("upsample_1d__linear_mirror", (2, 4), 2, 1, "linear", 0.0, "mirror"),
        ("upsample_1d__linear_constant", (2, 3), 2, 1, "linear", -2.0, "constant")]
    for row, shape, repeat, axis, mode, value, boundary in up_rows:
        for dt in FLOATS:
            x = rand(shape, dt)
            add(row, [x], out_as(np_upsample_1d(x, repeat, axis, mode, value, boundary), dt))
    for dt in FLOATS:
        x = rand((1, 2, 3, 2), dt)
        y = np_upsample_1d(np_upsample_1d(x, 1, 2, "linear", 0, "nearest"), 2, 3, "linear", 0,
                           "nearest")
        add("upsample_2d__linear", [x], out_as(y, dt))


@family("control_flow")
def gen_control_flow():
    def scan_tanh(xs, c):
        ys = []
        for a in xs:
            c = np.tanh(c * 0.5 + a)
            ys.append(c * a)
        return np.stack(ys)

    def scan_reverse(xs, c, w):
        for a in xs[::-1]:
            c = c * w + np.sin(a)
        return c

    for dt in FLOATS:
        xs, c = rand((5, 3), dt), rand((3,), dt)
        add("scan__tanh_recurrence_stacked", [xs, c], out_as(scan_tanh(wide(xs), wide(c)), dt))
        xs, c, w = rand((4, 2), dt, -1, 1), rand((2,), dt, -1, 1), rand((2,), dt, -1, 1)
        add("scan__reverse_captured_final_carry", [xs, c, w],
            out_as(scan_reverse(wide(xs), wide(c), wide(w)), dt))
        a = rand((3,), dt, 0.5, 3.0)
        v = wide(a)
        for _ in range(5):
            v = 0.5 * (v + wide(a) / v)
        add("while_loop__newton_sqrt", [a], out_as(v, dt))
        for shape in ((4,), (2, 3)):
            x, y = rand(shape, dt), rand(shape, dt)
            xw, yw = wide(x), wide(y)
            out = np.exp(xw * 0.5) * yw if xw.sum() > 0 else xw * xw - yw
            add("cond__sum_positive", [x, y], out_as(out, dt))
# ---- sort (Note [Sort] in src/ops/Sort.cpp) ---------------------------------------------------

def sort_order(line, descending):
    """The positions of a line in sort order: stable, NaN after every number (all NaNs equal),
    -0.0 equal to 0.0; descending is the reverse order with equal keys still in position order
    (Python's sorted keeps equal elements in order with reverse=True too)."""
    def key(i):
        v = line[i]
        nan = isinstance(v, float) and math.isnan(v)
        return (1, 0) if nan else (0, v)
    return sorted(range(len(line)), key=key, reverse=descending)


def sort_lines(keys, values, axis, descending, k=None):
    """values moved along axis as sorting keys moves them; the first k positions when k."""
    kw = np.moveaxis(np.asarray(keys), axis, -1)
    vw = np.moveaxis(np.asarray(values), axis, -1)
    n = kw.shape[-1]
    k = n if k is None else k
    out = np.empty(vw.shape[:-1] + (k,), dtype=vw.dtype)
    for idx in np.ndindex(kw.shape[:-1]):
        line = [x.item() for x in kw[idx]]
        perm = sort_order(line, descending)[:k]
        out[idx] = vw[idx][perm] if k else vw[idx][:0]
    return np.moveaxis(out, -1, axis)


def positions(x, axis):
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    return np.broadcast_to(np.arange(x.shape[axis], dtype=np.int64).reshape(shape), x.shape)


@family("sort")
def gen_sort():
    """sort, argsort, sort_by_key and top_k: one primitive (Note [Sort])."""
    def numeric(shape, draw):
        return [[draw(shape, dt)] for dt in NUMERIC]

    srt = lambda x, axis, desc=False: sort_lines(x, x, axis, desc)
    arg = lambda x, axis, desc=False: sort_lines(x, positions(x, axis), axis, desc)
    each("sort_last", lambda x: srt(x, -1),
         numeric((3, 5), rand) + numeric((2, 6), ties) + [[rand((7,), "bool")]] +
         [[specials(dt)] for dt in FLOATS] + [[rand((0, 3), "f32")], [rand((2, 0), "i32")]])
    each("sort_descending_axis0", lambda x: srt(x, 0, True),
         numeric((4, 3), ties) + [[rand((2, 5, 3), "f64")], [specials("f32")]])
    each("argsort_last", lambda x: arg(x, -1),
         numeric((3, 6), ties) + [[ties((2, 3, 5), "f64")]] +
         [[specials(dt, r)] for dt in FLOATS for r in (0, 1)])
    each("argsort_descending_axis0", lambda x: arg(x, 0, True),
         numeric((5, 3), ties) + [[specials("f64", 2)], [ties((4, 2, 2), "i64")]])
    each("sort_by_key_axis0", lambda v, k: sort_lines(k, v, 0, False),
         [[rand((5, 3), dt), ties((5, 3), "i64")] for dt in ALL] +
         [[rand((4, 2, 3), "f64"), ties((4, 2, 3), "i64")]])
    each("top_k3_values", lambda x: sort_lines(x, x, -1, True, 3),
         numeric((2, 6), rand) + numeric((3, 5), ties) + [[specials(dt)] for dt in FLOATS])
    each("top_k3_indices", lambda x: sort_lines(x, positions(x, x.ndim - 1), -1, True, 3),
         numeric((3, 5), ties) + [[rand((2, 2, 7), "f32")]] + [[specials(dt, 3)] for dt in FLOATS])

    def index(shape, n):
        return rng.integers(-n, n, size=shape).astype(np.int64)

    each("take_along_axis_axis1", lambda x, i: np.take_along_axis(x, i, 1),
         [[rand((3, 5), dt), index((3, 4), 5)] for dt in ALL] +
         [[rand((2, 4, 3), "f64"), index((2, 2, 3), 4)], [rand((3, 5), "f32"), index((1, 2), 5)]])


# ---- collectives (include/symjax/Dist.h) -----------------------------------------------------

@family("collectives")
def gen_collectives():
    """A world of one process: every reduction over the ranks is x itself, all_gather stacks the
    one rank's x along axis 0 (a scalar becomes a vector of one), reduce_scatter keeps block 0 of
    1, broadcast_from copies rank 0's x."""
    numeric = ("u8", "i32", "i64", "u32", "f32", "f64")
    for op in ("sum", "mean", "max", "min"):
        for dt in (FLOATS if op == "mean" else numeric):
            for shape in ((), (7,), (3, 5)):
                x = rand(shape, dt)
                add("all_reduce__" + op, [x], x.copy())
                if op != "min" and shape:
                    add("reduce_scatter__" + op, [x], x.copy())
    for dt in ("bool",) + numeric:
        for shape in ((), (7,), (3, 5)):
            x = rand(shape, dt)
            add("all_gather", [x], np.reshape(x, (1,)) if x.ndim == 0 else x.copy())
            add("broadcast_from", [x], x.copy())


def main():
    global rng
    gen_unary()
    gen_binary()
    gen_reduce()
    gen_movement()
    gen_indexing()
    gen_linalg()
    gen_random()
    gen_composites()
    gen_conv()  # the random draws of the entries above stay as they were
    gen_later_ops()
    write(OUT, ENTRIES)
    for stem, fn in FAMILIES:
        ENTRIES.clear()
        rng = np.random.default_rng(zlib.crc32(stem.encode()))
        fn()
        write(os.path.join(os.path.dirname(OUT), "golden_%s.json" % stem), ENTRIES)


if __name__ == "__main__":
    main()
