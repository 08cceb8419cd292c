// Helpers for reference kernels: odometer iteration over shapes with per-operand strides.
#pragma once

#include <symjax/Array.h>
#include <symjax/Tensor.h>

#include <cmath>

#include <type_traits>
#include <vector>

namespace sj::ref {

/// Strides of an operand of shape `in` broadcast (NumPy, right-aligned) to `out`: 0 on
/// broadcast dims.
/// Splits a shape around `axis` into (outer, len, inner): the elements before, along and after.
inline void split_axis(const Shape& s, int64_t axis, int64_t& outer, int64_t& len, int64_t& inner) {
    outer = 1;
    inner = 1;
    for (int64_t i = 0; i < axis; ++i)
        outer *= s[size_t(i)];
    len = s[size_t(axis)];
    for (size_t i = size_t(axis) + 1; i < s.size(); ++i)
        inner *= s[i];
}

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

/// The unsigned type in which T's arithmetic wraps without promotion to a signed int (Note
/// [Integer arithmetic wraps] in ElementwiseKernels.cpp).
template <class T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
template <class T, class U> T wrap(U v) {
    return static_cast<T>(v);
}
/// a + b and a * b: in double for floats, wrapping for integers.
template <class T> T add_wrap(T a, T b) {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bool>)
        return T(a + b);
    else
        return wrap<T>(Wide<T>(a) + Wide<T>(b));
}
template <class T> T mul_wrap(T a, T b) {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bool>)
        return T(a * b);
    else
        return wrap<T>(Wide<T>(a) * Wide<T>(b));
}

/// One update combined into the element it lands on (Ops.h scatter; NaN propagates through min
/// and max as in minimum/maximum; integers wrap; on bools, stored as 0 or 1, mul and min are a
/// logical and, max an or). Add is the scatter_add op, never a scatter node (its type rule).
template <class T> T scatter_combine(ScatterMode mode, T dst, T src) {
    switch (mode) {
    case ScatterMode::Set:
        return src;
    case ScatterMode::Add:
        return add_wrap<T>(dst, src);
    case ScatterMode::Mul:
        if constexpr (std::is_floating_point_v<T>)
            return T(double(dst) * double(src));
        else
            return mul_wrap<T>(dst, src);
    case ScatterMode::Min:
        if constexpr (std::is_floating_point_v<T>)
            if (std::isnan(dst) || std::isnan(src))
                return T(NAN);
        return src < dst ? src : dst;
    case ScatterMode::Max:
        if constexpr (std::is_floating_point_v<T>)
            if (std::isnan(dst) || std::isnan(src))
                return T(NAN);
        return src > dst ? src : dst;
    }
    return dst;
}

template <class T> const T* ptr(const Array& a) { return static_cast<const T*>(a.raw()); }
template <class T> T* ptr(Array& a) { return static_cast<T*>(a.raw()); }

} // namespace sj::ref
