#!/usr/bin/python3
"""Expected values of tests/symjax_suite, the port of SymJAX's own test suite.

Everything here is computed with NumPy and torch (the stand-ins for the NumPy, JAX, SciPy and
TensorFlow values SymJAX's tests compare against), never with symjax. Regenerate with

    /usr/bin/python3 tests/symjax_suite/gen_expected.py

which rewrites tests/symjax_suite/expected.json; running it twice gives the same bytes.

Inputs small enough to store are drawn exactly as SymJAX's tests draw them (np.random.seed(0) and
the same calls, so the same numbers). The large inputs of comparison_test.py (a 1000 x 500
regression problem, 128 images of 3 x 32 x 32 per epoch) would make the file megabytes: both
sides draw them instead from `hash_uniform`, a counter-based generator (splitmix64 of
seed * 2^32 + index) that tests/symjax_suite/SuiteUtil.h implements bit for bit.
"""
import json
import math
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
M64 = (1 << 64) - 1


def hash_uniform(seed, shape, lo, hi):
    """Uniform values in [lo, hi): splitmix64(seed * 2^32 + i) >> 11, times 2^-53, for each
    flat index i (f64). SuiteUtil.h's hash_uniform is the same function."""
    n = int(np.prod(shape))
    with np.errstate(over="ignore"):
        z = np.uint64(seed << 32) + np.arange(n, dtype=np.uint64)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return (lo + (hi - lo) * u).reshape(shape)


def unit(seed, shape):
    """hash_uniform scaled to mean 0 and variance 1 (stands in for np.random.randn)."""
    r = math.sqrt(3.0)
    return hash_uniform(seed, shape, -r, r)


