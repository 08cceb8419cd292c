// Indexing ops (gather, scatter_add, scatter, dynamic_slice, dynamic_update_slice, one_hot).
#include "OpDef.h"

#include <symjax/Ops.h>
#include <symjax/ir/Node.h>

#include <algorithm>

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
    if (a.size() != b.size())
        return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i] != b[i] && a[i] != -1 && b[i] != -1)
            return false;
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

// scatter_add and scatter: updates of the target's dtype, shaped as gather(target, indices, axis)
TensorType infer_scatter_like(const InferCtx& c, int64_t axis) {
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

TensorType infer_scatter_add(const InferCtx& c) {
    return infer_scatter_like(c, c.attr<AxisAttrs>().axis);
}

TensorType infer_scatter(const InferCtx& c) {
    SJ_CHECK(c.attr<ScatterAttrs>().mode != ScatterMode::Add, InputError)
        << c.where() << ": mode add is the scatter_add op";
    return infer_scatter_like(c, c.attr<ScatterAttrs>().axis);
}

/// The position of each index of i (0, 1, ... in row-major order), as an i64 tensor of i's
/// shape, expanded with size-1 dims to the rank of scatter(x, i, u, axis)'s updates.
Tensor index_ids(const Tensor& i, int64_t axis, int64_t inner_rank) {
    Tensor flat = reshape(i, {-1});
    Tensor ids = cumsum(cast(ones_like(flat), DType::I64), 0) - 1.0;
    const Shape& s = i.shape();
    if (std::count(s.begin(), s.end(), int64_t(-1)) <= 1)
        ids = reshape(ids, s);
    else
        ids = make(Op::Reshape, {ids, i}, ShapeAttrs{s}); // dims follow i
    for (int64_t a = 0; a < axis; ++a)
        ids = expand_dims(ids, 0);
    for (int64_t a = 0; a < inner_rank; ++a)
        ids = expand_dims(ids, -1);
    return ids;
}

/// a == b elementwise, with NaN equal to NaN for floats (a NaN result came from a NaN operand).
Tensor same(const Tensor& a, const Tensor& b) {
    Tensor e = eq(a, b);
    return is_float(a.dtype()) ? logical_or(e, logical_and(isnan(a), isnan(b))) : e;
}

void check_starts(const InferCtx& c, size_t i, size_t rank) {
    check_index_dtype(c, i);
    SJ_CHECK(c.in[i].shape.size() == 1 &&
                 (c.in[i].shape[0] == int64_t(rank) || c.in[i].shape[0] == -1),
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
            << c.where() << ": window " << shape_str(sizes) << " does not fit in " << shape_str(s);
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
    // scatter(x, i, u, mode) along axis; gradients by mode (docs/ops.md, "Indexed updates"):
    t[int(Op::Scatter)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        const auto& a = n.attr<ScatterAttrs>();
        Tensor x = in(n, 0), i = in(n, 1), u = in(n, 2), y(n.shared_from_this());
        int64_t ax = a.axis;
        switch (a.mode) {
        case ScatterMode::Set: {
            // set: d/dx = g with the written positions zeroed; d/du = g at the position, for the
            // update that won it (the last of a repeated index: the kernel writes in order, and
            // scattering the updates' ids the same way names the winner)
            d[0] = scatter(g, i, zeros_like(u), ax, ScatterMode::Set);
            Tensor ids = index_ids(i, ax, x.rank() - ax - 1) + cast(zeros_like(u), DType::I64);
            Tensor won = scatter(full_like(x, -1.0, DType::I64), i, ids, ax, ScatterMode::Set);
            d[2] = where(eq(gather(won, i, ax), ids), gather(g, i, ax), zeros_like(u));
            return;
        }
        case ScatterMode::Add:
            SJ_ASSERT(false) << "scatter with mode add";
            return;
        case ScatterMode::Mul: {
            // y_j = x_j prod_{k: i_k = j} u_k: d/dx = g prod u; d/du_k = g x times the product of
            // the other updates of the position. With P the product of its non-zero updates, Z
            // their number of zeros and S the sum of its zero updates (0 in value, but
            // differentiable in them, so second derivatives are right too, as reduce_prod's):
            //   u_k != 0: P / u_k (Z = 0), P / u_k * S (Z = 1), else 0;
            //   u_k == 0: P (Z = 1), P * (S - u_k) (Z = 2), else 0
            d[0] = g * scatter(ones_like(x), i, u, ax, ScatterMode::Mul);
            Tensor zero = eq(u, zeros_like(u)), none = zeros_like(u);
            Tensor safe = where(zero, ones_like(u), u);
            auto at_position = [&](const Tensor& per_update, ScatterMode m) {
                Tensor init = m == ScatterMode::Mul ? ones_like(x) : zeros_like(x);
                return gather(scatter(init, i, per_update, ax, m), i, ax);
            };
            Tensor zeros = at_position(cast(zero, u.dtype()), ScatterMode::Add);
            Tensor prod_nz = at_position(safe, ScatterMode::Mul);
            Tensor zero_sum = at_position(where(zero, u, none), ScatterMode::Add);
            Tensor q = prod_nz / safe;
            Tensor others_nz = where(eq(zeros, none), q,
                                     where(eq(zeros, ones_like(u)), q * zero_sum, none));
            Tensor others_z = where(eq(zeros, ones_like(u)), prod_nz,
                                    where(eq(zeros, full_like(u, 2.0)), prod_nz * (zero_sum - u),
                                          none));
            d[2] = gather(g * x, i, ax) * where(zero, others_z, others_nz);
            return;
        }
        case ScatterMode::Min:
        case ScatterMode::Max: {
            // the result's gradient goes to the operands equal to it (x and the updates of the
            // position), shared equally among ties, as reduce_max does
            Tensor hx = cast(same(x, y), g.dtype());
            Tensor hu = cast(same(u, gather(y, i, ax)), g.dtype());
            Tensor count = hx + scatter_add(zeros_like(x), i, hu, ax);
            Tensor share = g / where(eq(count, zeros_like(count)), ones_like(count), count);
            d[0] = share * hx;
            d[2] = gather(share, i, ax) * hu;
            return;
        }
        }
    };
    // d dynamic_slice/dx: the window's gradient placed in zeros
    t[int(Op::DynamicSlice)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        d[0] = dynamic_update_slice(zeros_like(in(n, 0)), g, in(n, 1));
    };
    // d dus(x, u)/dx: g with the window zeroed; d/du: g's window
    t[int(Op::DynamicUpdateSlice)].grad = [](const Node& n, const Tensor& g,
                                             std::vector<Tensor>& d) {
        Tensor u = in(n, 1);
        SJ_CHECK(is_static(u.shape()), ShapeError)
            << "gradient of dynamic_update_slice: update " << u.name() << " has unknown dims "
            << u.type_str();
        d[0] = dynamic_update_slice(g, zeros_like(u), in(n, 2));
        d[1] = dynamic_slice(g, in(n, 2), u.shape());
    };
}

} // namespace

namespace {
/// i64 indices into a dim of `size` known only at call time, with each one outside [0, size)
/// moved far past the end of the flattened table (size * INT32_MAX), which gather refuses with
/// an InputError: the range check of a gather that indexes a table through flat positions.
Tensor past_end_if_out_of_range(const Tensor& idx, const Tensor& size) {
    return where(logical_and(idx >= 0.0, idx < size), idx,
                 full_like(idx, double(INT32_MAX)) * size);
}

// Batching (Note [Batching rules] in src/api/Vmap.cpp).

/// Each row's number (i64), [R, 1, ...] for idx [R, ...]: an arange when R is known, else a
/// cumsum of R ones.
Tensor row_numbers(const Tensor& idx) {
    Shape column(size_t(idx.rank()), 1);
    column[0] = idx.dim(0);
    if (idx.dim(0) >= 0)
        return reshape(arange(idx.dim(0)), column);
    std::vector<int64_t> start(size_t(idx.rank()), 0), stop(size_t(idx.rank()), 1),
        step(size_t(idx.rank()), 1);
    stop[0] = Index::kEnd;
    return cumsum(ones_like(index_slice(idx, start, stop, step, 0)), 0) - 1.0;
}

/// gather(x, i, 0) with a table and indices per example: one gather from the tables stacked,
/// [B * L, rest...], at i + b * L (take_along_axis's gather, Note [Taking along an axis], is of
/// this kind). An index outside [0, L) would read another example's table, so it is checked
/// first: check_index on a known L, else moved past the end of the stack, which the gather
/// refuses. x: [B, L, rest...], i: [B, m...]; the result [B, m..., rest...]. Undefined (vmap
/// loops) with more than one dim of unknown size after the table's axis.
Tensor gather_stacked(const Tensor& x, const Tensor& i) {
    Shape flat{-1};
    for (int d = 2; d < x.rank(); ++d) {
        if (x.dim(d) < 0)
            return Tensor();
        flat.push_back(x.dim(d));
    }
    const int64_t len = x.dim(1);
    Tensor idx = cast(i, DType::I64);
    Tensor size = runtime_dim(x, 1);
    if (len >= 0)
        idx = check_index(idx, len, {}, "gather (under vmap): index");
    else
        idx = past_end_if_out_of_range(idx, size);
    return make(Op::Gather, {reshape(x, flat), idx + row_numbers(idx) * size}, AxisAttrs{0, false});
}

/// Each example's indices i [B, m...] repeated for the D = d_0 ... d_{a-1} rows before axis a of
/// the batched x [B, d_0 .. d_{a-1}, L, rest...]: [B * D, m...] (i64). Undefined when a dim of x
/// or i other than the batch has an unknown size.
Tensor indices_per_row(const Tensor& x, const Tensor& i, int64_t a) {
    for (int64_t d = 1; d < x.rank(); ++d)
        if (x.dim(d) < 0)
            return Tensor();
    for (int64_t d = 1; d < i.rank(); ++d)
        if (i.dim(d) < 0)
            return Tensor();
    Shape ones{-1}, spread, rows{-1};
    for (int64_t d = 1; d <= a; ++d) {
        ones.push_back(1);
        spread.push_back(x.dim(d));
    }
    for (int64_t d = 1; d < i.rank(); ++d) {
        ones.push_back(i.dim(d));
        spread.push_back(1);
        rows.push_back(i.dim(d));
    }
    // [B, 1.., m...] + zeros [d_0 .., 1..] -> [B, d_0 .., m...] -> [B * D, m...]
    return reshape(reshape(cast(i, DType::I64), ones) + zeros(spread, DType::I64), rows);
}

/// gather(x, i, axis) with a table and indices per example (gather_stacked). Along an axis a >
/// 0 of the example's table, x [B, d_0 .. d_{a-1}, L, rest...] is read as [B * D, L, rest...]
/// (D = d_0 ... d_{a-1}; a reshape, no copy), each example's indices repeated for its D rows:
/// one gather of what the result needs, then a reshape to [B, d_0 .. d_{a-1}, m..., rest...].
/// (Moving the axis next to the batch instead would copy every table whole: measured slower
/// than the loop over the examples.) Undefined (vmap loops) with a dim of unknown size other
/// than the batch, except one after the table's axis when a is 0.
Tensor batch_gather_both(const BatchArgs& b) {
    const Tensor &x = b.in[0], &i = b.in[1];
    const int64_t a = b.n.attr<AxisAttrs>().axis; // (the example's axis; the batch is dim 0)
    if (a == 0)
        return gather_stacked(x, i);
    Tensor idx = indices_per_row(x, i, a);
    if (!idx.defined())
        return idx;
    Shape rows{-1}, out{-1};
    for (int64_t d = a + 1; d < x.rank(); ++d)
        rows.push_back(x.dim(d));
    out.insert(out.end(), x.shape().begin() + 1, x.shape().begin() + 1 + a);
    out.insert(out.end(), i.shape().begin() + 1, i.shape().end());
    out.insert(out.end(), x.shape().begin() + a + 2, x.shape().end());
    Tensor g = gather_stacked(reshape(x, rows), idx);
    return g.defined() ? reshape(g, out) : g;
}

Tensor batch_gather(const BatchArgs& b) {
    AxisAttrs a = b.n.attr<AxisAttrs>();
    if (b.batched[0] && b.batched[1])
        return batch_gather_both(b);
    if (b.batched[0]) {
        ++a.axis;
        return make(Op::Gather, {b.in[0], b.in[1]}, a);
    }
    // batched indices into a shared table: the batch lands where the indices go
    return move_batch_axis_to_front(make(Op::Gather, {b.in[0], b.in[1]}, a), a.axis);
}

/// A window's starts for the whole batch: 0, then the example's (shared) starts.
Tensor batch_starts(const Tensor& starts) {
    return concat({zeros({1}, starts.dtype()), starts}, 0);
}

/// The linear positions (i64, [B, sizes...]) of the elements of windows of `sizes` at starts
/// per example ([B, r], clamped as dynamic_slice clamps them) in tables of shape `ex`; when
/// `stacked`, in the B tables stacked (+ row * N, the rows counted from `starts`). Undefined when
/// a dim of `ex` is unknown, or for a window of more than 2^24 elements (its offsets, a
/// constant, would be large).
Tensor window_positions(const Shape& ex, const Shape& sizes, const Tensor& starts, bool stacked) {
    for (int64_t d : ex)
        if (d < 0)
            return Tensor();
    const int64_t r = int64_t(ex.size()), n = numel(ex), w = numel(sizes);
    if (w > (int64_t(1) << 24))
        return Tensor();
    const std::vector<int64_t> st = row_major_strides(ex);
    std::vector<int64_t> hi(static_cast<size_t>(r)), offsets(static_cast<size_t>(w));
    for (int64_t d = 0; d < r; ++d)
        hi[size_t(d)] = ex[size_t(d)] - sizes[size_t(d)];
    const std::vector<int64_t> wst = row_major_strides(sizes);
    for (int64_t k = 0; k < w; ++k) { // each window element's offset in the example
        int64_t off = 0;
        for (int64_t d = 0; d < r; ++d)
            off += (k / wst[size_t(d)] % sizes[size_t(d)]) * st[size_t(d)];
        offsets[size_t(k)] = off;
    }
    // the clamped starts [B, r] -> each example's window start [B]
    Tensor s = minimum(maximum(cast(starts, DType::I64), 0.0), constant(Array(hi, {r})));
    Tensor first = sum(s * constant(Array(std::vector<int64_t>(st), {r})), {1});
    if (stacked)
        first = first + row_numbers(first) * double(n);
    Shape column(sizes.size() + 1, 1), window{1}; // [B, 1...] + [1, sizes...]
    column[0] = -1;
    window.insert(window.end(), sizes.begin(), sizes.end());
    return reshape(first, column) + reshape(constant(Array(offsets, {w})), window);
}

/// dynamic_slice per example. The same starts for every example: one dynamic_slice of the batch
/// whole (its size known). Starts per example: one gather of single elements from the tables
/// flattened, at their window_positions. Undefined (vmap loops) where window_positions is, or
/// with shared starts and an unknown batch size.
Tensor batch_dynamic_slice(const BatchArgs& b) {
    const Tensor &x = b.in[0], &starts = b.in[1];
    const Shape& sizes = b.n.attr<DynamicSliceAttrs>().sizes;
    const bool xb = b.batched[0];
    if (!b.batched[1]) { // (x batched)
        if (x.dim(0) < 0)
            return Tensor();
        Shape all{x.dim(0)};
        all.insert(all.end(), sizes.begin(), sizes.end());
        return dynamic_slice(x, batch_starts(starts), all);
    }
    const Shape ex(x.shape().begin() + (xb ? 1 : 0), x.shape().end());
    Tensor idx = window_positions(ex, sizes, starts, xb);
    if (!idx.defined())
        return idx;
    return make(Op::Gather, {reshape(x, {-1}), idx}, AxisAttrs{0, false});
}

/// dynamic_update_slice per example: the targets and updates batched (repeated when shared).
/// The same starts for every example: one dynamic_update_slice of the batch whole. Starts per
/// example: one Set scatter of the updates' elements into the targets stacked and flattened, at
/// their window_positions (distinct within an example, so no write competes with another).
Tensor batch_dus(const BatchArgs& b) {
    const Tensor x = batched_input(b, 0), u = batched_input(b, 1), &starts = b.in[2];
    if (!b.batched[2])
        return dynamic_update_slice(x, u, batch_starts(starts));
    const Shape ex(x.shape().begin() + 1, x.shape().end()),
        sizes(u.shape().begin() + 1, u.shape().end());
    for (int64_t d : sizes)
        if (d < 0)
            return Tensor();
    Tensor idx = window_positions(ex, sizes, starts, true);
    if (!idx.defined())
        return idx;
    Shape whole = x.shape();
    whole[0] = -1;
    return reshape(make(Op::Scatter, {reshape(x, {-1}), reshape(idx, {-1}), reshape(u, {-1})},
                        ScatterAttrs{0, ScatterMode::Set}),
                   whole);
}

/// scatter_add and scatter per example (the gradient of a gather per example, as per-example
/// gradients of an embedding make): every input batched (repeated when it is not), then one
/// scatter into the targets stacked. x [B, d_0 .. d_{a-1}, L, rest...] is read as [B * D * L,
/// rest...], the updates [B, d_0 .., m..., rest...] as [B * D, m..., rest...], and each
/// example's indices are repeated for its D rows and moved to their row's place: + row * L.
/// An index outside [0, L) would write into another example's target, so it is checked first
/// (check_index).
/// Each example's updates stay in their order, so a Set scatter's last update still wins.
/// Undefined (vmap loops) with a dim of unknown size other than the batch in x or the indices.
Tensor batch_scatter(const BatchArgs& b) {
    const bool add = b.n.is(Op::ScatterAdd);
    const int64_t a = add ? b.n.attr<AxisAttrs>().axis : b.n.attr<ScatterAttrs>().axis;
    const Tensor x = batched_input(b, 0), i = batched_input(b, 1), u = batched_input(b, 2);
    Tensor idx = indices_per_row(x, i, a);
    if (!idx.defined())
        return idx;
    const int64_t len = x.dim(a + 1);
    Shape stack{-1}, upd_rows{-1};
    for (int64_t d = a + 2; d < x.rank(); ++d)
        stack.push_back(x.dim(d));
    upd_rows.insert(upd_rows.end(), i.shape().begin() + 1, i.shape().end());
    upd_rows.insert(upd_rows.end(), stack.begin() + 1, stack.end());
    // (every dim of x but the batch is known: indices_per_row)
    idx = check_index(idx, len, {},
                      std::string(add ? "scatter_add" : "scatter") + " (under vmap): index");
    Tensor pos = idx + row_numbers(idx) * double(len);
    Tensor r = add ? make(Op::ScatterAdd, {reshape(x, stack), pos, reshape(u, upd_rows)},
                          AxisAttrs{0, false})
                   : make(Op::Scatter, {reshape(x, stack), pos, reshape(u, upd_rows)},
                          ScatterAttrs{0, b.n.attr<ScatterAttrs>().mode});
    Shape whole = x.shape();
    whole[0] = -1;
    return reshape(r, whole);
}

} // namespace

void register_indexing_ops(OpDef* t) {
    t[int(Op::Gather)].batch = batch_gather;
    t[int(Op::DynamicSlice)].batch = batch_dynamic_slice;
    t[int(Op::DynamicUpdateSlice)].batch = batch_dus;
    t[int(Op::ScatterAdd)].batch = batch_scatter;
    t[int(Op::Scatter)].batch = batch_scatter;
    t[int(Op::OneHot)].batch = batch_as_is; // each index on its own
    t[int(Op::CheckIndex)].batch = batch_as_is; // each index on its own
    t[int(Op::Gather)].infer = infer_gather;
    t[int(Op::ScatterAdd)].infer = infer_scatter_add;
    t[int(Op::Scatter)].infer = infer_scatter;
    t[int(Op::DynamicSlice)].infer = infer_dynamic_slice;
    t[int(Op::DynamicUpdateSlice)].infer = infer_dus;
    t[int(Op::OneHot)].infer = infer_one_hot;
    t[int(Op::CheckIndex)].infer = infer_check_index; // no gradient: integer indices
    register_grads(t);
}

// Note [Taking along an axis]
// take_along_axis(x, i, axis) has no op of its own: it is a gather from x flattened, at the
// linear positions row * n + i, where n is the axis' size and row numbers the lines (every
// index but the axis) of i. With the axis moved last (a permute, free inside kernels), the rows
// are an iota over i's lines, counted by cumsum when a dim's size is known only at call time,
// and n is a constant or counted from x (runtime_dim): dims of unknown size work. The gradient is
// the gather's, a scatter_add into a zero x. top_k takes its values this way from its indices
// (one sort pass instead of two).
Tensor take_along_axis_unchecked(const Tensor& x, const Tensor& idx, int64_t axis) {
    const int r = x.rank();
    Axes perm;
    for (int i = 0; i < r; ++i)
        if (i != axis)
            perm.push_back(i);
    perm.push_back(axis);
    const bool moved = axis != r - 1;
    Tensor xt = moved ? transpose(x, perm) : x;
    Tensor it = moved ? transpose(idx, perm) : idx;
    Tensor n = runtime_dim(x, axis);
    // the line number of each line of it: [..., 1] (a sum, so that its last dim is 1 even
    // for an empty or unknown one)
    Tensor first = sum(cast(ones_like(it), DType::I64), {r - 1}, true);
    Tensor rows = cumsum(reshape(cast(ones_like(first), DType::I64), {-1}), 0) - 1.0;
    rows = is_static(first.shape()) ? reshape(rows, first.shape())
                                    : make(Op::Reshape, {rows, first}, ShapeAttrs{first.shape()});
    Tensor out = gather(reshape(xt, {-1}), rows * n + cast(it, DType::I64), 0);
    if (!moved)
        return out;
    Axes back(static_cast<size_t>(r));
    for (int i = 0; i < r; ++i)
        back[size_t(perm[size_t(i)])] = i;
    return transpose(out, back);
}

} // namespace detail

