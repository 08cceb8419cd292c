// Reductions, arg-reductions and cumsum: rules and builders.
#include "OpDef.h"

#include <symjax/Ops.h>
#include <symjax/ir/Node.h>

#include <algorithm>

namespace sj {
namespace detail {
namespace {

TensorType infer_reduce(const InferCtx& c) {
    const auto& a = c.attr<ReduceAttrs>();
    const TensorType& t = c.in[0];
    int r = static_cast<int>(t.shape.size());
    std::vector<bool> red(r, false);
    for (int64_t ax : a.axes) {
        SJ_CHECK(ax >= 0 && ax < r && !red[ax], ShapeError)
            << c.where() << ": axes " << shape_str(a.axes) << " invalid for rank " << r;
        red[ax] = true;
    }
    bool is_arg = c.op == Op::ArgMax || c.op == Op::ArgMin;
    check_dtype_class(c, 0);
    if (is_arg) {
        SJ_CHECK(a.axes.size() == 1, ShapeError) << c.where() << ": arg-reductions take one axis";
    }
    if (c.op == Op::ReduceMax || c.op == Op::ReduceMin || is_arg) {
        for (int i = 0; i < r; ++i)
            SJ_CHECK(!red[i] || t.shape[i] != 0, ShapeError)
                << c.where() << ": " << op_name(c.op) << " over an empty axis " << i << " of "
                << c.name(0) << " " << shape_str(t.shape);
    }
    Shape out;
    for (int i = 0; i < r; ++i) {
        if (!red[i]) out.push_back(t.shape[i]);
        else if (a.keepdims) out.push_back(1);
    }
    return {is_arg ? DType::I64 : t.dtype, out};
}

TensorType infer_cumsum(const InferCtx& c) {
    int64_t ax = c.attr<AxisAttrs>().axis;
    SJ_CHECK(ax >= 0 && ax < int64_t(c.in[0].shape.size()), ShapeError)
        << c.where() << ": axis " << ax << " out of range for rank " << c.in[0].shape.size();
    check_dtype_class(c, 0);
    return c.in[0];
}

/// g (the reduced shape) broadcast back over the input's shape.
Tensor expand_back(const Node& n, const Tensor& g) {
    const auto& a = n.attr<ReduceAttrs>();
    const Node& x = *n.input(0);
    Axes dims;
    for (int i = 0; i < x.rank(); ++i)
        if (a.keepdims || std::find(a.axes.begin(), a.axes.end(), i) == a.axes.end())
            dims.push_back(i);
    Tensor xt(x.shared_from_this());
    if (is_static(x.shape())) return make(Op::Broadcast, {g}, BroadcastAttrs{x.shape(), dims});
    return make(Op::Broadcast, {g, xt}, BroadcastAttrs{x.shape(), dims});
}

void register_grads(OpDef* t) {
    // d sum / dx_i = 1
    t[int(Op::ReduceSum)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        d[0] = expand_back(n, g);
    };
    // d prod / dx_i = product of the other elements: prod/x_i when no element is zero; with one
    // zero, the product of the non-zeros at the zero and 0 elsewhere; with two or more, 0.
    t[int(Op::ReduceProd)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        const auto& a = n.attr<ReduceAttrs>();
        Tensor x = in(n, 0);
        Tensor z = zeros_like(x), one = ones_like(x);
        Tensor nz = ne(x, z);
        Tensor safe = where(nz, x, one);
        Tensor y = expand_back(n, Tensor(n.shared_from_this())); // prod(x): 0 once a zero exists
        Tensor prod_nz = expand_back(n, prod(safe, a.axes, a.keepdims));
        Tensor zeros = expand_back(n, sum(cast(logical_not(nz), x.dtype()), a.axes, a.keepdims));
        // the other zero when there are exactly two (0 in value, but differentiable in x)
        Tensor zsum = expand_back(n, sum(where(nz, z, x), a.axes, a.keepdims));
        Tensor others = where(eq(zeros, one), one, where(eq(zeros, full_like(x, 2.0)), zsum - x, z));
        d[0] = expand_back(n, g) * where(nz, y / safe, prod_nz * others);
    };
    // d max / dx_i = [x_i == max] / (number of maxima)
    auto minmax = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        Tensor x = in(n, 0);
        Tensor y = expand_back(n, Tensor(n.shared_from_this()));
        Tensor hit = cast(eq(x, y), x.dtype());
        const auto& a = n.attr<ReduceAttrs>();
        Tensor count = expand_back(n, sum(hit, a.axes, a.keepdims));
        d[0] = expand_back(n, g) * hit / count;
    };
    t[int(Op::ReduceMax)].grad = minmax;
    t[int(Op::ReduceMin)].grad = minmax;
    // d cumsum / dx: the reverse cumulative sum of g
    t[int(Op::Cumsum)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        const auto& a = n.attr<AxisAttrs>();
        d[0] = cumsum(g, a.axis, !a.reverse);
    };
}

Axes norm_axes(const Tensor& x, const Axes& axes, const char* op) {
    Axes a;
    if (axes.empty())
        for (int i = 0; i < x.rank(); ++i) a.push_back(i);
    else
        for (int64_t ax : axes) a.push_back(normalize_axis(ax, x.rank(), op));
    std::sort(a.begin(), a.end());
    SJ_CHECK(std::adjacent_find(a.begin(), a.end()) == a.end(), ShapeError)
        << op << "(" << x.name() << "): repeated axis in " << shape_str(axes);
    return a;
}

} // namespace

namespace {
// Batching (Note [Batching rules] in src/api/Vmap.cpp): the axes move past the batch dim.
Tensor batch_reduce(const BatchArgs& b) {
    ReduceAttrs a = b.n.attr<ReduceAttrs>();
    for (int64_t& ax : a.axes)
        ++ax;
    return make(b.n.op(), {b.in[0]}, a);
}
Tensor batch_cumsum(const BatchArgs& b) {
    AxisAttrs a = b.n.attr<AxisAttrs>();
    ++a.axis;
    return make(Op::Cumsum, {b.in[0]}, a);
}

} // namespace

void register_reduce_ops(OpDef* t) {
    for (Op op : {Op::ReduceSum, Op::ReduceProd, Op::ReduceMax, Op::ReduceMin, Op::ReduceAny,
                  Op::ReduceAll, Op::ArgMax, Op::ArgMin}) {
        t[int(op)].infer = infer_reduce;
        t[int(op)].batch = batch_reduce;
    }
    t[int(Op::Cumsum)].infer = infer_cumsum;
    t[int(Op::Cumsum)].batch = batch_cumsum;
    register_grads(t);
}

} // namespace detail

