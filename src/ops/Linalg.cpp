// Linear algebra ops (dot_general, cholesky, triangular_solve): rules and builders, and matmul.
#include "OpDef.h"

#include <symjax/Ops.h>
#include <symjax/ir/Node.h>

#include <algorithm>
#include <numeric>
#include <sstream>

namespace sj {
namespace detail {
namespace {


// ---- dot_general ------------------------------------------------------------------------------

/// The axes of a rank-r operand that are neither batch nor contracting, in increasing order.
Axes free_axes(int r, const Axes& batch, const Axes& contract) {
    Axes out;
    for (int i = 0; i < r; ++i)
        if (std::find(batch.begin(), batch.end(), i) == batch.end() &&
            std::find(contract.begin(), contract.end(), i) == contract.end())
            out.push_back(i);
    return out;
}

void check_axes(const InferCtx& c, size_t i, const Axes& batch, const Axes& contract) {
    int r = static_cast<int>(c.in[i].shape.size());
    std::vector<bool> seen(r, false);
    for (const Axes* list : {&batch, &contract})
        for (int64_t ax : *list) {
            if (ax < 0 || ax >= r || seen[ax]) {
                std::ostringstream os;
                os << c.where() << ": batch dims " << shape_str(batch) << " and contracting dims "
                   << shape_str(contract) << " of " << c.name(i) << " (shape "
                   << shape_str(c.in[i].shape) << ") must be distinct axes in [0, " << r << ")";
                shape_fail(c, os.str());
            }
            seen[ax] = true;
        }
}

TensorType infer_dot_general(const InferCtx& c) {
    const auto& a = c.attr<DotAttrs>();
    const Shape& ls = c.in[0].shape;
    const Shape& rs = c.in[1].shape;
    SJ_CHECK(c.in[0].dtype == c.in[1].dtype, TypeError)
        << c.where() << ": dtypes " << dtype_name(c.in[0].dtype) << " and "
        << dtype_name(c.in[1].dtype) << " differ";
    check_dtype_class(c, 0);
    SJ_CHECK(a.lhs_batch.size() == a.rhs_batch.size(), ShapeError)
        << c.where() << ": " << a.lhs_batch.size() << " lhs batch dims but " << a.rhs_batch.size()
        << " rhs batch dims";
    SJ_CHECK(a.lhs_contract.size() == a.rhs_contract.size(), ShapeError)
        << c.where() << ": " << a.lhs_contract.size() << " lhs contracting dims but "
        << a.rhs_contract.size() << " rhs contracting dims";
    check_axes(c, 0, a.lhs_batch, a.lhs_contract);
    check_axes(c, 1, a.rhs_batch, a.rhs_contract);
    auto pair_check = [&](const Axes& la, const Axes& ra, const char* what) {
        for (size_t k = 0; k < la.size(); ++k)
            if (!dims_agree(ls[la[k]], rs[ra[k]])) {
                std::ostringstream os;
                os << c.where() << ": " << what << " dim " << la[k] << " of " << c.name(0)
                   << " (shape " << shape_str(ls) << ") has size " << ls[la[k]] << " but "
                   << what << " dim " << ra[k] << " of " << c.name(1) << " (shape "
                   << shape_str(rs) << ") has size " << rs[ra[k]];
                shape_fail(c, os.str());
            }
    };
    pair_check(a.lhs_batch, a.rhs_batch, "batch");
    pair_check(a.lhs_contract, a.rhs_contract, "contracting");
    Shape out;
    for (size_t k = 0; k < a.lhs_batch.size(); ++k) {
        int64_t d = ls[a.lhs_batch[k]];
        out.push_back(d >= 0 ? d : rs[a.rhs_batch[k]]);
    }
    for (int64_t ax : free_axes(int(ls.size()), a.lhs_batch, a.lhs_contract)) out.push_back(ls[ax]);
    for (int64_t ax : free_axes(int(rs.size()), a.rhs_batch, a.rhs_contract)) out.push_back(rs[ax]);
    return {c.in[0].dtype, out};
}

/// The gradient of dot_general with respect to operand x (the other operand is y), following
/// JAX's _dot_general_transpose_lhs. g's dims are [batch, lhs free, rhs free]; x_is_lhs says
/// where x's free dims sit in g. Contracting g's y-free dims with y's free dims (and batching
/// the batch dims) leaves [batch, x free, x contract (in y's axis order)], which a permute puts
/// back in x's dim order.
Tensor dot_transpose(const Tensor& g, const Tensor& y, int x_rank, const Axes& x_batch,
                     const Axes& x_contract, const Axes& y_batch, const Axes& y_contract,
                     bool x_is_lhs) {
    Axes x_free = free_axes(x_rank, x_batch, x_contract);
    Axes y_free = free_axes(y.rank(), y_batch, y_contract);
    int64_t nb = int64_t(x_batch.size());
    Axes g_batch(nb), g_y(y_free.size());
    std::iota(g_batch.begin(), g_batch.end(), 0);
    int64_t y_start = x_is_lhs ? nb + int64_t(x_free.size()) : nb;
    std::iota(g_y.begin(), g_y.end(), y_start);
    // y's remaining dims are its contracting dims in increasing axis order; name the x axis each
    // one pairs with.
    std::vector<size_t> by_y(y_contract.size());
    std::iota(by_y.begin(), by_y.end(), size_t(0));
    std::sort(by_y.begin(), by_y.end(),
              [&](size_t i, size_t j) { return y_contract[i] < y_contract[j]; });
    Axes order = x_batch; // order[k] = the x axis held by dim k of r
    Tensor r;
    if (x_is_lhs) {
        r = dot_general(g, y, DotDims{g_batch, y_batch, g_y, y_free});
        order.insert(order.end(), x_free.begin(), x_free.end());
        for (size_t k : by_y) order.push_back(x_contract[k]);
    } else {
        // the rhs's gradient as y^T g rather than (g^T y)^T: for a matmul x = W [in, out] the
        // product comes out as [in, out] already and no transpose is left for later kernels to
        // read with a stride (as JAX's _dot_general_transpose_rhs does)
        r = dot_general(y, g, DotDims{y_batch, g_batch, y_free, g_y});
        for (size_t k : by_y) order.push_back(x_contract[k]);
        order.insert(order.end(), x_free.begin(), x_free.end());
    }
    Axes perm(order.size());
    for (size_t k = 0; k < order.size(); ++k) perm[order[k]] = int64_t(k);
    bool identity = true;
    for (size_t k = 0; k < perm.size(); ++k) identity = identity && perm[k] == int64_t(k);
    return identity ? r : transpose(r, perm);
}

// ---- helpers for matrices in the last two dims -------------------------------------------------

/// Swaps the last two dims.
Tensor mT(const Tensor& x) {
    Axes p(x.rank());
    std::iota(p.begin(), p.end(), 0);
    std::swap(p[x.rank() - 1], p[x.rank() - 2]);
    return transpose(x, p);
}

/// An n x n constant: `below` under the diagonal, `diag` on it, `above` over it.
Tensor band_mask(int64_t n, double below, double diag, double above, DType dtype) {
    Array m(DType::F64, {n, n});
    double* p = m.data<double>();
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) p[i * n + j] = i > j ? below : i == j ? diag : above;
    return constant(m.astype(dtype));
}

// ---- cholesky ---------------------------------------------------------------------------------

void check_square(const InferCtx& c, size_t i, const char* what) {
    const Shape& s = c.in[i].shape;
    if (s.size() < 2 || !dims_agree(s[s.size() - 1], s[s.size() - 2])) {
        std::ostringstream os;
        os << c.where() << ": " << what << " " << c.name(i) << " must be a batch of square "
           << "matrices [..., n, n], got shape " << shape_str(s);
        shape_fail(c, os.str());
    }
}

TensorType infer_cholesky(const InferCtx& c) {
    const TensorType& t = c.in[0];
    check_dtype_class(c, 0);
    check_square(c, 0, "operand");
    const Shape& s = t.shape;
    SJ_CHECK(s[s.size() - 1] >= 0 && s[s.size() - 2] >= 0, ShapeError)
        << c.where() << ": the matrix size n of " << c.name(0) << " (shape " << shape_str(s)
        << ") must be known when the graph is built";
    return t;
}

// ---- triangular_solve -------------------------------------------------------------------------

TensorType infer_triangular_solve(const InferCtx& c) {
    const auto& a = c.attr<TriangularSolveAttrs>();
    const Shape& as = c.in[0].shape;
    const Shape& bs = c.in[1].shape;
    SJ_CHECK(c.in[0].dtype == c.in[1].dtype, TypeError)
        << c.where() << ": dtypes " << dtype_name(c.in[0].dtype) << " and "
        << dtype_name(c.in[1].dtype) << " differ";
    check_dtype_class(c, 0);
    check_square(c, 0, "the triangular matrix");
    size_t r = as.size();
    int64_t n = as[r - 1] >= 0 ? as[r - 1] : as[r - 2];
    auto fail = [&](const std::string& why) {
        std::ostringstream os;
        os << c.where() << ": the matrix " << c.name(0) << " has shape " << shape_str(as)
           << ", the right-hand side " << c.name(1) << " has shape " << shape_str(bs) << "; "
           << why;
        shape_fail(c, os.str());
    };
    if (bs.size() != r)
        fail("expected a right-hand side of rank " + std::to_string(r) +
             " (the same batch dims as the matrix)");
    for (size_t i = 0; i + 2 < r; ++i)
        if (!dims_agree(as[i], bs[i]))
            fail("batch dim " + std::to_string(i) + " differs (" + std::to_string(as[i]) + " vs " +
                 std::to_string(bs[i]) + ")");
    size_t bdim = a.left_side ? r - 2 : r - 1;
    if (!dims_agree(n, bs[bdim]))
        fail("dim " + std::to_string(bdim) + " of the right-hand side must equal n = " +
             std::to_string(n) +
             (a.left_side ? " (left side: B is [..., n, k])" : " (right side: B is [..., k, n])"));
    Shape out = bs;
    for (size_t i = 0; i + 2 < r; ++i)
        if (out[i] < 0) out[i] = as[i];
    if (out[bdim] < 0) out[bdim] = n;
    return {c.in[1].dtype, out};
}

/// triangular_solve per example: the matrix and the right-hand side both batched (the shared one
/// repeated: the op wants the same batch dims on both), one solve of the whole batch.
Tensor batch_triangular_solve(const BatchArgs& b) {
    return make(Op::TriangularSolve, {batched_input(b, 0), batched_input(b, 1)}, b.n.attrs());
}

/// The mask of the entries of A that triangular_solve reads: the selected triangle, without
/// the diagonal when it is taken as 1.
Tensor used_triangle(const Node& n, const Tensor& a) {
    const auto& t = n.attr<TriangularSolveAttrs>();
    int64_t sz = a.dim(-1);
    SJ_CHECK(sz >= 0, ShapeError) << "gradient of triangular_solve: the matrix size of "
                                  << a.name() << " " << a.type_str()
                                  << " must be known when the graph is built";
    double diag = t.unit_diagonal ? 0.0 : 1.0;
    return t.lower ? band_mask(sz, 1.0, diag, 0.0, a.dtype())
                   : band_mask(sz, 0.0, diag, 1.0, a.dtype());
}

void register_grads(OpDef* t) {
    // d(A.B) along a contraction: dA = g . B contracted over B's free dims, permuted back to
    // A's dim order; likewise dB = A^T-style contraction of g with A
    t[int(Op::DotGeneral)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        const auto& a = n.attr<DotAttrs>();
        Tensor x = in(n, 0), y = in(n, 1);
        d[0] = dot_transpose(g, y, x.rank(), a.lhs_batch, a.lhs_contract, a.rhs_batch,
                             a.rhs_contract, true);
        d[1] = dot_transpose(g, x, y.rank(), a.rhs_batch, a.rhs_contract, a.lhs_batch,
                             a.lhs_contract, false);
    };
    // Murray (2016): Abar = sym(L^-T Phi(L^T Lbar) L^-1), Phi = tril with the diagonal halved
    t[int(Op::Cholesky)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        Tensor l(n.shared_from_this());
        Tensor phi = band_mask(n.shape().back(), 1.0, 0.5, 0.0, l.dtype()) * matmul(mT(l), g);
        Tensor x = triangular_solve(l, phi, /*left_side=*/true, /*lower=*/true,
                                    /*transpose_a=*/true); // L^-T Phi
        Tensor s = triangular_solve(l, x, /*left_side=*/false, /*lower=*/true); // (L^-T Phi) L^-1
        d[0] = 0.5 * (s + mT(s));
    };
    // op(A) X = B: Bbar = op(A)^-T Xbar, op(A)bar = -Bbar X^T; X op(A) = B: Bbar = Xbar op(A)^-T,
    // op(A)bar = -X^T Bbar; Abar is op(A)bar (transposed back) on the triangle that was read
    t[int(Op::TriangularSolve)].grad = [](const Node& n, const Tensor& g,
                                          std::vector<Tensor>& d) {
        const auto& ta = n.attr<TriangularSolveAttrs>();
        Tensor a = in(n, 0);
        Tensor x(n.shared_from_this());
        Tensor bbar = triangular_solve(a, g, ta.left_side, ta.lower, !ta.transpose_a,
                                       ta.unit_diagonal);
        Tensor abar;
        if (ta.left_side)
            abar = ta.transpose_a ? matmul(x, mT(bbar)) : matmul(bbar, mT(x));
        else
            abar = ta.transpose_a ? matmul(mT(bbar), x) : matmul(mT(x), bbar);
        d[0] = neg(abar) * used_triangle(n, a);
        d[1] = bbar;
    };
}

} // namespace

namespace {
// Batching (Note [Batching rules] in src/api/Vmap.cpp): both sides batched, the batch is a new
// batch dim of the product (its first result dim); one side batched, it is that side's first free
// dim, which lands after the batch dims (lhs) or after the lhs's free dims (rhs).
Tensor batch_dot_general(const BatchArgs& b) {
    DotAttrs a = b.n.attr<DotAttrs>();
    auto shift = [](std::vector<int64_t>& v) {
        for (int64_t& x : v)
            ++x;
    };
    const int64_t nb = int64_t(a.lhs_batch.size());
    if (b.batched[0])
        shift(a.lhs_batch), shift(a.lhs_contract);
    if (b.batched[1])
        shift(a.rhs_batch), shift(a.rhs_contract);
    if (b.batched[0] && b.batched[1]) {
        a.lhs_batch.insert(a.lhs_batch.begin(), 0);
        a.rhs_batch.insert(a.rhs_batch.begin(), 0);
        return make(Op::DotGeneral, {b.in[0], b.in[1]}, a);
    }
    const int64_t lhs_free =
        int64_t(b.n.input(0)->shape().size()) - nb - int64_t(a.lhs_contract.size());
    const int64_t at = b.batched[0] ? nb : nb + lhs_free;
    return move_batch_axis_to_front(make(Op::DotGeneral, {b.in[0], b.in[1]}, a), at);
}

} // namespace

void register_linalg_ops(OpDef* t) {
    t[int(Op::DotGeneral)].batch = batch_dot_general;
    t[int(Op::DotGeneral)].infer = infer_dot_general;
    t[int(Op::Cholesky)].infer = infer_cholesky;
    t[int(Op::TriangularSolve)].infer = infer_triangular_solve;
    // (their leading dims are a batch already: vmap's is one more)
    t[int(Op::Cholesky)].batch = batch_as_is;
    t[int(Op::TriangularSolve)].batch = batch_triangular_solve;
    register_grads(t);
}

} // namespace detail