using detail::make;

Tensor take_along_axis(const Tensor& x, const Tensor& indices, int64_t axis) {
    const int ax = normalize_axis(axis, x.rank(), "take_along_axis");
    SJ_CHECK(is_int(indices.dtype()), TypeError)
        << "take_along_axis(" << x.name() << ", " << indices.name()
        << "): indices must be an integer tensor, got " << dtype_name(indices.dtype());
    SJ_CHECK(indices.rank() == x.rank(), ShapeError)
        << "take_along_axis(" << x.name() << ", " << indices.name() << "): indices of rank "
        << indices.rank() << " for a tensor of rank " << x.rank();
    Shape want = x.shape();
    want[size_t(ax)] = indices.dim(ax);
    Tensor idx = indices;
    for (int i = 0; i < x.rank(); ++i) {
        int64_t a = x.dim(i), b = indices.dim(i);
        SJ_CHECK(i == ax || a == b || (b == 1 && a >= 0), ShapeError)
            << "take_along_axis(" << x.name() << ", " << indices.name() << "): indices of shape "
            << shape_str(indices.shape()) << " do not fit " << shape_str(x.shape())
            << " outside axis " << ax << " (each dim equal, or 1 against a known size)";
    }
    if (idx.shape() != want)
        idx = broadcast_to(idx, want);
    idx = cast(idx, DType::I64);
    const int64_t n = x.dim(ax);
    if (n >= 0) // NumPy's range, negative indices from the end; checked when the function runs
        idx = make(Op::CheckIndex, {idx},
                   CheckIndexAttrs{n, false, 0, "take_along_axis: index", true});
    Tensor size = detail::runtime_dim(x, ax);
    idx = where(idx < 0.0, idx + size, idx);
    if (n < 0)
        idx = detail::past_end_if_out_of_range(idx, size);
    return detail::take_along_axis_unchecked(x, idx, ax);
}

Tensor gather(const Tensor& x, const Tensor& indices, int64_t axis) {
    int ax = normalize_axis(axis, x.rank(), "gather");
    return make(Op::Gather, {x, indices}, AxisAttrs{ax, false});
}

Tensor scatter_add(const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis) {
    int ax = normalize_axis(axis, x.rank(), "scatter_add");
    return make(Op::ScatterAdd, {x, indices, cast(updates, x.dtype())}, AxisAttrs{ax, false});
}

Tensor scatter(const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis,
               ScatterMode mode) {
    if (mode == ScatterMode::Add)
        return scatter_add(x, indices, updates, axis);
    int ax = normalize_axis(axis, x.rank(), "scatter");
    return make(Op::Scatter, {x, indices, cast(updates, x.dtype())}, ScatterAttrs{ax, mode});
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
