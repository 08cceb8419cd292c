"""Searching and counting (include/symjax/Search.h): unique, nonzero, argwhere, flatnonzero,
lexsort, searchsorted, digitize, bincount and histogram, each against NumPy on the same inputs,
compiled on the cpu backend, with static dims and with a dim of unknown size. Where JAX asks
for a static size, the expected value is NumPy's result cut or padded as JAX documents."""
import numpy as np
import pytest

import symjax as sj
import symjax.tensor as T

rng = np.random.RandomState(11)


def run(fn, *arrays, dynamic=False):
    phs = [T.Placeholder(tuple(None if dynamic and i == 0 else d for i, d in enumerate(a.shape)),
                         a.dtype, name="in%d" % k) for k, a in enumerate(arrays)]
    out = fn(*phs)
    many = isinstance(out, tuple)
    got = sj.function(*phs, outputs=list(out) if many else out)(*arrays)
    return tuple(got) if many else got


def tied(shape, dtype=np.float32):
    pool = np.array([np.nan, -np.inf, np.inf, 0.0, 1.5, -2.0, 1.5, 3.0, -2.0, 7.0], np.float64)
    return pool[rng.randint(0, len(pool), size=shape)].astype(dtype)


def pad(a, size, fill):
    a = np.asarray(a)[:size]
    return np.concatenate([a, np.full(size - len(a), fill, a.dtype)])


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("size", [1, 4, 12])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_unique_is_numpys_cut_or_padded(dtype, size, dynamic):
    x = tied((5, 4), np.float64)
    if dtype not in (np.float32, np.float64):
        x = np.nan_to_num(x, nan=5.0, posinf=9.0, neginf=-9.0)
    x = x.astype(dtype)
    vals, index, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                             return_counts=True, equal_nan=True)
    got = run(lambda p: T.unique(p, True, True, True, size=size), x, dynamic=dynamic)
    np.testing.assert_array_equal(got[0], pad(vals, size, vals[0]))
    np.testing.assert_array_equal(got[1], pad(index, size, 0))
    # entries cut off point at the last slot kept (JAX's and MLX's clamp)
    np.testing.assert_array_equal(got[2], np.minimum(inverse.reshape(x.shape), size - 1))
    np.testing.assert_array_equal(got[3], pad(counts, size, 0))
    got = run(lambda p: T.unique(p, size=size, fill_value=-1), x, dynamic=dynamic)
    np.testing.assert_array_equal(got, pad(vals, size, -1))


def test_unique_nan_rules_and_the_array_api_names():
    x = np.array([np.nan, 2.0, np.nan, 1.0, 2.0], np.float32)
    np.testing.assert_array_equal(run(lambda p: T.unique(p, size=4, equal_nan=False), x),
                                  np.unique(x, equal_nan=False)[:4])
    r = run(lambda p: tuple(T.unique_all(p, size=3)), x)
    np.testing.assert_array_equal(r[0], [1, 2, np.nan])
    np.testing.assert_array_equal(r[1], [3, 1, 0])
    np.testing.assert_array_equal(r[2], [2, 1, 2, 0, 1])
    np.testing.assert_array_equal(r[3], [1, 2, 2])
    p = T.Placeholder((5,), "float32")
    assert T.unique_counts(p, size=2)._fields == ("values", "counts")
    assert T.unique_inverse(p, size=2)._fields == ("values", "inverse_indices")
    np.testing.assert_array_equal(run(lambda p: T.unique_values(p, size=2), x), [1, 2])
    with pytest.raises(ValueError, match="size= is needed"):
        T.unique(p)
    with pytest.raises(ValueError, match="axis="):
        T.unique(p, axis=0, size=2)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("size", [2, 7, 30])
def test_nonzero_argwhere_flatnonzero(size, dynamic):
    x = (rng.rand(3, 4, 5) > 0.7).astype(np.float32) * rng.randn(3, 4, 5).astype(np.float32)
    want = np.nonzero(x)
    got = run(lambda p: T.nonzero(p, size=size, fill_value=-1), x, dynamic=dynamic)
    assert len(got) == 3
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, pad(w, size, -1))
    aw = np.argwhere(x)[:size]
    aw = np.concatenate([aw, np.zeros((size - len(aw), 3), aw.dtype)])
    np.testing.assert_array_equal(run(lambda p: T.argwhere(p, size=size), x, dynamic=dynamic),
                                  aw)
    np.testing.assert_array_equal(
        run(lambda p: T.flatnonzero(p, size=size), x, dynamic=dynamic),
        pad(np.flatnonzero(x), size, 0))
    b = x != 0
    np.testing.assert_array_equal(run(lambda p: T.flatnonzero(p, size=size), b),
                                  pad(np.flatnonzero(b), size, 0))