using detail::make;

namespace {
Tensor reduce(Op op, const Tensor& x, const Axes& axes, bool keepdims) {
    Axes a = detail::norm_axes(x, axes, op_name(op));
    if (a.empty()) return x; // a 0-d tensor: nothing to reduce
    return make(op, {x}, ReduceAttrs{a, keepdims});
}
} // namespace

Tensor sum(const Tensor& x, const Axes& axes, bool keepdims) {
    return reduce(Op::ReduceSum, x.dtype() == DType::Bool ? cast(x, DType::I64) : x, axes, keepdims);
}
Tensor prod(const Tensor& x, const Axes& axes, bool keepdims) {
    return reduce(Op::ReduceProd, x.dtype() == DType::Bool ? cast(x, DType::I64) : x, axes, keepdims);
}
Tensor max(const Tensor& x, const Axes& axes, bool keepdims) {
    return reduce(Op::ReduceMax, x, axes, keepdims);
}
Tensor min(const Tensor& x, const Axes& axes, bool keepdims) {
    return reduce(Op::ReduceMin, x, axes, keepdims);
}
Tensor any(const Tensor& x, const Axes& axes, bool keepdims) {
    return reduce(Op::ReduceAny, cast(x, DType::Bool), axes, keepdims);
}
Tensor all(const Tensor& x, const Axes& axes, bool keepdims) {
    return reduce(Op::ReduceAll, cast(x, DType::Bool), axes, keepdims);
}
Tensor argmax(const Tensor& x, int64_t axis, bool keepdims) {
    int ax = normalize_axis(axis, x.rank(), "argmax");
    return make(Op::ArgMax, {x}, ReduceAttrs{{ax}, keepdims});
}
Tensor argmin(const Tensor& x, int64_t axis, bool keepdims) {
    int ax = normalize_axis(axis, x.rank(), "argmin");
    return make(Op::ArgMin, {x}, ReduceAttrs{{ax}, keepdims});
}
Tensor cumsum(const Tensor& x, int64_t axis, bool reverse) {
    int ax = normalize_axis(axis, x.rank(), "cumsum");
    return make(Op::Cumsum, {x}, AxisAttrs{ax, reverse});
}

Tensor detail::count_over(const Tensor& x, const Axes& axes, bool keepdims, DType dtype) {
    int64_t n = 1;
    for (int a = 0; a < x.rank(); ++a) {
        if (!axes.empty() && std::find(axes.begin(), axes.end(), a) == axes.end() &&
            std::find(axes.begin(), axes.end(), a - x.rank()) == axes.end())
            continue;
        if (x.dim(a) < 0)
            return cast(sum(ones_like(x), axes, keepdims), dtype);
        n *= x.dim(a);
    }
    return scalar(double(n), dtype);
}

} // namespace sj
