// Composite ops built from primitives with stable formulations (mean, var, softmax family...).
#include "../ops/OpDef.h"

#include <symjax/Ops.h>

#include <algorithm>
#include <cmath>

namespace sj {

namespace {
Tensor as_float(const Tensor& x) {
    return is_float(x.dtype()) ? x : cast(x, DType::F32);
}

Axes all_axes_if_empty(const Tensor& x, const Axes& axes) {
    if (!axes.empty())
        return axes;
    Axes a(x.rank());
    for (int i = 0; i < x.rank(); ++i)
        a[i] = i;
    return a;
}

/// Number of elements reduced over `axes`, as a scalar of x's dtype.
Tensor count_over(const Tensor& x, const Axes& axes, bool keepdims) {
    return detail::count_over(x, axes, keepdims, x.dtype());
}
} // namespace

Tensor mean(const Tensor& x, const Axes& axes, bool keepdims) {
    Tensor xf = as_float(x);
    return sum(xf, axes, keepdims) / count_over(xf, axes, keepdims);
}

Tensor var(const Tensor& x, const Axes& axes, bool keepdims, int ddof) {
    Tensor xf = as_float(x);
    Tensor d = xf - mean(xf, axes, true);
    Tensor ss = sum(d * d, axes, keepdims);
    Tensor n = count_over(xf, axes, keepdims);
    return ss / (n - double(ddof));
}

Tensor nansum(const Tensor& x, const Axes& axes, bool keepdims) {
    if (!is_float(x.dtype()))
        return sum(x, axes, keepdims); // only floats hold NaN
    return sum(where(isnan(x), 0.0, x), axes, keepdims);
}

Tensor nanmean(const Tensor& x, const Axes& axes, bool keepdims) {
    if (!is_float(x.dtype()))
        return mean(x, axes, keepdims);
    Tensor n = sum(cast(logical_not(isnan(x)), x.dtype()), axes, keepdims);
    return nansum(x, axes, keepdims) / n; // 0 / 0: NaN for an all-NaN slice, as NumPy
}

namespace {
/// nanmax / nanmin: NaN replaced by `fill` (-inf / +inf), then NaN again where a slice is all NaN.
Tensor nan_extremum(const Tensor& x, const Axes& axes, bool keepdims, bool is_max) {
    if (!is_float(x.dtype()))
        return is_max ? max(x, axes, keepdims) : min(x, axes, keepdims);
    Tensor nan = isnan(x);
    Tensor filled = where(nan, is_max ? -INFINITY : INFINITY, x);
    Tensor m = is_max ? max(filled, axes, keepdims) : min(filled, axes, keepdims);
    return where(all(nan, axes, keepdims), NAN, m);
}
} // namespace

Tensor nanmax(const Tensor& x, const Axes& axes, bool keepdims) {
    return nan_extremum(x, axes, keepdims, true);
}
Tensor nanmin(const Tensor& x, const Axes& axes, bool keepdims) {
    return nan_extremum(x, axes, keepdims, false);
}

Tensor logsumexp(const Tensor& x, const Axes& axes, bool keepdims) {
    // shift by the max (a constant for the gradient: the result does not depend on the shift);
    // an infinite max (all -inf, or +inf present) is replaced by 0 so no inf - inf appears
    Tensor m = stop_gradient(max(x, axes, true));
    Tensor shift = where(isinf(m), zeros_like(m), m);
    Tensor s = log(sum(exp(x - shift), axes, true)) + shift;
    if (keepdims)
        return s;
    Axes a = all_axes_if_empty(x, axes);
    return squeeze(s, a);
}

Tensor sigmoid(const Tensor& x) {
    // both branches finite for every x: exp(-|x|) never overflows
    Tensor z = exp(neg(abs(x)));
    return where(x >= 0.0, 1.0 / (z + 1.0), z / (z + 1.0));
}

Tensor softplus(const Tensor& x) {
    return maximum(x, 0.0) + log1p(exp(neg(abs(x))));
}

Tensor log_sigmoid(const Tensor& x) {
    return neg(softplus(neg(x)));
}

Tensor softmax(const Tensor& x, int64_t axis) {
    Tensor e = exp(x - stop_gradient(max(x, {axis}, true)));
    return e / sum(e, {axis}, true);
}

Tensor log_softmax(const Tensor& x, int64_t axis) {
    return x - logsumexp(x, {axis}, true);
}

Tensor clip(const Tensor& x, double lo, double hi) {
    SJ_CHECK(lo <= hi, InputError) << "clip(" << x.name() << "): lo " << lo << " > hi " << hi;
    return minimum(maximum(x, lo), hi);
}

} // namespace sj
