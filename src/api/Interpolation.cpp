// Interpolation composites: map_coordinates, resize, upsample_1d/2d from gather, floor and where.
#include <symjax/Interpolation.h>

#include <algorithm>
#include <cmath>

namespace sj::interpolation {

namespace {

std::string desc(const Tensor& t) {
    return t.name() + " " + t.type_str();
}

int64_t norm_axis(int64_t axis, int rank, const char* op, const Tensor& x) {
    SJ_CHECK(axis >= -rank && axis < rank, ShapeError)
        << op << ": axis " << axis << " is out of range for " << desc(x);
    return axis < 0 ? axis + rank : axis;
}

/// The host-side boundary rule: integer index i into [0, n), or -1 where Constant leaves the grid.
int64_t bound_host(int64_t i, int64_t n, Boundary b) {
    switch (b) {
    case Boundary::Constant:
        return i >= 0 && i < n ? i : -1;
    case Boundary::Nearest:
        return std::min(std::max<int64_t>(i, 0), n - 1);
    case Boundary::Wrap:
        return ((i % n) + n) % n;
    case Boundary::Reflect: {
        int64_t m = ((i % (2 * n)) + 2 * n) % (2 * n);
        return m >= n ? 2 * n - 1 - m : m;
    }
    case Boundary::Mirror: {
        if (n == 1)
            return 0;
        int64_t p = 2 * n - 2, m = ((i % p) + p) % p;
        return m >= n ? p - m : m;
    }
    }
    return 0;
}

/// The same rule on an i64 tensor of indices; Constant clamps (the caller masks with cval).
Tensor bound_index(const Tensor& i, int64_t n, Boundary b) {
    auto c = [&](double v) { return scalar(v, DType::I64); };
    switch (b) {
    case Boundary::Constant:
    case Boundary::Nearest:
        return minimum(maximum(i, 0.0), double(n - 1));
    case Boundary::Wrap:
        return mod(i, c(double(n)));
    case Boundary::Reflect: {
        Tensor m = mod(i, c(double(2 * n)));
        return where(m >= double(n), c(double(2 * n - 1)) - m, m);
    }
    case Boundary::Mirror: {
        if (n == 1)
            return zeros_like(i);
        Tensor m = mod(i, c(double(2 * n - 2)));
        return where(m >= double(n), c(double(2 * n - 2)) - m, m);
    }
    }
    return i;
}

/// [1, ..., len at `axis`, ..., 1] for a rank-`rank` tensor.
Shape along(int rank, int64_t axis, int64_t len) {
    Shape s(static_cast<size_t>(rank), 1);
    s[static_cast<size_t>(axis)] = len;
    return s;
}

Tensor index_constant(const std::vector<int64_t>& v) {
    return constant(Array(v, Shape{static_cast<int64_t>(v.size())}));
}

/// Weights w along `axis` of a rank-`rank` tensor of dtype `dt`, broadcastable against it.
Tensor weight_constant(const std::vector<double>& w, int rank, int64_t axis, DType dt) {
    Array a(w, along(rank, axis, static_cast<int64_t>(w.size())));
    return constant(a.astype(dt));
}

/// sum_k w[k] * gather(x, idx[k], axis): a linear map along one axis.
Tensor blend(const Tensor& x, int64_t axis, const std::vector<std::vector<int64_t>>& idx,
             const std::vector<std::vector<double>>& w) {
    Tensor out;
    for (size_t k = 0; k < idx.size(); ++k) {
        Tensor term = gather(x, index_constant(idx[k]), axis) *
                      weight_constant(w[k], x.rank(), axis, x.dtype());
        out = out.defined() ? out + term : term;
    }
    return out;
}

} // namespace

// ---- map_coordinates ------------------------------------------------------------------------

Tensor map_coordinates(const Tensor& input, const Tensor& coordinates, int order, Boundary mode,
                       double cval) {
    const char* op = "interpolation::map_coordinates";
    SJ_CHECK(input.defined() && coordinates.defined(), InputError) << op << ": undefined tensor";
    SJ_CHECK(order == 0 || order == 1, InputError)
        << op << ": order must be 0 (nearest) or 1 (linear), got " << order;
    const int r = input.rank();
    SJ_CHECK(r >= 1, ShapeError) << op << ": input " << desc(input) << " must have rank >= 1";
    for (int64_t d : input.shape())
        SJ_CHECK(d >= 1, ShapeError) << op << ": input " << desc(input)
                                     << " needs every dim known and >= 1 when the graph is built";
    SJ_CHECK(coordinates.rank() >= 1 && coordinates.dim(0) == r, ShapeError)
        << op << ": coordinates " << desc(coordinates) << " must be [" << r
        << ", ...] (one coordinate per dim of input " << desc(input) << ")";
    SJ_CHECK(input.dtype() != DType::Bool, TypeError)
        << op << ": input " << desc(input) << " must be numeric";
    SJ_CHECK(order == 0 || is_float(input.dtype()), TypeError)
        << op << ": linear interpolation (order 1) needs a float input, got " << desc(input)
        << "; use order 0 or cast it";
    SJ_CHECK(coordinates.dtype() != DType::Bool, TypeError)
        << op << ": coordinates " << desc(coordinates) << " must be numeric";

    Tensor flat = reshape(input, {-1});
    std::vector<int64_t> stride(static_cast<size_t>(r), 1);
    for (int k = r - 2; k >= 0; --k)
        stride[k] = stride[k + 1] * input.dim(k + 1);
    const bool constant_mode = mode == Boundary::Constant;
    // Gathers input at the integer indices idx[k] (i64, shaped like one coordinate): out-of-grid
    // indices go through the boundary rule; Constant mode replaces them by cval.
    auto sample = [&](const std::vector<Tensor>& idx) {
        Tensor flat_index, valid;
        for (int k = 0; k < r; ++k) {
            const int64_t n = input.dim(k);
            Tensor term = bound_index(idx[k], n, mode) * scalar(double(stride[k]), DType::I64);
            flat_index = flat_index.defined() ? flat_index + term : term;
            if (constant_mode) {
                Tensor in = (idx[k] >= 0.0) & (idx[k] <= double(n - 1));
                valid = valid.defined() ? valid & in : in;
            }
        }
        Tensor v = gather(flat, flat_index, 0);
        return constant_mode ? where(valid, v, cval) : v;
    };

    std::vector<Tensor> c(static_cast<size_t>(r));
    for (int k = 0; k < r; ++k)
        c[k] = coordinates[k];
    if (order == 0) {
        std::vector<Tensor> idx(static_cast<size_t>(r));
        for (int k = 0; k < r; ++k)
            idx[k] = is_float(c[k].dtype()) ? cast(floor(c[k] + 0.5), DType::I64)
                                            : cast(c[k], DType::I64);
        return sample(idx);
    }
    // order 1: the 2^r corners of the cell around each point, weighted by the products of
    // (1 - t) and t per dim, t = x - floor(x); floor has no gradient, so d/dx = the slope.
    std::vector<Tensor> i0(static_cast<size_t>(r)), t(static_cast<size_t>(r));
    for (int k = 0; k < r; ++k) {
        Tensor x = cast(c[k], input.dtype());
        Tensor f = floor(x);
        i0[k] = cast(f, DType::I64);
        t[k] = x - f;
    }
    Tensor out;
    for (int corner = 0; corner < (1 << r); ++corner) {
        std::vector<Tensor> idx(static_cast<size_t>(r));
        Tensor w;
        for (int k = 0; k < r; ++k) {
            const bool hi = (corner >> (r - 1 - k)) & 1;
            idx[k] = hi ? i0[k] + scalar(1.0, DType::I64) : i0[k];
            Tensor wk = hi ? t[k] : 1.0 - t[k];
            w = w.defined() ? w * wk : wk;
        }
        Tensor term = w * sample(idx);
        out = out.defined() ? out + term : term;
    }
    return out;
}

// ---- resize ---------------------------------------------------------------------------------

Tensor resize(const Tensor& x, const Shape& spatial_shape, Method method, bool align_corners) {
    const char* op = "interpolation::resize";
    SJ_CHECK(x.defined(), InputError) << op << ": undefined tensor";
    const int r = x.rank();
    SJ_CHECK(r >= 3 && r <= 5, ShapeError)
        << op << ": input " << desc(x) << " must be [N, C, spatial...] with 1, 2 or 3 spatial dims";
    SJ_CHECK(static_cast<int>(spatial_shape.size()) == r - 2, ShapeError)
        << op << ": spatial_shape " << shape_str(spatial_shape) << " must have " << r - 2
        << " entries, one per spatial dim of " << desc(x);
    for (int a = 2; a < r; ++a) {
        SJ_CHECK(x.dim(a) >= 1, ShapeError)
            << op << ": input " << desc(x) << " needs its spatial dims known and >= 1";
        SJ_CHECK(spatial_shape[a - 2] >= 1, ShapeError)
            << op << ": spatial_shape " << shape_str(spatial_shape) << " must be >= 1 everywhere";
    }
    SJ_CHECK(method == Method::Nearest || is_float(x.dtype()), TypeError)
        << op << ": linear resizing needs a float input, got " << desc(x);
    SJ_CHECK(x.dtype() != DType::Bool || method == Method::Nearest, TypeError)
        << op << ": input " << desc(x) << " must be numeric";

    Tensor y = x;
    for (int a = 2; a < r; ++a) {
        const int64_t n = x.dim(a), m = spatial_shape[a - 2];
        if (n == m)
            continue; // every convention maps j to j
        if (method == Method::Nearest) {
            std::vector<int64_t> idx(static_cast<size_t>(m));
            for (int64_t j = 0; j < m; ++j) {
                if (align_corners) {
                    // round(j (n - 1) / (m - 1)) with halves up, in exact integers
                    idx[j] = m == 1 ? 0 : (2 * j * (n - 1) + (m - 1)) / (2 * (m - 1));
                } else {
                    // torch's nearest, in its float arithmetic so that ties land as there
                    const float scale = float(n) / float(m);
                    idx[j] = std::min<int64_t>(static_cast<int64_t>(std::floor(float(j) * scale)),
                                               n - 1);
                }
            }
            y = gather(y, index_constant(idx), a);
            continue;
        }
        std::vector<int64_t> lo(static_cast<size_t>(m)), hi(static_cast<size_t>(m));
        std::vector<double> w0(static_cast<size_t>(m)), w1(static_cast<size_t>(m));
        for (int64_t j = 0; j < m; ++j) {
            double src;
            if (align_corners)
                src = m == 1 ? 0.0 : double(j) * double(n - 1) / double(m - 1);
            else
                src = std::max((double(j) + 0.5) * double(n) / double(m) - 0.5, 0.0);
            const int64_t i = std::min(static_cast<int64_t>(std::floor(src)), n - 1);
            const double l = std::min(std::max(src - double(i), 0.0), 1.0);
            lo[j] = i, hi[j] = std::min(i + 1, n - 1);
            w0[j] = 1.0 - l, w1[j] = l;
        }
        y = blend(y, a, {lo, hi}, {w0, w1});
    }
    return y;
}

// ---- upsample -------------------------------------------------------------------------------

Tensor upsample_1d(const Tensor& x, int64_t repeat, int64_t axis, UpsampleMode mode, double value,
                   Boundary boundary) {
    const char* op = "interpolation::upsample_1d";
    SJ_CHECK(x.defined(), InputError) << op << ": undefined tensor";
    SJ_CHECK(repeat >= 0, InputError) << op << ": repeat must be >= 0, got " << repeat;
    SJ_CHECK(x.rank() >= 1, ShapeError) << op << ": input " << desc(x) << " must have rank >= 1";
    const int64_t a = norm_axis(axis, x.rank(), op, x);
    SJ_CHECK(x.dtype() != DType::Bool, TypeError)
        << op << ": input " << desc(x) << " must be numeric";
    if (repeat == 0)
        return x;
    const int r = x.rank();
    if (mode == UpsampleMode::Constant) {
        // zero-stuffing is interior padding: n + (n - 1) r + r = n (r + 1) samples
        std::vector<int64_t> lo(r, 0), hi(r, 0), interior(r, 0);
        hi[a] = repeat, interior[a] = repeat;
        return pad(x, lo, hi, interior, value);
    }
    const int64_t n = x.dim(a);
    SJ_CHECK(n >= 1, ShapeError) << op << ": axis " << axis << " of " << desc(x)
                                 << " needs a known size >= 1 when the graph is built";
    const int64_t m = n * (repeat + 1);
    std::vector<int64_t> i0(static_cast<size_t>(m));
    for (int64_t j = 0; j < m; ++j)
        i0[j] = j / (repeat + 1);
    if (mode == UpsampleMode::Nearest)
        return gather(x, index_constant(i0), a);
    SJ_CHECK(is_float(x.dtype()), TypeError)
        << op << ": linear upsampling needs a float input, got " << desc(x);
    // x[n] comes from the boundary; Constant appends `value` as sample n
    Tensor src = x;
    std::vector<int64_t> i1(static_cast<size_t>(m));
    std::vector<double> w0(static_cast<size_t>(m)), w1(static_cast<size_t>(m));
    if (boundary == Boundary::Constant) {
        std::vector<int64_t> lo(r, 0), hi(r, 0);
        hi[a] = 1;
        src = pad(x, lo, hi, value);
    }
    for (int64_t j = 0; j < m; ++j) {
        const int64_t next = i0[j] + 1;
        i1[j] = boundary == Boundary::Constant ? next : bound_host(next, n, boundary);
        w1[j] = double(j % (repeat + 1)) / double(repeat + 1);
        w0[j] = 1.0 - w1[j];
    }
    return blend(src, a, {i0, i1}, {w0, w1});
}

Tensor upsample_2d(const Tensor& x, const Axes& repeats, const Axes& axes, UpsampleMode mode,
                   double value, Boundary boundary) {
    const char* op = "interpolation::upsample_2d";
    SJ_CHECK(repeats.size() == 1 || repeats.size() == 2, InputError)
        << op << ": repeats must have 1 or 2 entries, got " << repeats.size();
    SJ_CHECK(axes.size() == 2, InputError)
        << op << ": axes must have 2 entries, got " << axes.size();
    SJ_CHECK(x.defined(), InputError) << op << ": undefined tensor";
    const int64_t a0 = norm_axis(axes[0], x.rank(), op, x),
                  a1 = norm_axis(axes[1], x.rank(), op, x);
    SJ_CHECK(a0 != a1, InputError)
        << op << ": axes must differ, got {" << axes[0] << ", " << axes[1] << "} on " << desc(x);
    const int64_t r1 = repeats.size() == 2 ? repeats[1] : repeats[0];
    return upsample_1d(upsample_1d(x, repeats[0], a0, mode, value, boundary), r1, a1, mode, value,
                       boundary);
}

} // namespace sj::interpolation
