// Indexing ops (gather, scatter_add, dynamic_slice, dynamic_update_slice, one_hot).
#include "OpDef.h"

#include <symjax/Ops.h>
#include <symjax/ir/Node.h>

namespace sj {
namespace detail {
namespace {

void check_index_dtype(const InferCtx& c, size_t i) {
    SJ_CHECK(is_int(c.in[i].dtype), TypeError)
        << c.where() << ": indices " << c.name(i) << " must be an integer tensor, got "
        << dtype_name(c.in[i].dtype);
}

Shape gathered_shape(const Shape& x, const Shape& idx, int64_t axis) {
    Shape out(x.begin(), x.begin() + axis);
    out.insert(out.end(), idx.begin(), idx.end());
    out.insert(out.end(), x.begin() + axis + 1, x.end());
    return out;
}

bool dims_match(const Shape& a, const Shape& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i] != b[i] && a[i] != -1 && b[i] != -1) return false;
    return true;
}

TensorType infer_gather(const InferCtx& c) {
    int64_t axis = c.attr<AxisAttrs>().axis;
    SJ_CHECK(axis >= 0 && axis < int64_t(c.in[0].shape.size()), ShapeError)
        << c.where() << ": axis " << axis << " out of range for " << c.name(0) << " of shape "
        << shape_str(c.in[0].shape);
    check_index_dtype(c, 1);
    return {c.in[0].dtype, gathered_shape(c.in[0].shape, c.in[1].shape, axis)};
}

TensorType infer_scatter_add(const InferCtx& c) {
    int64_t axis = c.attr<AxisAttrs>().axis;
    SJ_CHECK(axis >= 0 && axis < int64_t(c.in[0].shape.size()), ShapeError)
        << c.where() << ": axis " << axis << " out of range for rank " << c.in[0].shape.size();
    check_index_dtype(c, 1);
    SJ_CHECK(c.in[2].dtype == c.in[0].dtype, TypeError)
        << c.where() << ": updates are " << dtype_name(c.in[2].dtype) << ", target is "
        << dtype_name(c.in[0].dtype);
    Shape want = gathered_shape(c.in[0].shape, c.in[1].shape, axis);
    SJ_CHECK(dims_match(want, c.in[2].shape), ShapeError)
        << c.where() << ": updates " << c.name(2) << " have shape " << shape_str(c.in[2].shape)
        << ", expected " << shape_str(want);
    return c.in[0];
}

void check_starts(const InferCtx& c, size_t i, size_t rank) {
    check_index_dtype(c, i);
    SJ_CHECK(c.in[i].shape.size() == 1 && (c.in[i].shape[0] == int64_t(rank) || c.in[i].shape[0] == -1),
             ShapeError)
        << c.where() << ": starts " << c.name(i) << " must be a vector of " << rank
        << " indices, got shape " << shape_str(c.in[i].shape);
}

TensorType infer_dynamic_slice(const InferCtx& c) {
    const Shape& sizes = c.attr<DynamicSliceAttrs>().sizes;
    const Shape& s = c.in[0].shape;
    SJ_CHECK(sizes.size() == s.size(), ShapeError)
        << c.where() << ": " << sizes.size() << " sizes for a tensor of rank " << s.size();
    for (size_t i = 0; i < s.size(); ++i)
        SJ_CHECK(sizes[i] >= 0 && (s[i] < 0 || sizes[i] <= s[i]), ShapeError)
            << c.where() << ": window " << shape_str(sizes) << " does not fit in "
            << shape_str(s);
    check_starts(c, 1, s.size());
    return {c.in[0].dtype, sizes};
}

TensorType infer_dus(const InferCtx& c) {
    const Shape& s = c.in[0].shape;
    const Shape& u = c.in[1].shape;
    SJ_CHECK(c.in[1].dtype == c.in[0].dtype, TypeError)
        << c.where() << ": update is " << dtype_name(c.in[1].dtype) << ", target is "
        << dtype_name(c.in[0].dtype);
    SJ_CHECK(u.size() == s.size(), ShapeError)
        << c.where() << ": update " << shape_str(u) << " and target " << shape_str(s)
        << " have different ranks";
    for (size_t i = 0; i < s.size(); ++i)
        SJ_CHECK(s[i] < 0 || u[i] < 0 || u[i] <= s[i], ShapeError)
            << c.where() << ": update " << shape_str(u) << " does not fit in " << shape_str(s);
    check_starts(c, 2, s.size());
    return c.in[0];
}

TensorType infer_one_hot(const InferCtx& c) {
    const auto& a = c.attr<OneHotAttrs>();
    check_dtype_class(c, 0, /*name_input=*/true);
    SJ_CHECK(a.depth >= 0, ShapeError) << c.where() << ": depth must be >= 0, got " << a.depth;
    Shape out = c.in[0].shape;
    out.push_back(a.depth);
    return {a.dtype, out};
}

TensorType infer_check_index(const InferCtx& c) {
    const auto& a = c.attr<CheckIndexAttrs>();
    check_dtype_class(c, 0, /*name_input=*/true);
    SJ_CHECK(a.depth >= 0, ShapeError) << c.where() << ": depth must be >= 0, got " << a.depth;
    return c.in[0];
}

void register_grads(OpDef* t) {
    // d gather(x, i)/dx: scatter the gradient back to the gathered positions
    t[int(Op::Gather)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        d[0] = scatter_add(zeros_like(in(n, 0)), in(n, 1), g, n.attr<AxisAttrs>().axis);
    };
    // scatter_add(x, i, u): d/dx = 1, d/du = gather(g, i)
    t[int(Op::ScatterAdd)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        d[0] = g;
        d[2] = gather(g, in(n, 1), n.attr<AxisAttrs>().axis);
    };
    // d dynamic_slice/dx: the window's gradient placed in zeros
    t[int(Op::DynamicSlice)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        d[0] = dynamic_update_slice(zeros_like(in(n, 0)), g, in(n, 1));
    };
    // d dus(x, u)/dx: g with the window zeroed; d/du: g's window
    t[int(Op::DynamicUpdateSlice)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        Tensor u = in(n, 1);
        SJ_CHECK(is_static(u.shape()), ShapeError)
            << "gradient of dynamic_update_slice: update " << u.name() << " has unknown dims "
            << u.type_str();
        d[0] = dynamic_update_slice(g, zeros_like(u), in(n, 2));
        d[1] = dynamic_slice(g, in(n, 2), u.shape());
    };
}

} // namespace

