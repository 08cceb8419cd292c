// Reference kernels of conv, pool and their backward ops: N-d loops over a window table, sums
// in double. The oracle for the oneDNN path (src/backend/cpu/Conv.cpp).
#include "../../ops/ChannelBlocking.h"
#include "Iterate.h"
#include "Reference.h"

#include <symjax/ir/Node.h>

#include <cmath>
#include <cstring>

namespace sj::ref {
namespace {

Shape spatial(const Shape& s) { return Shape(s.begin() + 2, s.end()); }

/// For output position o (flat over the output's spatial dims) and window position kk (flat over
/// the window), table[o * K + kk] is the flat spatial offset of the input element the window
/// reads there, or -1 where it reads padding. Input index per dim: o * stride - lo + kk * dilation.
std::vector<int64_t> window_table(const Shape& in, const Shape& window, const Shape& out,
                                  const std::vector<int64_t>& strides,
                                  const std::vector<int64_t>& lo,
                                  const std::vector<int64_t>& dilation) {
    size_t n = in.size();
    int64_t P = numel(out), K = numel(window);
    auto in_st = row_major_strides(in);
    std::vector<int64_t> table(size_t(P * K), -1), oi(n), ki(n);
    for (int64_t o = 0; o < P; ++o) {
        for (int64_t r = o, d = int64_t(n) - 1; d >= 0; --d) {
            oi[d] = r % out[d];
            r /= out[d];
        }
        for (int64_t kk = 0; kk < K; ++kk) {
            for (int64_t r = kk, d = int64_t(n) - 1; d >= 0; --d) {
                ki[d] = r % window[d];
                r /= window[d];
            }
            int64_t off = 0;
            bool inside = true;
            for (size_t d = 0; d < n && inside; ++d) {
                int64_t pos = oi[d] * strides[d] - lo[d] + ki[d] * dilation[d];
                inside = pos >= 0 && pos < in[d];
                off += pos * in_st[d];
            }
            if (inside) table[size_t(o * K + kk)] = off;
        }
    }
    return table;
}

/// The sizes every conv kernel loops over: x [N, C, in...], w [O, C / G, k...], y [N, O, out...].
struct ConvDims {
    int64_t N, C, O, I, G, S, K, P; // S, K, P: input, filter and output spatial sizes
    std::vector<int64_t> table;
    ConvDims(const Shape& x, const Shape& w, const Shape& y, const ConvAttrs& a)
        : N(x[0]), C(x[1]), O(w[0]), I(w[1]), G(conv_groups(a, x[1])), S(numel(spatial(x))),
          K(numel(spatial(w))), P(numel(spatial(y))),
          table(window_table(spatial(x), spatial(w), spatial(y), a.strides, a.pad_lo, a.dilation)) {
    }
    /// The first input channel of output channel oc's group.
    int64_t first_channel(int64_t oc) const { return oc / (O / G) * I; }
};

template <class T> Array cast_from(const std::vector<double>& acc, const TensorType& t) {
    Array out(t.dtype, t.shape);
    T* p = ptr<T>(out);
    for (size_t i = 0; i < acc.size(); ++i) p[i] = static_cast<T>(acc[i]);
    return out;
}

template <class F> Array float_dispatch(DType d, F&& f) {
    SJ_ASSERT(d == DType::F32 || d == DType::F64) << "conv/pool kernel on " << dtype_name(d);
    return d == DType::F32 ? f(float{}) : f(double{});
}

/// Calls f(xi, wi, yi) for every product x[xi] * w[wi] that contributes to y[yi] (flat indices
/// into x [N, C, in...], w [O, C / G, k...] and y [N, O, out...]), in the order n, oc, o, ic, kk.
/// The three conv kernels are this loop with the sum landing in y, x or w.
template <class F> void for_each_product(const ConvDims& d, F&& f) {
    for (int64_t n = 0; n < d.N; ++n)
        for (int64_t oc = 0; oc < d.O; ++oc)
            for (int64_t o = 0; o < d.P; ++o) {
                const int64_t* row = &d.table[size_t(o * d.K)];
                int64_t yi = (n * d.O + oc) * d.P + o;
                for (int64_t ic = 0; ic < d.I; ++ic) {
                    int64_t xc = (n * d.C + d.first_channel(oc) + ic) * d.S;
                    int64_t wk = (oc * d.I + ic) * d.K;
                    for (int64_t kk = 0; kk < d.K; ++kk)
                        if (row[kk] >= 0) f(xc + row[kk], wk + kk, yi);
                }
            }
}

// y[n, oc, o] = sum over the group's input channels ic and window positions kk of
// x[n, g(oc) + ic, at(o, kk)] * w[oc, ic, kk]
Array conv_kernel(const KernelCtx& c) {
    const Array& x = c.in[0];
    const Array& w = c.in[1];
    ConvDims d(x.shape(), w.shape(), c.out.shape, c.attr<ConvAttrs>());
    return float_dispatch(c.out.dtype, [&](auto tag) {
        using T = decltype(tag);
        const T* px = ptr<T>(x);
        const T* pw = ptr<T>(w);
        std::vector<double> acc(size_t(d.N * d.O * d.P), 0.0);
        for_each_product(d, [&](int64_t xi, int64_t wi, int64_t yi) {
            acc[size_t(yi)] += double(px[xi]) * double(pw[wi]);
        });
        return cast_from<T>(acc, c.out);
    });
}

// the adjoint of conv in x: every product x[...] * w[...] of the forward sends dy * w back to x
Array conv_backward_data_kernel(const KernelCtx& c) {
    const Array& dy = c.in[0];
    const Array& w = c.in[1];
    ConvDims d(c.out.shape, w.shape(), dy.shape(), c.attr<ConvAttrs>());
    return float_dispatch(c.out.dtype, [&](auto tag) {
        using T = decltype(tag);
        const T* pd = ptr<T>(dy);
        const T* pw = ptr<T>(w);
        std::vector<double> acc(size_t(d.N * d.C * d.S), 0.0);
        for_each_product(d, [&](int64_t xi, int64_t wi, int64_t yi) {
            acc[size_t(xi)] += double(pd[yi]) * double(pw[wi]);
        });
        return cast_from<T>(acc, c.out);
    });
}

// the adjoint of conv in w: dw[oc, ic, kk] = sum over n, o of dy[n, oc, o] * x[n, g + ic,
// at(o, kk)]
Array conv_backward_filter_kernel(const KernelCtx& c) {
    const Array& x = c.in[0];
    const Array& dy = c.in[1];
    ConvDims d(x.shape(), c.out.shape, dy.shape(), c.attr<ConvAttrs>());
    return float_dispatch(c.out.dtype, [&](auto tag) {
        using T = decltype(tag);
        const T* px = ptr<T>(x);
        const T* pd = ptr<T>(dy);
        std::vector<double> acc(size_t(d.O * d.I * d.K), 0.0);
        for_each_product(d, [&](int64_t xi, int64_t wi, int64_t yi) {
            acc[size_t(wi)] += double(pd[yi]) * double(px[xi]);
        });
        return cast_from<T>(acc, c.out);
    });
}

/// The sizes every pool kernel loops over: planes (N * C) of S input and P output elements.
struct PoolDims {
    int64_t planes, S, K, P;
    std::vector<int64_t> table;
    PoolDims(const Shape& x, const Shape& y, const PoolAttrs& a)
        : planes(x[0] * x[1]), S(numel(spatial(x))), K(numel(a.window)), P(numel(spatial(y))),
          table(window_table(spatial(x), a.window, spatial(y), a.strides, a.pad_lo,
                             std::vector<int64_t>(a.window.size(), 1))) {}
};

/// The offset of the first maximum in window row `row` of plane `xp` (the first NaN if any).
/// Pads are never selected; every window holds an input element (pads < window).
template <class T> int64_t argmax_in_window(const T* xp, const int64_t* row, int64_t K) {
    int64_t best = -1;
    for (int64_t kk = 0; kk < K; ++kk) {
        int64_t off = row[kk];
        if (off < 0) continue;
        if (best < 0) {
            best = off;
            continue;
        }
        T b = xp[best], v = xp[off];
        if (std::isnan(b)) break;
        if (std::isnan(v) || v > b) best = off;
    }
    return best;
}

/// Number of input elements (not pads) in window row `row`.
int64_t inside_count(const int64_t* row, int64_t K) {
    int64_t n = 0;
    for (int64_t kk = 0; kk < K; ++kk) n += row[kk] >= 0;
    return n;
}

Array pool_kernel(const KernelCtx& c) {
    const Array& x = c.in[0];
    const auto& a = c.attr<PoolAttrs>();
    PoolDims d(x.shape(), c.out.shape, a);
    return float_dispatch(c.out.dtype, [&](auto tag) {
        using T = decltype(tag);
        std::vector<double> acc(size_t(d.planes * d.P), 0.0);
        for (int64_t pl = 0; pl < d.planes; ++pl) {
            const T* xp = ptr<T>(x) + pl * d.S;
            for (int64_t o = 0; o < d.P; ++o) {
                const int64_t* row = &d.table[size_t(o * d.K)];
                double r;
                if (a.kind == PoolKind::Max) {
                    r = double(xp[argmax_in_window(xp, row, d.K)]);
                } else {
                    double s = 0;
                    for (int64_t kk = 0; kk < d.K; ++kk)
                        if (row[kk] >= 0) s += double(xp[row[kk]]);
                    r = s / double(a.count_include_pad ? d.K : inside_count(row, d.K));
                }
                acc[size_t(pl * d.P + o)] = r;
            }
        }
        return cast_from<T>(acc, c.out);
    });
}

// dy[o] goes to the first maximum of window o of x (overlapping windows accumulate)
Array max_pool_backward_kernel(const KernelCtx& c) {
    const Array& x = c.in[0];
    const Array& dy = c.in[1];
    PoolDims d(x.shape(), dy.shape(), c.attr<PoolAttrs>());
    return float_dispatch(c.out.dtype, [&](auto tag) {
        using T = decltype(tag);
        std::vector<double> acc(size_t(d.planes * d.S), 0.0);
        for (int64_t pl = 0; pl < d.planes; ++pl) {
            const T* xp = ptr<T>(x) + pl * d.S;
            const T* gp = ptr<T>(dy) + pl * d.P;
            for (int64_t o = 0; o < d.P; ++o)
                acc[size_t(pl * d.S + argmax_in_window(xp, &d.table[size_t(o * d.K)], d.K))] +=
                    double(gp[o]);
        }
        return cast_from<T>(acc, c.out);
    });
}

// dy[o] / divisor goes to every input element of window o
Array avg_pool_backward_kernel(const KernelCtx& c) {
    const Array& dy = c.in[0];
    const auto& a = c.attr<PoolAttrs>();
    PoolDims d(c.out.shape, dy.shape(), a);
    return float_dispatch(c.out.dtype, [&](auto tag) {
        using T = decltype(tag);
        std::vector<double> acc(size_t(d.planes * d.S), 0.0);
        for (int64_t pl = 0; pl < d.planes; ++pl) {
            const T* gp = ptr<T>(dy) + pl * d.P;
            for (int64_t o = 0; o < d.P; ++o) {
                const int64_t* row = &d.table[size_t(o * d.K)];
                double g = double(gp[o]) /
                           double(a.count_include_pad ? d.K : inside_count(row, d.K));
                for (int64_t kk = 0; kk < d.K; ++kk)
                    if (row[kk] >= 0) acc[size_t(pl * d.S + row[kk])] += g;
            }
        }
        return cast_from<T>(acc, c.out);
    });
}

/// Copies between [N, C, S] (S: the flat spatial size) and [N, C / B, S, B], either way
/// (Note [Channel-blocked layout]); `block`: B when blocking (unblocking reads it from the shape).
Array reblock(const Array& src, bool to_blocked, int64_t block = 0) {
    const Shape to = to_blocked ? detail::blocked_shape(src.shape(), block)
                                : detail::unblocked_shape(src.shape());
    const int64_t B = to_blocked ? block : src.shape().back();
    Array out(src.dtype(), to);
    const Shape& logical = to_blocked ? src.shape() : to;
    int64_t N = logical[0], C = logical[1], S = numel(spatial(logical));
    size_t es = size_t(dtype_size(src.dtype()));
    const char* from = static_cast<const char*>(src.raw());
    char* dst = static_cast<char*>(out.raw());
    for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c)
            for (int64_t s = 0; s < S; ++s) {
                int64_t plain = (n * C + c) * S + s;
                int64_t blocked = ((n * (C / B) + c / B) * S + s) * B + c % B;
                int64_t i = to_blocked ? plain : blocked, o = to_blocked ? blocked : plain;
                std::memcpy(dst + size_t(o) * es, from + size_t(i) * es, es);
            }
    return out;
}

/// A window op with channel-blocked operands (Note [Channel-blocked layout]): the kernel on the
/// operands unblocked, its result blocked when the op's mask says so.
template <Kernel Logical> Array window_kernel(const KernelCtx& c) {
    const int64_t mask = detail::blocked_mask(c.node);
    if (mask == 0) return Logical(c);
    std::vector<Array> in;
    for (size_t i = 0; i < c.in.size(); ++i)
        in.push_back(mask & (int64_t(1) << i) ? reblock(c.in[i], false) : c.in[i]);
    TensorType out = c.out;
    if (mask & detail::kBlockedResult) out.shape = detail::unblocked_shape(out.shape);
    Array r = Logical(KernelCtx{c.node, in, out, c.counter});
    return mask & detail::kBlockedResult ? reblock(r, true, detail::block_width(mask)) : r;
}

Array block_channels_kernel(const KernelCtx& c) {
    return reblock(c.in[0], true, detail::block_width(detail::blocked_mask(c.node)));
}
Array unblock_channels_kernel(const KernelCtx& c) { return reblock(c.in[0], false); }

} // namespace

void register_conv_kernels(Kernel* table) {
    table[int(Op::Conv)] = window_kernel<conv_kernel>;
    table[int(Op::ConvBackwardData)] = window_kernel<conv_backward_data_kernel>;
    table[int(Op::ConvBackwardFilter)] = window_kernel<conv_backward_filter_kernel>;
    table[int(Op::Pool)] = window_kernel<pool_kernel>;
    table[int(Op::MaxPoolBackward)] = window_kernel<max_pool_backward_kernel>;
    table[int(Op::AvgPoolBackward)] = window_kernel<avg_pool_backward_kernel>;
    table[int(Op::BlockChannels)] = block_channels_kernel;
    table[int(Op::UnblockChannels)] = unblock_channels_kernel;
}

} // namespace sj::ref
