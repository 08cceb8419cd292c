// Searching, counting and order statistics (include/symjax/Search.h): unique, nonzero, lexsort,
// searchsorted, digitize, bincount, histogram, quantile and median.
#include <symjax/Search.h>

#include "../ops/OpDef.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

namespace sj {

// Note [Searching by sorting]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// NumPy's unique, nonzero and bincount return as many elements as the values call for; a graph
// needs the length when it is built. JAX's answer, taken here: the caller gives it (`size`,
// `length`), and the result is cut or padded to it. Each function is then a fixed sequence of
// ops:
//
//   * A run of equal values is found by sorting (argsort is stable, so the first of a run is
//     the first occurrence) and comparing each sorted value with the one before it, read by a
//     gather at max(i - 1, 0) rather than a slice, so that an empty x stays well typed.
//   * The k-th selected element's slot is an inclusive cumsum of the selection, minus one.
//   * Results are written by a scatter into a buffer one longer than asked for: every element
//     that is not selected, or whose slot is past the end, goes to that last entry, which is
//     cut off. A Set scatter leaves which write wins a repeated index unspecified; only the
//     cut entry has repeats.
//   * searchsorted counts how many elements of the sorted `a` come before v, by a branchless
//     binary search: for k = the largest power of 2 <= n down to 1, add k to the count when
//     the element at count + k - 1 still comes before v. Each step is one gather of v's size.
//
// Sorting's order is total (NaN last, -0.0 equal to 0.0), so every function here follows it.

namespace {

std::string desc(const Tensor& t) {
    return t.name() + " " + t.type_str();
}

/// 0, 1, ..., n - 1 (i64) for a 1-d f of possibly unknown length.
Tensor positions(const Tensor& f) {
    if (f.dim(0) >= 0)
        return arange(f.dim(0));
    return cumsum(full_like(f, 1.0, DType::I64), 0) - 1.0;
}

/// x flattened to 1-d (dims of unknown size allowed).
Tensor flat(const Tensor& x) {
    return reshape(x, {-1});
}

/// True where x sorts before y in sort's order (NaN last).
Tensor before(const Tensor& x, const Tensor& y) {
    if (!is_float(x.dtype()) && !is_float(y.dtype()))
        return lt(x, y);
    Tensor lt_xy = lt(x, y);
    if (!is_float(x.dtype()))
        return logical_or(isnan(y), lt_xy);
    if (!is_float(y.dtype()))
        return logical_and(logical_not(isnan(x)), lt_xy);
    return logical_and(logical_not(isnan(x)), logical_or(isnan(y), lt_xy));
}

/// `values` written at `slot` (i64, `size` for "nowhere") into a tensor [size] that starts as
/// `init` [size + 1]; the last entry takes the writes to nowhere and is cut off.
Tensor place(const Tensor& init, const Tensor& slot, const Tensor& values, int64_t size) {
    return slice_axis(scatter(init, slot, values, 0, ScatterMode::Set), 0, 0, size);
}

void check_size(int64_t size, const char* op, const char* what) {
    SJ_CHECK(size >= 0, InputError) << op << ": " << what << " must be >= 0, got " << size;
}

} // namespace

Unique unique_all(const Tensor& x, int64_t size, std::optional<double> fill_value, bool equal_nan) {
    check_size(size, "unique", "size");
    SJ_CHECK(x.dtype() != DType::Bool || !fill_value || *fill_value == 0 || *fill_value == 1,
             InputError)
        << "unique: fill_value " << *fill_value << " is not a bool for " << desc(x);
    Tensor f = flat(x);
    int64_t n = f.dim(0);
    SJ_CHECK(n != 0 || fill_value || size == 0, InputError)
        << "unique: " << desc(x)
        << " is empty, so it has no smallest value to pad with: pass fill_value";
    Tensor order = argsort(f, 0);
    Tensor s = gather(f, order, 0);
    Tensor i = positions(f);
    Tensor prev = gather(s, maximum(i - 1.0, 0.0), 0);
    Tensor differ = ne(s, prev);
    if (equal_nan && is_float(x.dtype()))
        differ = logical_and(differ, logical_not(logical_and(isnan(s), isnan(prev))));
    Tensor first = logical_or(eq(i, 0.0), differ);
    Tensor rank = cumsum(cast(first, DType::I64), 0) - 1.0; // the value's slot, for every element
    Tensor kept = lt(rank, double(size));
    Tensor slot = where(logical_and(first, kept), rank, double(size));

    // (size 0 pads nothing: no smallest value is read, so an empty x needs no fill_value)
    Tensor fill = fill_value || size == 0
                      ? full({size + 1}, fill_value.value_or(0.0), x.dtype())
                      : broadcast_to(gather(s, zeros({1}, DType::I64), 0), {size + 1});
    Unique u;
    u.values = place(fill, slot, s, size);
    u.indices = place(zeros({size + 1}, DType::I64), slot, order, size);
    u.counts = slice_axis(scatter_add(zeros({size + 1}, DType::I64),
                                      where(kept, rank, double(size)), ones_like(rank)),
                          0, 0, size);
    double last = double(std::max<int64_t>(size - 1, 0));
    Tensor inv = scatter(zeros_like(order), order, minimum(rank, last), 0, ScatterMode::Set);
    const Shape& xs = x.shape();
    u.inverse = std::count(xs.begin(), xs.end(), int64_t(-1)) <= 1
                    ? reshape(inv, xs)
                    : detail::make(Op::Reshape, {inv, x}, ShapeAttrs{xs}); // dims follow x
    return u;
}

Tensor unique(const Tensor& x, int64_t size, std::optional<double> fill_value, bool equal_nan) {
    return unique_all(x, size, fill_value, equal_nan).values;
}

Tensor flatnonzero(const Tensor& x, int64_t size, int64_t fill_value) {
    check_size(size, "flatnonzero", "size");
    Tensor f = flat(x);
    Tensor mask = x.dtype() == DType::Bool ? f : ne(f, 0.0);
    Tensor pos = cumsum(cast(mask, DType::I64), 0) - 1.0;
    Tensor slot = where(logical_and(mask, lt(pos, double(size))), pos, double(size));
    return place(full({size + 1}, double(fill_value), DType::I64), slot, positions(f), size);
}

std::vector<Tensor> nonzero(const Tensor& x, int64_t size, int64_t fill_value) {
    SJ_CHECK(x.rank() >= 1, ShapeError)
        << "nonzero: " << desc(x) << " is a scalar; make it 1-d first (atleast_1d)";
    for (int d = 1; d < x.rank(); ++d)
        SJ_CHECK(x.dim(d) >= 0, ShapeError)
            << "nonzero: dim " << d << " of " << desc(x)
            << " has unknown size; the coordinates need every dim's size but the first's";
    if (x.rank() == 1)
        return {flatnonzero(x, size, fill_value)};
    // -1 marks the entries past the last non-zero element (a flat index is never negative).
    Tensor k = flatnonzero(x, size, -1);
    Tensor found = ge(k, 0.0);
    std::vector<Tensor> coords(size_t(x.rank()));
    int64_t stride = 1;
    for (int d = x.rank() - 1; d >= 0; --d) {
        Tensor c = k / double(stride);
        if (d > 0)
            c = mod(c, double(x.dim(d)));
        coords[size_t(d)] = where(found, c, double(fill_value));
        if (d > 0)
            stride *= x.dim(d);
    }
    return coords;
}

Tensor argwhere(const Tensor& x, int64_t size, int64_t fill_value) {
    if (x.rank() == 0) // NumPy: a 0-d x gives [nonzero, 0]
        return reshape(flatnonzero(x, size, fill_value), {size, 0});
    return stack(nonzero(x, size, fill_value), 1);
}

Tensor lexsort(const std::vector<Tensor>& keys, int64_t axis) {
    SJ_CHECK(!keys.empty(), InputError) << "lexsort: needs at least one key";
    const Tensor& k0 = keys[0];
    SJ_CHECK(k0.rank() >= 1, ShapeError) << "lexsort: " << desc(k0) << " is a scalar";
    int64_t ax = normalize_axis(axis, k0.rank(), "lexsort");
    for (const Tensor& k : keys) {
        bool same = k.rank() == k0.rank();
        for (int d = 0; same && d < k.rank(); ++d)
            same = k.dim(d) == k0.dim(d);
        SJ_CHECK(same, ShapeError)
            << "lexsort: keys " << desc(k0) << " and " << desc(k) << " differ in shape";
    }
    // Stable sorts, least significant key first: each pass keeps the order of the ones before
    // it among equal keys.
    Tensor idx = argsort(k0, ax);
    for (size_t j = 1; j < keys.size(); ++j) {
        Tensor o = argsort(take_along_axis(keys[j], idx, ax), ax);
        idx = take_along_axis(idx, o, ax);
    }
    return idx;
}

Tensor searchsorted(const Tensor& a, const Tensor& v, Side side) {
    SJ_CHECK(a.rank() == 1, ShapeError) << "searchsorted: a must be 1-d (sorted), got " << desc(a);
    // pred(e, w): the element e of a comes before w (left), or not after it (right).
    auto pred = [&](const Tensor& e, const Tensor& w) {
        return side == Side::Left ? before(e, w) : logical_not(before(w, e));
    };
    int64_t n = a.dim(0);
    if (n < 0) { // every element of v against every element of a
        Tensor hit = pred(a, expand_dims(v, v.rank())); // v's shape + [n]
        return sum(cast(hit, DType::I64), {v.rank()});
    }
    Tensor count = full_like(v, 0.0, DType::I64);
    int64_t k = 1;
    while (k * 2 <= n)
        k *= 2;
    for (; n > 0 && k >= 1; k /= 2) {
        Tensor cand = count + double(k);
        Tensor e = gather(a, minimum(cand - 1.0, double(n - 1)), 0);
        count = where(logical_and(le(cand, double(n)), pred(e, v)), cand, count);
    }
    return count;
}

Tensor digitize(const Tensor& x, const Tensor& bins, bool right) {
    SJ_CHECK(bins.rank() == 1 && bins.dim(0) >= 0, ShapeError)
        << "digitize: bins must be 1-d of known length, got " << desc(bins);
    int64_t n = bins.dim(0);
    // NumPy's rule: bins increasing (non-strictly) unless some step goes down; then every step
    // must go down (or stay), else the bins are refused.
    Side side = right ? Side::Left : Side::Right;
    if (n < 2)
        return searchsorted(bins, x, side);
    Tensor lo = slice_axis(bins, 0, 0, n - 1), hi = slice_axis(bins, 0, 1, n);
    Tensor rising = all(le(lo, hi));
    Tensor broken = logical_and(logical_not(rising), logical_not(ge(lo, hi)));
    Tensor checked = check_index(cast(broken, DType::I64), 1, {},
                                 "digitize: bins must be monotonic; the flag of each step "
                                 "that breaks it is");
    // The bins are read through the check (its flags are 0 when it passes), so that it runs.
    Tensor b = gather(bins, arange(n) + pad(checked, {0}, {1}), 0);
    Tensor up = searchsorted(b, x, side);
    Tensor down = double(n) - searchsorted(flip(b, {0}), x, side);
    return where(rising, up, down);
}

Tensor bincount(const Tensor& x, int64_t length, const std::optional<Tensor>& weights) {
    check_size(length, "bincount", "length");
    SJ_CHECK(is_int(x.dtype()), TypeError) << "bincount: " << desc(x) << " must hold integers";
    SJ_CHECK(x.rank() == 1, ShapeError) << "bincount: " << desc(x) << " must be 1-d";
    if (weights) {
        SJ_CHECK(weights->rank() == 1 && weights->dim(0) == x.dim(0), ShapeError)
            << "bincount: weights " << desc(*weights) << " must have the shape of " << desc(x);
    }
    Tensor xi = cast(x, DType::I64);
    // Negative values are refused when the function runs; values >= length are left out.
    Tensor past = ge(xi, double(length));
    Tensor checked =
        check_index(where(past, 0.0, xi), std::max<int64_t>(length, 1), {}, "bincount: value");
    Tensor slot = where(past, double(length), checked);
    Tensor w = weights ? *weights : full_like(xi, 1.0, DType::I64);
    return slice_axis(scatter_add(zeros({length + 1}, w.dtype()), slot, w), 0, 0, length);
}

namespace {

/// The histogram of f (flat, float) into the bins with these edges [nb + 1]; `bin` is each
/// element's candidate bin, before the comparisons with the edges settle it.
std::pair<Tensor, Tensor> fill_bins(const Tensor& f, const Tensor& edges, int64_t nb,
                                    const Tensor& bin, const std::optional<Tensor>& weights,
                                    bool density) {
    Tensor first = slice_axis(edges, 0, 0, 1), last = slice_axis(edges, 0, nb, nb + 1);
    Tensor keep = logical_and(ge(f, first), le(f, last)); // NaN fails both
    Tensor w = weights ? flat(*weights) : full_like(f, 1.0, DType::I64);
    Tensor slot = where(keep, bin, double(nb));
    Tensor hist = slice_axis(scatter_add(zeros({nb + 1}, w.dtype()), slot, w), 0, 0, nb);
    if (density) {
        Tensor h = cast(hist, edges.dtype());
        Tensor width = slice_axis(edges, 0, 1, nb + 1) - slice_axis(edges, 0, 0, nb);
        hist = h / sum(h) / width;
    }
    return {hist, edges};
}

Tensor float_of(const Tensor& x) {
    return is_float(x.dtype()) ? x : cast(x, DType::F64);
}

void check_weights(const Tensor& x, const std::optional<Tensor>& weights) {
    if (!weights)
        return;
    bool same = weights->rank() == x.rank();
    for (int d = 0; same && d < x.rank(); ++d)
        same = weights->dim(d) == x.dim(d);
    SJ_CHECK(same, ShapeError) << "histogram: weights " << desc(*weights)
                               << " must have the shape of " << desc(x);
}

} // namespace

std::pair<Tensor, Tensor> histogram(const Tensor& x, int64_t bins,
                                    std::optional<std::pair<double, double>> range,
                                    const std::optional<Tensor>& weights, bool density) {
    SJ_CHECK(bins >= 1, InputError) << "histogram: bins must be >= 1, got " << bins;
    check_weights(x, weights);
    Tensor f = float_of(flat(x));
    DType dt = f.dtype();
    Tensor lo, hi;
    if (range) {
        SJ_CHECK(range->first <= range->second, InputError)
            << "histogram: range [" << range->first << ", " << range->second
            << "] has its lower end above its upper one";
        lo = scalar(range->first, dt);
        hi = scalar(range->second, dt);
    } else {
        lo = min(f);
        hi = max(f);
    }
    Tensor same = eq(lo, hi);
    lo = where(same, lo - 0.5, lo);
    hi = where(same, hi + 0.5, hi);
    // NumPy's linspace: i * step + lo, the last edge exactly hi.
    Tensor i = arange(bins + 1, dt);
    Tensor edges = where(eq(i, double(bins)), hi, i * ((hi - lo) / double(bins)) + lo);
    // NumPy's bin: the scaled position, then one step down or up where an edge disagrees.
    Tensor b = cast((f - lo) / (hi - lo) * double(bins), DType::I64);
    b = minimum(maximum(b, 0.0), double(bins - 1));
    b = where(lt(f, gather(edges, b, 0)), maximum(b - 1.0, 0.0), b);
    b = where(logical_and(ge(f, gather(edges, b + 1.0, 0)), lt(b, double(bins - 1))), b + 1.0, b);
    return fill_bins(f, edges, bins, b, weights, density);
}

std::pair<Tensor, Tensor> histogram(const Tensor& x, const Tensor& edges,
                                    const std::optional<Tensor>& weights, bool density) {
    SJ_CHECK(edges.rank() == 1 && edges.dim(0) >= 2, ShapeError)
        << "histogram: the bin edges must be 1-d of known length >= 2, got " << desc(edges);
    check_weights(x, weights);
    int64_t nb = edges.dim(0) - 1;
    Tensor f = flat(x);
    Tensor e = is_float(edges.dtype()) || !is_float(f.dtype()) ? edges : cast(edges, f.dtype());
    Tensor b = minimum(searchsorted(e, f, Side::Right) - 1.0, double(nb - 1));
    return fill_bins(f, float_of(e), nb, maximum(b, 0.0), weights, density);
}

namespace {

/// NumPy's _lerp: exact at both ends, for a number g or a tensor g.
Tensor lerp(const Tensor& lo, const Tensor& hi, double g) {
    Tensor d = hi - lo;
    return g >= 0.5 ? hi - d * (1.0 - g) : lo + d * g;
}
Tensor lerp(const Tensor& lo, const Tensor& hi, const Tensor& g) {
    Tensor d = hi - lo;
    return where(ge(g, 0.5), hi - d * (1.0 - g), lo + d * g);
}

Tensor quantiles(const Tensor& x0, const std::vector<double>& qs, bool one_q,
                 std::optional<int64_t> axis, QuantileMethod method, bool keepdims, bool skip_nan) {
    const char* what = skip_nan ? "nanquantile" : "quantile";
    for (double q : qs)
        SJ_CHECK(q >= 0.0 && q <= 1.0, InputError)
            << what << ": quantiles must lie in [0, 1], got " << q;
    Tensor x = is_float(x0.dtype()) ? x0 : cast(x0, DType::F32);
    const int rank = x.rank();
    int64_t ax = 0;
    if (axis)
        ax = normalize_axis(*axis, rank, what);
    else
        x = flat(x);
    const int64_t n = x.dim(ax);
    SJ_CHECK(n >= 0, ShapeError) << what << ": axis " << ax << " of " << desc(x)
                                 << " has a size unknown until the call; it needs a known size";
    SJ_CHECK(n > 0, InputError) << what << ": axis " << ax << " of " << desc(x) << " is empty";
    Tensor s = sort(x, ax); // NaN last
    Tensor nan = isnan(x);
    Tensor count;
    if (skip_nan)
        count = sum(cast(logical_not(nan), x.dtype()), {ax}, true);
    // NumPy's methods on the elements at lo, hi and near (ints, or i64 tensors per line) with
    // g the fraction between lo and hi
    auto pick = [&](const auto& i) {
        if constexpr (std::is_same_v<std::decay_t<decltype(i)>, Tensor>)
            return take_along_axis(s, i, ax);
        else
            return slice_axis(s, ax, i, i + 1);
    };
    auto choose = [&](const auto& lo, const auto& hi, const auto& near, const auto& g) {
        switch (method) {
        case QuantileMethod::Lower:
            return pick(lo);
        case QuantileMethod::Higher:
            return pick(hi);
        case QuantileMethod::Nearest:
            return pick(near);
        case QuantileMethod::Midpoint:
            return (pick(lo) + pick(hi)) * 0.5;
        case QuantileMethod::Linear:
            break;
        }
        return lerp(pick(lo), pick(hi), g);
    };
    std::vector<Tensor> outs;
    for (double q : qs) {
        Tensor r;
        if (skip_nan) {
            // the position among the line's count non-NaN elements, which sort first
            Tensor pos = (count - 1.0) * q;
            Tensor lo_f = floor(pos);
            auto index = [&](const Tensor& p) {
                return cast(clip(p, 0.0, double(n - 1)), DType::I64);
            };
            r = choose(index(lo_f), index(ceil(pos)), index(round(pos)), pos - lo_f);
            r = where(gt(count, 0.0), r, full_like(r, NAN)); // a line of NaNs only
        } else {
            const double pos = q * double(n - 1);
            const int64_t lo = int64_t(std::floor(pos));
            // nearest: halves to even, as NumPy
            r = choose(lo, int64_t(std::ceil(pos)), int64_t(std::nearbyint(pos)),
                       pos - double(lo));
            r = where(any(nan, {ax}, true), full_like(r, NAN), r); // NumPy: NaN in, NaN out
        }
        if (!axis)
            r = reshape(r, keepdims ? Shape(size_t(rank), 1) : Shape{});
        else if (!keepdims)
            r = squeeze(r, {ax});
        outs.push_back(r);
    }
    return one_q ? outs[0] : stack(outs, 0);
}

} // namespace

Tensor quantile(const Tensor& x, double q, std::optional<int64_t> axis, QuantileMethod method,
                bool keepdims) {
    return quantiles(x, {q}, true, axis, method, keepdims, false);
}
Tensor quantile(const Tensor& x, const std::vector<double>& qs, std::optional<int64_t> axis,
                QuantileMethod method, bool keepdims) {
    return quantiles(x, qs, false, axis, method, keepdims, false);
}
Tensor nanquantile(const Tensor& x, double q, std::optional<int64_t> axis, QuantileMethod method,
                   bool keepdims) {
    return quantiles(x, {q}, true, axis, method, keepdims, true);
}
Tensor nanquantile(const Tensor& x, const std::vector<double>& qs, std::optional<int64_t> axis,
                   QuantileMethod method, bool keepdims) {
    return quantiles(x, qs, false, axis, method, keepdims, true);
}
Tensor median(const Tensor& x, std::optional<int64_t> axis, bool keepdims) {
    return quantile(x, 0.5, axis, QuantileMethod::Linear, keepdims);
}
Tensor nanmedian(const Tensor& x, std::optional<int64_t> axis, bool keepdims) {
    return nanquantile(x, 0.5, axis, QuantileMethod::Linear, keepdims);
}

} // namespace sj
