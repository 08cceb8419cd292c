// Data-parallel training over MPI: gradients averaged across the ranks in buckets, parameters
// broadcast from rank 0. docs/distributed.md.
#pragma once

#include <symjax/Data.h>
#include <symjax/Function.h>
#include <symjax/Variable.h>
#include <symjax/nn/Optim.h>

#include <cstdint>
#include <vector>

namespace sj::nn {

/// Options of DataParallel.
struct DataParallelOptions {
    /// Gradients are averaged in buckets of about this many bytes, one all_reduce each (a
    /// gradient larger than a bucket is a bucket of its own). PyTorch DDP's default, 25 MiB.
    int64_t bucket_bytes = int64_t(25) << 20;
    /// Copy rank 0's parameter values to every rank when minimize() or apply() builds the step,
    /// so that all ranks start from the same point.
    bool broadcast_parameters = true;
};

/// The gradients averaged over the ranks (dist::all_reduce mean), in buckets: the gradients
/// are taken from the last to the first (the order backward produces them), flattened and
/// concatenated while a bucket holds fewer than bucket_bytes of one dtype; each bucket is one
/// collective, sliced back into the gradients' shapes. The identity in a world of one.
std::vector<Tensor> average_gradients(const std::vector<Tensor>& grads,
                                      int64_t bucket_bytes = int64_t(25) << 20);

/// Copies root's values of `vars` to every rank now (one broadcast per variable, in order).
void broadcast_variables(const std::vector<Variable>& vars, int root = 0);

/// This rank's share of a global batch: rows [r * b, (r + 1) * b) of x, y and indices with
/// b = B / size (B must be a multiple of size). Every rank runs the same Loader (same seed, so
/// the same order each epoch) with batch_size = the global batch, and trains on its share: the
/// ranks' shares together are exactly the one-process batch. Each rank builds the whole batch
/// and keeps its share (simple and exact; the loader's work is not divided).
data::Batch shard_batch(const data::Batch& global, int rank, int size);

/// An optimizer wrapped for data-parallel training: the one-line change from one process to
/// many. Each rank computes the gradients of its own share of the batch; they are averaged over
/// the ranks before the wrapped optimizer's update, so that every rank applies the same step.
///
///     nn::optim::Adam adam(1e-3);
///     nn::DataParallel dp(adam);                 // was: adam.minimize(loss, params)
///     Updates upd = dp.minimize(loss, params);
///
/// With a loss that is the mean over the local batch and equal local batches (LoaderOptions::
/// shard_batch), the step equals a one-process step on the global batch.
class DataParallel {
public:
    explicit DataParallel(optim::Optimizer& optimizer, DataParallelOptions options = {});

    /// The wrapped optimizer's minimize, with the gradients averaged over the ranks.
    Updates minimize(const Tensor& loss, const std::vector<Variable>& params);
    /// As above, on every trainable float variable the loss depends on (in graph order).
    Updates minimize(const Tensor& loss);
    /// The wrapped optimizer's apply on the averaged gradients.
    Updates apply(const std::vector<Tensor>& grads, const std::vector<Variable>& params);

    optim::Optimizer& optimizer() const { return *optimizer_; }
    const DataParallelOptions& options() const { return options_; }

private:
    optim::Optimizer* optimizer_;
    DataParallelOptions options_;
};

} // namespace sj::nn
