"""Sorting (Note [Sort] in src/ops/Sort.cpp): sort, argsort, top_k, sort_by_key and the names
built on them (median, quantile, percentile and their nan versions, searchsorted, partition),
each against NumPy on the same inputs, compiled on the cpu backend, with static dims and with a
dim of unknown size; gradients against their closed forms."""
import numpy as np
import pytest

import symjax as sj
import symjax.tensor as T

rng = np.random.RandomState(7)


def run(fn, *arrays, dynamic=False):
    phs = [T.Placeholder(tuple(None if dynamic and i == 0 else d for i, d in enumerate(a.shape)),
                         a.dtype, name="in%d" % k) for k, a in enumerate(arrays)]
    return sj.function(*phs, outputs=fn(*phs))(*arrays)


def tied(shape, dtype=np.float32):
    """Values with many ties, NaNs, infinities and both zeros."""
    pool = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, 1.5, -2.0, 1.5, 3.0, -2.0], np.float64)
    return pool[rng.randint(0, len(pool), size=shape)].astype(dtype)


def stable_descending(x, axis):
    """NumPy has no descending stable sort: positions by (not NaN, -value), position order
    among equals (lexsort's last key is the primary one)."""
    xm = np.moveaxis(x, axis, -1)
    out = np.empty(xm.shape, np.int64)
    for idx in np.ndindex(xm.shape[:-1]):
        line = xm[idx].astype(np.float64)
        nan = np.isnan(line)
        out[idx] = np.lexsort((np.arange(len(line)), -np.where(nan, 0, line), ~nan))
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_sort_and_argsort_follow_numpys_stable_sort(dtype, axis, dynamic):
    x = tied((6, 9, 4), np.float64)
    if dtype not in (np.float32, np.float64):
        x = np.nan_to_num(x, nan=7.0, posinf=9.0, neginf=-9.0)
        x = np.abs(x) if dtype == np.uint8 else x
    x = x.astype(dtype)
    np.testing.assert_array_equal(run(lambda p: T.sort(p, axis), x, dynamic=dynamic),
                                  np.sort(x, axis, kind="stable"))
    np.testing.assert_array_equal(run(lambda p: T.argsort(p, axis), x, dynamic=dynamic),
                                  np.argsort(x, axis, kind="stable"))
    want = stable_descending(x, axis)
    got = run(lambda p: T.argsort(p, axis, descending=True), x, dynamic=dynamic)
    np.testing.assert_array_equal(got, want)
    got = run(lambda p: T.sort(p, axis, descending=True), x, dynamic=dynamic)
    np.testing.assert_array_equal(got, np.take_along_axis(x, want, axis))


