"""symjax.vmap (T.vmap): results against NumPy's loop over the batch and closed forms."""
import numpy as np
import pytest

import symjax as sj
import symjax.tensor as T


def test_matches_numpy_loop():
    x = T.Placeholder((4, 3), "float64", name="x")
    w = T.Placeholder((3, 2), "float64", name="w")
    f = sj.vmap(lambda row, m: T.tanh(T.matmul(row, m)) + T.sum(row), in_axes=(0, None))
    y = f(x, w)
    fn = sj.function(x, w, outputs=y)
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    want = np.stack([np.tanh(r @ wv) + r.sum() for r in xv])
    np.testing.assert_allclose(fn(xv, wv), want, rtol=1e-12, atol=1e-12)


def test_pytrees_axes_and_nesting():
    x = T.Placeholder((3, 2), "float64", name="x")
    y = T.Placeholder((2, 5), "float64", name="y")
    v = T.Placeholder((4, 3), "float64", name="v")
    # a dict and an array mapped along its last axis in, a tuple out (stacked along 0 and 1)
    f = sj.vmap(lambda d, c: (d["a"] * 2.0, T.sum(d["b"]) + c), in_axes=(0, -1), out_axes=(0, 1))
    a2, sb = f({"a": x, "b": x * 3.0}, v)
    dist = sj.vmap(sj.vmap(lambda p, q: T.sum((p - q) ** 2), in_axes=(None, 0)), in_axes=(0, None))
    d = dist(x, T.transpose(y))
    fn = sj.function(x, y, v, outputs=[a2, sb, d])
    rng = np.random.default_rng(1)
    xv, yv, vv = rng.standard_normal((3, 2)), rng.standard_normal((2, 5)), rng.standard_normal((4, 3))
    r = fn(xv, yv, vv)
    np.testing.assert_allclose(r[0], xv * 2, rtol=1e-12)
    # example i: sum(3 x_i) + v[:, i] (a [4] vector), stacked along axis 1 -> [4, 3]
    np.testing.assert_allclose(r[1], (3 * xv).sum(1)[None, :] + vv, rtol=1e-12)
    want = ((xv[:, None, :] - yv.T[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(r[2], want, rtol=1e-12)


def test_per_example_gradients_closed_form():
    # logistic regression: d loss_i / d w = (sigmoid(x_i . w) - y_i) x_i
    x = T.Placeholder((6, 3), "float64", name="x")
    lab = T.Placeholder((6,), "float64", name="lab")
    w = T.Variable(np.array([0.3, -0.2, 0.5]), name="w_vmap")

    def loss_grad(xi, yi):
        p = T.sigmoid(T.sum(xi * w))
        return sj.gradients(-(yi * T.log(p) + (1 - yi) * T.log(1 - p)), [w])[0]

    g = sj.vmap(loss_grad)(x, lab)
    fn = sj.function(x, lab, outputs=g)
    rng = np.random.default_rng(2)
    xv, yv = rng.standard_normal((6, 3)), (rng.random(6) > 0.5).astype(np.float64)
    p = 1 / (1 + np.exp(-(xv @ np.array([0.3, -0.2, 0.5]))))
    np.testing.assert_allclose(fn(xv, yv), (p - yv)[:, None] * xv, rtol=1e-10, atol=1e-12)


def test_errors():
    x = T.Placeholder((4, 3), "float32", name="x")
    y = T.Placeholder((5, 3), "float32", name="y")
    with pytest.raises(sj.ShapeError, match="argument 1 \\(y\\)"):
        sj.vmap(lambda a, b: a + b)(x, y)
    with pytest.raises(sj.TypeError, match="1 in_axes for 2 arguments"):
        sj.vmap(lambda a, b: a + b, in_axes=(0,))(x, y)
    with pytest.raises(ZeroDivisionError):  # the function's own exception comes through
        sj.vmap(lambda a: 1 / 0)(x)
