// Reference kernels of reductions, arg-reductions and cumsum (float sums accumulate in double).
#include "Iterate.h"
#include "Reference.h"

#include <symjax/ir/Node.h>

#include <cmath>
#include <limits>

namespace sj::ref {
namespace {

/// Strides that map an input multi-index to its output position (0 on reduced axes).
std::vector<int64_t> reduced_strides(const Shape& in, const std::vector<int64_t>& axes) {
    std::vector<bool> red(in.size(), false);
    for (int64_t a : axes) red[a] = true;
    Shape kept;
    for (size_t i = 0; i < in.size(); ++i) kept.push_back(red[i] ? 1 : in[i]);
    auto rm = row_major_strides(kept);
    for (size_t i = 0; i < in.size(); ++i)
        if (red[i]) rm[i] = 0;
    return rm;
}

Array reduce_kernel(const KernelCtx& c) {
    const Array& x = c.in[0];
    const auto& a = c.attr<ReduceAttrs>();
    Op op = c.node.op();
    Array out(c.out.dtype, c.out.shape);
    int64_t n_out = out.size();
    std::vector<std::vector<int64_t>> st{reduced_strides(x.shape(), a.axes)};
    dispatch(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* p = ptr<T>(x);
        if (op == Op::ArgMax || op == Op::ArgMin) {
            int64_t ax = a.axes[0];
            std::vector<T> best(n_out);
            std::vector<int64_t> arg(n_out, -1);
            for_each_index(x.shape(), st, [&](int64_t i, const auto& idx, const auto& off) {
                T v = p[i];
                int64_t o = off[0];
                bool take = arg[o] < 0;
                if (!take) {
                    if constexpr (std::is_floating_point_v<T>) {
                        if (std::isnan(best[o])) return; // the first NaN wins
                        if (std::isnan(v)) take = true;
                    }
                    take = take || (op == Op::ArgMax ? v > best[o] : v < best[o]);
                }
                if (take) {
                    best[o] = v;
                    arg[o] = idx[ax];
                }
            });
            for (int64_t o = 0; o < n_out; ++o) ptr<int64_t>(out)[o] = arg[o];
            return;
        }
        if (op == Op::ReduceAny || op == Op::ReduceAll) {
            uint8_t* po = ptr<uint8_t>(out);
            for (int64_t o = 0; o < n_out; ++o) po[o] = op == Op::ReduceAll;
            for_each_index(x.shape(), st, [&](int64_t i, const auto&, const auto& off) {
                if (op == Op::ReduceAny) po[off[0]] |= p[i] != 0;
                else po[off[0]] &= p[i] != 0;
            });
            return;
        }
        if (op == Op::ReduceSum || op == Op::ReduceProd) {
            // floats accumulate in double; integers in their own type, wrapping (Note [Integer
            // arithmetic wraps] in ElementwiseKernels.cpp)
            using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
            std::vector<Acc> acc(n_out, op == Op::ReduceSum ? Acc(0) : Acc(1));
            for_each_index(x.shape(), st, [&](int64_t i, const auto&, const auto& off) {
                if (op == Op::ReduceSum)
                    acc[off[0]] = add_wrap<Acc>(acc[off[0]], Acc(p[i]));
                else
                    acc[off[0]] = mul_wrap<Acc>(acc[off[0]], Acc(p[i]));
            });
            for (int64_t o = 0; o < n_out; ++o) ptr<T>(out)[o] = static_cast<T>(acc[o]);
            return;
        }
        // max / min: NaN propagates
        std::vector<T> acc(n_out, op == Op::ReduceMax ? std::numeric_limits<T>::lowest()
                                                      : std::numeric_limits<T>::max());
        if constexpr (std::is_floating_point_v<T>)
            std::fill(acc.begin(), acc.end(), op == Op::ReduceMax ? -INFINITY : INFINITY);
        for_each_index(x.shape(), st, [&](int64_t i, const auto&, const auto& off) {
            T v = p[i];
            T& r = acc[off[0]];
            if constexpr (std::is_floating_point_v<T>) {
                if (std::isnan(r)) return;
                if (std::isnan(v)) {
                    r = v;
                    return;
                }
            }
            if (op == Op::ReduceMax ? v > r : v < r) r = v;
        });
        for (int64_t o = 0; o < n_out; ++o) ptr<T>(out)[o] = acc[o];
    });
    return out;
}

Array cumsum_kernel(const KernelCtx& c) {
    const Array& x = c.in[0];
    const auto& a = c.attr<AxisAttrs>();
    Array out(c.out.dtype, c.out.shape);
    const Shape& s = x.shape();
    int64_t ax = a.axis, len = s[ax];
    int64_t inner = 1, outer = 1;
    for (size_t i = ax + 1; i < s.size(); ++i) inner *= s[i];
    for (int64_t i = 0; i < ax; ++i) outer *= s[i];
    dispatch(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
        const T* p = ptr<T>(x);
        T* q = ptr<T>(out);
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t in = 0; in < inner; ++in) {
                Acc acc = 0;
                for (int64_t k = 0; k < len; ++k) {
                    int64_t kk = a.reverse ? len - 1 - k : k;
                    int64_t i = (o * len + kk) * inner + in;
                    acc = add_wrap<Acc>(acc, Acc(p[i]));
                    q[i] = static_cast<T>(acc);
                }
            }
    });
    return out;
}

} // namespace

void register_reduce_kernels(Kernel* t) {
    for (Op op : {Op::ReduceSum, Op::ReduceProd, Op::ReduceMax, Op::ReduceMin, Op::ReduceAny,
                  Op::ReduceAll, Op::ArgMax, Op::ArgMin})
        t[int(op)] = reduce_kernel;
    t[int(Op::Cumsum)] = cumsum_kernel;
}

} // namespace sj::ref
