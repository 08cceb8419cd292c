// Initializers: constant, uniform/normal draws scaled by fan-in and fan-out, orthogonal.
#include <symjax/Ops.h>
#include <symjax/Random.h>
#include <symjax/nn/Init.h>

#include <cmath>
#include <vector>

namespace sj::nn {

Initializer::Initializer(Fn fn, std::optional<uint64_t> seed) : fn_(std::move(fn)), seed_(seed) {
    SJ_CHECK(static_cast<bool>(fn_), Error) << "Initializer: empty function";
}

Tensor Initializer::operator()(const Shape &shape, DType dtype) const {
    SJ_CHECK(is_static(shape), ShapeError)
        << "Initializer: shape " << shape_str(shape) << " must be fully known";
    return fn_(shape, dtype, seed_ ? *seed_ : random::next_seed());
}

Array Initializer::array(const Shape &shape, DType dtype) const {
    return (*this)(shape, dtype).eval();
}

namespace init {

namespace {
void check_float(DType dtype, const char *what) {
    SJ_CHECK(is_float(dtype), TypeError)
        << "nn::init::" << what << ": dtype must be f32 or f64, got " << dtype_name(dtype);
}

/// A uniform draw in +-bound.
Initializer scaled_uniform(const char *what, std::function<double(const Fans &)> bound,
                           std::optional<uint64_t> seed) {
    return Initializer(
        [what, bound](const Shape &shape, DType dtype, uint64_t s) {
            check_float(dtype, what);
            double b = bound(compute_fans(shape));
            return random::uniform(shape, -b, b, dtype, s);
        },
        seed);
}

/// A normal draw with the given standard deviation.
Initializer scaled_normal(const char *what, std::function<double(const Fans &)> stddev,
                          std::optional<uint64_t> seed) {
    return Initializer(
        [what, stddev](const Shape &shape, DType dtype, uint64_t s) {
            check_float(dtype, what);
            return random::normal(shape, 0.0, stddev(compute_fans(shape)), dtype, s);
        },
        seed);
}

/// Orthonormalises the n columns of the m x n row-major matrix a (m >= n) in place: modified
/// Gram-Schmidt, run twice ("twice is enough", Giraud et al. 2005) so Q is orthonormal to
/// rounding. The result is the Q of a QR factorisation whose R has a positive diagonal.
void orthonormalize_columns(std::vector<double> &a, int64_t m, int64_t n) {
    auto at = [&](int64_t i, int64_t j) -> double & { return a[i * n + j]; };
    for (int64_t j = 0; j < n; ++j) {
        for (int pass = 0; pass < 2; ++pass) {
            for (int64_t k = 0; k < j; ++k) {
                double dot = 0;
                for (int64_t i = 0; i < m; ++i)
                    dot += at(i, k) * at(i, j);
                for (int64_t i = 0; i < m; ++i)
                    at(i, j) -= dot * at(i, k);
            }
        }
        double norm = 0;
        for (int64_t i = 0; i < m; ++i)
            norm += at(i, j) * at(i, j);
        norm = std::sqrt(norm);
        SJ_ASSERT(norm > 0) << "orthogonal: degenerate normal draw";
        for (int64_t i = 0; i < m; ++i)
            at(i, j) /= norm;
    }
}
} // namespace

Fans compute_fans(const Shape &shape) {
    if (shape.empty())
        return {1, 1};
    if (shape.size() == 1)
        return {double(shape[0]), double(shape[0])};
    if (shape.size() == 2)
        return {double(shape[0]), double(shape[1])};
    // [O, C, k...]: each output sees C x prod(k) inputs, each input reaches O x prod(k) outputs
    double receptive = 1;
    for (size_t i = 2; i < shape.size(); ++i)
        receptive *= double(shape[i]);
    return {double(shape[1]) * receptive, double(shape[0]) * receptive};
}

Initializer constant(double v) {
    return Initializer([v](const Shape &shape, DType dtype, uint64_t) {
        return sj::constant(Array::full(dtype, shape, v));
    });
}
Initializer zeros() {
    return constant(0.0);
}
Initializer ones() {
    return constant(1.0);
}

Initializer uniform(double lo, double hi, std::optional<uint64_t> seed) {
    return Initializer(
        [lo, hi](const Shape &shape, DType dtype, uint64_t s) {
            check_float(dtype, "uniform");
            return random::uniform(shape, lo, hi, dtype, s);
        },
        seed);
}

Initializer normal(double stddev, double mean, std::optional<uint64_t> seed) {
    return Initializer(
        [stddev, mean](const Shape &shape, DType dtype, uint64_t s) {
            check_float(dtype, "normal");
            return random::normal(shape, mean, stddev, dtype, s);
        },
        seed);
}

Initializer truncated_normal(double stddev, std::optional<uint64_t> seed) {
    return Initializer(
        [stddev](const Shape &shape, DType dtype, uint64_t s) {
            check_float(dtype, "truncated_normal");
            Tensor z = random::truncated_normal(shape, -2.0, 2.0, dtype, s);
            return stddev == 1.0 ? z : z * stddev;
        },
        seed);
}

Initializer glorot_uniform(double gain, std::optional<uint64_t> seed) {
    return scaled_uniform(
        "glorot_uniform", [gain](const Fans &f) { return gain * std::sqrt(6.0 / (f.in + f.out)); },
        seed);
}

Initializer glorot_normal(double gain, std::optional<uint64_t> seed) {
    return scaled_normal(
        "glorot_normal", [gain](const Fans &f) { return gain * std::sqrt(2.0 / (f.in + f.out)); },
        seed);
}

Initializer he_uniform(std::optional<uint64_t> seed) {
    // gain sqrt(2) times the bound sqrt(3 / fan_in) of a unit-variance-per-fan-in uniform
    return scaled_uniform(
        "he_uniform", [](const Fans &f) { return std::sqrt(6.0 / f.in); }, seed);
}

Initializer he_normal(std::optional<uint64_t> seed) {
    return scaled_normal(
        "he_normal", [](const Fans &f) { return std::sqrt(2.0 / f.in); }, seed);
}

Initializer lecun_normal(std::optional<uint64_t> seed) {
    return scaled_normal(
        "lecun_normal", [](const Fans &f) { return std::sqrt(1.0 / f.in); }, seed);
}

Initializer lecun_uniform(std::optional<uint64_t> seed) {
    return scaled_uniform(
        "lecun_uniform", [](const Fans &f) { return std::sqrt(3.0 / f.in); }, seed);
}

Initializer orthogonal(double gain, std::optional<uint64_t> seed) {
    return Initializer(
        [gain](const Shape &shape, DType dtype, uint64_t s) {
            check_float(dtype, "orthogonal");
            SJ_CHECK(shape.size() >= 2, ShapeError)
                << "nn::init::orthogonal: needs a shape of rank >= 2, got " << shape_str(shape);
            int64_t rows = shape[0], total = numel(shape);
            if (total == 0)
                return sj::zeros(shape, dtype);
            int64_t cols = total / rows;
            // QR of the tall orientation: m x n with m >= n
            bool wide = rows < cols;
            int64_t m = wide ? cols : rows, n = wide ? rows : cols;
            std::vector<double> a =
                random::normal({m, n}, 0, 1, DType::F64, s).eval().to_vector<double>();
            orthonormalize_columns(a, m, n);
            std::vector<double> w(static_cast<size_t>(total));
            for (int64_t i = 0; i < rows; ++i)
                for (int64_t j = 0; j < cols; ++j)
                    w[i * cols + j] = gain * (wide ? a[j * n + i] : a[i * n + j]);
            return sj::constant(Array(w, shape).astype(dtype));
        },
        seed);
}

} // namespace init
} // namespace sj::nn