@pytest.mark.parametrize("axis", [0, -1])
def test_lexsort_is_numpys(axis):
    keys = [rng.randint(0, 3, size=(6, 7)).astype(np.int32), tied((6, 7)),
            rng.randint(0, 2, size=(6, 7)).astype(np.int64)]
    np.testing.assert_array_equal(run(lambda *p: T.lexsort(p, axis), *keys),
                                  np.lexsort(keys, axis))
    stacked = np.stack([k.astype(np.float32) for k in keys])
    np.testing.assert_array_equal(run(lambda p: T.lexsort(p, axis), stacked),
                                  np.lexsort(stacked, axis))


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("n", [0, 1, 6, 33])
def test_searchsorted_both_sides(n, dynamic):
    a = np.sort(tied(n, np.float32))
    v = tied((4, 5), np.float32)
    for side in ("left", "right"):
        got = run(lambda pa, pv: T.searchsorted(pa, pv, side=side), a, v, dynamic=dynamic)
        np.testing.assert_array_equal(got, np.searchsorted(a, v, side=side))
    perm = rng.permutation(n)
    got = run(lambda pa, pv, ps: T.searchsorted(pa, pv, sorter=ps), a[perm], v,
              np.argsort(a[perm], kind="stable"))
    np.testing.assert_array_equal(got, np.searchsorted(a, v))


@pytest.mark.parametrize("right", [False, True])
def test_digitize(right):
    x = np.concatenate([rng.randn(40) * 3, [np.nan, np.inf, -np.inf, 0.0, 1.0]])
    for bins in (np.array([-2.0, -1.0, 0.0, 0.0, 1.0, 4.0]), np.array([4.0, 1.0, 0.0, -3.0])):
        np.testing.assert_array_equal(run(lambda px, pb: T.digitize(px, pb, right), x, bins),
                                      np.digitize(x, bins, right))
    f = sj.function(*(ph := [T.Placeholder((3,), "float64"), T.Placeholder((3,), "float64")]),
                    outputs=T.digitize(*ph))
    with pytest.raises(Exception, match="monotonic"):
        f(np.zeros(3), np.array([0.0, 2.0, 1.0]))


def test_bincount():
    x = rng.randint(0, 9, size=50).astype(np.int32)
    w = rng.rand(50)
    np.testing.assert_array_equal(run(lambda p: T.bincount(p, length=12), x, dynamic=True),
                                  np.bincount(x, minlength=12))
    np.testing.assert_allclose(run(lambda p, q: T.bincount(p, q, length=6), x, w),
                               np.bincount(x, w)[:6], rtol=1e-12)
    with pytest.raises(ValueError, match="length= is needed"):
        T.bincount(T.Placeholder((3,), "int32"))
    f = sj.function(ph := T.Placeholder((3,), "int32"), outputs=T.bincount(ph, length=4))
    with pytest.raises(Exception, match="bincount"):
        f(np.array([1, -1, 2], np.int32))


@pytest.mark.parametrize("dynamic", [False, True])
def test_histogram(dynamic):
    x = rng.randn(300).astype(np.float64)
    w = rng.rand(300)
    for bins in (1, 10, 17):
        h, e = run(lambda p: T.histogram(p, bins), x, dynamic=dynamic)
        wh, we = np.histogram(x, bins)
        np.testing.assert_allclose(e, we, rtol=1e-14, atol=1e-14)
        np.testing.assert_array_equal(h, wh)
    # integer-valued data on exact edges, a range, weights, density
    xi = rng.randint(-3, 12, size=200).astype(np.float32)
    for kw in ({"range": (0, 8)}, {"range": (0, 8), "density": True}):
        h, e = run(lambda p: T.histogram(p, 4, **kw), xi)
        wh, we = np.histogram(xi, 4, **kw)
        np.testing.assert_allclose(h, wh, rtol=1e-6)
        np.testing.assert_array_equal(e, we)
    h, _ = run(lambda p, q: T.histogram(p, 5, weights=q), x, w)
    np.testing.assert_allclose(h, np.histogram(x, 5, weights=w)[0], rtol=1e-12)
    edges = np.array([-2.0, -0.5, 0.0, 3.0])
    h, e = run(lambda p, q: T.histogram(p, q), x, edges)
    np.testing.assert_array_equal(h, np.histogram(x, edges)[0])
    np.testing.assert_array_equal(e, edges)
    # an integer input takes float64 edges, as NumPy
    xi = rng.randint(0, 5, size=20).astype(np.int64)
    h, e = run(lambda p: T.histogram(p, 3), xi)
    np.testing.assert_array_equal(h, np.histogram(xi, 3)[0])
    assert e.dtype == np.float64
    np.testing.assert_allclose(e, np.histogram(xi, 3)[1], rtol=1e-15)
