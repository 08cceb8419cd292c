// gather, scatter_add, scatter and cumsum on the CPU (Indexing.h).
#include "Indexing.h"

#include "../reference/Iterate.h"
#include "../reference/Reference.h"
#include "ElementBits.h"
#include "ThreadPool.h"

#include <symjax/Error.h>
#include <symjax/ir/Attrs.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>

namespace sj::cpu {

// Note [Indexing kernels]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The reference kernels read each index through a dtype dispatch, check it, and copy each
// element with memcpy: about 4 ns an element, which made a gather of 1M elements 4 ms and the
// searching composites (Note [Searching by sorting] in src/api/Search.cpp) slower than PyTorch.
// These kernels give the same results, bit for bit, and throw the same errors:
//
//   * The indices are checked in one pass before anything is written: their minimum and
//     maximum, and only when those are out of range a second pass for the first bad one, whose
//     message is the reference's (ref::throw_index_out_of_range).
//   * Elements are copied in typed loops, by width (1, 2, 4 or 8 bytes) when each index picks
//     one element, by memcpy of the row when it picks a row.
//   * Work is split over the thread team only where the split cannot change a bit: a gather
//     over its output, whose elements are each written once; a scatter over its outer rows and
//     over the columns of each row (inner), because every destination element then receives
//     its updates in the reference's order (the index order). A scatter of single elements
//     (inner == 1) into one row runs on one thread: its updates can land anywhere, and a float
//     sum's bits depend on their order. cumsum splits over its lines; each line accumulates in
//     order, in double for floats, as the reference; a single long line of integers is scanned
//     in blocks, one per thread, after the sums of the blocks before (wrapping adds commute).
//   * A team starts only for work of parallel_work() bytes or more (bytes moved), below which
//     starting it costs more than it saves (Note [Parallel work threshold] in CpuExecutable.cpp).

namespace {

/// The first k in [0, m) whose value p[k] (as int64) fails ok, or -1: one pass (on the team for
/// many values) that only finds whether one fails, then, only when one does, a second for the
/// first (the reference names the first in its error).
template <class I, class Ok> int64_t first_failing(const I* p, int64_t m, Ok&& ok) {
    std::atomic<bool> bad{false};
    split_work(m, m * int64_t(sizeof(I)), [&](int64_t k0, int64_t k1) {
        bool b = false;
        for (int64_t k = k0; k < k1; ++k)
            b |= !ok(static_cast<int64_t>(p[k]));
        if (b)
            bad = true;
    });
    for (int64_t k = 0; bad && k < m; ++k)
        if (!ok(static_cast<int64_t>(p[k])))
            return k;
    return -1;
}

/// fn(p) with p the integer values of idx typed (floats are the caller's bug).
template <class F> void with_integers(const Node& node, const Array& idx, F&& fn) {
    dispatch(idx.dtype(), [&](auto tag) {
        using I = typename decltype(tag)::type;
        if constexpr (std::is_floating_point_v<I>)
            SJ_THROW(InternalError)
                << node.describe() << ": indices of dtype " << dtype_name(idx.dtype());
        else
            fn(static_cast<const I*>(idx.raw()));
    });
}

/// Checks indices p[0..m) against [0, len); the reference's error for the first bad one.
template <class I> void check_range(const Node& node, const I* p, int64_t m, int64_t len) {
    const int64_t k = first_failing(p, m, [&](int64_t v) { return v >= 0 && v < len; });
    if (k >= 0)
        ref::throw_index_out_of_range(node, static_cast<int64_t>(p[k]), k, len);
}

/// fn(p) with p the indices (node input 1) typed, after check_range.
template <class F>
void with_checked_indices(const Node& node, const Array& idx, int64_t len, F&& fn) {
    with_integers(node, idx, [&](const auto* p) {
        check_range(node, p, idx.size(), len);
        fn(p);
    });
}

/// q[e] = x[o][j[k]] for the output elements e = o * m + k in [e0, e1), row by row. An index
/// outside [0, len) reads element 0 instead and makes the result true (the caller then throws).
template <class T, class I>
bool gather_elements(const T* x, T* q, const I* j, int64_t len, int64_t m, int64_t e0, int64_t e1) {
    bool bad = false;
    for (int64_t e = e0; e < e1;) {
        const int64_t o = e / m, stop = std::min(e1, (o + 1) * m);
        const T* xo = x + o * len;
        const I* jo = j - o * m;
        for (; e < stop; ++e) {
            int64_t v = int64_t(jo[e]);
            bool out = v < 0 || v >= len;
            bad |= out;
            q[e] = xo[out ? 0 : v];
        }
    }
    return bad;
}

} // namespace

void gather(const Node& node, const std::vector<Array>& in, Array& out, uint64_t) {
    const Array &x = in[0], &idx = in[1];
    int64_t outer, len, inner;
    ref::split_axis(x.shape(), node.attr<AxisAttrs>().axis, outer, len, inner);
    const int64_t m = idx.size(), sz = dtype_size(x.dtype());
    const auto* p = static_cast<const unsigned char*>(x.raw());
    auto* q = static_cast<unsigned char*>(out.raw());
    if (inner == 1 && len > 0 && (sz == 1 || sz == 2 || sz == 4 || sz == 8)) {
        // one pass: the indices are checked as they are used (an index out of range reads
        // element 0), and the first bad one is looked for only when a piece found one
        dispatch(idx.dtype(), [&](auto tag) {
            using I = typename decltype(tag)::type;
            if constexpr (!std::is_floating_point_v<I>) {
                const I* j = static_cast<const I*>(idx.raw());
                const int64_t n = outer * m;
                std::atomic<bool> bad{false};
                auto copy = [&](auto bits) {
                    using B = decltype(bits);
                    split_work(n, n * (2 * sz + int64_t(sizeof(I))), [&](int64_t e0, int64_t e1) {
                        if (gather_elements(reinterpret_cast<const B*>(p), reinterpret_cast<B*>(q),
                                            j, len, m, e0, e1))
                            bad = true;
                    });
                };
                with_element_bits(sz, copy);
                if (bad)
                    check_range(node, j, m, len);
            }
        });
        return;
    }
    with_checked_indices(node, idx, len, [&](const auto* j) {
        const int64_t row = inner * sz, rows = outer * m;
        split_work(rows, rows * 2 * row, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) {
                int64_t o = r / m, k = r % m;
                std::memcpy(q + r * row, p + (o * len + int64_t(j[k])) * row, size_t(row));
            }
        });
    });
}

