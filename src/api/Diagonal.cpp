// Diagonals (NumPy's diagonal, diag, trace): composites of permute, slice, reshape and pad, so
// they stay movement ops (no gather) and their gradients are the movement ops' own.
#include "../ops/OpDef.h"

#include <symjax/Ops.h>

#include <algorithm>

namespace sj {

namespace {
/// Merges the last two dims of x into one of size `merged`; with several unknown leading dims,
/// they follow x's at call time (a shape-only `like` input of x's rank less one).
Tensor merge_last_two(const Tensor& x, int64_t merged) {
    Shape shape(x.shape().begin(), x.shape().end() - 2);
    shape.push_back(merged);
    if (std::count(shape.begin(), shape.end(), int64_t(-1)) <= 1)
        return reshape(x, shape);
    Tensor like = any(cast(x, DType::Bool), {-1});
    return detail::make(Op::Reshape, {x, like}, ShapeAttrs{shape});
}
} // namespace

// The diagonal of an [L, L] block is every (L + 1)-th element of its L * L row-major elements:
//
//     x [..., d1, d2] --slice--> [..., L, L] --reshape--> [..., L*L] --slice step L+1--> [..., L]
Tensor diagonal(const Tensor& x, int64_t offset, int64_t axis1, int64_t axis2) {
    SJ_CHECK(x.rank() >= 2, ShapeError)
        << "diagonal(" << x.name() << "): needs rank >= 2, got " << x.name() << " " << x.type_str();
    int a1 = normalize_axis(axis1, x.rank(), "diagonal");
    int a2 = normalize_axis(axis2, x.rank(), "diagonal");
    SJ_CHECK(a1 != a2, ShapeError) << "diagonal(" << x.name() << "): axis1 and axis2 are both dim "
                                   << a1 << " of " << x.type_str();
    int64_t d1 = x.dim(a1), d2 = x.dim(a2);
    SJ_CHECK(d1 >= 0 && d2 >= 0, ShapeError)
        << "diagonal(" << x.name() << "): dims " << a1 << " and " << a2 << " of " << x.type_str()
        << " must be known when the graph is built";
    Axes perm;
    for (int i = 0; i < x.rank(); ++i)
        if (i != a1 && i != a2)
            perm.push_back(i);
    perm.push_back(a1);
    perm.push_back(a2);
    Tensor p = transpose(x, perm);
    int64_t row = offset >= 0 ? 0 : -offset, col = offset >= 0 ? offset : 0;
    int64_t len = std::max<int64_t>(0, std::min(d1 - row, d2 - col));
    int r = x.rank();
    std::vector<int64_t> start(r, 0), stop(r, Index::kEnd);
    start[r - 2] = std::min(row, d1);
    stop[r - 2] = start[r - 2] + len;
    start[r - 1] = std::min(col, d2);
    stop[r - 1] = start[r - 1] + len;
    Tensor f = merge_last_two(slice(p, start, stop), len * len);
    return slice_axis(f, -1, 0, Index::kEnd, len + 1);
}

// A vector v of L elements on the k-th diagonal of an n x n matrix (n = L + |k|) sits at flat
// positions first + i (n + 1): one pad with n interior zeros, reshaped.
Tensor diag(const Tensor& x, int64_t k) {
    if (x.rank() == 2)
        return diagonal(x, k, 0, 1);
    SJ_CHECK(x.rank() == 1, ShapeError) << "diag(" << x.name() << "): needs a vector or a "
                                        << "matrix, got " << x.name() << " " << x.type_str();
    int64_t len = x.dim(0);
    SJ_CHECK(len >= 0, ShapeError) << "diag(" << x.name() << "): the length of " << x.type_str()
                                   << " must be known when the graph is built";
    int64_t n = len + (k >= 0 ? k : -k);
    int64_t first = k >= 0 ? k : -k * n;
    int64_t covered = len > 0 ? (len - 1) * (n + 1) + 1 : 0;
    Tensor flat = pad(x, {first}, {n * n - first - covered}, {n}, 0.0);
    return reshape(flat, {n, n});
}

Tensor trace(const Tensor& x, int64_t offset, int64_t axis1, int64_t axis2) {
    Tensor d = diagonal(x, offset, axis1, axis2);
    if (d.dtype() == DType::Bool)
        d = cast(d, DType::I64); // NumPy counts the true elements
    return sum(d, {-1});
}

} // namespace sj
