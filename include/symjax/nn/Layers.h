// Layers: Dense, Dropout, Flatten, Embedding, LayerNorm, BatchNorm.
#pragma once

#include <symjax/nn/Init.h>
#include <symjax/nn/Module.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

namespace sj::nn {

// Every layer takes its sizes positionally and everything else in its options struct, whose
// defaults are the documented ones: naming some options (`{.bias = false}`) keeps the others.

/// Options of Dense.
struct DenseOptions {
    bool bias = true;
    Initializer init = init::glorot_uniform();
    DType dtype = DType::F32;
};
/// y = x @ W + b with W [in, out] and b [out]; x is [..., in].
class Dense : public Module {
public:
    Dense(int64_t in, int64_t out, DenseOptions options = {});
    Tensor forward(const Tensor &x, Mode mode) const override;
    const Variable &weights() const { return w_; }
    /// Undefined when built without a bias.
    const Variable &bias() const { return b_; }

private:
    int64_t in_, out_;
    Variable w_, b_;
};

/// Inverted dropout: in train mode each element is zeroed with probability p and the others are
/// scaled by 1 / (1 - p), so the expectation is unchanged; identity in eval mode. Masks come from
/// counter-based random bits: a compiled function draws a new mask on every call. Each call of the
/// layer (each graph built) takes its own seed: the next of sj::random's global sequence, or,
/// when a seed is given, one derived from it and the call's index (so the same program built
/// twice draws the same masks).
struct DropoutOptions {
    std::optional<uint64_t> seed = {};
};
class Dropout : public Module {
public:
    explicit Dropout(double p, DropoutOptions options = {});
    Tensor forward(const Tensor &x, Mode mode) const override;
    double p() const { return p_; }

private:
    double p_;
    std::optional<uint64_t> seed_;
    std::shared_ptr<std::atomic<uint64_t>> calls_;
};

/// [N, d1, d2, ...] -> [N, d1 * d2 * ...].
class Flatten : public Module {
public:
    Tensor forward(const Tensor &x, Mode mode) const override;
};

/// A table of `num` vectors of size `dim` (initialised N(0, 1) by default); integer indices of
/// any shape S give S + [dim].
struct EmbeddingOptions {
    Initializer init = init::normal(1.0);
    DType dtype = DType::F32;
};
class Embedding : public Module {
public:
    Embedding(int64_t num, int64_t dim, EmbeddingOptions options = {});
    Tensor forward(const Tensor &indices, Mode mode) const override;
    const Variable &table() const { return table_; }

private:
    Variable table_;
};

/// Normalises over the last axis (of size dim): (x - mean) / sqrt(var + eps) * gamma + beta,
/// with gamma (ones) and beta (zeros) of shape [dim]. Same in both modes.
struct LayerNormOptions {
    double eps = 1e-5;
    DType dtype = DType::F32;
};
class LayerNorm : public Module {
public:
    explicit LayerNorm(int64_t dim, LayerNormOptions options = {});
    Tensor forward(const Tensor &x, Mode mode) const override;
    const Variable &gamma() const { return gamma_; }
    const Variable &beta() const { return beta_; }

private:
    int64_t dim_;
    double eps_;
    Variable gamma_, beta_;
};

/// Batch normalisation (Ioffe and Szegedy 2015) over axis 1 of [N, F] (or [N, F, ...]) inputs:
/// statistics are taken over every axis but 1.
///  - train: normalises with the batch mean and biased variance, and attaches to its output the
///    state updates (see Note [State updates], collect them with state_updates)
///      running_mean <- momentum * running_mean + (1 - momentum) * batch_mean
///      running_var  <- momentum * running_var  + (1 - momentum) * batch_var * n / (n - 1)
///    (the running variance is the unbiased estimate, as PyTorch; n is the count per feature).
///  - eval: normalises with running_mean and running_var (which start at 0 and 1).
/// momentum follows Keras and SymJAX (0.99 keeps 99% of the old value; PyTorch's 0.1 is 0.9 here).
struct BatchNormOptions {
    double momentum = 0.99;
    double eps = 1e-5;
    DType dtype = DType::F32;
    /// Batch statistics over the global batch of a data-parallel job (every rank's share, equal
    /// in size: two all_reduce means per layer and step, PyTorch's SyncBatchNorm) instead of
    /// this rank's share alone; the same as false in a single process (docs/distributed.md).
    bool sync = false;
};
class BatchNorm : public Module {
public:
    explicit BatchNorm(int64_t features, BatchNormOptions options = {});
    Tensor forward(const Tensor &x, Mode mode) const override;
    const Variable &gamma() const { return gamma_; }
    const Variable &beta() const { return beta_; }
    /// Non-trainable.
    const Variable &running_mean() const { return mean_; }
    const Variable &running_var() const { return var_; }

private:
    int64_t features_;
    double momentum_, eps_;
    bool sync_;
    Variable gamma_, beta_, mean_, var_;
};

} // namespace sj::nn
