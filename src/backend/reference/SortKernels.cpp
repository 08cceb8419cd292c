// Reference kernel of sort (Note [Sort] in src/ops/Sort.cpp): a stable sort of each line's
// positions by a comparison that spells the order out; then the keys, the values or the
// positions themselves in that order.
#include "Iterate.h"
#include "Reference.h"

#include <symjax/ir/Node.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace sj::ref {
namespace {

/// a before b in the ascending order: NaN after everything, NaNs and signed zeros equal.
template <class T> bool ascending_before(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(a))
            return false;
        if (std::isnan(b))
            return true;
    }
    return a < b;
}

Array sort_kernel(const KernelCtx& c) {
    const auto& a = c.attr<SortAttrs>();
    const Array& keys = c.in[0];
    const Array& values = c.in.back();
    int64_t outer, n, inner;
    split_axis(keys.shape(), a.axis, outer, n, inner);
    const int64_t k = c.out.shape[size_t(a.axis)]; // the type rule checked k <= n
    Array out(c.out.dtype, c.out.shape);
    const size_t width = size_t(dtype_size(values.dtype()));
    const auto* src = static_cast<const unsigned char*>(values.raw());
    auto* dst = static_cast<unsigned char*>(out.raw());
    std::vector<int64_t> order(static_cast<size_t>(n));
    dispatch(keys.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* kp = ptr<T>(keys);
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t in = 0; in < inner; ++in) {
                auto key = [&](int64_t j) { return kp[(o * n + j) * inner + in]; };
                std::iota(order.begin(), order.end(), int64_t(0));
                std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
                    return a.descending ? ascending_before(key(j), key(i))
                                        : ascending_before(key(i), key(j));
                });
                if (a.indices) {
                    for (int64_t j = 0; j < k; ++j)
                        ptr<int64_t>(out)[(o * k + j) * inner + in] = order[size_t(j)];
                    continue;
                }
                for (int64_t j = 0; j < k; ++j)
                    std::memcpy(dst + size_t((o * k + j) * inner + in) * width,
                                src + size_t((o * n + order[size_t(j)]) * inner + in) * width,
                                width);
            }
    });
    return out;
}

} // namespace

void register_sort_kernels(Kernel* t) {
    t[int(Op::Sort)] = sort_kernel;
}

} // namespace sj::ref
