// The user-facing op functions: primitives (src/ops) and composites (src/api).
#pragma once

#include <symjax/Tensor.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sj {

using Axes = std::vector<int64_t>;

// ---- constants and creation -------------------------------------------------------------
/// A constant tensor holding `value`.
Tensor constant(const Array& value);
/// A 0-d constant of the given dtype.
Tensor scalar(double v, DType dtype = DType::F32);
Tensor full(const Shape& shape, double v, DType dtype = DType::F32);
Tensor zeros(const Shape& shape, DType dtype = DType::F32);
Tensor ones(const Shape& shape, DType dtype = DType::F32);
/// Same shape and dtype as t (dims unknown at build time follow t at call time).
Tensor full_like(const Tensor& t, double v);
Tensor full_like(const Tensor& t, double v, DType dtype);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
/// [start, stop) with `step`, NumPy's arange.
Tensor arange(double start, double stop, double step = 1, DType dtype = DType::I64);
Tensor arange(int64_t stop, DType dtype = DType::I64);
/// `num` evenly spaced values from start to stop inclusive.
Tensor linspace(double start, double stop, int64_t num, DType dtype = DType::F32);
/// The n x m matrix with ones on the k-th diagonal (m = n when negative; k > 0 above the main
/// diagonal, k < 0 below), NumPy's eye(n, m, k, dtype).
Tensor eye(int64_t n, int64_t m = -1, int64_t k = 0, DType dtype = DType::F32);

