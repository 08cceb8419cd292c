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
    if (v < 0 || v >= len)
        throw_index_out_of_range(c.node, v, k, len);
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
                    dst = bool_or ? T(dst || src) : scatter_combine<T>(mode, dst, src);
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

Array dynamic_slice_kernel(const KernelCtx& c) {
    const Array &x = c.in[0], &starts = c.in[1];
    auto s0 = dynamic_starts(c.node, starts, x.shape(), c.out.shape);
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
    auto s0 = dynamic_starts(c.node, starts, x.shape(), u.shape());
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

Array check_index_kernel(const KernelCtx& c) {
    const Array& idx = c.in[0];
    const auto& a = c.attr<CheckIndexAttrs>();
    const int64_t lo = a.negative ? -a.depth : 0;
    // a typed pass that only finds whether any index is bad (the cpu backend runs this kernel
    // too, on every batch of labels); then the first bad one, for the error
    bool bad = false;
    dispatch(idx.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* p = ptr<T>(idx);
        for (int64_t k = 0; k < idx.size(); ++k) {
            int64_t v = static_cast<int64_t>(p[k]);
            bad |= !((v >= lo && v < a.depth) || (a.has_ignore && v == a.ignore));
        }
    });
    for (int64_t k = 0; bad && k < idx.size(); ++k) {
        int64_t v = index_at(idx, k);
        if (!((v >= lo && v < a.depth) || (a.has_ignore && v == a.ignore)))
            throw_check_index(c.node, idx, k, v);
    }
    return idx;
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

} // namespace

void throw_index_out_of_range(const Node& node, int64_t v, int64_t k, int64_t len) {
    SJ_THROW(InputError) << node.describe() << ": index " << v << " (at position " << k << " of "
                         << node.input(1)->describe() << ") is out of range [0, " << len << ")";
}

std::vector<int64_t> dynamic_starts(const Node& node, const Array& starts, const Shape& shape,
                                    const Shape& sizes) {
    SJ_CHECK(starts.size() == int64_t(shape.size()), InputError)
        << node.describe() << ": " << starts.size() << " start indices for rank " << shape.size();
    std::vector<int64_t> s(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) {
        int64_t v = index_at(starts, static_cast<int64_t>(i));
        int64_t hi = shape[i] - sizes[i];
        s[i] = v < 0 ? 0 : (v > hi ? hi : v);
    }
    return s;
}

void throw_check_index(const Node& node, const Array& idx, int64_t k, int64_t v) {
    const auto& a = node.attr<CheckIndexAttrs>();
    int64_t lo = a.negative ? -a.depth : 0;
    SJ_THROW(InputError) << a.what << " " << v << " at position " << position_str(idx.shape(), k)
                         << " of " << node.input(0)->describe() << " " << idx.type_str()
                         << " is out of range [" << lo << ", " << a.depth << ")"
                         << (a.has_ignore
                                 ? " and is not the ignore_index " + std::to_string(a.ignore)
                                 : std::string());
}

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
