// sort: the rule, gradient and batching of the one sorting primitive, and the builders sort,
// argsort, sort_by_key and top_k.
#include "OpDef.h"

#include <symjax/Ops.h>
#include <symjax/ir/Node.h>

namespace sj {
namespace detail {
namespace {

// Note [Sort]
// One primitive serves sort, argsort, sort_by_key and top_k: sort(keys[, values]) along
// attrs.axis gives the keys in order, their positions in that order (attrs.indices: argsort),
// or, with a second input of the keys' shape, the values moved as the keys move (XLA's sort
// with an operand; lax.sort_key_val). top_k keeps the first k of the descending order
// (attrs.k), which a kernel finds without sorting the rest.
//
// The order is total and stable, so every backend returns the same result: ascending puts NaN
// last (all NaNs equal, NumPy's order), -0.0 equals 0.0, and equal keys keep their original
// order; descending is the reverse order (NaN first) with equal keys still in their original
// order, so top_k of [1, 3, 3] gives the first 3 first (lax.top_k's and a stable
// torch.sort(descending=True)'s choice).
//
// The gradient moves the cotangent back: with p = argsort(keys) (the same axis and direction,
// every position), the values' gradient is g with g[j] put at p[j]. Putting is itself a sort:
// p is a permutation of 0..n-1, so sorting g by the keys p ascending puts g[j] at p[j]. When
// k < n, g is first padded with zeros to n (the positions top_k dropped get no gradient). The
// keys get none: the order is piecewise constant in them. For sort(x), x is both; positions
// (attrs.indices) have no gradient.

TensorType infer_sort(const InferCtx& c) {
    const auto& a = c.attr<SortAttrs>();
    const Shape& s = c.in[0].shape;
    SJ_CHECK(a.axis >= 0 && a.axis < int64_t(s.size()), ShapeError)
        << c.where() << ": axis " << a.axis << " out of range for " << c.name(0) << " of shape "
        << shape_str(s);
    TensorType out = c.in.back();
    if (a.indices) {
        SJ_CHECK(c.in.size() == 1, ShapeError)
            << c.where() << ": positions (indices) are of a sort of one input, got " << c.in.size();
        out.dtype = DType::I64;
    }
    if (c.in.size() == 2) {
        const Shape& v = c.in[1].shape;
        bool same = v.size() == s.size();
        for (size_t i = 0; same && i < s.size(); ++i)
            same = dims_agree(s[i], v[i]);
        SJ_CHECK(same, ShapeError)
            << c.where() << ": values " << c.name(1) << " have shape " << shape_str(v)
            << ", the keys " << c.name(0) << " " << shape_str(s);
        for (size_t i = 0; i < s.size(); ++i)
            if (out.shape[i] < 0)
                out.shape[i] = s[i];
    }
    if (a.k >= 0) {
        int64_t n = out.shape[a.axis];
        if (n >= 0 && a.k > n)
            shape_fail(c, c.where() + ": k = " + std::to_string(a.k) + " is more than the " +
                              std::to_string(n) + " elements along axis " + std::to_string(a.axis) +
                              " of " + c.name(0) + " " + shape_str(s));
        out.shape[a.axis] = a.k;
    }
    SJ_CHECK(a.k >= -1, ShapeError) << c.where() << ": k must be >= 0, got " << a.k;
    return out;
}

void register_grads(OpDef* t) {
    t[int(Op::Sort)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        const auto& a = n.attr<SortAttrs>();
        Tensor keys = in(n, 0);
        if (a.indices)
            return;
        Tensor perm = make(Op::Sort, {keys}, SortAttrs{a.axis, a.descending, -1, true});
        Tensor gf = g;
        if (a.k >= 0 && keys.dim(a.axis) != a.k) { // top-k: zeros where nothing was kept
            Tensor dropped = slice_axis(keys, a.axis, a.k, Index::kEnd);
            gf = concat({g, cast(zeros_like(dropped), g.dtype())}, a.axis);
        }
        d[n.num_inputs() - 1] = make(Op::Sort, {perm, gf}, SortAttrs{a.axis, false, -1, false});
    };
}

// Batching (Note [Batching rules] in src/api/Vmap.cpp): the axis moves past the batch dim.
Tensor batch_sort(const BatchArgs& b) {
    SortAttrs a = b.n.attr<SortAttrs>();
    ++a.axis;
    std::vector<Tensor> ins;
    for (size_t i = 0; i < b.in.size(); ++i)
        ins.push_back(batched_input(b, i));
    return make(Op::Sort, ins, a);
}

} // namespace

void register_sort_ops(OpDef* t) {
    t[int(Op::Sort)].infer = infer_sort;
    t[int(Op::Sort)].batch = batch_sort;
    register_grads(t);
}

} // namespace detail

using detail::make;

Tensor sort(const Tensor& x, int64_t axis, bool descending) {
    int ax = normalize_axis(axis, x.rank(), "sort");
    return make(Op::Sort, {x}, SortAttrs{ax, descending, -1, false});
}

Tensor argsort(const Tensor& x, int64_t axis, bool descending) {
    int ax = normalize_axis(axis, x.rank(), "argsort");
    return make(Op::Sort, {x}, SortAttrs{ax, descending, -1, true});
}

Tensor sort_by_key(const Tensor& keys, const Tensor& values, int64_t axis, bool descending) {
    int ax = normalize_axis(axis, keys.rank(), "sort_by_key");
    return make(Op::Sort, {keys, values}, SortAttrs{ax, descending, -1, false});
}

std::pair<Tensor, Tensor> top_k(const Tensor& x, int64_t k) {
    SJ_CHECK(x.rank() >= 1, ShapeError)
        << "top_k(" << x.name() << "): x must have at least one dim";
    SJ_CHECK(k >= 0, ShapeError) << "top_k(" << x.name() << "): k must be >= 0, got " << k;
    // the values taken at the indices: one sort pass (Note [Taking along an axis])
    const int64_t axis = x.rank() - 1;
    Tensor indices = make(Op::Sort, {x}, SortAttrs{axis, true, k, true});
    return {detail::take_along_axis_unchecked(x, indices, axis), indices};
}

} // namespace sj