void scatter(const Node& node, const std::vector<Array>& in, Array& out, uint64_t) {
    const Array &x = in[0], &idx = in[1], &upd = in[2];
    const bool add = node.is(Op::ScatterAdd);
    const int64_t axis = add ? node.attr<AxisAttrs>().axis : node.attr<ScatterAttrs>().axis;
    const ScatterMode mode = add ? ScatterMode::Add : node.attr<ScatterAttrs>().mode;
    int64_t outer, len, inner;
    ref::split_axis(x.shape(), axis, outer, len, inner);
    const int64_t m = idx.size();
    const bool bool_or = x.dtype() == DType::Bool && mode == ScatterMode::Add;
    with_checked_indices(node, idx, len, [&](const auto* j) {
        if (out.raw() != x.raw())
            std::memcpy(out.raw(), x.raw(), size_t(x.nbytes()));
        dispatch(x.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            T* q = static_cast<T*>(out.raw());
            const T* u = static_cast<const T*>(upd.raw());
            // (outer row o, columns [i0, i1)): every update of those elements, in index order
            auto apply = [&](int64_t o, int64_t i0, int64_t i1) {
                for (int64_t k = 0; k < m; ++k) {
                    T* dst = q + (o * len + int64_t(j[k])) * inner;
                    const T* src = u + (o * m + k) * inner;
                    if (bool_or) {
                        for (int64_t i = i0; i < i1; ++i)
                            dst[i] = T(dst[i] || src[i]);
                    } else if (mode == ScatterMode::Set) {
                        for (int64_t i = i0; i < i1; ++i)
                            dst[i] = src[i];
                    } else if (mode == ScatterMode::Add) {
                        for (int64_t i = i0; i < i1; ++i)
                            dst[i] = ref::add_wrap<T>(dst[i], src[i]);
                    } else {
                        for (int64_t i = i0; i < i1; ++i)
                            dst[i] = ref::scatter_combine<T>(mode, dst[i], src[i]);
                    }
                }
            };
            if constexpr (std::is_integral_v<T>) {
                // Integer adds wrap, so they are exact in any order: a scatter_add of single
                // elements into one short row sums on each thread into a row of its own, then adds
                // the rows (counts: bincount, histogram, unique's).
                ThreadPool& pool = ThreadPool::get();
                const int64_t bytes = m * int64_t(sizeof(T) + sizeof(*j));
                if (mode == ScatterMode::Add && !bool_or && inner == 1 && outer == 1 &&
                    pool.threads() > 1 && len * 8 <= m && bytes >= parallel_work()) {
                    const int tasks = pool.threads();
                    std::vector<T> rows(size_t(tasks * len), T(0));
                    pool.run(tasks, [&](int t) {
                        T* r = rows.data() + t * len;
                        for (int64_t k = m * t / tasks, e = m * (t + 1) / tasks; k < e; ++k)
                            r[int64_t(j[k])] = ref::add_wrap<T>(r[int64_t(j[k])], u[k]);
                    });
                    for (int t = 0; t < tasks; ++t)
                        for (int64_t i = 0; i < len; ++i)
                            q[i] = ref::add_wrap<T>(q[i], rows[size_t(t * len + i)]);
                    return;
                }
            }
            // pieces: outer rows times column blocks of at least 64 elements
            const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(inner / 64, 64));
            const int64_t pieces = outer * blocks;
            split_work(pieces, m * outer * inner * 2 * int64_t(sizeof(T)),
                       [&](int64_t p0, int64_t p1) {
                           for (int64_t pc = p0; pc < p1; ++pc) {
                               int64_t o = pc / blocks, b = pc % blocks;
                               apply(o, inner * b / blocks, inner * (b + 1) / blocks);
                           }
                       });
        });
    });
}

