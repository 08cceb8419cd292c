// Reference kernels of movement ops: each output element reads one input element (or a pad value).
#include "Iterate.h"
#include "Reference.h"

#include <symjax/ir/Node.h>

#include <cstring>

namespace sj::ref {
namespace {

/// Copies elements: out[i] = in[src(i)] for every output index, or `fill` where src is -1.
template <class SrcFn> Array gather_copy(const KernelCtx& c, SrcFn&& src, double fill = 0.0) {
    const Array& x = c.in[0];
    Array out = Array::full(c.out.dtype, c.out.shape, fill);
    int64_t sz = dtype_size(x.dtype());
    const auto* p = static_cast<const unsigned char*>(x.raw());
    auto* q = static_cast<unsigned char*>(out.raw());
    for_each_index(c.out.shape, {}, [&](int64_t i, const std::vector<int64_t>& idx, const auto&) {
        int64_t s = src(idx);
        if (s >= 0) std::memcpy(q + i * sz, p + s * sz, sz);
    });
    return out;
}

Array reshape_kernel(const KernelCtx& c) { return c.in[0].reshape(c.out.shape); }

Array permute_kernel(const KernelCtx& c) {
    const auto& perm = c.attr<AxesAttrs>().axes;
    auto st = row_major_strides(c.in[0].shape());
    return gather_copy(c, [&](const std::vector<int64_t>& idx) {
        int64_t s = 0;
        for (size_t i = 0; i < perm.size(); ++i) s += idx[i] * st[perm[i]];
        return s;
    });
}

Array broadcast_kernel(const KernelCtx& c) {
    const auto& a = c.attr<BroadcastAttrs>();
    const Shape& s = c.in[0].shape();
    auto st = row_major_strides(s);
    return gather_copy(c, [&](const std::vector<int64_t>& idx) {
        int64_t off = 0;
        for (size_t i = 0; i < a.dims.size(); ++i)
            if (s[i] != 1) off += idx[a.dims[i]] * st[i];
        return off;
    });
}

Array slice_kernel(const KernelCtx& c) {
    const auto& a = c.attr<SliceAttrs>();
    const Shape& s = c.in[0].shape();
    auto st = row_major_strides(s);
    std::vector<int64_t> start(s.size());
    for (size_t i = 0; i < s.size(); ++i)
        start[i] = slice_bounds(s[i], a.start[i], a.stop[i], a.step[i]).start;
    return gather_copy(c, [&](const std::vector<int64_t>& idx) {
        int64_t off = 0;
        for (size_t i = 0; i < s.size(); ++i) off += (start[i] + idx[i] * a.step[i]) * st[i];
        return off;
    });
}

Array pad_kernel(const KernelCtx& c) {
    const auto& a = c.attr<PadAttrs>();
    const Shape& s = c.in[0].shape();
    auto st = row_major_strides(s);
    return gather_copy(
        c,
        [&](const std::vector<int64_t>& idx) {
            int64_t off = 0;
            for (size_t i = 0; i < s.size(); ++i) {
                int64_t k = idx[i] - a.lo[i];
                int64_t step = a.interior[i] + 1;
                if (k < 0 || k % step != 0 || k / step >= s[i]) return int64_t(-1);
                off += (k / step) * st[i];
            }
            return off;
        },
        a.value);
}

Array flip_kernel(const KernelCtx& c) {
    const auto& axes = c.attr<AxesAttrs>().axes;
    const Shape& s = c.in[0].shape();
    auto st = row_major_strides(s);
    std::vector<bool> f(s.size(), false);
    for (int64_t a : axes) f[a] = true;
    return gather_copy(c, [&](const std::vector<int64_t>& idx) {
        int64_t off = 0;
        for (size_t i = 0; i < s.size(); ++i) off += (f[i] ? s[i] - 1 - idx[i] : idx[i]) * st[i];
        return off;
    });
}

Array concat_kernel(const KernelCtx& c) {
    int64_t ax = c.attr<AxisAttrs>().axis;
    Array out(c.out.dtype, c.out.shape);
    int64_t sz = dtype_size(c.out.dtype);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < ax; ++i) outer *= c.out.shape[i];
    for (size_t i = ax + 1; i < c.out.shape.size(); ++i) inner *= c.out.shape[i];
    int64_t out_row = c.out.shape[ax] * inner;
    int64_t col = 0;
    auto* q = static_cast<unsigned char*>(out.raw());
    for (const Array& x : c.in) {
        int64_t row = x.shape()[ax] * inner;
        const auto* p = static_cast<const unsigned char*>(x.raw());
        for (int64_t o = 0; o < outer; ++o)
            if (row > 0) std::memcpy(q + (o * out_row + col) * sz, p + o * row * sz, row * sz);
        col += row;
    }
    return out;
}

} // namespace

void register_movement_kernels(Kernel* t) {
    t[int(Op::Reshape)] = reshape_kernel;
    t[int(Op::Permute)] = permute_kernel;
    t[int(Op::Broadcast)] = broadcast_kernel;
    t[int(Op::Slice)] = slice_kernel;
    t[int(Op::Pad)] = pad_kernel;
    t[int(Op::Flip)] = flip_kernel;
    t[int(Op::Concat)] = concat_kernel;
}

} // namespace sj::ref
