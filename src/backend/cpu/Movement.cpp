// pad, concat, argmax/argmin, one_hot, dynamic_slice and dynamic_update_slice on the CPU
// (Movement.h).
#include "Movement.h"

#include "../reference/Iterate.h"
#include "../reference/Reference.h"
#include "ElementBits.h"
#include "ThreadPool.h"

#include <symjax/Error.h>
#include <symjax/ir/Attrs.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace sj::cpu {

// Note [Row kernels]
// ~~~~~~~~~~~~~~~~~~
// pad, concat, argmax, argmin, one_hot, dynamic_slice and dynamic_update_slice have no
// generated kernel (their fusion class is Fallback), and their reference kernels walk the output
// with an odometer, one memcpy per element, into a new array per call: a pad of 2 MB took 9.8
// ms, an argmax over 2 MB 3 ms. Here they write the call's kept buffer:
//
//   * pad fills the result with the pad value (converted as Array::full converts it), then
//     copies each input row's run along the last dim with one memcpy (an interior pad on the
//     last dim copies element by element);
//   * concat copies each input's row of each outer index;
//   * argmax and argmin give the reference's answer: the first NaN, else the first extreme. A
//     contiguous line is searched for a NaN, then for its extreme by eight compare chains, then
//     for the first element equal to it; columns of an inner dim are scanned side by side with
//     the reference's rule;
//   * one_hot clears each index's row and sets its one;
//   * dynamic_slice copies the window's rows, dynamic_update_slice copies the operand and then
//     the update's rows over it; a row runs along the window's last dim and the dims after the
//     last one it cuts (contiguous on both sides), with the start indices clamped as the
//     reference clamps them (ref::dynamic_starts, which also gives its error).
//
// Rows are split over the team when the work reaches parallel_work(); each output element is
// written by one row, and the arg-reductions scan each line in order, so the bits are the
// reference's at any thread count (tests/unit/IndexingCpuTest.cpp compares them byte for byte).

namespace {

/// Every element of `out` set to the bytes of one element of `value`.
void fill_with(Array& out, const Array& value) {
    const int64_t sz = dtype_size(out.dtype()), n = out.size();
    auto run = [&](auto bits) {
        using B = decltype(bits);
        B v;
        std::memcpy(&v, value.raw(), sizeof(B));
        B* q = static_cast<B*>(out.raw());
        split_work(n, n * sz, [&](int64_t e0, int64_t e1) { std::fill(q + e0, q + e1, v); });
    };
    with_element_bits(sz, run);
}

} // namespace

void pad(const Node& node, const std::vector<Array>& in, Array& out, uint64_t) {
    const Array& x = in[0];
    const auto& a = node.attr<PadAttrs>();
    fill_with(out, Array::full(out.dtype(), {1}, a.value));
    const Shape &s = x.shape(), &os = out.shape();
    const int r = x.rank();
    if (x.size() == 0 || out.size() == 0)
        return;
    const int64_t sz = dtype_size(x.dtype());
    const auto* p = static_cast<const unsigned char*>(x.raw());
    auto* q = static_cast<unsigned char*>(out.raw());
    if (r == 0) {
        std::memcpy(q, p, size_t(sz));
        return;
    }
    const std::vector<int64_t> ost = row_major_strides(os);
    const int last = r - 1;
    const int64_t len = s[size_t(last)], lo = a.lo[size_t(last)];
    const int64_t step = a.interior[size_t(last)] + 1, rows = x.size() / len;
    // (every pad is >= 0, so each input element lands inside the result)
    split_work(rows, out.nbytes() + x.nbytes(), [&](int64_t r0, int64_t r1) {
        for (int64_t row = r0; row < r1; ++row) {
            // the output offset of this input row's start along the dims before the last
            int64_t off = 0, rem = row;
            for (int d = last - 1; d >= 0; --d) {
                const int64_t k = rem % s[size_t(d)];
                rem /= s[size_t(d)];
                off += (a.lo[size_t(d)] + k * (a.interior[size_t(d)] + 1)) * ost[size_t(d)];
            }
            const unsigned char* src = p + row * len * sz;
            unsigned char* dst = q + (off + lo) * sz;
            if (step == 1) {
                std::memcpy(dst, src, size_t(len * sz));
                continue;
            }
            for (int64_t k = 0; k < len; ++k)
                std::memcpy(dst + k * step * sz, src + k * sz, size_t(sz));
        }
    });
}

