// Array: host values.
#include <symjax/Array.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace sj {

namespace {
/// The element count of an array of this type: every dim known, and the count and the byte
/// size fit in int64 (then so do nbytes() and its rounding up to 64 bytes in size_t).
int64_t checked_size(DType dtype, const Shape& shape) {
    for (int64_t d : shape)
        SJ_CHECK(d >= 0, InputError) << "Array: shape " << shape_str(shape)
                                     << " has a negative dim (arrays hold concrete values)";
    try {
        byte_size(shape, dtype_size(dtype));
    } catch (const ShapeError& e) {
        throw ShapeError(std::string("Array ") + dtype_name(dtype) + ": " + e.what());
    }
    return numel(shape);
}

/// "8.0 GiB", "12 bytes".
std::string byte_size_str(uint64_t bytes) {
    const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = double(bytes);
    int u = 0;
    while (v >= 1024 && u < 6)
        v /= 1024, ++u;
    char buf[64];
    if (u == 0)
        std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
    else
        std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
    return buf;
}

/// 64-byte aligned storage for an array; OutOfMemoryError naming the array when there is none
/// (std::bad_alloc would not say what was being allocated).
std::shared_ptr<unsigned char> alloc_bytes(int64_t nbytes, bool zero, DType dtype,
                                           const Shape& shape) {
    const uint64_t want = static_cast<uint64_t>(nbytes);
    size_t n = want > SIZE_MAX - 63 ? 0 : static_cast<size_t>((want + 63) / 64 * 64);
    if (n == 0 && want == 0)
        n = 64;
    void* p = n ? std::aligned_alloc(64, n) : nullptr;
    SJ_CHECK(p, OutOfMemoryError) << "out of memory allocating " << byte_size_str(want) << " ("
                                  << want << " bytes) for array " << dtype_name(dtype)
                                  << shape_str(shape);
    if (zero)
        std::memset(p, 0, n);
    return std::shared_ptr<unsigned char>(static_cast<unsigned char*>(p), std::free);
}
} // namespace

Array::Array(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
    size_ = checked_size(dtype_, shape_);
    buf_ = alloc_bytes(nbytes(), true, dtype_, shape_);
}

Array Array::uninitialized(DType dtype, Shape shape) {
    Array a;
    a.dtype_ = dtype;
    a.shape_ = std::move(shape);
    a.size_ = checked_size(a.dtype_, a.shape_);
    a.buf_ = alloc_bytes(a.nbytes(), false, a.dtype_, a.shape_);
    return a;
}

Array Array::from_buffer(DType dtype, Shape shape, const void* src) {
    Array a = uninitialized(dtype, std::move(shape));
    if (a.nbytes() > 0)
        std::memcpy(a.raw(), src, static_cast<size_t>(a.nbytes()));
    return a;
}

Array Array::full(DType dtype, Shape shape, double v) {
    Array a(dtype, std::move(shape));
    dispatch(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* p = static_cast<T*>(a.raw());
        // saturating, NaN -> 0 (as the cast kernels): static_cast of an out-of-range double is UB
        T tv;
        if (dtype == DType::Bool)
            tv = T(v != 0);
        else if constexpr (std::is_floating_point_v<T>)
            tv = static_cast<T>(v);
        else if (std::isnan(v))
            tv = T(0);
        else if (v <= double(std::numeric_limits<T>::lowest()))
            tv = std::numeric_limits<T>::lowest();
        else if (v >= double(std::numeric_limits<T>::max()))
            tv = std::numeric_limits<T>::max();
        else
            tv = static_cast<T>(v);
        for (int64_t i = 0; i < a.size(); ++i)
            p[i] = tv;
    });
    return a;
}

void Array::check_type(DType t, const char* what) const {
    bool ok = t == dtype_ || (dtype_ == DType::Bool && t == DType::U8);
    SJ_CHECK(ok, TypeError) << "Array::" << what << ": array is " << dtype_name(dtype_)
                            << ", asked for " << dtype_name(t);
    SJ_CHECK(defined(), InputError) << "Array::" << what << ": empty (default-constructed) array";
}

