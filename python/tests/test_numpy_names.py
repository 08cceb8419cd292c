"""NumPy's names that symjax.tensor composes from its ops (the section "more of NumPy's names" of
python/symjax/tensor.py), each against NumPy itself on the same inputs, compiled and on the cpu
backend; gradients against the closed-form derivatives."""
import numpy as np
import pytest

import symjax as sj
import symjax.tensor as T


def run(fn, *arrays, dynamic=False):
    phs = [T.Placeholder(tuple(None if dynamic and i == 0 else d for i, d in enumerate(a.shape)),
                         a.dtype, name="in%d" % k) for k, a in enumerate(arrays)]
    out = fn(*phs)
    return sj.function(*phs, outputs=out)(*arrays)


X = np.array([-3.5, -1.0, -0.7, -1e-4, -0.0, 0.0, 2e-5, 0.3, 0.999, 1.0, 4.2, 30.0, 95.0],
             np.float32)
UNIT = np.array([-1.0, -0.999, -0.5, -1e-4, 0.0, 3e-6, 0.25, 0.7, 0.9999, 1.0], np.float32)
ONE_UP = np.array([1.0, 1.0 + 2e-7, 1.001, 1.5, 2.0, 10.0, 1e5, 3e9, 1e30], np.float32)

# name, inputs, float32 tolerance in ulp-scaled relative terms
ELEMENTWISE = [
    ("arctan", X), ("arcsin", UNIT), ("arccos", UNIT), ("sinh", X), ("cosh", X),
    ("arcsinh", np.concatenate([X, np.float32([3e9, -1e30])])), ("arccosh", ONE_UP),
    ("arctanh", UNIT), ("cbrt", X), ("exp2", X[:-1]), ("trunc", X), ("fix", X), ("rint", X),
    ("deg2rad", X), ("rad2deg", X), ("radians", X), ("degrees", X), ("sinc", X),
    ("fabs", X), ("positive", X),
]


@pytest.mark.parametrize("name,x", ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
def test_unary_functions_match_numpy(name, x):
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x.astype(np.float64)).astype(np.float32)
    got = run(getattr(T, name), x)
    # a few float32 ulp: the composites round a handful of times more than NumPy's libm. sinc's
    # zeros at the integers are sin of float32(pi) * k, 1e-7 off zero (NumPy's float32 sinc too)
    atol = 1e-7 if name == "sinc" else 1e-37
    np.testing.assert_allclose(got, want, rtol=4e-6, atol=atol, err_msg=name)
    np.testing.assert_array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))


def test_sinh_and_cosh_stay_finite_up_to_their_own_overflow():
    x = np.float32([88.0, 89.0, -89.0])
    np.testing.assert_allclose(run(T.sinh, x), np.sinh(x.astype(np.float64)), rtol=4e-6)
    np.testing.assert_allclose(run(T.cosh, x), np.cosh(x.astype(np.float64)), rtol=4e-6)
    assert np.all(np.isinf(run(T.cosh, np.float32([89.5, 90.0, -90.0]))))


DERIVATIVES = {
    "arcsin": lambda x: 1 / np.sqrt(1 - x * x), "arccos": lambda x: -1 / np.sqrt(1 - x * x),
    "arctan": lambda x: 1 / (1 + x * x), "sinh": np.cosh, "cosh": np.sinh,
    "arcsinh": lambda x: 1 / np.sqrt(x * x + 1), "arctanh": lambda x: 1 / (1 - x * x),
    "sinc": lambda x: np.where(x == 0, 0.0, (np.cos(np.pi * x) * np.pi * x - np.sin(np.pi * x))
                               / (np.pi * x * x + (x == 0))),
}


@pytest.mark.parametrize("name", sorted(DERIVATIVES))
def test_gradients_are_the_closed_form_derivatives(name):
    x = np.array([-0.9, -0.4, 0.0, 1e-3, 0.35, 0.8], np.float64)
    p = T.Placeholder(x.shape, "float64", name="x")
    g = sj.function(p, outputs=sj.gradients(T.sum(getattr(T, name)(p)), [p])[0])(x)
    np.testing.assert_allclose(g, DERIVATIVES[name](x), rtol=1e-12, atol=1e-12, err_msg=name)


