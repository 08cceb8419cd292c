// dot_general's dims mapped onto a column-major strided batched GEMM.
#include "DotGemm.h"

#include <algorithm>
#include <climits>
#include <vector>

namespace sj::cuda {

// Note [dot_general as a GEMM]
// dot_general's result is [batch..., lhs free..., rhs free...] (XLA's convention), row-major,
// so per batch entry it is an M x N matrix with M the lhs free dims and N the rhs free dims,
// and C[i, j] = sum_k L[i, k] R[k, j]. Each group of dims (batch, M, K on the lhs; batch, K, N
// on the rhs) is one BLAS dimension if its dims, taken in the order that flattens them (the
// order of lhs_batch / lhs_contract / rhs_batch / rhs_contract, and for free dims their order
// in the operand), step through memory as one dim would: each dim's stride is the next one's
// stride times its size (dims of size 1 do not count). Then the group is (extent, stride).
// BLAS is column-major and our buffers are row-major, so we ask it for the transpose:
//   C^T (N x M, column-major, ldc = N) = op(R) (N x K) * op(L) (K x M)
// A column-major matrix needs its row stride to be 1 and its column stride to be the leading
// dimension; `trans` swaps the roles. So R is A, untransposed when its N stride is 1 (lda = its
// K stride) and transposed when its K stride is 1 (lda = its N stride); L is B, untransposed
// when its K stride is 1 (ldb = its M stride), transposed when its M stride is 1 (ldb = its K
// stride). A dim of extent 1 has no stride of its own, so either choice works and the leading
// dimension only has to satisfy BLAS's lower bound. Anything else (a contraction in an order
// that does not flatten, free dims around a contracted one) does not fit: the runner computes
// that step another way rather than copying operands around here.

namespace {

/// A group of dims as one: its extent and stride (0 when the extent is 0 or 1: unconstrained).
struct Dim {
    int64_t extent = 1, stride = 0;
};

std::vector<int64_t> row_major_strides(const Shape& s) {
    std::vector<int64_t> st(s.size(), 1);
    for (size_t i = s.size(); i-- > 1;)
        st[i - 1] = st[i] * s[i];
    return st;
}

/// dims (in flattening order) of a row-major array of shape s as one dim, if they collapse.
std::optional<Dim> collapse(const Shape& s, const std::vector<int64_t>& dims) {
    const std::vector<int64_t> st = row_major_strides(s);
    Dim g;
    int64_t last = -1; // the last dim of size > 1
    for (int64_t d : dims) {
        g.extent *= s[size_t(d)];
        if (s[size_t(d)] == 1)
            continue;
        if (last >= 0 && st[size_t(last)] != st[size_t(d)] * s[size_t(d)])
            return std::nullopt;
        last = d;
    }
    if (g.extent > 1)
        g.stride = st[size_t(last)];
    return g;
}

/// The dims of an operand of rank r in neither list, in order.
std::vector<int64_t> free_dims(size_t r, const std::vector<int64_t>& a,
                               const std::vector<int64_t>& b) {
    std::vector<int64_t> f;
    for (int64_t i = 0; i < int64_t(r); ++i)
        if (std::find(a.begin(), a.end(), i) == a.end() &&
            std::find(b.begin(), b.end(), i) == b.end())
            f.push_back(i);
    return f;
}

bool fits_int(int64_t v) {
    return v >= 0 && v <= INT_MAX;
}

} // namespace

std::optional<GemmArgs> gemm_for(const DotAttrs& d, const Shape& lhs, const Shape& rhs, DType t,
                                 DevicePtr lhs_ptr, DevicePtr rhs_ptr, DevicePtr out_ptr) {
    if (t != DType::F32 && t != DType::F64)
        return std::nullopt;
    const auto batch_l = collapse(lhs, d.lhs_batch), batch_r = collapse(rhs, d.rhs_batch);
    const auto k_l = collapse(lhs, d.lhs_contract), k_r = collapse(rhs, d.rhs_contract);
    const auto m = collapse(lhs, free_dims(lhs.size(), d.lhs_batch, d.lhs_contract));
    const auto n = collapse(rhs, free_dims(rhs.size(), d.rhs_batch, d.rhs_contract));
    if (!batch_l || !batch_r || !k_l || !k_r || !m || !n)
        return std::nullopt;
    GemmArgs g;
    g.dtype = t;
    g.m = n->extent; // C^T's rows
    g.n = m->extent; // C^T's columns
    g.k = k_l->extent;
    g.batch = batch_l->extent;
    g.a = rhs_ptr;
    g.b = lhs_ptr;
    g.c = out_ptr;
    g.ldc = std::max<int64_t>(1, g.m);
    g.stride_c = g.m * g.n;
    if (g.m == 0 || g.n == 0 || g.k == 0 || g.batch == 0) { // nothing for BLAS to do
        g.lda = std::max<int64_t>(1, g.m);
        g.ldb = std::max<int64_t>(1, g.k);
        return g;
    }
    // A = op(R), N x K: untransposed when R's N stride is 1, transposed when its K stride is 1
    if (n->stride <= 1) {
        g.trans_a = false;
        g.lda = k_r->stride ? k_r->stride : g.m;
        if (g.lda < g.m)
            return std::nullopt;
    } else if (k_r->stride <= 1) {
        g.trans_a = true;
        g.lda = n->stride;
        if (g.lda < g.k)
            return std::nullopt;
    } else {
        return std::nullopt;
    }
    // B = op(L), K x M: untransposed when L's K stride is 1, transposed when its M stride is 1
    if (k_l->stride <= 1) {
        g.trans_b = false;
        g.ldb = m->stride ? m->stride : g.k;
        if (g.ldb < g.k)
            return std::nullopt;
    } else if (m->stride <= 1) {
        g.trans_b = true;
        g.ldb = k_l->stride;
        if (g.ldb < g.n)
            return std::nullopt;
    } else {
        return std::nullopt;
    }
    g.stride_a = batch_r->stride;
    g.stride_b = batch_l->stride;
    for (int64_t v : {g.m, g.n, g.k, g.batch, g.lda, g.ldb, g.ldc})
        if (!fits_int(v))
            return std::nullopt;
    return g;
}

} // namespace sj::cuda
