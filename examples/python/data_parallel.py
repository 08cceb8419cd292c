"""Example: data-parallel training with symjax.dist under mpirun (docs/distributed.md).

Each process trains a two-layer network on its share of every global batch; nn.DataParallel
averages the gradients over the processes before Adam's step and copies rank 0's initial values
to every rank. Every rank also trains the same network as one process on the whole global batch,
and the script checks (1) the ranks' parameters are bit-identical and (2) they equal the
one-process parameters to 1e-5, then prints "data_parallel: OK" on rank 0.

    mpirun -np 2 python3 examples/python/data_parallel.py        (as root: --allow-run-as-root)

Without mpirun it runs as a world of one process (the averaging is the identity).
"""
import sys

import numpy as np

import symjax as sj
import symjax.tensor as T
from symjax import dist, nn

dist.init()
rank, size = dist.rank(), dist.size()

GLOBAL, STEPS = 32, 6
rng = np.random.default_rng(7)  # the same data on every rank
X = rng.standard_normal((GLOBAL * STEPS, 10)).astype(np.float32)
Y = rng.integers(0, 4, GLOBAL * STEPS).astype(np.int32)

x = T.Placeholder((None, 10), "float32", "x")
y = T.Placeholder((None,), "int32", "y")


def network(scope, seed):
    """A two-layer MLP; rank 1 starts elsewhere in the data-parallel copy (seed) and must
    receive rank 0's values through DataParallel's broadcast."""
    r = np.random.default_rng(seed)
    with sj.Scope(scope):
        w1 = T.Variable(r.standard_normal((10, 16)).astype(np.float32) * 0.3, name="w1")
        b1 = T.Variable(np.zeros(16, np.float32), name="b1")
        w2 = T.Variable(r.standard_normal((16, 4)).astype(np.float32) * 0.3, name="w2")
        b2 = T.Variable(np.zeros(4, np.float32), name="b2")
    logits = T.matmul(T.tanh(T.matmul(x, w1) + b1), w2) + b2
    loss = nn.losses.sparse_softmax_crossentropy_logits(y, logits).mean()
    return [w1, b1, w2, b2], loss


params, loss = network("dp", seed=1 + rank)
dp = nn.DataParallel(nn.optimizers.Adam(1e-2), bucket_bytes=256)  # several buckets
step = sj.function(x, y, outputs=loss, updates=dp.minimize(loss, params))

ref_params, ref_loss = network("one", seed=1)
ref_step = sj.function(x, y, outputs=ref_loss,
                       updates=nn.optimizers.Adam(1e-2).minimize(ref_loss, ref_params))

local = GLOBAL // size
for s in range(STEPS):
    at = s * GLOBAL
    mine = slice(at + rank * local, at + (rank + 1) * local)
    value = float(step(X[mine], Y[mine]))
    ref_step(X[at:at + GLOBAL], Y[at:at + GLOBAL])
    if dist.is_root():
        print("step %d  local loss %.5f" % (s, value))

failures = 0
for p, q in zip(params, ref_params):
    mine = np.asarray(p.value)
    root = dist.broadcast(mine, root=0)
    if mine.tobytes() != root.tobytes():
        print("rank %d: %s differs from rank 0's" % (rank, p.name))
        failures += 1
    err = float(np.max(np.abs(mine - np.asarray(q.value))))
    if err > 1e-5:
        print("rank %d: %s differs from one process by %.3g" % (rank, p.name, err))
        failures += 1
failures = int(dist.all_reduce(np.array(failures, np.int64)))  # every rank's verdict
if dist.is_root():
    print("data_parallel: %s (%d processes)" % ("OK" if failures == 0 else "FAILED", size))
dist.finalize()
sys.exit(1 if failures else 0)