void concat(const Node& node, const std::vector<Array>& in, Array& out, uint64_t) {
    const int64_t ax = node.attr<AxisAttrs>().axis;
    const Shape& os = out.shape();
    const int64_t sz = dtype_size(out.dtype());
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < ax; ++i)
        outer *= os[size_t(i)];
    for (size_t i = size_t(ax) + 1; i < os.size(); ++i)
        inner *= os[i];
    const int64_t out_row = os[size_t(ax)] * inner;
    auto* q = static_cast<unsigned char*>(out.raw());
    split_work(outer, out.nbytes() * 2, [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) {
            int64_t col = 0;
            for (const Array& x : in) {
                const int64_t row = x.shape()[size_t(ax)] * inner;
                if (row > 0)
                    std::memcpy(q + (o * out_row + col) * sz,
                                static_cast<const unsigned char*>(x.raw()) + o * row * sz,
                                size_t(row * sz));
                col += row;
            }
        }
    });
}

void arg_reduce(const Node& node, const std::vector<Array>& in, Array& out, uint64_t) {
    const Array& x = in[0];
    const bool is_max = node.is(Op::ArgMax);
    int64_t outer, len, inner;
    ref::split_axis(x.shape(), node.attr<ReduceAttrs>().axes[0], outer, len, inner);
    auto* q = static_cast<int64_t*>(out.raw());
    dispatch(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* p = static_cast<const T*>(x.raw());
        // the reference's rule: v replaces the best so far when it is the first, or when the
        // best is not NaN and v is NaN or beyond it (the first NaN wins, then the first extreme)
        auto better = [&](T v, T best) {
            if constexpr (std::is_floating_point_v<T>) {
                if (std::isnan(best))
                    return false;
                if (std::isnan(v))
                    return true;
            }
            return is_max ? v > best : v < best;
        };
        if (inner == 1 && len > 0) {
            // Lines: the first NaN if there is one, else the extreme (eight chains of compares,
            // which NaN-free values make order-free), then the first element equal to it; equal
            // includes -0.0 against 0.0, as the reference's strict compare keeps the first zero.
            auto lines = [&](auto max_tag) {
                constexpr bool mx = decltype(max_tag)::value;
                split_work(outer, x.nbytes(), [&](int64_t o0, int64_t o1) {
                    for (int64_t o = o0; o < o1; ++o) {
                        const T* line = p + o * len;
                        if constexpr (std::is_floating_point_v<T>) {
                            bool nan = false;
                            for (int64_t k = 0; k < len; ++k)
                                nan |= line[k] != line[k];
                            if (nan) {
                                int64_t k = 0;
                                while (!std::isnan(line[k]))
                                    ++k;
                                q[o] = k;
                                continue;
                            }
                        }
                        T m[8];
                        for (T& v : m)
                            v = line[0];
                        int64_t k = 0;
                        for (; k + 8 <= len; k += 8)
                            for (int j = 0; j < 8; ++j)
                                m[j] = (mx ? line[k + j] > m[j] : line[k + j] < m[j]) ? line[k + j]
                                                                                      : m[j];
                        for (; k < len; ++k)
                            m[0] = (mx ? line[k] > m[0] : line[k] < m[0]) ? line[k] : m[0];
                        T best = m[0];
                        for (int j = 1; j < 8; ++j)
                            best = (mx ? m[j] > best : m[j] < best) ? m[j] : best;
                        k = 0;
                        while (line[k] != best)
                            ++k;
                        q[o] = k;
                    }
                });
            };
            if (is_max)
                lines(std::true_type{});
            else
                lines(std::false_type{});
            return;
        }
        const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(inner / 64, 64));
        split_work(outer * blocks, x.nbytes(), [&](int64_t p0, int64_t p1) {
            std::vector<T> best;
            for (int64_t pc = p0; pc < p1; ++pc) {
                const int64_t o = pc / blocks, b = pc % blocks;
                const int64_t i0 = inner * b / blocks, i1 = inner * (b + 1) / blocks;
                int64_t* arg = q + o * inner;
                const T* line = p + o * len * inner;
                if (len == 0) {
                    std::fill(arg + i0, arg + i1, int64_t(-1));
                    continue;
                }
                best.assign(line + i0, line + i1);
                std::fill(arg + i0, arg + i1, int64_t(0));
                for (int64_t k = 1; k < len; ++k) {
                    const T* row = line + k * inner;
                    for (int64_t i = i0; i < i1; ++i)
                        if (better(row[i], best[size_t(i - i0)])) {
                            best[size_t(i - i0)] = row[i];
                            arg[i] = k;
                        }
                }
            }
        });
    });
}

