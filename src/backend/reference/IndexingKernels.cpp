// Reference kernels of the indexing ops (indices are checked; out of range is an InputError).
#include "Iterate.h"
#include "Reference.h"

#include <symjax/ir/Node.h>

#include <cmath>
#include <cstring>
#include <type_traits>

namespace sj::ref {
namespace {

int64_t index_at(const Array& idx, int64_t i) {
    return dispatch(idx.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        return static_cast<int64_t>(ptr<T>(idx)[i]);
    });
}

int64_t checked_index(const KernelCtx& c, const Array& idx, int64_t k, int64_t len) {
    int64_t v = index_at(idx, k);
    SJ_CHECK(v >= 0 && v < len, InputError)
        << c.node.describe() << ": index " << v << " (at position " << k << " of "
        << c.node.input(1)->describe() << ") is out of range [0, " << len << ")";
    return v;
}

Array gather_kernel(const KernelCtx& c) {
    const Array &x = c.in[0], &idx = c.in[1];
    int64_t outer, len, inner;
    split_axis(x.shape(), c.attr<AxisAttrs>().axis, outer, len, inner);
    Array out(c.out.dtype, c.out.shape);
    int64_t sz = dtype_size(x.dtype());
    int64_t m = idx.size();
    const auto* p = static_cast<const unsigned char*>(x.raw());
    auto* q = static_cast<unsigned char*>(out.raw());
    for (int64_t k = 0; k < m; ++k) {
        int64_t j = checked_index(c, idx, k, len);
        for (int64_t o = 0; o < outer; ++o)
            std::memcpy(q + ((o * m + k) * inner) * sz, p + ((o * len + j) * inner) * sz,
                        inner * sz);
    }
    return out;
}

/// One update combined into the element it lands on (Ops.h scatter; NaN propagates through min
/// and max as in minimum/maximum; integers wrap; on bools, stored as 0 or 1, mul and min are a
/// logical and, max an or). Add is the scatter_add op, never a scatter node (its type rule).
template <class T> T combine(ScatterMode mode, T dst, T src) {
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

/// Updates in index order (k, then the outer and inner positions): for Set the last update of a
/// repeated index wins, which the gradient's winner mask relies on (src/ops/Indexing.cpp).
/// scatter_add is mode Add, which on bools is a logical or.
Array scatter_into(const KernelCtx& c, int64_t axis, ScatterMode mode) {
    const Array &x = c.in[0], &idx = c.in[1], &upd = c.in[2];
    int64_t outer, len, inner;
    split_axis(x.shape(), axis, outer, len, inner);
    Array out = x.clone();
    int64_t m = idx.size();
    const bool bool_or = x.dtype() == DType::Bool && mode == ScatterMode::Add;
    dispatch(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* q = ptr<T>(out);
        const T* u = ptr<T>(upd);
        for (int64_t k = 0; k < m; ++k) {
            int64_t j = checked_index(c, idx, k, len);
            for (int64_t o = 0; o < outer; ++o)
                for (int64_t i = 0; i < inner; ++i) {
                    T& dst = q[(o * len + j) * inner + i];
                    T src = u[(o * m + k) * inner + i];
                    dst = bool_or ? T(dst || src) : combine<T>(mode, dst, src);
                }
        }
    });
    return out;
}

Array scatter_add_kernel(const KernelCtx& c) {
    return scatter_into(c, c.attr<AxisAttrs>().axis, ScatterMode::Add);
}

Array scatter_kernel(const KernelCtx& c) {
    const auto& a = c.attr<ScatterAttrs>();
    return scatter_into(c, a.axis, a.mode);
}

/// Start indices clamped so a window of `sizes` fits in `shape` (XLA semantics).
std::vector<int64_t> clamped_starts(const Array& starts, const Shape& shape, const Shape& sizes) {
    std::vector<int64_t> s(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) {
        int64_t v = index_at(starts, static_cast<int64_t>(i));
        int64_t hi = shape[i] - sizes[i];
        s[i] = v < 0 ? 0 : (v > hi ? hi : v);
    }
    return s;
}

void check_starts_size(const KernelCtx& c, const Array& starts, size_t rank) {
    SJ_CHECK(starts.size() == int64_t(rank), InputError)
        << c.node.describe() << ": " << starts.size() << " start indices for rank " << rank;
}

Array dynamic_slice_kernel(const KernelCtx& c) {
    const Array &x = c.in[0], &starts = c.in[1];
    check_starts_size(c, starts, x.shape().size());
    auto s0 = clamped_starts(starts, x.shape(), c.out.shape);
    auto st = row_major_strides(x.shape());
    Array out(c.out.dtype, c.out.shape);
    int64_t sz = dtype_size(x.dtype());
    const auto* p = static_cast<const unsigned char*>(x.raw());
    auto* q = static_cast<unsigned char*>(out.raw());
    for_each_index(c.out.shape, {}, [&](int64_t i, const std::vector<int64_t>& idx, const auto&) {
        int64_t off = 0;
        for (size_t d = 0; d < idx.size(); ++d)
            off += (s0[d] + idx[d]) * st[d];
        std::memcpy(q + i * sz, p + off * sz, sz);
    });
    return out;
}

Array dus_kernel(const KernelCtx& c) {
    const Array &x = c.in[0], &u = c.in[1], &starts = c.in[2];
    check_starts_size(c, starts, x.shape().size());
    auto s0 = clamped_starts(starts, x.shape(), u.shape());
    auto st = row_major_strides(x.shape());
    Array out = x.clone();
    int64_t sz = dtype_size(x.dtype());
    const auto* p = static_cast<const unsigned char*>(u.raw());
    auto* q = static_cast<unsigned char*>(out.raw());
    for_each_index(u.shape(), {}, [&](int64_t i, const std::vector<int64_t>& idx, const auto&) {
        int64_t off = 0;
        for (size_t d = 0; d < idx.size(); ++d)
            off += (s0[d] + idx[d]) * st[d];
        std::memcpy(q + off * sz, p + i * sz, sz);
    });
    return out;
}

Array one_hot_kernel(const KernelCtx& c) {
    const Array& idx = c.in[0];
    int64_t depth = c.attr<OneHotAttrs>().depth;
    Array out(c.out.dtype, c.out.shape);
    dispatch(c.out.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* q = ptr<T>(out);
        for (int64_t k = 0; k < idx.size(); ++k) {
            int64_t v = index_at(idx, k);
            if (v >= 0 && v < depth)
                q[k * depth + v] = T(1);
        }
    });
    return out;
}