def f32(a):
    """What a float32 placeholder holds."""
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def short(x):
    """Nested lists of floats with 9 significant digits (float32 is exact to about 7)."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 0:
        return float("%.9g" % a)
    return [short(v) for v in a]


# ---- base_test.py: test_pymc ----
def pymc():
    """Log density of x ~ N(0, 10), s ~ N(0, 5), y ~ N(x, exp(s)) and its gradient, at the
    draws of test_pymc (np.random.seed(0) added: SymJAX's test draws unseeded)."""
    np.random.seed(0)
    rows = []
    for _ in range(10):
        x_val = np.random.randn() * 10.0
        s_val = np.random.randn() * 5.0
        y_val = np.random.randn() * 0.1 + x_val
        x, s, y = (torch.tensor(v, dtype=torch.float64, requires_grad=True)
                   for v in f32([x_val, s_val, y_val]))
        n = torch.distributions.Normal
        logp = (n(0.0, 10.0).log_prob(x) + n(0.0, 5.0).log_prob(s)
                + n(x, torch.exp(s)).log_prob(y))
        logp.backward()
        rows.append({"x": short(x.item()), "s": short(s.item()), "y": short(y.item()),
                     "logp": short(logp.item()),
                     "grad": short([x.grad.item(), s.grad.item(), y.grad.item()])})
    return rows


# ---- base_test.py: test_sma ----
def sma():
    """The 3-window simple moving average of 4 vectors of 4 (np.random.seed(0) added)."""
    np.random.seed(0)
    data = f32(np.random.randn(4, 4))
    current = [data[0], data[:2].mean(0), data[:3].mean(0), data[1:4].mean(0)]
    return {"data": short(data), "sma": short(current)}


# ---- layers_test.py: test_bn ----
def batch_norm():
    """Train-mode batch norm of ten batches of 5 x 2 (eps 1e-3) and the running means with
    momentum 0.99, with test_bn's data."""
    np.random.seed(0)
    data = f32(np.random.randn(50, 2) * 4 + 2)
    outputs, true_means = [], [np.zeros(2)]
    for i in range(10):
        batch = data[5 * i:5 * (i + 1)]
        outputs.append((batch - batch.mean(0)) / np.sqrt(0.001 + batch.var(0)))
        true_means.append(0.99 * true_means[-1] + 0.01 * batch.mean(0))
    return {"data": short(data), "outputs": short(outputs), "true_means": short(true_means)}


# ---- comparison_test.py: test_ema ----
def ema_comparison():
    """tf.train.ExponentialMovingAverage(decay=0.9) over 100 draws: the shadow starts at the first
    value and moves by shadow -= (1 - decay) (shadow - x) on each apply. Also SymJAX's debiased
    EMA (zero start, divided by 1 - 0.9^t), which test_ema checks agrees with TF's on 45%."""
    np.random.seed(0)
    sample = f32(np.random.randn(100))
    shadow, tf_out = sample[0], []
    for v in sample:
        shadow -= (1 - 0.9) * (shadow - v)
        tf_out.append(shadow)
    biased, debiased = 0.0, []
    for t, v in enumerate(sample, 1):
        biased = 0.9 * biased + 0.1 * v
        debiased.append(biased / (1 - 0.9**t))
    return {"sample": short(sample), "tf": short(tf_out), "debiased": short(debiased)}


# ---- nn/schedules.py doctest: ExponentialMovingAverage ----
DOC_EMA_PRINTED = [
    [1.5292157, 1.1200472], [1.5056562, 1.1752692], [1.5111173, 1.1284239],
    [1.4885082, 1.1110408], [1.4365609, 1.1122546], [1.3972261, 1.1446574],
    [1.3803346, 1.1338419], [1.355617, 1.1304679], [1.3648777, 1.1112664],
    [1.3377819, 1.0745169], [1.227414, 1.0866737], [1.2306056, 1.0557414],
    [1.2756376, 1.0065362], [1.2494465, 1.000267], [1.2704852, 1.0443211],
    [1.2480851, 1.0512339], [1.196643, 0.9866866], [1.1665413, 0.9927084],
    [1.186796, 1.029509], [1.1564965, 1.017489], [1.1093903, 0.97313946],
    [1.0472631, 1.0343488], [1.0272473, 1.0177717], [0.9869387, 1.0393193],
    [0.93982786, 1.029005]]


def doc_ema():
    """The doctest's 25 inputs (np.random.seed(0); ones(2) + randn(2) * 0.3) and its printed EMA:
    decay 0.9, starting at the first input (the first_step variable of the SymJAX version that
    printed them). Checked here against the printed numbers."""
    np.random.seed(0)
    inputs = [f32(np.ones(2) + np.random.randn(2) * 0.3) for _ in range(25)]
    ema, out = None, []
    for v in inputs:
        ema = v if ema is None else 0.9 * ema + 0.1 * v
        out.append(ema)
    assert np.allclose(out, DOC_EMA_PRINTED, rtol=0, atol=1e-6), "doctest numbers not reproduced"
    return {"inputs": short(inputs), "ema": short(out)}


# ---- comparison_test.py: test_adam ----
ADAM_BS, ADAM_D, ADAM_N = 1000, 500, 400


def adam_problem():
    """X [1000, 500], Y = X w + 2, the initial W [500, 1] and b [1] (hash_uniform seeds 1-4)."""
    X = f32(unit(1, (ADAM_BS, ADAM_D)))
    Y = f32(X @ f32(unit(2, (ADAM_D, 1))) + 2)
    return X, Y, f32(unit(3, (ADAM_D, 1))), f32(unit(4, (1,)))


def adam_comparison():
    """Losses of 400 full-batch steps of TF1's GradientDescentOptimizer and AdamOptimizer
    (defaults: beta1 0.9, beta2 0.999, epsilon 1e-8, applied as
    lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), p -= lr_t m / (sqrt(v) + eps)) on
    mean((X W + b - Y)^2), in float64, for lr 0.001, 0.01 and 0.1."""
    X, Y, W0, b0 = adam_problem()
    out = {}
    for lr in [0.001, 0.01, 0.1]:
        for model in ["SGD", "Adam"]:
            W, b = W0.copy(), b0.copy()
            mW, vW, mb, vb = 0 * W, 0 * W, 0 * b, 0 * b
            losses = []
            for t in range(1, ADAM_N + 1):
                r = X @ W + b - Y
                losses.append(np.mean(r**2))
                gW = 2 * X.T @ r / ADAM_BS
                gb = 2 * r.sum(0) / ADAM_BS
                if model == "SGD":
                    W, b = W - lr * gW, b - lr * gb
                else:
                    lr_t = lr * math.sqrt(1 - 0.999**t) / (1 - 0.9**t)
                    mW, mb = 0.9 * mW + 0.1 * gW, 0.9 * mb + 0.1 * gb
                    vW, vb = 0.999 * vW + 0.001 * gW**2, 0.999 * vb + 0.001 * gb**2
                    W = W - lr_t * mW / (np.sqrt(vW) + 1e-8)
                    b = b - lr_t * mb / (np.sqrt(vb) + 1e-8)
            out["%s_%g" % (model, lr)] = short(losses)
    return out


# ---- comparison_test.py: test_learn_bn ----
BN_BATCH, BN_EPOCHS = 128, 10
BN_PRED_SAMPLE, BN_W2_SAMPLE = 256, 512


def learn_bn_inputs(epoch):
    """The epoch's images [128, 3, 32, 32] and labels [128] (hash_uniform seeds 100+, 200+)."""
    x = f32(unit(100 + epoch, (BN_BATCH, 3, 32, 32)))
    y = np.floor(hash_uniform(200 + epoch, (BN_BATCH,), 0, 10)).astype(np.int64)
    return x, y


def learn_bn():
    """Keras' conv 5x5 (3 -> 2, VALID) + BatchNormalization (momentum 0.99, eps 1e-3) + relu +
    flatten (channels last) + dense (1568 -> 10) with SGD(0.001) on the mean sparse softmax
    cross-entropy, as torch in float64. Per epoch: the predictions in inference mode, the
    predictions, loss and gradients in training mode (that forward also moves the running
    statistics, as Keras' does, with the unbiased batch variance), then one SGD step. Stored:
    the sampled predictions and dense-W gradient entries the test checks (see the test), the
    other gradients whole, in symjax's layouts (W OIHW, W2 [in, out])."""
    W = torch.tensor(f32(unit(10, (2, 3, 5, 5))), requires_grad=True)
    cb = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    gamma = torch.ones(2, dtype=torch.float64, requires_grad=True)
    beta = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    W2 = torch.tensor(f32(unit(11, (2 * 28 * 28, 10))), requires_grad=True)
    b2 = torch.zeros(10, dtype=torch.float64, requires_grad=True)
    params = [W, cb, gamma, beta, W2, b2]
    rmean = torch.zeros(2, dtype=torch.float64)
    rvar = torch.ones(2, dtype=torch.float64)
    pred_idx = np.floor(hash_uniform(20, (BN_PRED_SAMPLE,), 0, BN_BATCH * 10)).astype(np.int64)
    w2_idx = np.floor(hash_uniform(21, (BN_W2_SAMPLE,), 0, W2.numel())).astype(np.int64)

    def forward(x, training):
        h = torch.nn.functional.conv2d(x, W, cb)
        h = torch.nn.functional.batch_norm(h, rmean, rvar, gamma, beta, training, 0.01, 1e-3)
        h = torch.relu(h).permute(0, 2, 3, 1).reshape(x.shape[0], -1)
        return h @ W2 + b2

    epochs = []
    for epoch in range(BN_EPOCHS):
        x, y = learn_bn_inputs(epoch)
        xt, yt = torch.tensor(x), torch.tensor(y)
        with torch.no_grad():
            preds_eval = forward(xt, False)
        preds = forward(xt, True)
        loss = torch.nn.functional.cross_entropy(preds, yt)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p -= 0.001 * g
        epochs.append({
            "preds_eval": short(preds_eval.numpy().reshape(-1)[pred_idx]),
            "preds_train": short(preds.detach().numpy().reshape(-1)[pred_idx]),
            "loss": short(loss.item()),
            "grad_W": short(grads[0].numpy().reshape(-1)),
            "grad_b": short(grads[1].numpy()),
            "grad_gamma": short(grads[2].numpy()),
            "grad_beta": short(grads[3].numpy()),
            "grad_W2": short(grads[4].numpy().reshape(-1)[w2_idx]),
            "grad_b2": short(grads[5].numpy()),
        })
    return {"pred_index": pred_idx.tolist(), "w2_index": w2_idx.tolist(), "epochs": epochs}


def main():
    out = {
        "hash_uniform_check": short(hash_uniform(7, (5,), -1, 1)),
        "pymc": pymc(),
        "sma": sma(),
        "batch_norm": batch_norm(),
        "ema_comparison": ema_comparison(),
        "doc_ema": doc_ema(),
        "adam": adam_comparison(),
        "learn_bn": learn_bn(),
    }
    path = os.path.join(HERE, "expected.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
