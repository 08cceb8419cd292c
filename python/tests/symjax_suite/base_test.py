#!/usr/bin/env python
# -*- coding: utf-8 -*-
# SymJAX's tests/base_test.py. Changes (docs/python.md, "Differences"):
#  - imports: jax and jax.scipy removed; test_pymc's reference log density is NumPy's closed form
#    of the normal log pdf instead of jax.scipy.stats.norm.logpdf, and its jax.grad check is the
#    closed-form gradient.
#  - test_sma: symjax.function(..., updates=symjax.get_updates()) as SymJAX (the registry).
__author__ = "Randall Balestriero"


import symjax
import numpy as np
import symjax.tensor as tt


def _norm_logpdf(x, mu, sigma):  # sj: replaces jax.scipy.stats.norm.logpdf
    return -0.5 * ((x - mu) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)


def test_add():
    a = symjax.tensor.ones(2)
    assert symjax.current_graph().get(a.max()) == 1


def test_placeholders():
    a = symjax.tensor.ones(1) * 2
    x = symjax.tensor.Placeholder((), "int32")
    f = symjax.function(x, outputs=x * a)
    y = symjax.tensor.Placeholder((), "int32")
    g = symjax.function(y, outputs=y * a)
    assert np.isclose(f(1), 2)
    assert np.isclose(g(2), 4)


def test_ema():
    symjax.current_graph().reset()
    a = symjax.tensor.Placeholder((), "float32")
    ema, var = symjax.nn.schedules.ExponentialMovingAverage(a, 0.9, debias=False)
    # t = symjax.get_variables("*num_steps*", trainable=False)
    f = symjax.function(a, outputs=[ema, var], updates=symjax.get_updates())
    current = 0

    for i in range(10):
        out = f(1)
        assert np.allclose(out[1], current)
        current = 0.9 * current + 0.1 * 1
        assert np.allclose(out[0], current)


def test_sma():
    symjax.current_graph().reset()
    a = symjax.tensor.Placeholder((4,), "float32")
    sma, var = symjax.nn.schedules.SimpleMovingAverage(a, 3)
    f = symjax.function(a, outputs=[sma, var], updates=symjax.get_updates())

    data = np.random.randn(4, 4)
    current = [data[0], data[:2].mean(0), data[:3].mean(0), data[1:4].mean(0)]

    for i in range(data.shape[0]):
        out = f(data[i])
        assert np.allclose(out[0], current[i])


def test_stop():
    a = symjax.tensor.ones(())
    b = a + a ** 2
    g = symjax.gradients(b, [a])[0]
    f = symjax.function(outputs=g)
    assert f() == 3
    b = a + symjax.tensor.stop_gradient(a ** 2)
    g = symjax.gradients(b, [a])[0]
    f = symjax.function(outputs=g)
    assert f() == 1


def test_g():
    a = symjax.tensor.ones(())
    b = symjax.tensor.Variable(1.0)
    l = a * b
    g = symjax.gradients(l, [a])[0]
    f = symjax.function(outputs=g, updates={b: b + 1.0})
    assert f() == 1
    assert f() == 2
    assert f() == 3


def test_pymc():
    class RandomVariable(symjax.tensor.Variable):
        def __init__(self, name, shape, observed):
            if observed is None:
                super().__init__(np.zeros(shape), name=name)
            else:
                super().__init__(observed, name=name, trainable=False)

        def logp(self, value):
            raise NotImplementedError()

        def random(self, sample_shape):
            raise NotImplementedError()

        @property
        def logpt(self):
            return self.logp(self)

    class Normal(RandomVariable):
        def __init__(self, name, mu, sigma, shape=None, observed=None):
            self.mu = mu
            self.sigma = sigma
            super().__init__(name, shape, observed)

        def logp(self, value):
            tau = self.sigma ** -2.0
            return (-tau * (value - self.mu) ** 2 + tt.log(tau / np.pi / 2.0)) / 2.0

        def random(self, sample_shape):
            return np.random.randn(sample_shape) * self.sigma + self.mu

    x = Normal("x", 0, 10.0)
    s = Normal("s", 0.0, 5.0)
    y = Normal("y", x, tt.exp(s))

    assert symjax.current_graph().get(y) == 0.0

    #################
    model_logpt = x.logpt + s.logpt + y.logpt

    f = symjax.function(x, s, y, outputs=model_logpt)

    normal_loglike = _norm_logpdf  # sj: NumPy's closed form

    def f_(x, s, y):
        return (
            normal_loglike(x, 0.0, 10.0)
            + normal_loglike(s, 0.0, 5.0)
            + normal_loglike(y, x, np.exp(s))
        )

    for i in range(10):
        x_val = np.random.randn() * 10.0
        s_val = np.random.randn() * 5.0
        y_val = np.random.randn() * 0.1 + x_val

        np.testing.assert_allclose(
            f(x_val, s_val, y_val), f_(x_val, s_val, y_val), rtol=1e-06
        )

    model_dlogpt = symjax.gradients(model_logpt, [x, s, y])

    f_with_grad = symjax.function(x, s, y, outputs=[model_logpt, model_dlogpt])

    out = f_with_grad(x_val, s_val, y_val)

    # sj: jax.grad(f_) replaced by the closed-form gradient of f_
    es = np.exp(s_val)
    grad = [
        -x_val / 100.0 + (y_val - x_val) / es ** 2,
        -s_val / 25.0 - 1.0 + (y_val - x_val) ** 2 / es ** 2,
        -(y_val - x_val) / es ** 2,
    ]
    np.testing.assert_allclose(np.array(out[1], dtype=np.float64), grad, rtol=1e-6)


def test_stack():
    u = tt.Variable(tt.ones((2,)))
    output = tt.stack([u, 2 * u, 3 * u])
    f = symjax.function(outputs=output)
    assert np.allclose(f(), (np.arange(3)[:, None] + 1) * np.ones((3, 2)))
    print(f())
    print(f())


def test_grad():
    w = tt.Placeholder((), "float32")
    v = tt.Variable(1.0, dtype="float32")
    x = w * v + 2
    #    symjax.nn.optimizers.Adam(x, 0.001)
    g = symjax.gradients(x.sum(), [v])[0]
    f = symjax.function(w, outputs=g)
    assert f(1) == 1
    assert f(10) == 10