double Array::at(int64_t i) const {
    SJ_CHECK(i >= 0 && i < size_, InputError)
        << "Array::at: index " << i << " out of range for " << type_str();
    return dispatch(dtype_, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return static_cast<double>(static_cast<const T*>(raw())[i]);
    });
}

Array Array::clone() const {
    if (!defined())
        return {};
    return from_buffer(dtype_, shape_, raw());
}

Array Array::reshape(Shape shape) const {
    SJ_CHECK(numel(shape) == size_, ShapeError)
        << "Array::reshape: cannot view " << type_str() << " as " << shape_str(shape);
    Array a = *this;
    a.shape_ = std::move(shape);
    return a;
}

Array Array::row(int64_t i) const {
    SJ_CHECK(rank() >= 1 && i >= 0 && i < shape_[0], InputError)
        << "Array::row: row " << i << " of " << type_str();
    Array a;
    a.dtype_ = dtype_;
    a.shape_.assign(shape_.begin() + 1, shape_.end());
    a.size_ = shape_[0] == 0 ? 0 : size_ / shape_[0];
    // the aliasing constructor: the view keeps the whole buffer alive
    a.buf_ = std::shared_ptr<unsigned char>(buf_, buf_.get() + i * a.size_ * dtype_size(dtype_));
    return a;
}

Array Array::astype(DType t) const {
    Array out(t, shape_);
    dispatch(dtype_, [&](auto stag) {
        using S = typename decltype(stag)::type;
        dispatch(t, [&](auto dtag) {
            using D = typename decltype(dtag)::type;
            const S* s = static_cast<const S*>(raw());
            D* d = static_cast<D*>(out.raw());
            for (int64_t i = 0; i < size_; ++i)
                d[i] = t == DType::Bool ? D(s[i] != S(0)) : static_cast<D>(s[i]);
        });
    });
    return out;
}

std::string Array::type_str() const {
    return std::string(dtype_name(dtype_)) + shape_str(shape_);
}

std::string Array::str(int max_elems) const {
    if (!defined())
        return "<undefined>";
    std::ostringstream os;
    os.precision(6);
    auto strides = row_major_strides(shape_);
    int64_t shown = 0;
    auto put = [&](int64_t i) {
        dispatch(dtype_, [&](auto tag) {
            using T = typename decltype(tag)::type;
            T v = static_cast<const T*>(raw())[i];
            if constexpr (sizeof(T) == 1)
                os << int(v);
            else
                os << v;
        });
    };
    if (shape_.empty()) {
        put(0);
        return os.str();
    }
    // iterate in row-major order, opening/closing brackets at dim boundaries
    std::vector<int64_t> idx(shape_.size(), 0);
    for (size_t d = 0; d < shape_.size(); ++d)
        os << "[";
    if (size_ == 0) {
        for (size_t d = 0; d < shape_.size(); ++d)
            os << "]";
        return os.str();
    }
    for (int64_t flat = 0; flat < size_; ++flat) {
        if (shown == max_elems) {
            os << "...";
            break;
        }
        put(flat);
        ++shown;
        int d = static_cast<int>(shape_.size()) - 1;
        int closed = 0;
        while (d >= 0 && ++idx[d] == shape_[d]) {
            idx[d] = 0;
            --d;
            ++closed;
        }
        for (int c = 0; c < closed; ++c)
            os << "]";
        if (d >= 0) {
            os << ", ";
            for (int c = 0; c < closed; ++c)
                os << "[";
        }
    }
    if (shown < size_)
        for (size_t d = 0; d < shape_.size(); ++d)
            os << "]";
    return os.str();
}

bool Array::equals(const Array& o) const {
    if (dtype_ != o.dtype_ || shape_ != o.shape_)
        return false;
    return nbytes() == 0 || std::memcmp(raw(), o.raw(), static_cast<size_t>(nbytes())) == 0;
}

} // namespace sj
