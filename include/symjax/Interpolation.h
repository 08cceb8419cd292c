// Interpolation: sampling a tensor at fractional coordinates (map_coordinates), resizing images
// and volumes (resize) and upsampling along axes (upsample_1d, upsample_2d). All composites of
// gather, floor and where, so their gradients come from autodiff. See docs/ops.md,
// "Interpolation".
#pragma once

#include <symjax/Ops.h>

#include <cstdint>

namespace sj::interpolation {

/// How samples outside the input are defined (n is the size of the dim, i an integer index).
enum class Boundary : uint8_t {
    Constant, ///< cval outside [0, n - 1]; a linear sample blends cval with the edge value
              ///< (scipy's "grid-constant", JAX's "constant")
    Nearest,  ///< the edge value: a a a | a b c d | d d d
    Wrap,     ///< periodic: i mod n (scipy's "grid-wrap", JAX's "wrap")
    Reflect,  ///< half-sample symmetric: b a | a b c d | d c
    Mirror,   ///< whole-sample symmetric: c b | a b c d | c b
};

/// Resampling kernels.
enum class Method : uint8_t {
    Nearest, ///< the nearest sample
    Linear,  ///< linear, bilinear or trilinear
};

/// Samples `input` at `coordinates`, as scipy.ndimage.map_coordinates: coordinates is
/// [input.rank(), ...] (coordinate k of each point along axis k, in index units) and the result
/// has shape coordinates.shape[1:] and input's dtype. order 0 takes the nearest sample
/// (floor(x + 0.5)), order 1 interpolates linearly between the 2^rank neighbours; samples outside
/// the input follow `mode`, with `cval` for Boundary::Constant. input needs static dims; order 1
/// needs a float input (order 0 takes any numeric one). Differentiable with respect to input, and
/// for order 1 with respect to the coordinates (piecewise linear: the derivative at an integer
/// coordinate is the one of the segment to its right).
Tensor map_coordinates(const Tensor& input, const Tensor& coordinates, int order = 1,
                       Boundary mode = Boundary::Constant, double cval = 0.0);

/// Resizes the spatial dims of x [N, C, spatial...] (1, 2 or 3 spatial dims, static) to
/// `spatial_shape`, as torch.nn.functional.interpolate(x, size=spatial_shape, mode=...):
///   Linear (linear, bilinear, trilinear): align_corners false samples output index j at
///     (j + 0.5) * in / out - 0.5 (clamped at 0), true at j * (in - 1) / (out - 1);
///   Nearest with align_corners false: input index floor(j * in / out) (torch's "nearest");
///   Nearest with align_corners true: round(j * (in - 1) / (out - 1)), halves up (torch refuses
///     this combination; it is TF's align_corners nearest, and the corners map to the corners).
/// x must be a float tensor for Linear.
Tensor resize(const Tensor& x, const Shape& spatial_shape, Method method = Method::Linear,
              bool align_corners = false);

/// What upsample_1d puts between the input's samples.
enum class UpsampleMode : uint8_t {
    Constant, ///< `value` (zero-stuffing with the default 0)
    Nearest,  ///< copies of the sample before (each sample repeated repeat + 1 times)
    Linear,   ///< the linear ramp to the next sample; after the last one, to the sample the
              ///< boundary puts at index n (its own value for Boundary::Nearest)
};

/// SymJAX's upsample_1d: inserts `repeat` new samples after each sample of x along `axis`, so the
/// dim grows from n to n * (repeat + 1); sample k of the block after x[i] is, for Linear,
/// x[i] + (x[i + 1] - x[i]) * k / (repeat + 1). `boundary` defines x[n] for Linear (Nearest: the
/// last sample, Wrap: x[0], Reflect: x[n - 1], Mirror: x[n - 2], Constant: `value`). The axis
/// needs a static size for Linear and Nearest. repeat 0 returns x.
Tensor upsample_1d(const Tensor& x, int64_t repeat, int64_t axis = -1,
                   UpsampleMode mode = UpsampleMode::Constant, double value = 0.0,
                   Boundary boundary = Boundary::Nearest);

/// upsample_1d along axes[0] with repeats[0], then along axes[1] with repeats[1] (one repeat for
/// both when repeats has one entry).
Tensor upsample_2d(const Tensor& x, const Axes& repeats, const Axes& axes = {-2, -1},
                   UpsampleMode mode = UpsampleMode::Constant, double value = 0.0,
                   Boundary boundary = Boundary::Nearest);

} // namespace sj::interpolation