void register_indexing_ops(OpDef* t) {
    t[int(Op::Gather)].infer = infer_gather;
    t[int(Op::ScatterAdd)].infer = infer_scatter_add;
    t[int(Op::DynamicSlice)].infer = infer_dynamic_slice;
    t[int(Op::DynamicUpdateSlice)].infer = infer_dus;
    t[int(Op::OneHot)].infer = infer_one_hot;
    t[int(Op::CheckIndex)].infer = infer_check_index; // no gradient: integer indices
    register_grads(t);
}

} // namespace detail

using detail::make;

Tensor gather(const Tensor& x, const Tensor& indices, int64_t axis) {
    int ax = normalize_axis(axis, x.rank(), "gather");
    return make(Op::Gather, {x, indices}, AxisAttrs{ax, false});
}

Tensor scatter_add(const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis) {
    int ax = normalize_axis(axis, x.rank(), "scatter_add");
    return make(Op::ScatterAdd, {x, indices, cast(updates, x.dtype())}, AxisAttrs{ax, false});
}

Tensor dynamic_slice(const Tensor& x, const Tensor& starts, const Shape& sizes) {
    return make(Op::DynamicSlice, {x, starts}, DynamicSliceAttrs{sizes});
}

Tensor dynamic_update_slice(const Tensor& x, const Tensor& update, const Tensor& starts) {
    return make(Op::DynamicUpdateSlice, {x, cast(update, x.dtype()), starts});
}

Tensor one_hot(const Tensor& indices, int64_t depth, DType dtype) {
    return make(Op::OneHot, {indices}, OneHotAttrs{depth, dtype});
}

Tensor check_index(const Tensor& indices, int64_t depth, std::optional<int64_t> ignore,
                   const std::string& what) {
    return make(Op::CheckIndex, {indices},
                CheckIndexAttrs{depth, ignore.has_value(), ignore.value_or(0),
                                what.empty() ? std::string("check_index: index") : what});
}

} // namespace sj
