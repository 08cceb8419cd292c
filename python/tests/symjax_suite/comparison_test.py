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
#  - test_learn_bn: Keras's model is replaced by its stored predictions, loss and gradients
#    (gen_expected.py's torch twin in float64); the layers are modules whose weights are assigned,
#    the mode is chosen when the graph is built, the model is made in a Scope so that
#    get_variables(scope=...) lists its variables only, and the training function adds batch
#    norm's state updates (get_updates(outputs=loss)).
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


def test_learn_bn():

    symjax.current_graph().reset()
    import symjax.nn as nn

    learn = EXPECTED["learn_bn"]  # sj: Keras's numbers, stored (torch in float64)
    pred_index = np.array(learn["pred_index"])
    w2_index = np.array(learn["w2_index"])

    batch_size = 128

    W = f32(unit(10, (2, 3, 5, 5))).astype("float32")  # sj: OIHW, hash_uniform
    W2 = f32(unit(11, (2 * 28 * 28, 10))).astype("float32")  # sj: [in, out], hash_uniform

    input = T.Placeholder((batch_size, 3, 32, 32), "float32")
    label = T.Placeholder((batch_size,), "int32")

    with symjax.Scope("learn_bn"):  # sj: so get_variables sees this model's variables only
        conv = nn.layers.Conv2D(3, 2, (5, 5))  # sj: modules, weights assigned
        conv.W.update(W)
        bn = nn.layers.BatchNormalization(2, momentum=0.99, eps=1e-3)  # sj: Keras's eps
        dense = nn.layers.Dense(2 * 28 * 28, 10)
        dense.W.update(W2)

    def model(deterministic):  # sj: the mode is chosen when the graph is built
        out = bn(conv(input), deterministic=deterministic)
        out = nn.relu(out)
        out = out.transpose((0, 2, 3, 1)).reshape((batch_size, -1))
        return dense(out)

    out = model(False)
    loss = nn.losses.sparse_softmax_crossentropy_logits(label, out).mean()
    nn.optimizers.SGD(loss, 0.001)
    f_eval = symjax.function(input, outputs=model(True))  # sj: deterministic=1
    f = symjax.function(input, label, outputs=[loss, out])
    g = symjax.function(
        input,
        label,
        outputs=symjax.gradients(loss, symjax.get_variables(scope="/learn_bn/", trainable=True)),
    )
    train = symjax.function(
        input,
        label,
        outputs=loss,
        updates=symjax.get_updates(outputs=loss),  # sj: + batch norm's state updates
    )
    names = ["grad_W", "grad_b", "grad_gamma", "grad_beta", "grad_W2", "grad_b2"]

    for epoch in range(10):
        # generate some random inputs and labels (sj: hash_uniform, as the stored numbers)
        x = f32(unit(100 + epoch, (batch_size, 3, 32, 32))).astype("float32")
        y = np.floor(hash_uniform(200 + epoch, (batch_size,), 0, 10)).astype("int32")
        ref = learn["epochs"][epoch]

        # test predictions during testing mode
        preds = np.array(ref["preds_eval"])
        nb = np.isclose(preds, f_eval(x).reshape(-1)[pred_index], atol=1e-3).mean()
        print("preds not training", nb)
        assert nb > 0.8

        # test prediction during training mode
        preds = np.array(ref["preds_train"])
        nb = np.isclose(preds, f(x, y)[1].reshape(-1)[pred_index], atol=1e-3).mean()
        print("preds training", nb)
        assert nb > 0.8

        # test loss function during training
        losss = f(x, y)[0]
        print("losses", losss, ref["loss"])
        assert np.abs(losss - ref["loss"]) < 1e-3

        # test the gradients
        sj_grads = g(x, y)
        for name, sj_g in zip(names, sj_grads):
            tf_g = np.array(ref[name])
            sj_g = np.reshape(sj_g, -1)
            if name == "grad_W2":
                sj_g = sj_g[w2_index]
            nb = np.isclose(sj_g, tf_g, atol=1e-3).mean()
            print("grads training", nb)
            assert nb >= 0.5

        train(x, y)


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
