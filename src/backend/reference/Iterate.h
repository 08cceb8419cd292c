// Helpers for reference kernels: odometer iteration over shapes with per-operand strides.
#pragma once

#include <symjax/Array.h>

#include <vector>

namespace sj::ref {

/// Strides of an operand of shape `in` broadcast (NumPy, right-aligned) to `out`: 0 on
/// broadcast dims.
inline std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
    std::vector<int64_t> st(out.size(), 0);
    auto rm = row_major_strides(in);
    size_t lead = out.size() - in.size();
    for (size_t i = 0; i < in.size(); ++i) st[lead + i] = in[i] == 1 ? 0 : rm[i];
    return st;
}

/// Visits every multi-index of `shape` in row-major order: f(flat, idx, offsets) where
/// offsets[k] is the running offset sum(idx[d] * strides[k][d]) of operand k.
template <class F>
void for_each_index(const Shape& shape, const std::vector<std::vector<int64_t>>& strides, F&& f) {
    int64_t n = numel(shape);
    if (n <= 0) return;
    int r = static_cast<int>(shape.size());
    std::vector<int64_t> idx(r, 0), off(strides.size(), 0);
    for (int64_t flat = 0; flat < n; ++flat) {
        f(flat, idx, off);
        for (int d = r - 1; d >= 0; --d) {
            ++idx[d];
            for (size_t k = 0; k < strides.size(); ++k) off[k] += strides[k][d];
            if (idx[d] < shape[d]) break;
            for (size_t k = 0; k < strides.size(); ++k) off[k] -= strides[k][d] * shape[d];
            idx[d] = 0;
        }
    }
}

template <class T> const T* ptr(const Array& a) { return static_cast<const T*>(a.raw()); }
template <class T> T* ptr(Array& a) { return static_cast<T*>(a.raw()); }

} // namespace sj::ref
