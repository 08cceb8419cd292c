"""
Adam TF and SymJAX
==================

In this example we demonstrate how to perform a simple optimization with Adam in TF and SymJAX

"""
# SymJAX's tests/comparison_test.py. Changes (tests/symjax_suite/README.md in the C++ tree has
# the reasons in full):
#  - TensorFlow is not available: TF1's and TF_EMA's numbers are read from
#    tests/symjax_suite/expected.json, computed by its gen_expected.py with NumPy; the 1000 x 500
#    regression uses that generator's hash_uniform draws instead of np.random (so the file stays
#    small), copied below bit for bit; tqdm is dropped.
#  - test_ema: SymJAX's own assertion (its debiased EMA agrees with TF's on >= 45%) fails for
#    SymJAX itself (29% on this sample); the port asserts the correct behaviour instead, as the C++
#    port does: the debiased EMA is the zero-started one over (1 - 0.9^t), and the first-value
#    EMA (start_at_first) is TF's exactly.
#  - test_adam: TF's Adam is bias-corrected from the first step; sj's Adam follows Kingma and Ba
#    (SymJAX's own first step was a raw gradient step).
#  - test_learn_bn compares against Keras layers at run time; it is skipped here (no TensorFlow)
#    and covered by the C++ port (ComparisonTest.cpp, LearnBn), whose Keras numbers are stored.
# Each changed line is marked `# sj:`.
import json
import math
import os

import numpy as np
import pytest

import symjax
import symjax.tensor as T
from symjax.nn import optimizers

_HERE = os.path.dirname(os.path.abspath(__file__))
_SRC = os.environ.get("SJ_SOURCE_DIR", os.path.join(_HERE, "..", "..", ".."))
with open(os.path.join(_SRC, "tests", "symjax_suite", "expected.json")) as _f:  # sj:
    EXPECTED = json.load(_f)

BS = 1000
D = 500


def hash_uniform(seed, shape, lo, hi):  # sj: gen_expected.py's generator
    n = int(np.prod(shape))
    with np.errstate(over="ignore"):
        z = np.uint64(seed << 32) + np.arange(n, dtype=np.uint64)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    return (lo + (hi - lo) * u).reshape(shape)


def unit(seed, shape):
    r = math.sqrt(3.0)
    return hash_uniform(seed, shape, -r, r)


def f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


X = f32(unit(1, (BS, D))).astype("float32")  # sj: hash_uniform, not np.random
Y = f32(X.astype(np.float64) @ f32(unit(2, (D, 1))) + 2).astype("float32")  # sj:


def TF1(x, y, N, lr, model, preallocate=False):  # sj: the stored TF losses
    return EXPECTED["adam"]["%s_%g" % (model, lr)][:N]


def TF_EMA(X):  # sj: the stored TF shadow values
    return EXPECTED["ema_comparison"]["tf"]


def SJ_EMA(X, debias=True, start_at_first=False):
    symjax.current_graph().reset()
    x = T.Placeholder((), "float32", name="x")
    value, _, updates, _ = symjax.nn.schedules.exponential_moving_average(  # sj:
        x, 0.9, debias=debias, start_at_first=start_at_first)
    train = symjax.function(x, outputs=value, updates=updates)  # sj:
    outputs = []
    for i in range(len(X)):
        outputs.append(train(X[i]))
    return outputs


def SJ(x, y, N, lr, model, preallocate=False):
    symjax.current_graph().reset()
    sj_input = T.Placeholder(dtype=np.float32, shape=[BS, D])
    sj_output = T.Placeholder(dtype=np.float32, shape=[BS, 1])

    sj_W = T.Variable(f32(unit(3, (D, 1))).astype("float32"))  # sj: hash_uniform
    sj_b = T.Variable(f32(unit(4, (1,))).astype("float32"))  # sj: hash_uniform

    sj_loss = ((sj_input.dot(sj_W) + sj_b - sj_output) ** 2).mean()

    if model == "SGD":
        optimizers.SGD(sj_loss, lr)
    elif model == "Adam":
        optimizers.Adam(sj_loss, lr)
    train = symjax.function(
        sj_input, sj_output, outputs=sj_loss, updates=symjax.get_updates()
    )

    losses = []
    for i in range(N):
        losses.append(train(x, y))

    return losses


@pytest.mark.skip(reason="needs TensorFlow/Keras at run time; the C++ port covers it")  # sj:
def test_learn_bn():
    pass


def test_ema():
    sample = np.array(EXPECTED["ema_comparison"]["sample"])  # sj: the stored draws
    debiased = np.array(EXPECTED["ema_comparison"]["debiased"])
    # sj: SymJAX's ">= 0.45" fails for SymJAX itself; the correct behaviour is asserted
    assert np.isclose(TF_EMA(sample), debiased, atol=1e-3).mean() < 0.45
    assert np.allclose(SJ_EMA(sample, True), debiased, atol=1e-6)
    assert np.allclose(TF_EMA(sample), SJ_EMA(sample, False, start_at_first=True), atol=1e-7)


def test_adam():

    Ns = [400]
    lrs = [0.001, 0.01, 0.1]
    for k, N in enumerate(Ns):
        for c, lr in enumerate(lrs):
            assert np.allclose(
                TF1(X, Y, N, lr, "Adam"), SJ(X, Y, N, lr, "Adam"), atol=1e-03
            )
            assert np.allclose(
                TF1(X, Y, N, lr, "SGD"), SJ(X, Y, N, lr, "SGD"), atol=1e-03
            )
