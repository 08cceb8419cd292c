// Reference kernels of dot_general, cholesky and triangular_solve: plain loops, the oracle.
#include "Iterate.h"
#include "Reference.h"

#include <symjax/ir/Node.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace sj::ref {
namespace {

Shape dims_of(const Shape& s, const std::vector<int64_t>& axes) {
    Shape out;
    for (int64_t a : axes) out.push_back(s[a]);
    return out;
}

std::vector<int64_t> free_axes(int r, const std::vector<int64_t>& batch,
                               const std::vector<int64_t>& contract) {
    std::vector<int64_t> out;
    for (int i = 0; i < r; ++i)
        if (std::find(batch.begin(), batch.end(), i) == batch.end() &&
            std::find(contract.begin(), contract.end(), i) == contract.end())
            out.push_back(i);
    return out;
}

/// The strides of `axes` of an operand with row-major strides `rm`.
std::vector<int64_t> pick(const std::vector<int64_t>& rm, const std::vector<int64_t>& axes) {
    std::vector<int64_t> out;
    for (int64_t a : axes) out.push_back(rm[a]);
    return out;
}

// out[batch, lhs free, rhs free] = sum over contracting indices of lhs[...] * rhs[...]
Array dot_general_kernel(const KernelCtx& c) {
    const auto& a = c.attr<DotAttrs>();
    const Array& x = c.in[0];
    const Array& y = c.in[1];
    Array out(c.out.dtype, c.out.shape);
    auto lf = free_axes(x.rank(), a.lhs_batch, a.lhs_contract);
    auto rf = free_axes(y.rank(), a.rhs_batch, a.rhs_contract);
    auto xs = row_major_strides(x.shape());
    auto ys = row_major_strides(y.shape());
    // output dims -> strides into x and y (0 where the operand lacks the dim)
    std::vector<int64_t> ox, oy;
    for (size_t k = 0; k < a.lhs_batch.size(); ++k) {
        ox.push_back(xs[a.lhs_batch[k]]);
        oy.push_back(ys[a.rhs_batch[k]]);
    }
    for (int64_t ax : lf) {
        ox.push_back(xs[ax]);
        oy.push_back(0);
    }
    for (int64_t ax : rf) {
        ox.push_back(0);
        oy.push_back(ys[ax]);
    }
    Shape kshape = dims_of(x.shape(), a.lhs_contract);
    std::vector<std::vector<int64_t>> kst{pick(xs, a.lhs_contract), pick(ys, a.rhs_contract)};
    dispatch(out.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        // floats accumulate in double; integers wrap in their own width (unsigned arithmetic
        // avoids signed overflow)
        using Acc = typename std::conditional_t<std::is_floating_point_v<T>,
                                                std::type_identity<double>,
                                                std::make_unsigned<T>>::type;
        const T* px = ptr<T>(x);
        const T* py = ptr<T>(y);
        T* po = ptr<T>(out);
        for_each_index(out.shape(), {ox, oy}, [&](int64_t o, const auto&, const auto& base) {
            Acc acc = 0;
            if (kshape.empty()) {
                acc = Acc(Acc(px[base[0]]) * Acc(py[base[1]]));
            } else {
                for_each_index(kshape, kst, [&](int64_t, const auto&, const auto& off) {
                    acc = Acc(acc + Acc(px[base[0] + off[0]]) * Acc(py[base[1] + off[1]]));
                });
            }
            po[o] = static_cast<T>(acc);
        });
    });
    return out;
}

