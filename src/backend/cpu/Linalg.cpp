// cholesky via LAPACK ?potrf and triangular_solve via CBLAS ?trsm (OpenBLAS, OpenMP build).
//
// Note [Row-major LAPACK without LAPACKE]: LAPACK is column-major. A row-major lower triangle
// is the column-major upper triangle of the same buffer, so ?potrf('U') on the row-major matrix
// computes L with A = L L^T in place: no transposing copies (LAPACKE_?potrf(ROW_MAJOR) makes
// two). We also avoid linking liblapacke.so, whose liblapack.so.3 dependency resolves through
// Debian's alternatives to the pthread build of OpenBLAS: a second BLAS with its own threads.
// CBLAS takes row-major directly. Batches of small matrices, and the right-hand sides of a
// large solve, are split over our threads (the OpenMP team), each piece a single-threaded BLAS
// call: OpenBLAS threads a 16 x 100000 trsm badly (10x slower on 2 threads than on 1).
#include "Linalg.h"

#include "../reference/Reference.h"
#include "ThreadPool.h"

#include <symjax/ir/Attrs.h>
#include <symjax/Error.h>
#include <symjax/ir/Node.h>

#include <cblas.h>
#include <lapack.h>
#include <omp.h>

#include <cstring>

namespace sj::cpu {

namespace {

/// OpenBLAS (OpenMP build) runs on one thread while the calling thread's OpenMP thread count
/// is 1: set for the scope of one piece of work, then restored (a per-thread setting).
struct SingleThreadedBlas {
    int saved = omp_get_max_threads();
    SingleThreadedBlas() { omp_set_num_threads(1); }
    ~SingleThreadedBlas() { omp_set_num_threads(saved); }
};

/// Runs fn(begin, end) over [0, n) items of `work` flops each: split over the pool when the
/// total is worth it, each piece with single-threaded BLAS.
template <class F> void split(int64_t n, double work, F fn) {
    ThreadPool& pool = ThreadPool::get();
    int nt = int(std::min<int64_t>(pool.threads(), n));
    if (nt < 2 || double(n) * work < 2e5) {
        SingleThreadedBlas st;
        fn(int64_t(0), n);
        return;
    }
    pool.run(nt, [&](int t) {
        SingleThreadedBlas st;
        fn(n * t / nt, n * (t + 1) / nt);
    });
}

void potrf(float* a, int n, int* info) {
    char uplo = 'U';
    LAPACK_spotrf(&uplo, &n, a, &n, info);
}
void potrf(double* a, int n, int* info) {
    char uplo = 'U';
    LAPACK_dpotrf(&uplo, &n, a, &n, info);
}

template <class T> void cholesky_t(const Node& node, const Array& x, Array& out) {
    if (x.nbytes() > 0) std::memcpy(out.raw(), x.raw(), size_t(x.nbytes()));
    int64_t n = x.shape().back();
    int64_t nb = ref::matrix_count(x.shape());
    if (n == 0 || nb == 0) return;
    SJ_CHECK(n <= INT32_MAX, InputError) << ref::linalg_where(node) << ": matrix size " << n << " is too large for LAPACK";
    std::vector<int> info(nb, 0);
    T* base = static_cast<T*>(out.raw());
    split(nb, double(n) * n * n / 3, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
            T* a = base + b * n * n;
            potrf(a, int(n), &info[b]);
            for (int64_t i = 0; i < n; ++i) // the upper triangle of L is zero (potrf leaves A there)
                for (int64_t j = i + 1; j < n; ++j) a[i * n + j] = T(0);
        }
    });
    for (int64_t b = 0; b < nb; ++b) {
        SJ_CHECK(info[b] <= 0, InputError)
            << ref::linalg_where(node) << ": matrix " << b << " of " << shape_str(x.shape())
            << " is not positive definite (its leading minor of order " << info[b] << " is not positive)";
        SJ_ASSERT(info[b] == 0) << "potrf: bad argument " << -info[b];
    }
}

void trsm(CBLAS_SIDE side, CBLAS_UPLO uplo, CBLAS_TRANSPOSE ta, CBLAS_DIAG diag, int m, int n, const float* a,
          int lda, float* b, int ldb) {
    cblas_strsm(CblasRowMajor, side, uplo, ta, diag, m, n, 1.0f, a, lda, b, ldb);
}
void trsm(CBLAS_SIDE side, CBLAS_UPLO uplo, CBLAS_TRANSPOSE ta, CBLAS_DIAG diag, int m, int n, const double* a,
          int lda, double* b, int ldb) {
    cblas_dtrsm(CblasRowMajor, side, uplo, ta, diag, m, n, 1.0, a, lda, b, ldb);
}

template <class T>
void triangular_solve_t(const Node& node, const Array& am, const Array& bm, Array& out) {
    const auto& at = node.attr<TriangularSolveAttrs>();
    if (bm.nbytes() > 0) std::memcpy(out.raw(), bm.raw(), size_t(bm.nbytes()));
    int64_t n = am.shape().back();
    const Shape& bs = bm.shape();
    int64_t rows = bs[bs.size() - 2], cols = bs.back();
    SJ_CHECK(rows <= INT32_MAX && cols <= INT32_MAX, InputError)
        << ref::linalg_where(node) << ": right-hand side " << shape_str(bs) << " is too large for BLAS";
    int64_t nb = ref::matrix_count(am.shape());
    const T* a = static_cast<const T*>(am.raw());
    T* x = static_cast<T*>(out.raw());
    if (rows == 0 || cols == 0 || nb == 0) return;
    auto side = at.left_side ? CblasLeft : CblasRight;
    auto uplo = at.lower ? CblasLower : CblasUpper;
    auto ta = at.transpose_a ? CblasTrans : CblasNoTrans;
    auto diag = at.unit_diagonal ? CblasUnit : CblasNonUnit;
    int64_t nvec = at.left_side ? cols : rows; // right-hand sides per matrix
    if (nb == 1) { // one matrix: split its right-hand sides (columns, or rows on the right side)
        split(nvec, double(n) * n, [&](int64_t v0, int64_t v1) {
            if (at.left_side)
                trsm(side, uplo, ta, diag, int(rows), int(v1 - v0), a, int(n), x + v0, int(cols));
            else
                trsm(side, uplo, ta, diag, int(v1 - v0), int(cols), a, int(n), x + v0 * cols, int(cols));
        });
        return;
    }
    split(nb, double(n) * n * double(nvec), [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b)
            trsm(side, uplo, ta, diag, int(rows), int(cols), a + b * n * n, int(n), x + b * rows * cols, int(cols));
    });
}

} // namespace

void cholesky(const Node& node, const std::vector<Array>& in, Array& out, uint64_t) {
    if (out.dtype() == DType::F32)
        return cholesky_t<float>(node, in[0], out);
    return cholesky_t<double>(node, in[0], out);
}

void triangular_solve(const Node& node, const std::vector<Array>& in, Array& out, uint64_t) {
    if (out.dtype() == DType::F32)
        return triangular_solve_t<float>(node, in[0], in[1], out);
    return triangular_solve_t<double>(node, in[0], in[1], out);
}

} // namespace sj::cpu
