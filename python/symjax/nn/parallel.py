"""Data-parallel training (docs/distributed.md): ``DataParallel(optimizer)`` is the optimizer with
the gradients averaged over the MPI ranks, in buckets, before its step; rank 0's parameter
values are copied to every rank when the step is built. The one-line change from one process:

    opt = nn.DataParallel(nn.optimizers.Adam(1e-3), bucket_bytes=25 << 20)
    step = sj.function(x, y, outputs=loss, updates=opt.minimize(loss))
"""
from .._core import nn as _n

average_gradients = _n.average_gradients
broadcast_variables = _n.broadcast_variables


class DataParallel(_n.DataParallel):
    """DataParallel(optimizer, bucket_bytes=25 MiB, broadcast_parameters=True)."""

    def minimize(self, loss, params=None):
        """The updates of one step on ``loss`` with the gradients averaged over the ranks."""
        return dict(super().minimize(loss, None if params is None else list(params)))

    def apply(self, grads, params):
        """The updates of one step with the given gradients, averaged over the ranks first."""
        return dict(super().apply(list(grads), list(params)))