// A = L L^T, Cholesky-Banachiewicz, row by row, reading only the lower triangle of A
Array cholesky_kernel(const KernelCtx& c) {
    const Array& x = c.in[0];
    Array out(c.out.dtype, c.out.shape);
    int64_t n = x.shape().back();
    int64_t nb = matrix_count(x.shape());
    std::vector<double> a(n * n), l(n * n);
    for (int64_t b = 0; b < nb; ++b) {
        for (int64_t i = 0; i < n * n; ++i) a[i] = x.at(b * n * n + i);
        std::fill(l.begin(), l.end(), 0.0);
        for (int64_t i = 0; i < n; ++i) {
            for (int64_t j = 0; j <= i; ++j) {
                double s = a[i * n + j];
                for (int64_t k = 0; k < j; ++k) s -= l[i * n + k] * l[j * n + k];
                if (i == j) {
                    SJ_CHECK(s > 0, InputError)
                        << linalg_where(c.node) << ": matrix " << b << " of "
                        << shape_str(x.shape()) << " is not positive definite (its leading minor "
                        << "of order " << i + 1 << " is not positive)";
                    l[i * n + i] = std::sqrt(s);
                } else {
                    l[i * n + j] = s / l[j * n + j];
                }
            }
        }
        dispatch(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            T* po = ptr<T>(out) + b * n * n;
            for (int64_t i = 0; i < n * n; ++i) po[i] = static_cast<T>(l[i]);
        });
    }
    return out;
}

// op(A) X = B by forward/back substitution (left), or X op(A) = B, i.e. op(A)^T X^T = B^T (right)
Array triangular_solve_kernel(const KernelCtx& c) {
    const auto& t = c.attr<TriangularSolveAttrs>();
    const Array& am = c.in[0];
    const Array& bm = c.in[1];
    Array out(c.out.dtype, c.out.shape);
    int64_t n = am.shape().back();
    const Shape& bs = bm.shape();
    int64_t rows = bs[bs.size() - 2], cols = bs.back();
    int64_t nb = matrix_count(am.shape());
    int64_t nvec = t.left_side ? cols : rows; // right-hand sides per matrix
    std::vector<double> a(n * n), b(rows * cols), x(rows * cols), m(n * n);
    for (int64_t bi = 0; bi < nb; ++bi) {
        for (int64_t i = 0; i < n * n; ++i) a[i] = am.at(bi * n * n + i);
        for (int64_t i = 0; i < rows * cols; ++i) b[i] = bm.at(bi * rows * cols + i);
        // the entries read: the selected triangle, with a unit diagonal when asked
        auto a_at = [&](int64_t i, int64_t j) {
            if (i == j) return t.unit_diagonal ? 1.0 : a[i * n + i];
            bool in_triangle = t.lower ? i > j : i < j;
            return in_triangle ? a[i * n + j] : 0.0;
        };
        // the system solved per vector is m x = rhs, with m = op(A) (left) or op(A)^T (right)
        bool transposed = t.transpose_a != !t.left_side;
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) m[i * n + j] = transposed ? a_at(j, i) : a_at(i, j);
        bool m_lower = t.lower != transposed;
        // element k of vector v of B (and of X)
        auto at = [&](int64_t v, int64_t k) { return t.left_side ? k * cols + v : v * cols + k; };
        for (int64_t v = 0; v < nvec; ++v) {
            for (int64_t s = 0; s < n; ++s) {
                int64_t i = m_lower ? s : n - 1 - s;
                double acc = b[at(v, i)];
                for (int64_t j = 0; j < n; ++j) {
                    bool solved = m_lower ? j < i : j > i;
                    if (solved) acc -= m[i * n + j] * x[at(v, j)];
                }
                x[at(v, i)] = acc / m[i * n + i];
            }
        }
        dispatch(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            T* po = ptr<T>(out) + bi * rows * cols;
            for (int64_t i = 0; i < rows * cols; ++i) po[i] = static_cast<T>(x[i]);
        });
    }
    return out;
}

} // namespace

void register_linalg_kernels(Kernel* table) {
    table[int(Op::DotGeneral)] = dot_general_kernel;
    table[int(Op::Cholesky)] = cholesky_kernel;
    table[int(Op::TriangularSolve)] = triangular_solve_kernel;
}

} // namespace sj::ref
