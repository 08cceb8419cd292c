// Random numbers: counter-based Philox bits and the distributions built on them.
#pragma once

#include <symjax/Tensor.h>

#include <cstdint>
#include <optional>

namespace sj::random {

// Note [Seeds and counters]
// Every draw is philox4x32_10 with a key derived from a seed (fixed when the graph is built) and
// a counter made of the element index and the running function's call counter. The same seed
// gives the same numbers on every backend; a function draws new numbers on each call because its
// counter advances. With no explicit seed, a draw takes the next seed of a global sequence that
// manual_seed() restarts. Tensor::eval draws with call counter 0.

/// Restarts the global seed sequence used by draws that are given no seed (thread-safe).
void manual_seed(uint64_t seed);
/// The next seed of the global sequence (thread-safe).
uint64_t next_seed();

/// Uniform u32 bits (Philox4x32-10).
Tensor bits(const Shape& shape, std::optional<uint64_t> seed = {});
/// Uniform in [lo, hi); for f32, [0, 1) is sampled on the grid k * 2^-24.
Tensor uniform(const Shape& shape, double lo = 0, double hi = 1, DType dtype = DType::F32,
               std::optional<uint64_t> seed = {});
/// Normal with the given mean and standard deviation (Box-Muller).
Tensor normal(const Shape& shape, double mean = 0, double stddev = 1, DType dtype = DType::F32,
              std::optional<uint64_t> seed = {});
/// True with probability p (bool).
Tensor bernoulli(const Shape& shape, double p, std::optional<uint64_t> seed = {});
/// Standard normal truncated to [lo, hi] (inverse-CDF sampling).
Tensor truncated_normal(const Shape& shape, double lo = -2, double hi = 2,
                        DType dtype = DType::F32, std::optional<uint64_t> seed = {});

// The *_like variants take the shape from t: dims that are -1 when the graph is built follow t
// at call time. An omitted dtype means t's dtype when it is a float type, else f32.

/// bits() shaped like t.
Tensor bits_like(const Tensor& t, std::optional<uint64_t> seed = {});
/// uniform() shaped like t.
Tensor uniform_like(const Tensor& t, double lo = 0, double hi = 1,
                    std::optional<DType> dtype = {}, std::optional<uint64_t> seed = {});
/// normal() shaped like t.
Tensor normal_like(const Tensor& t, double mean = 0, double stddev = 1,
                   std::optional<DType> dtype = {}, std::optional<uint64_t> seed = {});
/// bernoulli() shaped like t.
Tensor bernoulli_like(const Tensor& t, double p, std::optional<uint64_t> seed = {});
/// truncated_normal() shaped like t.
Tensor truncated_normal_like(const Tensor& t, double lo = -2, double hi = 2,
                             std::optional<DType> dtype = {}, std::optional<uint64_t> seed = {});

} // namespace sj::random
