// Shape helpers.
#include <symjax/Error.h>
#include <symjax/Shape.h>

#include <sstream>

namespace sj {

std::string shape_str(const Shape& s) {
    std::ostringstream os;
    os << "[";
    for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
    os << "]";
    return os.str();
}

namespace {
/// The product of the known dims of s times `factor`, or -1 on int64 overflow (0 when a dim
/// is 0, whatever the others).
int64_t known_product(const Shape& s, int64_t factor) {
    for (int64_t d : s)
        if (d == 0)
            return 0;
    int64_t n = factor;
    for (int64_t d : s)
        if (d > 0 && __builtin_mul_overflow(n, d, &n))
            return -1;
    return n;
}
} // namespace

int64_t numel(const Shape& s) {
    int64_t n = known_product(s, 1);
    SJ_CHECK(n >= 0, ShapeError) << "shape " << shape_str(s)
                                 << " has too many elements: their number overflows int64";
    return is_static(s) ? n : -1;
}

int64_t byte_size(const Shape& s, int64_t elem_size) {
    int64_t n = known_product(s, elem_size);
    SJ_CHECK(n >= 0, ShapeError) << "shape " << shape_str(s) << " is too large: "
                                 << "its size in bytes (" << elem_size
                                 << " per element) overflows int64";
    return is_static(s) ? n : -1;
}

bool is_static(const Shape& s) {
    for (int64_t d : s)
        if (d < 0) return false;
    return true;
}

std::vector<int64_t> row_major_strides(const Shape& s) {
    std::vector<int64_t> st(s.size());
    int64_t acc = 1;
    for (size_t i = s.size(); i-- > 0;) {
        st[i] = acc;
        acc *= s[i];
    }
    return st;
}

int normalize_axis(int64_t axis, int rank, const char* op) {
    SJ_CHECK(axis >= -rank && axis < rank, ShapeError)
        << op << ": axis " << axis << " is out of range for a tensor of rank " << rank;
    return static_cast<int>(axis < 0 ? axis + rank : axis);
}

SliceBounds slice_bounds(int64_t dim, int64_t start, int64_t stop, int64_t step) {
    auto clamp = [&](int64_t i) {
        if (i < 0) i += dim;
        return i < 0 ? int64_t(0) : (i > dim ? dim : i);
    };
    int64_t s = clamp(start), e = clamp(stop);
    int64_t count = e > s ? 1 + (e - s - 1) / step : 0; // (no overflow for a huge step)
    return {s, count};
}

} // namespace sj
