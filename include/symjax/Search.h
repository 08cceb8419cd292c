// Searching, counting and order statistics: unique, nonzero, lexsort, searchsorted, digitize,
// bincount, histogram, quantile and median.
// NumPy's names, with JAX's rule for results whose length depends on the values: the caller
// gives that length (`size`, `length`, `bins`) and the result is padded or cut to it. All are
// composites of sort, cumsum, gather and scatter (Note [Searching by sorting] in
// src/api/Search.cpp), so they run on every backend, on dims of unknown size, and under vmap.
// See docs/ops.md, "Searching and counting".
#pragma once

#include <symjax/Ops.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace sj {

/// The results of unique_all: the sorted unique values of x (flattened), padded or cut to `size`.
struct Unique {
    Tensor values;  ///< [size]: the smallest `size` unique values, ascending; then fill_value
    Tensor indices; ///< [size] i64: where each value first occurs in flattened x (0 past the end)
    Tensor inverse; ///< x's shape, i64: the slot of each element's value in `values` (clamped to
                    ///< size - 1 for values cut off)
    Tensor counts;  ///< [size] i64: how often each value occurs (0 past the end)
};

/// jnp.unique(x, size=size, fill_value=..., equal_nan=...) with every result. The entries past
/// the last unique value hold `fill_value`, by default the smallest value of x (JAX's rule).
/// NaN sorts last; with equal_nan the NaNs are one value, otherwise each NaN is its own.
/// -0.0 and 0.0 are one value. size >= 0; x non-empty unless fill_value is given.
Unique unique_all(const Tensor& x, int64_t size, std::optional<double> fill_value = {},
                  bool equal_nan = true);
/// unique_all(...).values.
Tensor unique(const Tensor& x, int64_t size, std::optional<double> fill_value = {},
              bool equal_nan = true);

/// jnp.nonzero(x, size=size, fill_value=fill_value): one i64 tensor [size] per dim of x with
/// the coordinates of its first `size` non-zero elements in row-major order, then fill_value.
/// x has rank >= 1; every dim but the first needs a known size.
std::vector<Tensor> nonzero(const Tensor& x, int64_t size, int64_t fill_value = 0);
/// jnp.argwhere: the coordinates of nonzero(...) as rows, [size, rank].
Tensor argwhere(const Tensor& x, int64_t size, int64_t fill_value = 0);
/// jnp.flatnonzero: the flat indices of the first `size` non-zero elements, then fill_value.
Tensor flatnonzero(const Tensor& x, int64_t size, int64_t fill_value = 0);

/// NumPy's lexsort: the i64 indices that sort along `axis` by the last key, ties broken by the
/// one before it, and so on (keys of one shape, any dtypes; each key's order as sort's).
Tensor lexsort(const std::vector<Tensor>& keys, int64_t axis = -1);

/// Which end of a run of equal values searchsorted returns.
enum class Side : uint8_t {
    Left,  ///< the first position where v could go (a[i - 1] < v <= a[i])
    Right, ///< the last (a[i - 1] <= v < a[i])
};
/// NumPy's searchsorted for a sorted 1-d `a`: i64 of v's shape, the position in a where each
/// element of v would go to keep the order (NaN sorts last). A binary search of
/// ceil(log2(len(a) + 1)) gathers when a's length is known; otherwise every element of v is
/// compared with every element of a (memory len(a) * v.size).
Tensor searchsorted(const Tensor& a, const Tensor& v, Side side = Side::Left);

/// NumPy's digitize: for bins increasing, i with bins[i - 1] <= x < bins[i] (right: bins[i - 1]
/// < x <= bins[i]); for bins decreasing, the same with the inequalities turned. bins is 1-d, of
/// known length, and monotonic: InputError when the function runs otherwise.
Tensor digitize(const Tensor& x, const Tensor& bins, bool right = false);

/// jnp.bincount(x, weights, length=length): out[i] is the number of elements of the integer x
/// equal to i (or the sum of their weights, weights of x's shape), for i < length; values >=
/// length are left out, as JAX. A negative value is an InputError when the function runs (NumPy
/// refuses them). i64 counts, or the weights' dtype.
Tensor bincount(const Tensor& x, int64_t length, const std::optional<Tensor>& weights = {});

/// NumPy's histogram of x (flattened) over `bins` equal bins of [lo, hi] (`range`, or x's min
/// and max; lo == hi widens to [lo - 0.5, hi + 0.5]): returns (hist [bins], edges [bins + 1]).
/// Each bin holds lo <= x < hi except the last, which holds its upper edge; values outside the
/// range and NaN are left out. hist is i64, or the weights' dtype; with density, hist / (sum of
/// hist * bin width) in the edges' dtype. Edges are f64 for integer x, else x's dtype.
std::pair<Tensor, Tensor> histogram(const Tensor& x, int64_t bins,
                                    std::optional<std::pair<double, double>> range = {},
                                    const std::optional<Tensor>& weights = {},
                                    bool density = false);
/// histogram with the bin edges given (1-d, increasing, of known length >= 2).
std::pair<Tensor, Tensor> histogram(const Tensor& x, const Tensor& edges,
                                    const std::optional<Tensor>& weights = {},
                                    bool density = false);

/// How quantile picks its value between the sorted elements around position q * (n - 1)
/// (NumPy's methods of the same names).
enum class QuantileMethod : uint8_t {
    Linear,   ///< interpolates between them (NumPy's default)
    Lower,    ///< the one below
    Higher,   ///< the one above
    Midpoint, ///< their mean
    Nearest,  ///< the nearer one (halves to the even position)
};

/// NumPy's quantile of x along `axis` (x flattened when there is none), q in [0, 1]: sorts the
/// axis, then picks. Integer x is taken as f32. A NaN in a line makes its quantile NaN. The
/// axis needs a known, non-zero size; keepdims keeps it with size 1.
Tensor quantile(const Tensor& x, double q, std::optional<int64_t> axis = {},
                QuantileMethod method = QuantileMethod::Linear, bool keepdims = false);
/// One quantile per entry of qs, stacked along a new first dim.
Tensor quantile(const Tensor& x, const std::vector<double>& qs, std::optional<int64_t> axis = {},
                QuantileMethod method = QuantileMethod::Linear, bool keepdims = false);
/// quantile of each line's non-NaN elements (NaN for a line of NaNs only), as NumPy's.
Tensor nanquantile(const Tensor& x, double q, std::optional<int64_t> axis = {},
                   QuantileMethod method = QuantileMethod::Linear, bool keepdims = false);
Tensor nanquantile(const Tensor& x, const std::vector<double>& qs, std::optional<int64_t> axis = {},
                   QuantileMethod method = QuantileMethod::Linear, bool keepdims = false);
/// quantile(x, 0.5, ...) and nanquantile(x, 0.5, ...).
Tensor median(const Tensor& x, std::optional<int64_t> axis = {}, bool keepdims = false);
Tensor nanmedian(const Tensor& x, std::optional<int64_t> axis = {}, bool keepdims = false);

} // namespace sj
