"""symjax.nn from Python: layers against NumPy, optimizers against their textbook updates,
losses, schedules, initializers, state updates. Expected values come from NumPy."""
import numpy as np
import pytest

import symjax as sj
import symjax.tensor as T
from symjax import nn


def test_dense_is_x_w_plus_b():
    layer = nn.Dense(4, 3)
    x = np.random.randn(5, 4).astype(np.float32)
    out = sj.function(outputs=layer(x))()
    np.testing.assert_allclose(out, x @ layer.W.value + layer.b.value, rtol=1e-5, atol=1e-6)
    assert [v.full_name for v in layer.variables()][-2:] == [layer.W.full_name, layer.b.full_name]


def test_conv2d_matches_numpy_cross_correlation():
    layer = nn.Conv2D(2, 3, 3, padding="SAME", bias=False)
    x = np.random.randn(1, 2, 5, 5).astype(np.float32)
    out = sj.function(outputs=layer(x))()
    W = layer.W.value
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 3, 5, 5), np.float32)
    for o in range(3):
        for i in range(5):
            for j in range(5):
                want[0, o, i, j] = (xp[0, :, i:i + 3, j:j + 3] * W[o]).sum()
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_conv1d_conv2dtranspose_pooling_shapes_and_values():
    x = np.random.randn(2, 3, 8).astype(np.float32)
    assert sj.function(outputs=nn.Conv1D(3, 4, 3)(x))().shape == (2, 4, 6)
    img = np.random.randn(2, 3, 4, 4).astype(np.float32)
    assert sj.function(outputs=nn.Conv2DTranspose(3, 5, 2, strides=2)(img))().shape == (2, 5, 8, 8)
    mp = sj.function(outputs=nn.MaxPool2D(2)(img))()
    np.testing.assert_array_equal(mp, img.reshape(2, 3, 2, 2, 2, 2).max((3, 5)))
    ap = sj.function(outputs=nn.AvgPool2D(2)(img))()
    np.testing.assert_allclose(ap, img.reshape(2, 3, 2, 2, 2, 2).mean((3, 5)), rtol=1e-6)
    g = sj.function(outputs=nn.GlobalAvgPool()(img))()
    np.testing.assert_allclose(g, img.mean((2, 3)), rtol=1e-5)


def test_batch_norm_train_eval_and_state_updates():
    bn = nn.BatchNormalization(3, eps=1e-5)
    x = T.Placeholder((None, 3), "float32", name="x")
    train_out = bn(x, mode="train")
    f = sj.function(x, outputs=train_out, updates=sj.state_updates(train_out))
    data = (np.random.randn(8, 3) * 2 + 1).astype(np.float32)
    np.testing.assert_allclose(f(data), (data - data.mean(0)) / np.sqrt(data.var(0) + 1e-5),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.running_mean.value, 0.01 * data.mean(0), rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.value, 0.99 + 0.01 * data.var(0, ddof=1), rtol=1e-5)
    ev = sj.function(x, outputs=bn(x, deterministic=True))(data)
    np.testing.assert_allclose(
        ev, (data - bn.running_mean.value) / np.sqrt(bn.running_var.value + 1e-5), rtol=1e-4)


def test_dropout_embedding_random_flip_crop():
    x = np.ones((1000, 10), np.float32)
    d = nn.Dropout(0.5)
    out = sj.function(outputs=d(x))()
    assert set(np.unique(out)) <= {0.0, 2.0} and abs(out.mean() - 1) < 0.05
    np.testing.assert_array_equal(sj.function(outputs=d(x, mode="eval"))(), x)
    e = nn.Embedding(7, 3)
    idx = np.array([[0, 6], [2, 2]], np.int32)
    np.testing.assert_array_equal(sj.function(outputs=e(idx))(), e.table.value[idx])
    img = np.arange(2 * 1 * 4 * 4, dtype=np.float32).reshape(2, 1, 4, 4)
    np.testing.assert_array_equal(sj.function(outputs=nn.RandomFlip(p=1.0)(img))(), img[..., ::-1])
    crop = sj.function(outputs=nn.RandomCrop(padding=[(1, 1)], size=(4, 4))(img, mode="eval"))()
    np.testing.assert_array_equal(crop, img)


def test_sequential_and_lambda():
    net = nn.Sequential([nn.Dense(3, 4), nn.ReLU(), nn.Lambda(lambda t: t * 2.0), nn.Dense(4, 2)])
    assert len(net) == 4 and len(net.trainable_variables()) == 4
    x = np.random.randn(5, 3).astype(np.float32)
    d1, d2 = net.variables()[0:2], net.variables()[2:4]
    h = np.maximum(x @ d1[0].value + d1[1].value, 0) * 2
    np.testing.assert_allclose(sj.function(outputs=net(x))(), h @ d2[0].value + d2[1].value,
                               rtol=1e-5, atol=1e-5)


def test_activations_match_numpy():
    x = np.linspace(-3, 3, 13).astype(np.float32)
    A = nn.activations
    cases = [
        (A.relu, np.maximum(x, 0)), (A.relu6, np.clip(x, 0, 6)),
        (lambda t: A.leaky_relu(t, 0.1), np.where(x >= 0, x, 0.1 * x)),
        (A.elu, np.where(x > 0, x, np.exp(x) - 1)), (A.silu, x / (1 + np.exp(-x))),
        (A.sigmoid, 1 / (1 + np.exp(-x))), (A.softplus, np.log1p(np.exp(x))),
        (A.hard_tanh, np.clip(x, -1, 1)), (A.softmax, np.exp(x) / np.exp(x).sum()),
    ]
    for fn, want in cases:
        np.testing.assert_allclose(sj.function(outputs=fn(x))(), want, rtol=1e-5, atol=1e-6)