def test_arccosh_gradient():
    x = np.array([1.5, 2.0, 10.0], np.float64)
    p = T.Placeholder(x.shape, "float64", name="x")
    g = sj.function(p, outputs=sj.gradients(T.sum(T.arccosh(p)), [p])[0])(x)
    np.testing.assert_allclose(g, 1 / np.sqrt(x * x - 1), rtol=1e-12)


BINARY = [
    ("copysign", np.float32([1.5, -2.0, 3.0, 0.0, -0.0, 4.0]),
     np.float32([-1.0, 2.0, -0.0, -3.0, 5.0, 0.0])),
    ("fmod", np.float32([7.5, -7.5, 7.5, -7.5, 6.0, 0.0]),
     np.float32([2.0, 2.0, -2.0, -2.0, 3.0, 2.0])),
    ("logaddexp", np.float32([0.0, 100.0, -np.inf, np.inf, -50.0, 3.0]),
     np.float32([0.0, 99.0, -np.inf, np.inf, 40.0, -np.inf])),
    ("logaddexp2", np.float32([0.0, 100.0, -3.0, 1.0]), np.float32([0.0, 99.0, 8.0, -np.inf])),
    ("heaviside", np.float32([-2.0, 0.0, 3.0, np.nan, -0.0]),
     np.float32([0.5, 0.5, 0.5, 0.5, 7.0])),
    ("fmax", np.float32([1.0, np.nan, 3.0, np.nan]), np.float32([2.0, 4.0, np.nan, np.nan])),
    ("fmin", np.float32([1.0, np.nan, 3.0, np.nan]), np.float32([2.0, 4.0, np.nan, np.nan])),
    ("float_power", np.float32([2.0, 9.0, 0.5]), np.float32([10.0, 0.5, -3.0])),
]


@pytest.mark.parametrize("name,a,b", BINARY, ids=[e[0] for e in BINARY])
def test_binary_functions_match_numpy(name, a, b):
    want = getattr(np, name)(a, b)
    got = run(getattr(T, name), a, b)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=2e-6, err_msg=name)


def test_fmod_of_integers():
    a = np.array([7, -7, 7, -7, 6], np.int32)
    b = np.array([2, 2, -2, -2, 3], np.int32)
    np.testing.assert_array_equal(run(T.fmod, a, b), np.fmod(a, b))


def test_predicates_match_numpy():
    x = np.float32([-np.inf, -1.0, -0.0, 0.0, 2.0, np.inf, np.nan])
    for name in ("signbit", "isposinf", "isneginf"):
        np.testing.assert_array_equal(run(getattr(T, name), x), getattr(np, name)(x), err_msg=name)
    np.testing.assert_array_equal(run(T.nan_to_num, x), np.nan_to_num(x))
    np.testing.assert_array_equal(run(lambda v: T.nan_to_num(v, nan=5.0, posinf=9.0, neginf=-9.0),
                                      x), np.nan_to_num(x, nan=5.0, posinf=9.0, neginf=-9.0))
    a = np.float32([1.0, 1.0 + 1e-6, np.inf, np.inf, np.nan, 1e-9])
    b = np.float32([1.0, 1.0, np.inf, -np.inf, np.nan, 0.0])
    np.testing.assert_array_equal(run(T.isclose, a, b), np.isclose(a, b))
    np.testing.assert_array_equal(run(lambda u, v: T.isclose(u, v, equal_nan=True), a, b),
                                  np.isclose(a, b, equal_nan=True))
    assert bool(run(T.allclose, a[:2], b[:2])) and not bool(run(T.allclose, a, b))


rng = np.random.RandomState(3)
A = rng.randn(2, 3, 4).astype(np.float32)


@pytest.mark.parametrize("dynamic", [False, True])
def test_axis_moves_match_numpy(dynamic):
    for fn, want in [
        (lambda x: T.moveaxis(x, 0, -1), np.moveaxis(A, 0, -1)),
        (lambda x: T.moveaxis(x, [0, 2], [2, 0]), np.moveaxis(A, [0, 2], [2, 0])),
        (lambda x: T.moveaxis(x, [-1, 0], [0, 1]), np.moveaxis(A, [-1, 0], [0, 1])),
        (lambda x: T.swapaxes(x, 0, 2), np.swapaxes(A, 0, 2)),
        (lambda x: T.diff(x), np.diff(A)), (lambda x: T.diff(x, 2, 0), np.diff(A, 2, 0)),
        (lambda x: T.count_nonzero(x > 0, 1), np.count_nonzero(A > 0, 1)),
        (lambda x: T.ptp(x, 2), np.ptp(A, 2)),
        (lambda x: T.append(x, x[:, :1], axis=1), np.append(A, A[:, :1], axis=1)),
    ]:
        np.testing.assert_allclose(run(fn, A, dynamic=dynamic), want, rtol=1e-6)


