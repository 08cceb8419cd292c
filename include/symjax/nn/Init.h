// Parameter initializers with the textbook scales (Glorot, He, LeCun, orthogonal...).
#pragma once

#include <symjax/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>

namespace sj::nn {

/// Draws an initial value for a parameter of a given shape and dtype. The result is a Tensor
/// without placeholders (a random draw, or a constant), usable as a Variable initialiser:
///   Variable W(nn::init::he_normal()({784, 256}), "W");   // reset() redraws the same values
/// With a seed, every call draws the same values for the same shape; without one, each call takes
/// the next seed of sj::random's global sequence (so random::manual_seed makes a model
/// reproducible).
class Initializer {
public:
    /// fn(shape, dtype, seed) returns the initial value.
    using Fn = std::function<Tensor(const Shape &, DType, uint64_t)>;
    Initializer(Fn fn, std::optional<uint64_t> seed = {});
    /// The initial value as a graph (evaluated by Variable's constructor).
    Tensor operator()(const Shape &shape, DType dtype = DType::F32) const;
    /// The initial value evaluated now.
    Array array(const Shape &shape, DType dtype = DType::F32) const;

private:
    Fn fn_;
    std::optional<uint64_t> seed_;
};

namespace init {

/// Fan-in and fan-out of a weight shape. Rank 0: 1, 1. Rank 1: n, n. Rank 2 is a dense kernel
/// [in, out] (x @ W). Rank >= 3 is a convolution kernel [out, in, k...] (OIHW), whose fans are
/// in * prod(k) and out * prod(k).
struct Fans {
    double in = 1, out = 1;
};
Fans compute_fans(const Shape &shape);

/// Every element equal to v.
Initializer constant(double v);
Initializer zeros();
Initializer ones();
/// Uniform in [lo, hi).
Initializer uniform(double lo = -0.05, double hi = 0.05, std::optional<uint64_t> seed = {});
/// Normal(mean, stddev).
Initializer normal(double stddev = 1, double mean = 0, std::optional<uint64_t> seed = {});
/// stddev * N(0, 1) truncated to [-2, 2] (variance 0.7737 stddev^2), TensorFlow's convention.
Initializer truncated_normal(double stddev = 1, std::optional<uint64_t> seed = {});
/// Glorot and Bengio (2010): uniform in +-gain sqrt(6 / (fan_in + fan_out)), variance
/// gain^2 2 / (fan_in + fan_out).
Initializer glorot_uniform(double gain = 1, std::optional<uint64_t> seed = {});
/// Normal with stddev gain sqrt(2 / (fan_in + fan_out)) (PyTorch's xavier_normal_).
Initializer glorot_normal(double gain = 1, std::optional<uint64_t> seed = {});
/// He et al. (2015), fan_in mode, gain sqrt(2): uniform in +-sqrt(6 / fan_in), variance 2 / fan_in.
Initializer he_uniform(std::optional<uint64_t> seed = {});
/// Normal with stddev sqrt(2 / fan_in).
Initializer he_normal(std::optional<uint64_t> seed = {});
/// LeCun: normal with stddev sqrt(1 / fan_in) (for SELU networks).
Initializer lecun_normal(std::optional<uint64_t> seed = {});
/// LeCun uniform: uniform in +-sqrt(3 / fan_in), variance 1 / fan_in.
Initializer lecun_uniform(std::optional<uint64_t> seed = {});
/// Saxe et al. (2014): the shape viewed as [shape[0], prod(rest)] is gain times a matrix with
/// orthonormal columns (rows >= cols) or rows (rows < cols): the Q of the QR factorisation of a
/// standard normal draw, done on the host in double with the signs of R's diagonal made positive.
Initializer orthogonal(double gain = 1, std::optional<uint64_t> seed = {});

} // namespace init
} // namespace sj::nn