def test_sort_of_the_flattened_tensor_and_the_methods():
    x = tied((3, 5))
    np.testing.assert_array_equal(run(lambda p: T.sort(p, axis=None), x),
                                  np.sort(x, axis=None, kind="stable"))
    np.testing.assert_array_equal(run(lambda p: p.argsort(), x), np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(run(lambda p: p.sort(axis=0), x), np.sort(x, 0, kind="stable"))
    np.testing.assert_array_equal(run(lambda p: T.msort(p), x), np.sort(x, 0, kind="stable"))
    # partition and argpartition return the whole sort: it meets NumPy's contract for any kth
    got = run(lambda p: T.partition(p, 2, axis=1), x)
    np.testing.assert_array_equal(got[:, 2], np.partition(x, 2, axis=1)[:, 2])
    got = run(lambda p: T.argpartition(p, 3), x)
    np.testing.assert_array_equal(np.take_along_axis(x, got, 1)[:, 3],
                                  np.partition(x, 3, axis=1)[:, 3])


def test_a_long_line_and_many_lines_on_the_thread_team():
    # big enough for the cpu kernel's team (Note [Sorting packed keys]), with ties and NaNs
    x = tied((3, 20000))
    np.testing.assert_array_equal(run(lambda p: T.argsort(p, 1), x), np.argsort(x, 1, kind="stable"))
    y = rng.randn(4000, 33).astype(np.float64)
    np.testing.assert_array_equal(run(lambda p: T.sort(p, 0), y), np.sort(y, 0))


@pytest.mark.parametrize("dynamic", [False, True])
def test_top_k_is_laxs(dynamic):
    x = tied((5, 11))
    values, indices = run(lambda p: list(T.top_k(p, 4)), x, dynamic=dynamic)
    want = stable_descending(x, 1)[:, :4]
    np.testing.assert_array_equal(indices, want)
    np.testing.assert_array_equal(values, np.take_along_axis(x, want, 1))
    # k = 0 and k = n
    assert run(lambda p: T.top_k(p, 0)[0], x).shape == (5, 0)
    np.testing.assert_array_equal(run(lambda p: T.top_k(p, 11)[1], x), stable_descending(x, 1))


def test_top_k_larger_than_the_axis_is_an_error_naming_it():
    p = T.Placeholder((3, 4), "float32", name="logits")
    with pytest.raises(Exception, match="k = 5 is more than the 4 elements"):
        T.top_k(p, 5)
    q = T.Placeholder((3, None), "float32", name="scores")
    f = sj.function(q, outputs=T.top_k(q, 5)[0])
    assert f(np.zeros((3, 6), np.float32)).shape == (3, 5)
    with pytest.raises(Exception, match="k = 5 is more than the 4 elements"):
        f(np.zeros((3, 4), np.float32))


def test_sort_by_key_moves_values_of_any_dtype():
    keys = rng.randint(0, 3, size=(4, 7)).astype(np.int64)
    for values in (rng.randn(4, 7), rng.randint(-9, 9, size=(4, 7)).astype(np.int32),
                   rng.rand(4, 7) > 0.5):
        perm = np.argsort(keys, 1, kind="stable")
        got = run(lambda k, v: T.sort_by_key(k, v, 1), keys, values)
        np.testing.assert_array_equal(got, np.take_along_axis(values, perm, 1))
    with pytest.raises(Exception, match="values"):
        T.sort_by_key(T.Placeholder((3, 4), "int64"), T.Placeholder((3, 5), "float32"))


def test_gradients_put_the_cotangent_back():
    x = rng.randn(4, 6)
    w = rng.randn(4, 6)
    p = T.Placeholder(x.shape, "float64", name="x")
    g = sj.function(p, outputs=sj.gradients(T.sum(T.sort(p, 1, descending=True) * w), [p])[0])(x)
    perm = stable_descending(x, 1)
    want = np.zeros_like(x)
    np.put_along_axis(want, perm, w, 1)
    np.testing.assert_array_equal(g, want)
    # top_k: the dropped positions get nothing
    wk = rng.randn(4, 2)
    g = sj.function(p, outputs=sj.gradients(T.sum(T.top_k(p, 2)[0] * wk), [p])[0])(x)
    want = np.zeros_like(x)
    np.put_along_axis(want, perm[:, :2], wk, 1)
    np.testing.assert_array_equal(g, want)
    # on a dim of unknown size
    q = T.Placeholder((None, 6), "float64", name="x")
    g = sj.function(q, outputs=sj.gradients(T.sum(T.top_k(q, 2)[0] * wk), [q])[0])(x)
    np.testing.assert_array_equal(g, want)


def data_with_nans():
    x = rng.randn(5, 8, 3)
    x[1, 2, 0] = np.nan
    x[3, :, 1] = np.nan  # one whole line of NaNs along axis 1
    return x


METHODS = ["linear", "lower", "higher", "midpoint", "nearest"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("axis", [None, 0, 1, 2])
def test_quantile_and_percentile_match_numpy(method, axis):
    x = rng.randn(5, 8, 3)
    for q in (0.5, 0.0, 1.0, 0.3, [0.1, 0.25, 0.9]):
        got = run(lambda p: T.quantile(p, q, axis=axis, method=method), x)
        np.testing.assert_allclose(got, np.quantile(x, q, axis=axis, method=method),
                                   rtol=1e-13, atol=1e-14)
    got = run(lambda p: T.percentile(p, [12.5, 50], axis=axis, method=method, keepdims=True), x)
    np.testing.assert_allclose(
        got, np.percentile(x, [12.5, 50], axis=axis, method=method, keepdims=True),
        rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_median_and_the_nan_versions_match_numpy(axis):
    for n in (7, 8):  # odd and even lengths
        x = rng.randn(n, 4).astype(np.float32)
        np.testing.assert_allclose(run(lambda p: T.median(p, axis=axis), x),
                                   np.median(x, axis=axis), rtol=1e-6)
    x = data_with_nans()
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for a in (axis, 2):
                np.testing.assert_allclose(run(lambda p: T.median(p, axis=a), x),
                                           np.median(x, axis=a), rtol=1e-13)
                np.testing.assert_allclose(run(lambda p: T.nanmedian(p, axis=a), x),
                                           np.nanmedian(x, axis=a), rtol=1e-13)
                for method in METHODS:
                    got = run(lambda p: T.nanquantile(p, [0.2, 0.75], axis=a, method=method), x)
                    want = np.nanquantile(x, [0.2, 0.75], axis=a, method=method)
                    np.testing.assert_allclose(got, want, rtol=1e-13, err_msg=method)
                got = run(lambda p: T.nanpercentile(p, 40, axis=a, keepdims=True), x)
                np.testing.assert_allclose(got, np.nanpercentile(x, 40, axis=a, keepdims=True),
                                           rtol=1e-13)


def test_median_gradient():
    x = rng.randn(3, 6)  # an even length: the two middle entries get half each
    p = T.Placeholder(x.shape, "float64", name="x")
    g = sj.function(p, outputs=sj.gradients(T.sum(T.median(p, axis=1)), [p])[0])(x)
    order = np.argsort(x, 1)
    want = np.zeros_like(x)
    np.put_along_axis(want, order[:, 2:4], 0.5, 1)
    np.testing.assert_allclose(g, want, atol=1e-15)


def test_quantile_errors():
    p = T.Placeholder((3, 4), "float32", name="x")
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        T.quantile(p, 1.5)
    with pytest.raises(ValueError, match="method"):
        T.quantile(p, 0.5, method="cubic")
    with pytest.raises(ValueError, match="unknown until the call"):
        T.median(T.Placeholder((None, 4), "float32", name="x"), axis=0)
    # a dim of unknown size elsewhere is fine
    x = rng.randn(5, 4).astype(np.float32)
    np.testing.assert_allclose(run(lambda q: T.median(q, axis=1), x, dynamic=True),
                               np.median(x, axis=1), rtol=1e-6)


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_matches_numpy(side):
    a = np.sort(np.array([0.5, 1.0, 1.0, 2.0, 3.5, np.inf, np.nan, np.nan]))
    v = np.array([[-1.0, 0.5, 1.0, 1.5], [3.5, 4.0, np.inf, np.nan]])
    np.testing.assert_array_equal(run(lambda x, y: T.searchsorted(x, y, side=side), a, v),
                                  np.searchsorted(a, v, side=side))
    ai = np.array([1, 3, 3, 7], np.int32)
    vi = np.array([0, 3, 8], np.int32)
    np.testing.assert_array_equal(run(lambda x, y: T.searchsorted(x, y, side=side), ai, vi),
                                  np.searchsorted(ai, vi, side=side))
    unsorted = np.array([3.0, 1.0, 2.0])
    sorter = np.argsort(unsorted)
    got = run(lambda x, s: T.searchsorted(x, 2.5, side=side, sorter=s), unsorted, sorter)
    assert got == np.searchsorted(unsorted, 2.5, side=side, sorter=sorter)


@pytest.mark.parametrize("dynamic", [False, True])
def test_take_along_axis_on_dims_of_unknown_size(dynamic):
    x = rng.randn(4, 6, 3)
    i = rng.randint(-6, 6, size=(4, 2, 3))
    got = run(lambda a, b: T.take_along_axis(a, b, 1), x, i, dynamic=dynamic)
    np.testing.assert_array_equal(got, np.take_along_axis(x, i, 1))
    order = run(lambda a: T.take_along_axis(a, T.argsort(a, 0), 0), x, dynamic=dynamic)
    np.testing.assert_array_equal(order, np.sort(x, 0))


def test_take_along_axis_out_of_range_is_an_error_when_the_function_runs():
    x = np.arange(6.0).reshape(2, 3)
    for shape in ((2, 3), (2, None)):
        p = T.Placeholder(shape, "float64", name="x")
        q = T.Placeholder((2, 1), "int64", name="i")
        f = sj.function(p, q, outputs=T.take_along_axis(p, q, 1))
        np.testing.assert_array_equal(f(x, np.array([[-1], [2]])), [[2.0], [5.0]])
        with pytest.raises(Exception, match="out of range"):
            f(x, np.array([[0], [3]]))
