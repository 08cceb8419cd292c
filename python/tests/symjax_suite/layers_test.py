"""
Batch-Normalization example
===========================

example of batch-normalization classification
"""
# SymJAX's tests/layers_test.py. Changes (docs/python.md, "Differences"):
#  - layers are modules built with their sizes and then called on a tensor
#    (nn.layers.Dense(input, 64) is nn.layers.Dense(DIM, 64)(input)), not bare-tensor functions;
#  - `deterministic` is chosen when the graph is built (a Python bool), not a bool placeholder
#    fed at call time: where SymJAX calls one function with deterministic = 0 and = 1, the port
#    builds one function per mode;
#  - BatchNormalization(input, [1]) (SymJAX's axis = the kept feature axis) is
#    BatchNormalization(DIM, eps=1e-3) (statistics over every axis but 1; SymJAX's epsilon given)
#    and its running-statistics updates are collected with symjax.state_updates(out) instead of
#    the global registry; its running mean is read from bn.running_mean;
#  - RandomFlip(input, axis=2, p=0.5) is RandomFlip(p=0.5, axes=2)(input).
# Each changed line is marked `# sj:`.


import symjax.tensor as T
import symjax as sj
import symjax
from symjax import nn
import numpy as np


def test_bn():
    np.random.seed(0)
    sj.current_graph().reset()
    BATCH_SIZE = 5
    DIM = 2
    input = T.Placeholder((BATCH_SIZE, DIM), "float32", name="input")

    bnl = nn.layers.BatchNormalization(DIM, eps=1e-3)  # sj:
    bn = bnl(input, deterministic=False)  # sj:

    update = sj.function(input, outputs=bn, updates=sj.state_updates(bn))  # sj:
    avmean = bnl.running_mean  # sj:
    print(avmean)
    get_stats = sj.function(input, outputs=avmean)  # sj: avmean, not avmean[0]

    data = np.random.randn(50, DIM) * 4 + 2

    true_means = [np.zeros(DIM)]
    actual_means = [np.zeros(DIM)]

    for i in range(10):
        batch = data[BATCH_SIZE * i : BATCH_SIZE * (i + 1)]

        output = update(batch)  # sj: deterministic chosen above
        assert np.allclose(
            output,
            (batch - batch.mean(0)) / np.sqrt(0.001 + batch.var(0)),
            1e-4,
        )

        actual_means.append(get_stats(batch))
        true_means.append(0.99 * true_means[-1] + 0.01 * batch.mean(0))

    true_means = np.array(true_means)
    actual_means = np.array(actual_means).squeeze()
    assert np.allclose(true_means, actual_means)


def test_dropout():
    np.random.seed(0)
    sj.current_graph().reset()
    BATCH_SIZE = 4096
    DIM = 8
    input = T.Placeholder((BATCH_SIZE, DIM), "float32", name="input")

    layer = nn.layers.Dropout(p=0.2)  # sj:

    update = sj.function(input, outputs=layer(input, deterministic=False))  # sj:
    infer = sj.function(input, outputs=layer(input, deterministic=True))  # sj:

    data = np.ones((BATCH_SIZE, DIM))

    output1 = update(data)
    output2 = update(data)
    output3 = infer(data)

    assert not np.allclose(output1, output2, 1e-1)
    assert np.allclose(output1.mean(0) / 2 + output2.mean(0) / 2, 1, 0.08)
    assert np.all(output3)


def test_global_pool():
    np.random.seed(0)
    sj.current_graph().reset()
    BATCH_SIZE = 4096
    DIM = 8
    input = T.Placeholder((BATCH_SIZE, DIM), "float32", name="input")

    output = nn.layers.Dense(DIM, 64)(input)  # sj:
    output = nn.layers.Dense(output.shape[-1], output.shape[-1] * 2)(output)  # sj:
    output = nn.layers.Dense(output.shape[-1], output.shape[-1] * 2)(output)  # sj:
    get = sj.function(input, outputs=output)
    assert get(np.ones((BATCH_SIZE, DIM))).shape == (BATCH_SIZE, 64 * 4)


def test_flip():
    np.random.seed(0)
    sj.current_graph().reset()
    BATCH_SIZE = 2048
    DIM = 8
    input = T.Placeholder((BATCH_SIZE, DIM, DIM), "float32", name="input")

    layer = nn.layers.RandomFlip(p=0.5, axes=2)  # sj:
    update = sj.function(input, outputs=layer(input, deterministic=False))  # sj:
    infer = sj.function(input, outputs=layer(input, deterministic=True))  # sj:

    data = np.ones((BATCH_SIZE, DIM, DIM))
    data[:, :, : DIM // 2] = 0
    output1 = update(data)
    output2 = update(data)
    output3 = infer(data)

    assert not np.allclose(output1, output2, 1e-1)
    assert np.allclose(output1.mean(0) / 2 + output2.mean(0) / 2, 0.5, 0.05)
    assert np.allclose(data, output3, 1e-6)
