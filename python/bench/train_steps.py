"""The Python front end against PyTorch from the same interpreter (bench/run python): one training
step of the MLP of symjax_bench mlp_train (784-512-512-10, ReLU, softmax cross-entropy, SGD with
momentum 0.9, batch 128) and of the brief CNN of symjax_bench cnn_train (two [conv3x3-BN-ReLU] x2
+ maxpool stages, dense 4096 -> 10, Adam 1e-3, batch 32), written with symjax's Python API and
with PyTorch eager (torch.set_num_threads(--threads)), on one fixed random batch. The two are
timed in alternating samples (each at least --min-sample-s long; the median of --repeats), so
that a change of load on the machine reaches both. One JSON line per result:

  bench "python_train", case "mlp_train"/"cnn_train", impl "symjax-python" or "torch-eager":
      value = steps/s (MLP) or images/s (CNN), ms_per_step
  impl "ratio": value = symjax-python / torch-eager; with --cpp-mlp/--cpp-cnn (the C++ rows'
      values, which bench/run passes), also cpp_ratio = symjax C++ / torch-eager and
      python_vs_cpp = symjax-python / symjax C++; python_vs_cpp_loop: symjax-python against
      the same step called from a C++ loop in this process (impl "symjax-cpp-loop"), sampled in
      the same rounds.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/train_steps.py --threads 2
"""
import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--cases", default="mlp_train,cnn_train")
    p.add_argument("--mlp-batch", type=int, default=128)
    p.add_argument("--cnn-batch", type=int, default=32)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--min-sample-s", type=float, default=0.3)
    p.add_argument("--cpp-mlp", type=float, default=0.0, help="symjax_bench mlp_train steps/s")
    p.add_argument("--cpp-cnn", type=float, default=0.0, help="symjax_bench cnn_train images/s")
    return p.parse_args()


A = parse()
# thread counts are read when the libraries load: before numpy, symjax and torch
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "SJ_NUM_THREADS"):
    os.environ[var] = str(A.threads)

import numpy as np  # noqa: E402

import symjax as sj  # noqa: E402
import symjax.tensor as T  # noqa: E402
from symjax import nn  # noqa: E402

import torch  # noqa: E402

torch.set_num_threads(A.threads)


def emit(record):
    out = {"bench": "python_train", "threads": A.threads, **record,
           "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
           "python": platform.python_version(), "torch": torch.__version__}
    for k, v in list(out.items()):
        if isinstance(v, float):
            out[k] = float(f"{v:.6g}")
    print(json.dumps(out), flush=True)


def cpu_busy():
    """(all CPUs' busy seconds, this process's CPU seconds) for the foreign-load fraction."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    r = resource.getrusage(resource.RUSAGE_SELF)
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK"), r.ru_utime + r.ru_stime


def measure_pair(fns, native=None):
    """Seconds per call of each fn (a dict name -> fn): warm-up, an inner loop calibrated to
    min_sample_s per sample, then `repeats` rounds taking one sample of each in turn; medians.
    `native` (name -> fn(n)) are loops that run their n calls themselves (in C++). Also the
    fraction of the machine's CPU other processes used meanwhile."""
    native = native or {}
    calls = dict(fns)
    calls.update({name: (lambda f=f: f(1)) for name, f in native.items()})
    inner = {}
    for name, fn in calls.items():
        for _ in range(A.warmup):
            fn()
        t = time.perf_counter()
        fn()
        inner[name] = max(1, int(np.ceil(A.min_sample_s / max(time.perf_counter() - t, 1e-7))))
    samples = {name: [] for name in calls}
    busy0, own0 = cpu_busy()
    t0 = time.perf_counter()
    for _ in range(A.repeats):
        for name, fn in calls.items():
            t = time.perf_counter()
            if name in native:
                native[name](inner[name])
            else:
                for _ in range(inner[name]):
                    fn()
            samples[name].append((time.perf_counter() - t) / inner[name])
    wall = time.perf_counter() - t0
    busy1, own1 = cpu_busy()
    foreign = max(0.0, (busy1 - busy0) - (own1 - own0)) / (wall * (os.cpu_count() or 1))
    return {name: statistics.median(s) for name, s in samples.items()}, round(foreign, 3)


def linear_init(rng, fan_in, shape):
    # PyTorch's nn.Linear default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    b = 1.0 / np.sqrt(fan_in)
    return rng.uniform(-b, b, shape).astype(np.float32)