// ---- elementwise unary ------------------------------------------------------------------
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
/// Base-2 logarithm (NumPy's log2).
Tensor log2(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
/// Rounds half to even (as NumPy).
Tensor round(const Tensor& x);
Tensor logical_not(const Tensor& x);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
/// Converts to dtype (float to int truncates toward zero; to bool is x != 0).
Tensor cast(const Tensor& x, DType dtype);
/// Identity whose gradient is zero.
Tensor stop_gradient(const Tensor& x);

// ---- elementwise binary (NumPy broadcasting; mixed dtypes are promoted) ------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
/// True division for floats; for integers, division truncating toward zero (as C++), with
/// x / 0 == 0 and MIN / -1 == MIN (wrapping) instead of a trap (docs/ops.md).
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
/// Remainder with the sign of the divisor (Python's %, NumPy's mod); integer x mod 0 == 0.
Tensor mod(const Tensor& a, const Tensor& b);
Tensor atan2(const Tensor& y, const Tensor& x);
/// sqrt(a^2 + b^2) without overflow or underflow in the squares (NumPy's hypot, C's hypot).
Tensor hypot(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
/// Every binary op also takes a C++ number on either side; the number takes the tensor's dtype
/// (a weakly typed scalar, as in JAX): mul(x, 2.0), pow(2.0, x), lt(x, 0.5).
Tensor add(const Tensor& a, double b);
Tensor add(double a, const Tensor& b);
Tensor sub(const Tensor& a, double b);
Tensor sub(double a, const Tensor& b);
Tensor mul(const Tensor& a, double b);
Tensor mul(double a, const Tensor& b);
Tensor div(const Tensor& a, double b);
Tensor div(double a, const Tensor& b);
Tensor pow(const Tensor& a, double b);
Tensor pow(double a, const Tensor& b);
Tensor maximum(const Tensor& a, double b);
Tensor maximum(double a, const Tensor& b);
Tensor minimum(const Tensor& a, double b);
Tensor minimum(double a, const Tensor& b);
Tensor mod(const Tensor& a, double b);
Tensor mod(double a, const Tensor& b);
Tensor atan2(const Tensor& a, double b);
Tensor atan2(double a, const Tensor& b);
Tensor hypot(const Tensor& a, double b);
Tensor hypot(double a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor eq(double a, const Tensor& b);
Tensor ne(const Tensor& a, double b);
Tensor ne(double a, const Tensor& b);
Tensor lt(const Tensor& a, double b);
Tensor lt(double a, const Tensor& b);
Tensor le(const Tensor& a, double b);
Tensor le(double a, const Tensor& b);
Tensor gt(const Tensor& a, double b);
Tensor gt(double a, const Tensor& b);
Tensor ge(const Tensor& a, double b);
Tensor ge(double a, const Tensor& b);
/// cond ? a : b elementwise (cond is bool; a, b promoted to one dtype).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);
/// Clamps to [lo, hi].
Tensor clip(const Tensor& x, double lo, double hi);

// ---- reductions (axes empty = all axes; negative axes count from the end) ----------------
Tensor sum(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor prod(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor max(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor min(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor any(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor all(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
/// Index (i64) of the first maximum along `axis`.
Tensor argmax(const Tensor& x, int64_t axis, bool keepdims = false);
Tensor argmin(const Tensor& x, int64_t axis, bool keepdims = false);
Tensor mean(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
/// Variance with `ddof` degrees of freedom removed (0: population variance).
Tensor var(const Tensor& x, const Axes& axes = {}, bool keepdims = false, int ddof = 0);
/// log(sum(exp(x))), shifted by the max for stability.
Tensor logsumexp(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
/// sum and mean that skip NaN (NumPy's nansum, nanmean): NaN elements count as 0 in the sum and
/// are left out of the mean's count; the nanmean of an all-NaN slice is NaN. Their gradient is
/// zero at the NaN elements.
Tensor nansum(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor nanmean(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
/// max and min that skip NaN (NumPy's nanmax, nanmin): NaN only for an all-NaN slice.
Tensor nanmax(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor nanmin(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
/// Inclusive cumulative sum along axis (reverse: from the end).
Tensor cumsum(const Tensor& x, int64_t axis, bool reverse = false);

// ---- sorting (stable; NaN sorts last, or first when descending; docs/ops.md, "Sorting") ------
/// x sorted along axis.
Tensor sort(const Tensor& x, int64_t axis = -1, bool descending = false);
/// The indices (i64) that sort x along axis (NumPy's take_along_axis(x, argsort(x)) is sort(x)).
Tensor argsort(const Tensor& x, int64_t axis = -1, bool descending = false);
/// values reordered along axis as sorting keys would reorder them (lax.sort_key_val's second
/// result); keys and values have one shape, values any dtype. Differentiable in values.
Tensor sort_by_key(const Tensor& keys, const Tensor& values, int64_t axis = -1,
                   bool descending = false);
/// The k largest elements along the last axis, largest first, and their indices (i64):
/// lax.top_k. Equal elements keep their order; NaN counts as the largest.
std::pair<Tensor, Tensor> top_k(const Tensor& x, int64_t k);
/// out[..., j, ...] = x[..., indices[..., j, ...], ...] along axis (NumPy's take_along_axis):
/// indices (integers, x's rank) have any size along axis and x's dims elsewhere (or 1 against a
/// known size: broadcast); negative ones count from the end. An index out of range is an
/// InputError when the function runs. Dims of unknown size are fine.
Tensor take_along_axis(const Tensor& x, const Tensor& indices, int64_t axis);

// ---- activations and normalisers ---------------------------------------------------------
Tensor sigmoid(const Tensor& x);
Tensor log_sigmoid(const Tensor& x);
/// log(1 + exp(x)), stable for large |x|.
Tensor softplus(const Tensor& x);
Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor log_softmax(const Tensor& x, int64_t axis = -1);

// ---- movement ------------------------------------------------------------------------------
/// One target dim may be -1 (inferred from the size).
Tensor reshape(const Tensor& x, const Shape& shape);
/// x with its axes in the order `perm` (NumPy's transpose; the IR op is `permute`); reverses
/// the axes when perm is empty.
Tensor transpose(const Tensor& x, const Axes& perm = {});
/// NumPy broadcast_to; -1 in `shape` keeps x's dim.
Tensor broadcast_to(const Tensor& x, const Shape& shape);
Tensor expand_dims(const Tensor& x, int64_t axis);
/// Removes the given size-1 axes (all size-1 axes when empty).
Tensor squeeze(const Tensor& x, const Axes& axes = {});
/// Collapses dims [start_axis, end] into one.
Tensor flatten(const Tensor& x, int64_t start_axis = 0);
/// Python-style slice per axis: negative bounds count from the end, out-of-range bounds clamp,
/// a negative step walks backwards (Index::kBegin as its stop runs through index 0); step != 0.
Tensor slice(const Tensor& x, const std::vector<int64_t>& start, const std::vector<int64_t>& stop,
             const std::vector<int64_t>& step = {});
/// Slice along one axis.
Tensor slice_axis(const Tensor& x, int64_t axis, int64_t start, int64_t stop, int64_t step = 1);
/// Pads with `value`: lo/hi elements before/after each dim.
Tensor pad(const Tensor& x, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
           double value = 0.0);
/// Pad with interior padding (elements inserted between neighbours).
Tensor pad(const Tensor& x, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
           const std::vector<int64_t>& interior, double value);
Tensor flip(const Tensor& x, const Axes& axes);
Tensor concat(const std::vector<Tensor>& xs, int64_t axis = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t axis = 0);

// ---- indexing ------------------------------------------------------------------------------
/// NumPy take: x.shape[:axis] + indices.shape + x.shape[axis+1:]. Indices (integer dtype) must
/// lie in [0, x.shape[axis]); out-of-range indices raise InputError at call time.
Tensor gather(const Tensor& x, const Tensor& indices, int64_t axis = 0);
/// x with updates added at indices along axis (repeated indices accumulate).
Tensor scatter_add(const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis = 0);
/// x with `updates` combined in at `indices` along axis (shapes as scatter_add):
/// Set replaces (for a repeated index one of its updates wins, which one is unspecified),
/// Add is scatter_add, Mul multiplies, Min and Max keep the smaller or larger (NaN propagates);
/// repeated indices accumulate. Indices out of [0, x.shape[axis]) raise InputError at call time.
Tensor scatter(const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis = 0,
               ScatterMode mode = ScatterMode::Set);
/// Functional indexed updates (SymJAX's index_update and friends): x with x[idx] replaced by v,
/// or combined with it; the same as x.at(idx).set(v), .add(v), .mul(v), .min(v), .max(v). `idx`
/// is the subscript's list: integers, ranges (sl) and integer tensors (docs/ops.md).
Tensor index_update(const Tensor& x, const std::vector<Index>& idx, const Tensor& v);
Tensor index_update(const Tensor& x, const std::vector<Index>& idx, double v);
Tensor index_add(const Tensor& x, const std::vector<Index>& idx, const Tensor& v);
Tensor index_add(const Tensor& x, const std::vector<Index>& idx, double v);
Tensor index_mul(const Tensor& x, const std::vector<Index>& idx, const Tensor& v);
Tensor index_mul(const Tensor& x, const std::vector<Index>& idx, double v);
Tensor index_min(const Tensor& x, const std::vector<Index>& idx, const Tensor& v);
Tensor index_min(const Tensor& x, const std::vector<Index>& idx, double v);
Tensor index_max(const Tensor& x, const std::vector<Index>& idx, const Tensor& v);
Tensor index_max(const Tensor& x, const std::vector<Index>& idx, double v);
/// The indexed update of mode `mode` (what the functions above and IndexedRef call).
Tensor index_apply(const Tensor& x, const std::vector<Index>& idx, const Tensor& v,
                   ScatterMode mode);
/// A window of `sizes` at `starts` (an integer vector, clamped so the window fits, as XLA).
Tensor dynamic_slice(const Tensor& x, const Tensor& starts, const Shape& sizes);
Tensor dynamic_update_slice(const Tensor& x, const Tensor& update, const Tensor& starts);
/// one_hot(i, depth)[..., k] = (i == k); out-of-range indices give a zero row.
Tensor one_hot(const Tensor& indices, int64_t depth, DType dtype = DType::F32);
/// `indices` unchanged, checked when the function runs: an index outside [0, depth) that is not
/// `ignore` throws InputError, before any variable is updated, with a message that starts with
/// `what` (default "check_index: index") and names the value, its position and the tensor.
Tensor check_index(const Tensor& indices, int64_t depth, std::optional<int64_t> ignore = {},
                   const std::string& what = "");

// ---- diagonals ----------------------------------------------------------------------------
/// NumPy's diagonal: the elements x[..., i, ..., i + offset, ...] of the dims axis1 and axis2,
/// which are removed, with the diagonal appended as the last dim (offset > 0: above the main
/// diagonal).
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t axis1 = 0, int64_t axis2 = 1);
/// NumPy's diag: a vector becomes the square matrix with it on the k-th diagonal; a matrix gives
/// its k-th diagonal.
Tensor diag(const Tensor& x, int64_t k = 0);
/// The sum of diagonal(x, offset, axis1, axis2) along its last dim (NumPy's trace).
Tensor trace(const Tensor& x, int64_t offset = 0, int64_t axis1 = 0, int64_t axis2 = 1);

// ---- linear algebra ------------------------------------------------------------------------
struct DotDims {
    Axes lhs_batch, rhs_batch, lhs_contract, rhs_contract;
};
/// General contraction: output dims are batch..., lhs free..., rhs free....
Tensor dot_general(const Tensor& a, const Tensor& b, const DotDims& dims);
/// NumPy matmul: 1-d operands are promoted, leading dims broadcast as batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);
/// Lower Cholesky factor L (A = L L^T) of symmetric positive-definite matrices [..., n, n].
Tensor cholesky(const Tensor& a);
/// Solves op(A) X = B (left_side) or X op(A) = B, with A triangular [..., n, n].
Tensor triangular_solve(const Tensor& a, const Tensor& b, bool left_side = true, bool lower = true,
                        bool transpose_a = false, bool unit_diagonal = false);

// ---- convolution and pooling ---------------------------------------------------------------
// Layout: inputs [N, C, spatial...] (NCW, NCHW, NCDHW, ...), filters [O, C / groups, k...] (OIHW).
// Any number >= 1 of spatial dims; `strides`, `dilation` and `window` take one value per spatial
// dim, or a single value for all of them (empty: 1, or for pools the window).

/// The padding of the spatial dims of a convolution or a pooling window:
///   "VALID"            no padding;
///   "SAME"             out = ceil(in / stride) per dim: the total pad
///                      max((ceil(in / s) - 1) * s + (k - 1) * d + 1 - in, 0) is split with the
///                      smaller half before (TF, JAX); needs the input's spatial dims at build
///                      time;
///   {{lo, hi}, ...}    explicit pads, one (lo, hi) pair per spatial dim (or one pair for all);
///   p                  (p, p) on every spatial dim (PyTorch's padding=p).
class Padding {
public:
    enum class Mode : uint8_t { Valid, Same, Explicit };
    Padding(const char* mode);                              // NOLINT: implicit by design
    Padding(const std::string& mode);                       // NOLINT
    Padding(int p);                                         // NOLINT
    Padding(int64_t p);                                     // NOLINT
    Padding(std::initializer_list<std::pair<int64_t, int64_t>> pads); // NOLINT
    Padding(std::vector<std::pair<int64_t, int64_t>> pads);           // NOLINT
    Mode mode() const { return mode_; }
    const std::vector<std::pair<int64_t, int64_t>>& pairs() const { return pairs_; }
    /// The explicit (lo, hi) pads for inputs of spatial size `in` and windows of size `window`
    /// (with `strides` and `dilation`, all of in.size() entries). `where` starts error messages.
    std::pair<Axes, Axes> resolve(const Shape& in, const Shape& window, const Axes& strides,
                                  const Axes& dilation, const std::string& where) const;
    /// "VALID", "SAME" or "[(1, 1), (0, 2)]".
    std::string str() const;

private:
    Mode mode_ = Mode::Valid;
    std::vector<std::pair<int64_t, int64_t>> pairs_;
};

/// N-d convolution (cross-correlation, as in every deep-learning library): x [N, C, in...],
/// w [O, C / groups, k...] -> [N, O, out...], out = floor((in + lo + hi - (k - 1) * dilation - 1)
/// / stride) + 1. groups = C with O = m * C is a depthwise convolution.
Tensor conv(const Tensor& x, const Tensor& w, const Axes& strides = {},
            const Padding& padding = "VALID", const Axes& dilation = {}, int64_t groups = 1);
/// conv on x [N, C, W] (and w [O, C / groups, k]).
Tensor conv1d(const Tensor& x, const Tensor& w, const Axes& strides = {},
              const Padding& padding = "VALID", const Axes& dilation = {}, int64_t groups = 1);
/// conv on x [N, C, H, W] (and w [O, C / groups, kh, kw]).
Tensor conv2d(const Tensor& x, const Tensor& w, const Axes& strides = {},
              const Padding& padding = "VALID", const Axes& dilation = {}, int64_t groups = 1);
/// Transposed convolution (PyTorch's conv_transpose; "deconvolution"): the gradient of
/// conv(., w) with respect to its input. x [N, C, in...], w [C, O / groups, k...] (the forward
/// conv's filter, PyTorch's conv_transpose layout) -> [N, O, out...] with
/// out = (in - 1) * stride - lo - hi + (k - 1) * dilation + 1 + output_padding, where (lo, hi) are
/// the forward conv's pads; "SAME" gives out = in * stride. output_padding (< stride or
/// < dilation) picks among the sizes the forward conv maps to `in`.
Tensor conv_transpose(const Tensor& x, const Tensor& w, const Axes& strides = {},
                      const Padding& padding = "VALID", const Axes& dilation = {},
                      int64_t groups = 1, const Axes& output_padding = {});
/// Max over each window of x [N, C, in...]; pads are never selected. strides default to the
/// window (PyTorch's default).
Tensor max_pool(const Tensor& x, const Axes& window, const Axes& strides = {},
                const Padding& padding = "VALID");
/// Mean over each window; count_include_pad: divide by the window size, else by the number of
/// elements of x in the window (TF's SAME average pooling).
Tensor avg_pool(const Tensor& x, const Axes& window, const Axes& strides = {},
                const Padding& padding = "VALID", bool count_include_pad = true);
/// max_pool / avg_pool on [N, C, W] and [N, C, H, W] inputs.
Tensor max_pool1d(const Tensor& x, const Axes& window, const Axes& strides = {},
                  const Padding& padding = "VALID");
Tensor max_pool2d(const Tensor& x, const Axes& window, const Axes& strides = {},
                  const Padding& padding = "VALID");
Tensor avg_pool1d(const Tensor& x, const Axes& window, const Axes& strides = {},
                  const Padding& padding = "VALID", bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& x, const Axes& window, const Axes& strides = {},
                  const Padding& padding = "VALID", bool count_include_pad = true);

// The backward primitives (what gradients build; a backend runs them as library calls). Each
// takes the forward op's arguments; `src_spatial` / `kernel_spatial` are the spatial dims of
// the forward's input / filter, which the geometry alone does not fix when stride > 1.
/// d conv(x, w) / dx applied to dy: [N, O, out...] -> [N, C, src_spatial...].
Tensor conv_backward_data(const Tensor& dy, const Tensor& w, const Shape& src_spatial,
                          const Axes& strides = {}, const Padding& padding = "VALID",
                          const Axes& dilation = {}, int64_t groups = 1);
/// d conv(x, w) / dw applied to dy: -> [O, C / groups, kernel_spatial...].
Tensor conv_backward_filter(const Tensor& x, const Tensor& dy, const Shape& kernel_spatial,
                            const Axes& strides = {}, const Padding& padding = "VALID",
                            const Axes& dilation = {}, int64_t groups = 1);
/// d max_pool(x) / dx applied to dy: dy goes to the first maximum of each window of x.
Tensor max_pool_backward(const Tensor& x, const Tensor& dy, const Axes& window,
                         const Axes& strides = {}, const Padding& padding = "VALID");
/// d avg_pool(x) / dx applied to dy: -> [N, C, src_spatial...].
Tensor avg_pool_backward(const Tensor& dy, const Shape& src_spatial, const Axes& window,
                         const Axes& strides = {}, const Padding& padding = "VALID",
                         bool count_include_pad = true);
// ---- operators -----------------------------------------------------------------------------
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
/// mod(a, b): the sign of the divisor, as Python's %.
Tensor operator%(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator!(const Tensor& a);
/// A C++ number next to a tensor takes the tensor's dtype (as a weakly typed scalar).
Tensor operator+(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(const Tensor& a, double b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(const Tensor& a, double b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(const Tensor& a, double b);
Tensor operator/(double a, const Tensor& b);
Tensor operator<(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);
Tensor operator%(const Tensor& a, double b);
Tensor operator%(double a, const Tensor& b);
Tensor operator<(double a, const Tensor& b);
Tensor operator<=(double a, const Tensor& b);
Tensor operator>(double a, const Tensor& b);
Tensor operator>=(double a, const Tensor& b);
/// There is no elementwise operator== or !=: a Tensor is a handle (compare with same()); use
/// eq() and ne().
/// A scalar constant of t's dtype.
Tensor scalar_like(double v, const Tensor& t);

} // namespace sj