/// "[1, 2]": the multi-index of flat position k in shape s.
std::string position_str(const Shape& s, int64_t k) {
    Shape idx(s.size());
    for (size_t d = s.size(); d-- > 0;) {
        idx[d] = s[d] > 0 ? k % s[d] : 0;
        k = s[d] > 0 ? k / s[d] : 0;
    }
    return shape_str(idx);
}

Array check_index_kernel(const KernelCtx& c) {
    const Array& idx = c.in[0];
    const auto& a = c.attr<CheckIndexAttrs>();
    for (int64_t k = 0; k < idx.size(); ++k) {
        int64_t v = index_at(idx, k);
        int64_t lo = a.negative ? -a.depth : 0;
        if ((v >= lo && v < a.depth) || (a.has_ignore && v == a.ignore))
            continue;
        SJ_THROW(InputError) << a.what << " " << v << " at position "
                             << position_str(idx.shape(), k) << " of "
                             << c.node.input(0)->describe() << " " << idx.type_str()
                             << " is out of range [" << lo << ", " << a.depth << ")"
                             << (a.has_ignore
                                     ? " and is not the ignore_index " + std::to_string(a.ignore)
                                     : std::string());
    }
    return idx;
}

} // namespace

void register_indexing_kernels(Kernel* t) {
    t[int(Op::Gather)] = gather_kernel;
    t[int(Op::ScatterAdd)] = scatter_add_kernel;
    t[int(Op::Scatter)] = scatter_kernel;
    t[int(Op::DynamicSlice)] = dynamic_slice_kernel;
    t[int(Op::DynamicUpdateSlice)] = dus_kernel;
    t[int(Op::OneHot)] = one_hot_kernel;
    t[int(Op::CheckIndex)] = check_index_kernel;
}

} // namespace sj::ref