def mlp_case():
    B, H = A.mlp_batch, 512
    rng = np.random.RandomState(7)
    xb = rng.randn(B, 784).astype(np.float32)
    yb = (np.arange(B) % 10).astype(np.int32)

    # symjax: symjax_bench's Mlp, node for node
    dims = [784, H, H, 10]
    with sj.Scope("python_train_mlp"):
        params = []
        for l in range(3):
            params.append(T.Variable(linear_init(rng, dims[l], (dims[l], dims[l + 1])),
                                     name="W%d" % l))
            params.append(T.Variable(linear_init(rng, dims[l], (dims[l + 1],)), name="b%d" % l))
        x = T.Placeholder((None, 784), "float32", name="x")
        y = T.Placeholder((None,), "int32", name="y")
        h = x
        for l in range(3):
            h = h @ params[2 * l] + params[2 * l + 1]
            if l < 2:
                h = T.maximum(h, 0.0)
        loss = -(T.one_hot(y, 10) * T.log_softmax(h, 1)).sum(1).mean()
        grads = sj.gradients(loss, params)
        updates = {}
        for p, g in zip(params, grads):
            v = T.Variable(np.zeros(p.shape, np.float32), name="v_" + p.name, trainable=False)
            nv = v * 0.9 + g  # torch.optim.SGD(momentum=0.9, dampening=0)
            updates[v] = nv
            updates[p] = p - 0.01 * nv
    step = sj.function(x, y, outputs=loss, updates=updates)

    torch.manual_seed(0)
    tx, ty = torch.from_numpy(xb), torch.from_numpy(yb.astype(np.int64))
    model = torch.nn.Sequential(torch.nn.Linear(784, H), torch.nn.ReLU(), torch.nn.Linear(H, H),
                                torch.nn.ReLU(), torch.nn.Linear(H, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def torch_step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(tx), ty)
        loss.backward()
        opt.step()
        return loss

    return ({"symjax-python": lambda: step(xb, yb), "torch-eager": torch_step},
            {"symjax-cpp-loop": lambda n: step._call_repeated(n, xb, yb)}, 1.0, "steps/s")


def cnn_case():
    B = A.cnn_batch
    rng = np.random.RandomState(11)
    xb = rng.randn(B, 3, 32, 32).astype(np.float32)
    yb = rng.randint(0, 10, B).astype(np.int32)

    # symjax: symjax_bench's cnn("brief"), layer for layer
    with sj.Scope("python_train_cnn"):
        layers, cin = [], 3
        for cout in (32, 32, 0, 64, 64, 0):
            if cout == 0:
                layers.append(nn.MaxPool2D(2))
                continue
            layers += [nn.Conv2D(cin, cout, 3, padding="SAME", bias=False), nn.BatchNorm(cout),
                       nn.ReLU()]
            cin = cout
        net = nn.Sequential(layers + [nn.Flatten(), nn.Dense(64 * 8 * 8, 10)])
    x = T.Placeholder((None, 3, 32, 32), "float32", name="images")
    y = T.Placeholder((None,), "int32", name="labels")
    loss = nn.losses.sparse_softmax_crossentropy_logits(y, net(x, mode="train")).mean()
    adam = nn.optimizers.Adam(1e-3)
    step = sj.function(x, y, outputs=loss, updates={
        **adam.minimize(loss, net.trainable_variables()), **sj.state_updates(loss)})

    # PyTorch: ../shared/bench/torch_cnn.py's build(nn, "brief")
    tnn = torch.nn
    torch.manual_seed(0)

    def block(i, o):
        return [tnn.Conv2d(i, o, 3, padding=1, bias=False), tnn.BatchNorm2d(o), tnn.ReLU()]

    model = tnn.Sequential(*block(3, 32), *block(32, 32), tnn.MaxPool2d(2), *block(32, 64),
                           *block(64, 64), tnn.MaxPool2d(2), tnn.Flatten(),
                           tnn.Linear(64 * 8 * 8, 10)).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = tnn.CrossEntropyLoss()
    tx, ty = torch.from_numpy(xb), torch.from_numpy(yb.astype(np.int64))

    def torch_step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(tx), ty)
        loss.backward()
        opt.step()
        return loss

    return ({"symjax-python": lambda: step(xb, yb), "torch-eager": torch_step},
            {"symjax-cpp-loop": lambda n: step._call_repeated(n, xb, yb)}, B, "images/s")


def main():
    cpp = {"mlp_train": A.cpp_mlp, "cnn_train": A.cpp_cnn}
    for case in A.cases.split(","):
        fns, native, per_step, unit = {"mlp_train": mlp_case, "cnn_train": cnn_case}[case]()
        secs, foreign = measure_pair(fns, native)
        batch = A.mlp_batch if case == "mlp_train" else A.cnn_batch
        for impl, s in secs.items():
            emit({"case": case, "impl": impl, "batch": batch, "value": per_step / s,
                  "unit": unit, "ms_per_step": s * 1e3, "foreign_cpu_frac": foreign})
        ratio = {"case": case, "impl": "ratio", "batch": batch,
                 "value": secs["torch-eager"] / secs["symjax-python"],
                 "unit": "symjax-python / torch-eager (throughput)"}
        # the same compiled step called from a C++ loop in this process, in the same rounds:
        # what the Python front end itself costs, free of the load's drift between processes
        ratio["python_vs_cpp_loop"] = secs["symjax-cpp-loop"] / secs["symjax-python"]
        if cpp[case] > 0:
            cpp_s = per_step / cpp[case]
            ratio["cpp_ratio"] = secs["torch-eager"] / cpp_s
            ratio["python_vs_cpp"] = cpp_s / secs["symjax-python"]
        emit(ratio)


if __name__ == "__main__":
    sys.exit(main())
