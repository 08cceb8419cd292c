"""symjax.dist: data-parallel training over MPI (docs/distributed.md), under ``mpirun``.

    import symjax as sj
    from symjax import dist, nn
    dist.init()                                     # rank and size from mpirun
    opt = nn.DataParallel(nn.optimizers.Adam(1e-3))  # gradients averaged over the ranks
    step = sj.function(x, y, outputs=loss, updates=opt.minimize(loss))

Without mpirun the world has one process and every collective is the identity. The collectives
take a tensor (a node of the graph, with gradients) or an array (run now, returns a NumPy array);
``op`` is "sum", "mean", "max" or "min". A rank that dies or raises makes the others stop with an
error after ``timeout()`` seconds (``set_timeout``, ``SJ_DIST_TIMEOUT``), never hang.
"""
from ._core import dist as _d

init = _d.init
finalize = _d.finalize
initialized = _d.initialized
built_with_mpi = _d.built_with_mpi
using_mpi = _d.using_mpi
rank = _d.rank
size = _d.size
local_rank = _d.local_rank
local_size = _d.local_size
is_root = _d.is_root
timeout = _d.timeout
set_timeout = _d.set_timeout
barrier = _d.barrier
all_reduce = _d.all_reduce
all_gather = _d.all_gather
broadcast = _d.broadcast
reduce_scatter = _d.reduce_scatter

__all__ = ["init", "finalize", "initialized", "built_with_mpi", "using_mpi", "rank", "size",
           "local_rank", "local_size", "is_root", "timeout", "set_timeout", "barrier",
           "all_reduce", "all_gather", "broadcast", "reduce_scatter"]
