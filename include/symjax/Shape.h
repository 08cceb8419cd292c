// Tensor shapes: each dim a known size or -1 (bound when a function is called).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace sj {

/// A list of dims; -1 means "any size, bound at call time" (kAnyDim).
using Shape = std::vector<int64_t>;
inline constexpr int64_t kAnyDim = -1;

/// "[2, -1, 3]"
std::string shape_str(const Shape& s);
/// Number of elements, or -1 when a dim is unknown. Throws ShapeError naming the shape when the
/// product of its known dims does not fit in int64 (a shape with a 0 dim has 0 elements).
int64_t numel(const Shape& s);
/// numel(s) * elem_size: the bytes of a value of shape s, or -1 when a dim is unknown. Throws
/// ShapeError naming the shape when that (or the known dims' part of it) does not fit in int64.
int64_t byte_size(const Shape& s, int64_t elem_size);
/// True when every dim is known.
bool is_static(const Shape& s);
/// Row-major strides in elements.
std::vector<int64_t> row_major_strides(const Shape& s);
/// Normalises a possibly negative axis against rank; throws ShapeError naming `op` if out of range.
int normalize_axis(int64_t axis, int rank, const char* op);

/// Python-style slice of one dim of size `dim` (start/stop may be negative; step > 0): the first
/// index and the number of elements taken.
struct SliceBounds {
    int64_t start, count;
};
SliceBounds slice_bounds(int64_t dim, int64_t start, int64_t stop, int64_t step);

} // namespace sj