def test_losses_match_numpy():
    logits = np.random.randn(4, 5).astype(np.float32)
    labels = np.array([0, 4, 2, 1], np.int32)
    ls = logits - logits.max(1, keepdims=True)
    logp = ls - np.log(np.exp(ls).sum(1, keepdims=True))
    out = sj.function(outputs=nn.losses.sparse_softmax_crossentropy_logits(labels, logits))()
    np.testing.assert_allclose(out, -logp[np.arange(4), labels], rtol=1e-5)
    t = np.random.randn(4, 3).astype(np.float32)
    p = np.random.randn(4, 3).astype(np.float32)
    np.testing.assert_allclose(sj.function(outputs=nn.losses.mse(t, p))(), ((t - p) ** 2).mean(1),
                               rtol=1e-5)
    np.testing.assert_allclose(sj.function(outputs=nn.metrics.accuracy(labels, logits))(),
                               (logits.argmax(1) == labels).mean())
    with pytest.raises(sj.InputError):
        sj.function(outputs=nn.losses.sparse_softmax_crossentropy_logits(
            np.array([0, 9, 0, 0], np.int32), logits))()


def test_sgd_and_adam_follow_their_updates():
    w0 = np.array([1.0, -2.0], np.float32)
    for name in ("sgd", "adam"):
        w = T.Variable(w0.copy(), name="w_" + name)
        loss = (w * w).sum()
        opt = nn.optimizers.SGD(0.1) if name == "sgd" else nn.optimizers.Adam(0.1)
        step = sj.function(outputs=loss, updates=opt.minimize(loss))
        ref, m, v = w0.astype(np.float64), 0, 0
        for t in range(1, 4):
            step()
            g = 2 * ref
            if name == "sgd":
                ref = ref - 0.1 * g
            else:
                m = 0.9 * m + 0.1 * g
                v = 0.999 * v + 0.001 * g * g
                ref = ref - 0.1 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
            np.testing.assert_allclose(w.value, ref, rtol=1e-5)
        assert opt.step.value == 3


def test_symjax_style_optimizer_registers_updates():
    sj.current_graph().reset()
    w = T.Variable(np.float32(3.0), name="w_reg")
    loss = w * w
    nn.optimizers.SGD(loss, 0.25)
    f = sj.function(outputs=loss, updates=sj.get_updates())
    f()
    assert w.value == pytest.approx(1.5)
    sj.current_graph().reset()
    assert sj.get_updates() == {}


def test_learning_rate_schedule_callable():
    w = T.Variable(np.float32(1.0), name="w_sched")
    opt = nn.optimizers.SGD(lambda s: nn.schedules.piecewise_constant(s, [1], [0.5, 0.0]))
    f = sj.function(updates=opt.minimize(w * 1.0))
    f()
    f()
    assert w.value == pytest.approx(0.5)  # the second step has rate 0


def test_schedules_match_closed_forms():
    steps = np.arange(10)
    s = T.Placeholder((), "int32", name="s")
    f = sj.function(s, outputs=nn.schedules.exponential_decay(s, 0.1, 4, 0.5))
    np.testing.assert_allclose([f(i) for i in steps], 0.1 * 0.5 ** (steps / 4), rtol=1e-6)
    g = sj.function(s, outputs=nn.schedules.cosine_decay(s, 1.0, 8))
    np.testing.assert_allclose([g(i) for i in steps],
                               0.5 * (1 + np.cos(np.pi * np.minimum(steps, 8) / 8)), atol=1e-6)


def test_initializers_statistics():
    a = nn.initializers.he_normal(seed=1).array((400, 300))
    assert abs(a.std() - np.sqrt(2 / 400)) < 0.003
    u = nn.initializers.glorot_uniform(seed=2).array((200, 100))
    lim = np.sqrt(6 / 300)
    assert u.min() >= -lim and u.max() <= lim
    q = nn.initializers.orthogonal(seed=3).array((6, 4))
    np.testing.assert_allclose(q.T @ q, np.eye(4), atol=1e-5)
    assert nn.initializers.compute_fans((3, 4, 5, 5)) == (4 * 25, 3 * 25)


def test_parameter_ema():
    w = T.Variable(np.float32(0.0), name="w_ema")
    ema = nn.optimizers.ExponentialMovingAverage(0.5)
    upd = {w: w + 1.0}
    f = sj.function(updates={**upd, **ema.apply([w], after=upd)})
    f()
    f()
    # shadow starts at 0 (w's value when first seen); w becomes 1 then 2
    assert ema.average(w).value == pytest.approx(0.5 * (0.5 * 0 + 0.5 * 1) + 0.5 * 2)


def _forked_worker(queue, f, x):
    # runs in a fork()ed child of a process whose thread team has run (Note [Forked children]);
    # a forked Process inherits its arguments, nothing is pickled
    queue.put(f(x))


def test_a_forked_worker_runs_the_parents_function():
    """multiprocessing's fork start method after a convolution ran in the parent: the child used
    to hang in its first call (GNU OpenMP's team does not survive fork). It runs on one thread
    and gives the parent's bits."""
    import multiprocessing as mp
    layer = nn.Conv2D(3, 16, 3, padding="SAME")
    x = T.Placeholder((64, 3, 16, 16), "float32", name="x")
    f = sj.function(x, outputs=T.sum(T.exp(layer(x) * 1e-3)))
    xv = np.random.RandomState(5).randn(64, 3, 16, 16).astype(np.float32)
    parent = f(xv)
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_forked_worker, args=(queue, f, xv))
    child.start()
    try:
        got = queue.get(timeout=120)
    finally:
        child.join(timeout=10)
        if child.is_alive():
            child.kill()
    assert np.array_equal(np.asarray(got), np.asarray(parent))
