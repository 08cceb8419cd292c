// Data-parallel processes over MPI: the world (rank, size), collectives as graph ops and on host
// arrays. docs/distributed.md has the launch, the semantics and the scaling model.
//
//     mpirun -np 2 ./train              # each process: sj::dist::rank() is 0 or 1
//
//     Tensor g_sum = sj::dist::all_reduce(g);                            // the same on every rank
//     Tensor g_avg = sj::dist::all_reduce(g, sj::dist::ReduceOp::Mean);
//
// Without mpirun (or in a build without MPI, SJ_WITH_MPI=OFF) the world is this one process and
// every collective is the identity.
#pragma once

#include <symjax/Array.h>
#include <symjax/Error.h>
#include <symjax/Tensor.h>

#include <cstdint>

namespace sj::dist {

/// A collective that cannot complete: the ranks run different collectives (mismatched graphs or
/// programs), no answer within the timeout (a rank died, raised, or is stuck), or an MPI error.
class DistError : public Error {
public:
    using Error::Error;
};

/// How a reduction combines the ranks' values. Mean is for float dtypes only.
enum class ReduceOp : uint8_t { Sum, Mean, Max, Min };
/// "sum", "mean", "max", "min".
const char* reduce_op_name(ReduceOp op);

/// Joins the MPI world when the process was started by an MPI launcher (mpirun sets
/// OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK), else makes a world of one. Idempotent; every
/// other function here calls it. Registers finalize() to run at exit.
void init();
/// Leaves MPI (MPI_Finalize) after a barrier-free shutdown; idempotent. After a collective failed
/// (DistError for a timeout or an MPI error) it does not wait for the others: the process exits
/// and mpirun stops the rest of the job.
void finalize();
/// True once init() has run (explicitly or through any other call).
bool initialized();
/// True when the library was built with MPI (CMake option SJ_WITH_MPI).
bool built_with_mpi();
/// True when this process talks to others through MPI (built with it and launched by mpirun).
bool using_mpi();

/// This process's rank in [0, size()).
int rank();
/// The number of processes.
int size();
/// This process's rank among the processes on its machine, and how many there are.
int local_rank();
int local_size();
/// rank() == 0: the process that writes checkpoints, logs and plots.
inline bool is_root() {
    return rank() == 0;
}

/// Seconds a collective waits for the other ranks before it throws DistError (default 300, or
/// the environment's SJ_DIST_TIMEOUT). A failed collective leaves the world broken: every later
/// collective throws at once.
double timeout();
void set_timeout(double seconds);

/// Waits until every rank has arrived (with the timeout).
void barrier();

// ---- collectives in the graph --------------------------------------------------------------
// Primitives (docs/ops.md, "Collectives"): never folded, merged only with an identical
// collective of the same inputs, run in the same order on every rank. Each node records the
// world size it was built for; running it in another world is a DistError. Every rank must run
// the same collectives in the same order with the same shapes and dtypes; a mismatch is detected
// (a signature is exchanged before each collective) and raised as DistError on every rank.

/// The elementwise reduction of x over the ranks, the same on every rank. Numeric dtypes (not
/// bool); Mean only for f32 and f64.
/// Gradient: Sum -> all_reduce(g, Sum); Mean -> all_reduce(g, Mean); Max/Min -> the summed
/// cotangent, shared among the ranks that hold the extreme value.
Tensor all_reduce(const Tensor& x, ReduceOp op = ReduceOp::Sum);
/// The ranks' x concatenated along axis 0 in rank order: [size * n, ...] for x [n, ...], and
/// [size] for a scalar. Gradient: reduce_scatter(g, Sum).
Tensor all_gather(const Tensor& x);
/// root's x on every rank (x must have the same type everywhere). Gradient: the sum of the
/// cotangents on the root (all_reduce(g, Sum) there), zero elsewhere.
Tensor broadcast(const Tensor& x, int root = 0);
/// Block `rank()` of the reduction of x over the ranks, split along axis 0: x [size * n, ...]
/// gives [n, ...]. Gradient: all_gather(g) (Sum), / size (Mean); Max/Min as all_reduce.
Tensor reduce_scatter(const Tensor& x, ReduceOp op = ReduceOp::Sum);

// ---- collectives on host arrays (run now) --------------------------------------------------

/// As the graph ops, on values: every rank calls them in the same order.
Array all_reduce(const Array& x, ReduceOp op = ReduceOp::Sum);
Array all_gather(const Array& x);
Array broadcast(const Array& x, int root = 0);
Array reduce_scatter(const Array& x, ReduceOp op = ReduceOp::Sum);

} // namespace sj::dist
