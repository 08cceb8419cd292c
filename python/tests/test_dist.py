"""symjax.dist in a world of one process (no mpirun): the collectives are the identity on arrays
and on tensors, and DataParallel is the wrapped optimizer. Two processes: test_examples.py's
test_data_parallel_under_mpirun."""
import numpy as np
import pytest

import symjax as sj
import symjax.tensor as T
from symjax import dist, nn


def test_world_of_one():
    dist.init()
    assert dist.size() == 1 and dist.rank() == 0 and dist.is_root()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    for op in ("sum", "mean", "max", "min"):
        np.testing.assert_array_equal(dist.all_reduce(a, op), a)
    np.testing.assert_array_equal(dist.broadcast(a, root=0), a)
    np.testing.assert_array_equal(dist.all_gather(a), a)
    x = T.Placeholder((2, 3), "float32", "x")
    f = sj.function(x, outputs=[dist.all_reduce(x, "mean") * 2.0, dist.all_gather(x)])
    out = f(a)
    np.testing.assert_array_equal(out[0], 2 * a)
    np.testing.assert_array_equal(out[1], a)
    with pytest.raises(sj.InputError, match="unknown reduction 'avg'"):
        dist.all_reduce(a, "avg")


def test_data_parallel_is_the_optimizer_in_a_world_of_one():
    w = T.Variable(np.array([1.0, -2.0], np.float32), name="w_dp")
    v = T.Variable(np.array([1.0, -2.0], np.float32), name="v_dp")
    dp = nn.DataParallel(nn.optimizers.SGD(0.1), bucket_bytes=64)
    assert dp.bucket_bytes == 64
    step = sj.function(outputs=None, updates=dp.minimize((w * w).sum(), [w]))
    ref = sj.function(outputs=None, updates=nn.optimizers.SGD(0.1).minimize((v * v).sum(), [v]))
    for _ in range(3):
        step()
        ref()
    np.testing.assert_array_equal(np.asarray(w.value), np.asarray(v.value))