def test_shape_functions_match_numpy():
    cases = [
        (lambda x: T.tile(x, 2), np.tile(A, 2)), (lambda x: T.tile(x, (2, 1, 1, 3)),
                                                  np.tile(A, (2, 1, 1, 3))),
        (lambda x: T.roll(x, 2, 2), np.roll(A, 2, 2)),
        (lambda x: T.roll(x, -1, 0), np.roll(A, -1, 0)),
        (lambda x: T.roll(x, 5), np.roll(A, 5)), (lambda x: T.roll(x, (1, -2), (1, 2)),
                                                  np.roll(A, (1, -2), (1, 2))),
        (lambda x: T.split(x, 2, 2), np.split(A, 2, 2)),
        (lambda x: T.array_split(x, 3, 2), np.array_split(A, 3, 2)),
        (lambda x: T.split(x, [1, 3], 1), np.split(A, [1, 3], 1)),
        (lambda x: T.hsplit(x, 3), np.hsplit(A, 3)), (lambda x: T.vsplit(x, 2), np.vsplit(A, 2)),
        (lambda x: T.dsplit(x, [1]), np.dsplit(A, [1])),
        (lambda x: T.tril(x), np.tril(A)), (lambda x: T.triu(x, 1), np.triu(A, 1)),
        (lambda x: T.tril(x, -1), np.tril(A, -1)),
        (lambda x: T.kron(x[0], x[1, :2]), np.kron(A[0], A[1, :2])),
        (lambda x: T.vdot(x, x), np.vdot(A, A)),
        (lambda x: T.average(x, 1, weights=np.float32([1, 2, 3])),
         np.average(A, 1, weights=np.float32([1, 2, 3]))),
        (lambda x: T.trapz(x), np.trapz(A)),
        (lambda x: T.trapz(x, np.float32([0, 1, 3, 6]), axis=2),
         np.trapz(A, np.float32([0, 1, 3, 6]), axis=2)),
        (lambda x: T.cov(x[0]), np.cov(A[0])),
        (lambda x: T.cov(x[0], rowvar=False), np.cov(A[0], rowvar=False)),
        (lambda x: T.corrcoef(x[1]), np.corrcoef(A[1])),
        (lambda x: T.polyval([2.0, -1.0, 0.5], x), np.polyval([2.0, -1.0, 0.5], A)),
        (lambda x: T.vander(x[0, 0]), np.vander(A[0, 0])),
        (lambda x: T.vander(x[0, 0], 3, increasing=True), np.vander(A[0, 0], 3, increasing=True)),
        (lambda x: T.diagflat(x[0, 0], 1), np.diagflat(A[0, 0], 1)),
        (lambda x: T.dstack([x[0], x[1]]), np.dstack([A[0], A[1]])),
        (lambda x: T.atleast_3d(x[0, 0]), np.atleast_3d(A[0, 0])),
        (lambda x: T.atleast_2d(x[0, 0]), np.atleast_2d(A[0, 0])),
    ]
    for k, (fn, want) in enumerate(cases):
        got = run(fn, A)
        if isinstance(want, list):
            assert len(got) == len(want), k
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-5, err_msg=str(k))
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=str(k))
    np.testing.assert_array_equal(T.tri(3, 4, 1, "int32").get(), np.tri(3, 4, 1, np.int32))


def test_meshgrid_and_take_along_axis_match_numpy():
    x, y, z = np.float32([1, 2, 3]), np.float32([4, 5]), np.float32([6, 7, 8, 9])
    for indexing in ("xy", "ij"):
        got = run(lambda a, b, c: T.meshgrid(a, b, c, indexing=indexing), x, y, z)
        for g, w in zip(got, np.meshgrid(x, y, z, indexing=indexing)):
            np.testing.assert_array_equal(g, w)
    idx = rng.randint(-4, 4, (2, 3, 5))
    np.testing.assert_array_equal(run(lambda a: T.take_along_axis(a, idx, 2), A),
                                  np.take_along_axis(A, idx % 4, 2))
    idx = np.argmax(A, axis=1)[:, None, :]
    np.testing.assert_array_equal(run(lambda a: T.take_along_axis(a, idx, 1), A),
                                  np.take_along_axis(A, idx, 1))


EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ijk->kj", [(2, 3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]),
    ("iij->j", [(3, 3, 4)]), ("ij,ij->i", [(3, 4), (3, 4)]), ("ji,jk->ik", [(4, 3), (4, 5)]),
]


@pytest.mark.parametrize("spec,shapes", EINSUM, ids=[e[0] for e in EINSUM])
def test_einsum_matches_numpy(spec, shapes):
    arrays = [rng.randn(*s) for s in shapes]
    np.testing.assert_allclose(run(lambda *xs: T.einsum(spec, *xs), *arrays),
                               np.einsum(spec, *arrays), rtol=1e-12, atol=1e-12)


def test_einsum_gradient_and_errors():
    a, b = rng.randn(3, 4), rng.randn(4, 5)
    pa = T.Placeholder(a.shape, "float64", name="a")
    pb = T.Placeholder(b.shape, "float64", name="b")
    w = rng.randn(3, 5)
    g = sj.function(pa, pb, outputs=sj.gradients(T.sum(T.einsum("ij,jk->ik", pa, pb) * w),
                                                 [pa, pb]))(a, b)
    np.testing.assert_allclose(g[0], w @ b.T, rtol=1e-12)
    np.testing.assert_allclose(g[1], a.T @ w, rtol=1e-12)
    with pytest.raises(ValueError, match="ellipsis"):
        T.einsum("...ij->...ji", pa)
    with pytest.raises(ValueError, match="2 operands"):
        T.einsum("ij->ji", pa, pb)
    with pytest.raises(ValueError, match="rank 2"):
        T.einsum("ijk->k", pa)


def test_shape_errors_are_clear():
    x = T.Placeholder((None, 4), "float32", name="x")
    with pytest.raises(ValueError, match="axis 0 of x has a size unknown until the call"):
        T.roll(x, 1, 0)
    with pytest.raises(ValueError, match="does not split into 3 equal sections"):
        T.split(x, 3, 1)
    with pytest.raises(ValueError, match="out of bounds"):
        T.swapaxes(x, 0, 2)


def test_more_names_match_numpy():
    v = rng.randn(4, 3).astype(np.float32)
    w = rng.randn(4, 3).astype(np.float32)
    n = v.copy()
    n[1, 2] = n[3, 0] = np.nan
    cases = [
        (lambda a, b: T.cross(a, b), np.cross(v, w)),
        (lambda a, b: T.broadcast_arrays(a[:, :1], b[0]), np.broadcast_arrays(v[:, :1], w[0])),
        (lambda a, b: T.rot90(a), np.rot90(v)), (lambda a, b: T.rot90(a, 2), np.rot90(v, 2)),
        (lambda a, b: T.rot90(a, 3), np.rot90(v, 3)),
        (lambda a, b: T.rot90(a, -1), np.rot90(v, -1)),
        (lambda a, b: T.ediff1d(a), np.ediff1d(v)),
        (lambda a, b: T.array(a, "float64"), v.astype(np.float64)),
        (lambda a, b: T.conj(a) + T.real(b), v + w),
    ]
    for k, (fn, want) in enumerate(cases):
        got = run(fn, v, w)
        for g, e in zip(got if isinstance(want, list) else [got],
                        want if isinstance(want, list) else [want]):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=str(k))
    for name, args in [("nanprod", (1,)), ("nancumsum", (0,)), ("nanvar", (0,)), ("nanstd", (1,)),
                       ("nanvar", ()), ("nanprod", ())]:
        np.testing.assert_allclose(run(lambda a: getattr(T, name)(a, *args), n),
                                   getattr(np, name)(n, *args), rtol=1e-5, err_msg=name)
    np.testing.assert_allclose(T.logspace(0, 3, 4).get(), np.logspace(0, 3, 4), rtol=1e-6)
    np.testing.assert_array_equal(T.empty((2, 3)).get(), np.zeros((2, 3), np.float32))
