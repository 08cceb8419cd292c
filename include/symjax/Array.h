// Array: an owning, typed, shaped host value (contiguous, row-major).
#pragma once

#include <symjax/DType.h>
#include <symjax/Error.h>
#include <symjax/Shape.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace sj {

/// A host array. Copies share the buffer (like a tensor handle); clone() copies the data.
/// Every dim is known (no -1). Data is 64-byte aligned and contiguous in row-major order.
class Array {
public:
    Array() = default;
    /// Zero-filled array of the given dtype and shape.
    Array(DType dtype, Shape shape);
    /// Copies `values` (size must equal the product of `shape`).
    template <class T> Array(const std::vector<T>& values, Shape shape);
    /// A 1-d array holding `values`.
    template <class T> explicit Array(const std::vector<T>& values);
    /// Copies `n = numel(shape)` elements of `dtype` from `src`.
    static Array from_buffer(DType dtype, Shape shape, const void* src);
    /// A 0-d array.
    template <class T> static Array scalar(T v);
    /// Every element equal to `v` (converted to dtype).
    static Array full(DType dtype, Shape shape, double v);
    /// An array whose contents are unspecified (for kernels that write every element).
    static Array uninitialized(DType dtype, Shape shape);

    DType dtype() const { return dtype_; }
    const Shape& shape() const { return shape_; }
    int rank() const { return static_cast<int>(shape_.size()); }
    int64_t size() const { return size_; }
    int64_t nbytes() const { return size_ * dtype_size(dtype_); }
    bool defined() const { return static_cast<bool>(buf_); }
    /// True when no other Array shares this buffer.
    bool unique() const { return buf_.use_count() == 1; }
    /// Number of Arrays sharing this buffer.
    long use_count() const { return buf_.use_count(); }
    /// True when both share one buffer.
    bool shares_buffer(const Array& o) const { return buf_ && buf_ == o.buf_; }

    void* raw() { return buf_.get(); }
    const void* raw() const { return buf_.get(); }
    /// Typed pointer; throws TypeError when T does not match dtype().
    template <class T> T* data();
    template <class T> const T* data() const;
    /// The only element of a size-1 array, converted to T.
    template <class T> T item() const;
    /// Element i (flat, row-major) converted to double.
    double at(int64_t i) const;
    /// All elements converted to T.
    template <class T> std::vector<T> to_vector() const;

    /// Deep copy.
    Array clone() const;
    /// A view with a new shape of the same size (shares the buffer).
    Array reshape(Shape shape) const;
    /// Element i of the first dim, [d1, d2, ...], as a view (shares the buffer; no copy).
    Array row(int64_t i) const;
    /// Converted copy.
    Array astype(DType t) const;
    /// "f32[2, 3]"
    std::string type_str() const;
    /// Values as text, e.g. "[[1, 2], [3, 4]]" (long arrays are elided).
    std::string str(int max_elems = 64) const;
    /// Same dtype, shape and bytes.
    bool equals(const Array& o) const;

private:
    void check_type(DType t, const char* what) const;
    DType dtype_ = DType::F32;
    Shape shape_;
    int64_t size_ = 0;
    std::shared_ptr<unsigned char> buf_;
};

template <class T> Array::Array(const std::vector<T>& values, Shape shape) {
    constexpr DType d = dtype_of<T>();
    *this = Array(d, std::move(shape));
    SJ_CHECK(static_cast<int64_t>(values.size()) == size_, InputError)
        << "Array: " << values.size() << " values given for shape " << shape_str(shape_) << " ("
        << size_ << " elements)";
    if constexpr (std::is_same_v<T, bool>) {
        auto* p = static_cast<uint8_t*>(raw());
        for (size_t i = 0; i < values.size(); ++i) p[i] = values[i] ? 1 : 0;
    } else if (size_ > 0) {
        std::memcpy(raw(), values.data(), values.size() * sizeof(T));
    }
}
template <class T>
Array::Array(const std::vector<T>& values) : Array(values, Shape{int64_t(values.size())}) {}

template <class T> Array Array::scalar(T v) {
    if constexpr (std::is_same_v<T, bool>) {
        Array a(DType::Bool, {});
        *static_cast<uint8_t*>(a.raw()) = v ? 1 : 0;
        return a;
    } else {
        Array a(dtype_of<T>(), {});
        *static_cast<T*>(a.raw()) = v;
        return a;
    }
}
template <class T> T* Array::data() {
    check_type(dtype_of<T>(), "data");
    return static_cast<T*>(raw());
}
template <class T> const T* Array::data() const {
    check_type(dtype_of<T>(), "data");
    return static_cast<const T*>(raw());
}
template <class T> T Array::item() const {
    SJ_CHECK(size_ == 1, InputError)
        << "item(): array " << type_str() << " has " << size_ << " elements, expected 1";
    T out{};
    dispatch(dtype_, [&](auto tag) {
        using S = typename decltype(tag)::type;
        out = static_cast<T>(*static_cast<const S*>(raw()));
    });
    return out;
}
template <class T> std::vector<T> Array::to_vector() const {
    std::vector<T> out(static_cast<size_t>(size_));
    dispatch(dtype_, [&](auto tag) {
        using S = typename decltype(tag)::type;
        const S* p = static_cast<const S*>(raw());
        for (int64_t i = 0; i < size_; ++i) out[i] = static_cast<T>(p[i]);
    });
    return out;
}

} // namespace sj