void cumsum(const Node& node, const std::vector<Array>& in, Array& out, uint64_t) {
    const Array& x = in[0];
    const auto& a = node.attr<AxisAttrs>();
    int64_t outer, len, inner;
    ref::split_axis(x.shape(), a.axis, outer, len, inner);
    dispatch(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
        const T* p = static_cast<const T*>(x.raw());
        T* q = static_cast<T*>(out.raw());
        if constexpr (std::is_integral_v<T>) {
            // Single long lines of integers (the positions and ranks of Search.cpp): wrapping
            // adds are exact in any order, so each thread scans a block of the line, after an
            // offset of the blocks before it that a first pass summed.
            ThreadPool& pool = ThreadPool::get();
            if (x.dtype() != DType::Bool && inner == 1 && outer == 1 && pool.threads() > 1 &&
                x.nbytes() * 2 >= parallel_work()) {
                const int tasks = pool.threads();
                std::vector<T> block_sum(size_t(tasks) + 1, T(0));
                auto at = [&](int64_t s) { return a.reverse ? len - 1 - s : s; };
                pool.run(tasks, [&](int t) {
                    T r = 0;
                    for (int64_t s = len * t / tasks, e = len * (t + 1) / tasks; s < e; ++s)
                        r = ref::add_wrap<T>(r, p[at(s)]);
                    block_sum[size_t(t) + 1] = r;
                });
                for (int t = 0; t < tasks; ++t)
                    block_sum[size_t(t) + 1] =
                        ref::add_wrap<T>(block_sum[size_t(t)], block_sum[size_t(t) + 1]);
                pool.run(tasks, [&](int t) {
                    T r = block_sum[size_t(t)];
                    for (int64_t s = len * t / tasks, e = len * (t + 1) / tasks; s < e; ++s) {
                        r = ref::add_wrap<T>(r, p[at(s)]);
                        q[at(s)] = r;
                    }
                });
                return;
            }
        }
        // pieces: outer rows times column blocks; each column accumulates along the axis
        const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(inner / 256, 64));
        const int64_t pieces = outer * blocks;
        split_work(pieces, x.nbytes() * 2, [&](int64_t p0, int64_t p1) {
            std::vector<Acc> acc;
            for (int64_t pc = p0; pc < p1; ++pc) {
                int64_t o = pc / blocks, b = pc % blocks;
                int64_t i0 = inner * b / blocks, i1 = inner * (b + 1) / blocks;
                acc.assign(size_t(i1 - i0), Acc(0));
                for (int64_t s = 0; s < len; ++s) {
                    int64_t kk = a.reverse ? len - 1 - s : s;
                    const T* src = p + (o * len + kk) * inner;
                    T* dst = q + (o * len + kk) * inner;
                    for (int64_t i = i0; i < i1; ++i) {
                        Acc& r = acc[size_t(i - i0)];
                        r = ref::add_wrap<Acc>(r, Acc(src[i]));
                        dst[i] = static_cast<T>(r);
                    }
                }
            }
        });
    });
}

void check_index_values(const Node& node, const Array& idx) {
    const auto& a = node.attr<CheckIndexAttrs>();
    const int64_t lo = a.negative ? -a.depth : 0;
    auto ok = [&](int64_t v) {
        return (v >= lo && v < a.depth) || (a.has_ignore && v == a.ignore);
    };
    with_integers(node, idx, [&](const auto* p) {
        const int64_t k = first_failing(p, idx.size(), ok);
        if (k >= 0)
            ref::throw_check_index(node, idx, k, static_cast<int64_t>(p[k]));
    });
}

} // namespace sj::cpu
