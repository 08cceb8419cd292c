// Collective ops (all_reduce, all_gather, broadcast_from, reduce_scatter): type rules, gradients
// and the graph builders of <symjax/Dist.h>. The kernels are in CollectiveKernels.cpp.
#include "OpDef.h"

#include <symjax/Dist.h>
#include <symjax/Ops.h>
#include <symjax/ir/Node.h>

namespace sj::detail {
namespace {

using dist::ReduceOp;

/// The checks every collective shares: a sane world and root, a dtype its reduction takes.
void check_common(const InferCtx& c) {
    const auto& a = c.attr<CollectiveAttrs>();
    SJ_CHECK(a.world >= 1, ShapeError)
        << c.where() << ": built for a world of " << a.world << " processes";
    SJ_CHECK(a.root >= 0 && a.root < a.world, ShapeError)
        << c.where() << ": root " << a.root << " is not a rank of a " << a.world
        << "-process world";
    check_dtype_class(c, 0, true);
    bool mean = (c.op == Op::AllReduce || c.op == Op::ReduceScatter) && a.reduce == ReduceOp::Mean;
    SJ_CHECK(!mean || is_float(c.in[0].dtype), TypeError)
        << c.where() << ": " << op_name(c.op) << " mean needs a float tensor (f32 or f64), "
        << c.name(0) << " is " << type_str(c.in[0]) << "; use sum and divide";
}

// all_reduce(x), broadcast_from(x): x's type
TensorType infer_same(const InferCtx& c) {
    check_common(c);
    return c.in[0];
}

// all_gather(x): [world * n, ...] for x [n, ...]; [world] for a scalar
TensorType infer_all_gather(const InferCtx& c) {
    check_common(c);
    const auto& a = c.attr<CollectiveAttrs>();
    Shape s = c.in[0].shape;
    if (s.empty())
        return {c.in[0].dtype, {a.world}};
    if (s[0] != -1)
        s[0] *= a.world;
    return {c.in[0].dtype, s};
}

// reduce_scatter(x): [n, ...] for x [world * n, ...]
TensorType infer_reduce_scatter(const InferCtx& c) {
    check_common(c);
    const auto& a = c.attr<CollectiveAttrs>();
    Shape s = c.in[0].shape;
    SJ_CHECK(!s.empty(), ShapeError)
        << c.where() << ": reduce_scatter splits axis 0 among the ranks, " << c.name(0)
        << " is a scalar";
    if (s[0] != -1) {
        if (s[0] % a.world != 0)
            shape_fail(c, "reduce_scatter splits axis 0 of " + c.name(0) + " " + shape_str(s) +
                              " into " + std::to_string(a.world) +
                              " equal blocks (one per rank), but " + std::to_string(s[0]) +
                              " is not a multiple of " + std::to_string(a.world));
        s[0] /= a.world;
    }
    return {c.in[0].dtype, s};
}

/// The share of the summed cotangent `gsum` that goes to x where the extreme y was taken:
/// split evenly among the ranks (and elements) that hold it, as reduce_max's gradient.
Tensor extreme_share(const Tensor& x, const Tensor& y, const Tensor& gsum) {
    Tensor hit = cast(eq(x, y), x.dtype());
    Tensor count = dist::all_reduce(hit, ReduceOp::Sum);
    return gsum * hit / count;
}

void register_grads(OpDef* t) {
    // y = reduce_r x_r, the same on every rank, and L = sum_r L_r(y):
    // sum: dL/dx_r = sum_r' g_r' (all_reduce-sum of the cotangent); mean: that / size;
    // max, min: the summed cotangent, shared among the ranks holding the extreme
    t[int(Op::AllReduce)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        ReduceOp op = n.attr<CollectiveAttrs>().reduce;
        switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Mean:
            d[0] = dist::all_reduce(g, op);
            return;
        case ReduceOp::Max:
        case ReduceOp::Min:
            d[0] = extreme_share(in(n, 0), Tensor(n.shared_from_this()),
                                 dist::all_reduce(g, ReduceOp::Sum));
            return;
        }
    };
    // y = concat_r x_r: dL/dx_r = sum_r' g_r'[block r] = reduce_scatter-sum(g)
    t[int(Op::AllGather)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        Tensor x = in(n, 0);
        Tensor gx = dist::reduce_scatter(g, ReduceOp::Sum);
        d[0] = x.shape().empty() ? reshape(gx, Shape{}) : gx;
    };
    // y_r = x_root: dL/dx_root = sum_r g_r, and 0 on the other ranks (a reduce to the root)
    t[int(Op::BroadcastFrom)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        bool root = dist::rank() == n.attr<CollectiveAttrs>().root;
        d[0] = dist::all_reduce(g, ReduceOp::Sum) * (root ? 1.0 : 0.0);
    };
    // y_r = reduce_r' x_r'[block r]: dL/dx_r[block s] = g_s, so all_gather(g) (sum), / size
    // (mean); max, min: g_s where x_r[block s] is the extreme, shared among the ranks holding it
    t[int(Op::ReduceScatter)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        const auto& a = n.attr<CollectiveAttrs>();
        Tensor gall = dist::all_gather(g);
        switch (a.reduce) {
        case ReduceOp::Sum:
            d[0] = gall;
            return;
        case ReduceOp::Mean:
            d[0] = gall / double(a.world);
            return;
        case ReduceOp::Max:
        case ReduceOp::Min:
            d[0] = extreme_share(in(n, 0), dist::all_gather(Tensor(n.shared_from_this())), gall);
            return;
        }
    };
}

} // namespace

// Batching (Note [Batching rules] in src/api/Vmap.cpp): an elementwise reduction or copy across
// processes does not care about a leading batch dim (batch_as_is); all_gather and reduce_scatter
// loop.
void register_collective_ops(OpDef* t) {
    t[int(Op::AllReduce)].batch = batch_as_is;
    t[int(Op::BroadcastFrom)].batch = batch_as_is;
    t[int(Op::AllReduce)].infer = infer_same;
    t[int(Op::BroadcastFrom)].infer = infer_same;
    t[int(Op::AllGather)].infer = infer_all_gather;
    t[int(Op::ReduceScatter)].infer = infer_reduce_scatter;
    register_grads(t);
}

} // namespace sj::detail

namespace sj::dist {

namespace {
Tensor collective(Op op, const Tensor& x, ReduceOp reduce, int root) {
    SJ_CHECK(x.defined(), InputError)
        << "dist::" << op_name(op) << ": the input is an undefined (default-constructed) Tensor";
    return detail::make(op, {x}, CollectiveAttrs{reduce, root, size()});
}
} // namespace

Tensor all_reduce(const Tensor& x, ReduceOp op) {
    return collective(Op::AllReduce, x, op, 0);
}
Tensor all_gather(const Tensor& x) {
    return collective(Op::AllGather, x, ReduceOp::Sum, 0);
}
Tensor broadcast(const Tensor& x, int root) {
    return collective(Op::BroadcastFrom, x, ReduceOp::Sum, root);
}
Tensor reduce_scatter(const Tensor& x, ReduceOp op) {
    return collective(Op::ReduceScatter, x, op, 0);
}

} // namespace sj::dist