using detail::make;

namespace {

Axes normalized(const Axes& axes, int rank, const char* op) {
    Axes out;
    for (int64_t a : axes) out.push_back(normalize_axis(a, rank, op));
    return out;
}

/// Casts a and b to their common dtype.
std::pair<Tensor, Tensor> promoted(const Tensor& a, const Tensor& b) {
    SJ_CHECK(a.defined() && b.defined(), Error) << "linear algebra op on an undefined Tensor";
    if (a.dtype() == b.dtype()) return {a, b};
    DType t = promote(a.dtype(), b.dtype());
    return {cast(a, t), cast(b, t)};
}

} // namespace

Tensor dot_general(const Tensor& a, const Tensor& b, const DotDims& dims) {
    auto [x, y] = promoted(a, b);
    DotAttrs at{normalized(dims.lhs_batch, x.rank(), "dot_general"),
                normalized(dims.rhs_batch, y.rank(), "dot_general"),
                normalized(dims.lhs_contract, x.rank(), "dot_general"),
                normalized(dims.rhs_contract, y.rank(), "dot_general")};
    return make(Op::DotGeneral, {x, y}, std::move(at));
}

// Note [matmul without broadcast nodes]
// matmul never materialises a broadcast: a leading dim that both operands have becomes a
// dot_general batch dim; a dim that one operand lacks, or has as a static 1 while the other's
// is not a static 1 (it may be -1), becomes a free dim of the other operand (the size-1 dim is
// squeezed away), which is right whatever size the other dim has at call time. A final permute
// puts the dims in NumPy's order [batch..., m, n]. A dim that is -1 on one side and a known
// size > 1 (or -1) on the other is a batch dim, and dot_general checks the sizes at call time.
// Plain 2-d x 2-d is a single dot_general.
Tensor matmul(const Tensor& a0, const Tensor& b0) {
    auto [a, b] = promoted(a0, b0);
    int ra = a.rank(), rb = b.rank();
    SJ_CHECK(ra >= 1 && rb >= 1, ShapeError)
        << "matmul(" << a.name() << ", " << b.name() << "): operands must have rank >= 1, got "
        << a.type_str() << " and " << b.type_str();
    int ca = ra >= 2 ? 2 : 1; // core (matrix) dims of a: [m, k] or [k]
    int cb = rb >= 2 ? 2 : 1; // core dims of b: [k, n] or [k]
    int ba = ra - ca, bb = rb - cb, nbatch = std::max(ba, bb);
    const Shape& sa = a.shape();
    const Shape& sb = b.shape();
    int64_t ka = sa[ra - 1], kb = sb[rb - cb];
    SJ_CHECK(ka == kb || ka == -1 || kb == -1, ShapeError)
        << "matmul(" << a.name() << ", " << b.name() << "): " << a.type_str() << " @ "
        << b.type_str() << ": contracting dims differ (" << ka << " vs " << kb << ")";

    // Classify each output batch dim i (aligned from the right).
    enum Kind { Both, AOnly, BOnly };
    std::vector<Kind> kind(nbatch);
    Axes squeeze_a, squeeze_b;
    for (int i = 0; i < nbatch; ++i) {
        int ia = i - (nbatch - ba), ib = i - (nbatch - bb);
        if (ia < 0) { kind[i] = BOnly; continue; }
        if (ib < 0) { kind[i] = AOnly; continue; }
        int64_t da = sa[ia], db = sb[ib];
        if (da == 1 && db != 1) {
            kind[i] = BOnly;
            squeeze_a.push_back(ia);
        } else if (db == 1 && da != 1) {
            kind[i] = AOnly;
            squeeze_b.push_back(ib);
        } else {
            SJ_CHECK(da == db || da == -1 || db == -1, ShapeError)
                << "matmul(" << a.name() << ", " << b.name() << "): batch dims of "
                << a.type_str() << " and " << b.type_str() << " do not broadcast (" << da
                << " vs " << db << ")";
            kind[i] = Both;
        }
    }
    Tensor x = squeeze_a.empty() ? a : squeeze(a, squeeze_a);
    Tensor y = squeeze_b.empty() ? b : squeeze(b, squeeze_b);

    // Axes of x and y after the squeezes, and the output dim each dot_general dim becomes.
    DotDims dims;
    Axes a_free_out, b_free_out, batch_out; // output positions, in dot_general's dim order
    int64_t px = 0, py = 0;
    for (int i = 0; i < nbatch; ++i) {
        int ia = i - (nbatch - ba), ib = i - (nbatch - bb);
        bool xa = ia >= 0 && std::find(squeeze_a.begin(), squeeze_a.end(), ia) == squeeze_a.end();
        bool yb = ib >= 0 && std::find(squeeze_b.begin(), squeeze_b.end(), ib) == squeeze_b.end();
        if (kind[i] == Both) {
            dims.lhs_batch.push_back(px);
            dims.rhs_batch.push_back(py);
            batch_out.push_back(i);
        } else if (kind[i] == AOnly) {
            a_free_out.push_back(i);
        } else {
            b_free_out.push_back(i);
        }
        px += xa;
        py += yb;
    }
    int64_t out_rank = nbatch + (ca == 2) + (cb == 2);
    if (ca == 2) a_free_out.push_back(nbatch); // m
    if (cb == 2) b_free_out.push_back(out_rank - 1); // n
    dims.lhs_contract = {x.rank() - 1};
    dims.rhs_contract = {y.rank() - cb};
    Tensor r = dot_general(x, y, dims);
    // r's dim k holds output dim order[k]
    Axes order = batch_out;
    order.insert(order.end(), a_free_out.begin(), a_free_out.end());
    order.insert(order.end(), b_free_out.begin(), b_free_out.end());
    Axes perm(order.size());
    for (size_t k = 0; k < order.size(); ++k) perm[order[k]] = int64_t(k);
    return transpose(r, perm);
}

Tensor cholesky(const Tensor& a) { return make(Op::Cholesky, {a}); }

Tensor triangular_solve(const Tensor& a, const Tensor& b, bool left_side, bool lower,
                        bool transpose_a, bool unit_diagonal) {
    auto [x, y] = promoted(a, b);
    return make(Op::TriangularSolve, {x, y},
                TriangularSolveAttrs{left_side, lower, transpose_a, unit_diagonal});
}

} // namespace sj