void one_hot(const Node& node, const std::vector<Array>& in, Array& out, uint64_t) {
    const Array& idx = in[0];
    const int64_t depth = node.attr<OneHotAttrs>().depth, m = idx.size();
    const int64_t sz = dtype_size(out.dtype());
    dispatch(out.dtype(), [&](auto out_tag) {
        using T = typename decltype(out_tag)::type;
        T* q = static_cast<T*>(out.raw());
        dispatch(idx.dtype(), [&](auto idx_tag) {
            using I = typename decltype(idx_tag)::type;
            const I* j = static_cast<const I*>(idx.raw());
            split_work(m, m * depth * sz, [&](int64_t k0, int64_t k1) {
                std::memset(q + k0 * depth, 0, size_t((k1 - k0) * depth * sz));
                for (int64_t k = k0; k < k1; ++k) {
                    const int64_t v = static_cast<int64_t>(j[k]);
                    if (v >= 0 && v < depth)
                        q[k * depth + v] = T(1);
                }
            });
        });
    });
}

namespace {

/// Copies the window of `sizes` at `starts` of a row-major array of shape `big` to or from
/// (`into_big`) a dense array of the window's shape, by rows: `win` and `big_data` as bytes.
void copy_window(const Shape& big, const Shape& sizes, const std::vector<int64_t>& starts,
                 int64_t sz, unsigned char* big_data, unsigned char* win, bool into_big) {
    const size_t r = big.size();
    if (numel(sizes) == 0)
        return;
    // dims k.. form one contiguous run on both sides: every dim after k is whole
    size_t k = r == 0 ? 0 : r - 1;
    while (k > 0 && sizes[k] == big[k])
        --k;
    int64_t run = 1;
    for (size_t d = k; d < r; ++d)
        run *= sizes[d];
    const int64_t rows = numel(sizes) / run;
    const std::vector<int64_t> st = row_major_strides(big);
    const int64_t base = r == 0 ? 0 : starts[k] * st[k];
    split_work(rows, 2 * rows * run * sz, [&](int64_t r0, int64_t r1) {
        for (int64_t row = r0; row < r1; ++row) {
            int64_t off = base, rem = row;
            for (size_t d = k; d-- > 0;) {
                off += (starts[d] + rem % sizes[d]) * st[d];
                rem /= sizes[d];
            }
            unsigned char* b = big_data + off * sz;
            unsigned char* w = win + row * run * sz;
            if (into_big)
                std::memcpy(b, w, size_t(run * sz));
            else
                std::memcpy(w, b, size_t(run * sz));
        }
    });
}

} // namespace

void dynamic_slice(const Node& node, const std::vector<Array>& in, Array& out, uint64_t) {
    const Array& x = in[0];
    const std::vector<int64_t> s0 = ref::dynamic_starts(node, in[1], x.shape(), out.shape());
    copy_window(x.shape(), out.shape(), s0, dtype_size(x.dtype()),
                static_cast<unsigned char*>(const_cast<void*>(x.raw())),
                static_cast<unsigned char*>(out.raw()), false);
}

void dynamic_update_slice(const Node& node, const std::vector<Array>& in, Array& out, uint64_t) {
    const Array &x = in[0], &u = in[1];
    const std::vector<int64_t> s0 = ref::dynamic_starts(node, in[2], x.shape(), u.shape());
    if (out.raw() != x.raw()) {
        const auto* p = static_cast<const unsigned char*>(x.raw());
        auto* q = static_cast<unsigned char*>(out.raw());
        const int64_t n = x.nbytes();
        split_work(n, 2 * n,
                   [&](int64_t b0, int64_t b1) { std::memcpy(q + b0, p + b0, size_t(b1 - b0)); });
    }
    copy_window(x.shape(), u.shape(), s0, dtype_size(x.dtype()),
                static_cast<unsigned char*>(out.raw()),
                static_cast<unsigned char*>(const_cast<void*>(u.raw())), true);
}

} // namespace sj::cpu
