// Movement ops (reshape, permute, broadcast, slice, pad, flip, concat): rules and builders.
#include "OpDef.h"

#include <symjax/Ops.h>
#include <symjax/ir/Node.h>

#include <algorithm>
#include <numeric>

namespace sj {
namespace detail {
namespace {

TensorType infer_reshape(const InferCtx& c) {
    const Shape& target = c.attr<ShapeAttrs>().shape;
    const Shape& s = c.in[0].shape;
    if (c.in.size() == 2) { // -1 dims follow `like`
        const Shape& like = c.in[1].shape;
        SJ_CHECK(like.size() == target.size(), ShapeError)
            << c.where() << ": shape source " << shape_str(like) << " has rank " << like.size()
            << ", target " << shape_str(target) << " has rank " << target.size();
        Shape out = target;
        for (size_t i = 0; i < out.size(); ++i)
            if (out[i] == -1)
                out[i] = like[i];
        int64_t n = numel(s), m = numel(out);
        SJ_CHECK(n < 0 || m < 0 || n == m, ShapeError)
            << c.where() << ": cannot reshape " << shape_str(s) << " (" << n << " elements) into "
            << shape_str(out) << " (" << m << " elements)";
        return {c.in[0].dtype, out};
    }
    int infer_at = -1;
    int64_t known = 1;
    for (size_t i = 0; i < target.size(); ++i) {
        if (target[i] == -1) {
            SJ_CHECK(infer_at < 0, ShapeError)
                << c.where() << ": target " << shape_str(target) << " has more than one -1";
            infer_at = static_cast<int>(i);
        } else {
            SJ_CHECK(target[i] >= 0, ShapeError)
                << c.where() << ": target " << shape_str(target) << " has a negative dim";
            known *= target[i];
        }
    }
    Shape out = target;
    int64_t n = numel(s);
    if (n < 0)
        return {c.in[0].dtype, out}; // checked at call time
    if (infer_at >= 0) {
        SJ_CHECK(known > 0 ? n % known == 0 : n == 0, ShapeError)
            << c.where() << ": cannot reshape " << shape_str(s) << " (" << n << " elements) into "
            << shape_str(target);
        out[infer_at] = known > 0 ? n / known : 0;
    } else {
        SJ_CHECK(known == n, ShapeError)
            << c.where() << ": cannot reshape " << shape_str(s) << " (" << n << " elements) into "
            << shape_str(target) << " (" << known << " elements)";
    }
    return {c.in[0].dtype, out};
}

TensorType infer_permute(const InferCtx& c) {
    const auto& p = c.attr<AxesAttrs>().axes;
    const Shape& s = c.in[0].shape;
    SJ_CHECK(p.size() == s.size(), ShapeError)
        << c.where() << ": permutation " << shape_str(p) << " for a tensor of rank " << s.size();
    std::vector<bool> seen(s.size(), false);
    Shape out(s.size());
    for (size_t i = 0; i < p.size(); ++i) {
        SJ_CHECK(p[i] >= 0 && p[i] < int64_t(s.size()) && !seen[p[i]], ShapeError)
            << c.where() << ": " << shape_str(p) << " is not a permutation of 0.." << s.size() - 1;
        seen[p[i]] = true;
        out[i] = s[p[i]];
    }
    return {c.in[0].dtype, out};
}

TensorType infer_broadcast(const InferCtx& c) {
    const auto& a = c.attr<BroadcastAttrs>();
    const Shape& s = c.in[0].shape;
    SJ_CHECK(c.in.size() == 1 || c.in.size() == 2, ShapeError)
        << c.where() << ": broadcast takes 1 or 2 inputs";
    SJ_CHECK(a.dims.size() == s.size(), ShapeError)
        << c.where() << ": " << a.dims.size() << " dims mapped for an operand of rank " << s.size();
    Shape out = a.shape;
    if (c.in.size() == 2) {
        const Shape& like = c.in[1].shape;
        SJ_CHECK(like.size() == out.size(), ShapeError)
            << c.where() << ": shape source " << shape_str(like) << " has rank " << like.size()
            << ", target " << shape_str(out) << " has rank " << out.size();
        for (size_t i = 0; i < out.size(); ++i)
            if (out[i] == -1)
                out[i] = like[i];
    }
    for (size_t i = 0; i < s.size(); ++i) {
        int64_t od = a.dims[i];
        SJ_CHECK(od >= 0 && od < int64_t(out.size()) && (i == 0 || od > a.dims[i - 1]), ShapeError)
            << c.where() << ": broadcast dims " << shape_str(a.dims) << " must be increasing and < "
            << out.size();
        // an unknown target dim takes the operand's size; at run time a dim declared -1 binds
        // it even when that size is 1 (expand_dims of a batch of one), where a static 1 binds
        // nothing: it is broadcast to a size another input or `like` gives
        if (out[od] == -1 && (s[i] != 1 || (c.at_runtime && c.static_shape(0)[i] == -1)))
            out[od] = s[i];
        SJ_CHECK(s[i] == 1 || s[i] == -1 || out[od] == -1 || s[i] == out[od], ShapeError)
            << c.where() << ": cannot broadcast " << shape_str(s) << " to " << shape_str(out)
            << " (dim " << i << " is " << s[i] << ", target dim " << od << " is " << out[od] << ")";
        if (c.at_runtime) {
            SJ_CHECK(!(s[i] == 1 && out[od] != 1 && c.static_shape(0)[i] != 1), InputError)
                << c.where() << ": dim " << i << " of " << c.name(0)
                << " was declared -1 and bound to 1 at call time; declare it as 1 to broadcast it";
        }
    }
    if (c.at_runtime) {
        for (int64_t d : out)
            SJ_CHECK(d >= 0, InputError) << c.where() << ": target " << shape_str(a.shape)
                                         << " has a -1 dim that no input binds";
    }
    return {c.in[0].dtype, out};
}

TensorType infer_slice(const InferCtx& c) {
    const auto& a = c.attr<SliceAttrs>();
    const Shape& s = c.in[0].shape;
    SJ_CHECK(a.start.size() == s.size() && a.stop.size() == s.size() && a.step.size() == s.size(),
             ShapeError)
        << c.where() << ": slice bounds for " << a.start.size() << " dims, tensor has rank "
        << s.size();
    Shape out(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        SJ_CHECK(a.step[i] > 0, ShapeError)
            << c.where() << ": step " << a.step[i] << " on dim " << i << " must be > 0 (use flip)";
        out[i] = s[i] < 0 ? -1 : slice_bounds(s[i], a.start[i], a.stop[i], a.step[i]).count;
        // x[k] on a dim whose size was unknown when the graph was built (k < 0 counts from the
        // end)
        if (s[i] >= 0 && i < 64 && (a.index_dims >> i & 1) &&
            (a.start[i] >= s[i] || a.start[i] < -s[i]))
            shape_fail(c, "subscript of " + c.name(0) + ": index " + std::to_string(a.start[i]) +
                              " out of range for dim " + std::to_string(i) + " of size " +
                              std::to_string(s[i]) + " (" + c.name(0) + " is " + type_str(c.in[0]) +
                              " in this call)");
    }
    return {c.in[0].dtype, out};
}

TensorType infer_pad(const InferCtx& c) {
    const auto& a = c.attr<PadAttrs>();
    const Shape& s = c.in[0].shape;
    SJ_CHECK(a.lo.size() == s.size() && a.hi.size() == s.size() && a.interior.size() == s.size(),
             ShapeError)
        << c.where() << ": padding for " << a.lo.size() << " dims, tensor has rank " << s.size();
    Shape out(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        SJ_CHECK(a.lo[i] >= 0 && a.hi[i] >= 0 && a.interior[i] >= 0, ShapeError)
            << c.where() << ": padding must be >= 0 (dim " << i << ": lo " << a.lo[i] << ", hi "
            << a.hi[i] << ", interior " << a.interior[i] << ")";
        int64_t n = -1;
        if (s[i] >= 0) {
            int64_t inner = 0;
            bool over =
                __builtin_mul_overflow(std::max<int64_t>(s[i] - 1, 0), a.interior[i], &inner) ||
                __builtin_add_overflow(inner, s[i], &n) || __builtin_add_overflow(n, a.lo[i], &n) ||
                __builtin_add_overflow(n, a.hi[i], &n);
            SJ_CHECK(!over, ShapeError)
                << c.where() << ": padding dim " << i << " (" << s[i] << " elements, lo " << a.lo[i]
                << ", hi " << a.hi[i] << ", interior " << a.interior[i]
                << ") gives more than 2^63 elements";
        }
        out[i] = n;
    }
    return {c.in[0].dtype, out};
}

TensorType infer_flip(const InferCtx& c) {
    for (int64_t ax : c.attr<AxesAttrs>().axes)
        SJ_CHECK(ax >= 0 && ax < int64_t(c.in[0].shape.size()), ShapeError)
            << c.where() << ": axis " << ax << " out of range for rank " << c.in[0].shape.size();
    return c.in[0];
}

TensorType infer_concat(const InferCtx& c) {
    SJ_CHECK(!c.in.empty(), ShapeError) << "concat: no inputs";
    int64_t axis = c.attr<AxisAttrs>().axis;
    const TensorType& t0 = c.in[0];
    SJ_CHECK(axis >= 0 && axis < int64_t(t0.shape.size()), ShapeError)
        << c.where() << ": axis " << axis << " out of range for rank " << t0.shape.size();
    Shape out = t0.shape;
    int64_t total = 0;
    for (size_t k = 0; k < c.in.size(); ++k) {
        const TensorType& t = c.in[k];
        SJ_CHECK(t.dtype == t0.dtype, TypeError)
            << c.where() << ": " << c.name(k) << " is " << dtype_name(t.dtype) << ", " << c.name(0)
            << " is " << dtype_name(t0.dtype);
        SJ_CHECK(t.shape.size() == t0.shape.size(), ShapeError)
            << c.where() << ": " << c.name(k) << " has shape " << shape_str(t.shape) << ", "
            << c.name(0) << " has " << shape_str(t0.shape) << " (ranks differ)";
        for (size_t i = 0; i < out.size(); ++i) {
            if (int64_t(i) == axis)
                continue;
            if (out[i] == -1)
                out[i] = t.shape[i];
            SJ_CHECK(t.shape[i] == -1 || t.shape[i] == out[i], ShapeError)
                << c.where() << ": " << c.name(k) << " has shape " << shape_str(t.shape)
                << ", expected dim " << i << " = " << out[i] << " as in " << c.name(0);
        }
        total = (total < 0 || t.shape[axis] < 0) ? -1 : total + t.shape[axis];
    }
    out[axis] = total;
    return {t0.dtype, out};
}

Tensor x0(const Node& n) {
    return in(n, 0);
}

void register_grads(OpDef* t) {
    // reshape back to the input's shape (one unknown dim is inferred; more keep the input's
    // dims through the runtime shape of the input)
    t[int(Op::Reshape)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        const Shape& s = n.input(0)->shape();
        if (std::count(s.begin(), s.end(), int64_t(-1)) <= 1)
            d[0] = reshape(g, s);
        else
            d[0] = detail::make(Op::Reshape, {g, in(n, 0)}, ShapeAttrs{s}); // dims follow x
    };
    // inverse permutation
    t[int(Op::Permute)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        const auto& p = n.attr<AxesAttrs>().axes;
        Axes inv(p.size());
        for (size_t i = 0; i < p.size(); ++i)
            inv[p[i]] = int64_t(i);
        d[0] = transpose(g, inv);
    };
    // sum over the new and the stretched dims
    t[int(Op::Broadcast)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        const auto& a = n.attr<BroadcastAttrs>();
        const Shape& s = n.input(0)->shape();
        Axes keep_axes, drop_axes;
        std::vector<bool> mapped(n.rank(), false);
        for (size_t i = 0; i < a.dims.size(); ++i) {
            mapped[a.dims[i]] = true;
            if (s[i] == 1 && n.shape()[a.dims[i]] != 1)
                keep_axes.push_back(a.dims[i]);
        }
        for (int i = 0; i < n.rank(); ++i)
            if (!mapped[i])
                drop_axes.push_back(i);
        Tensor r = g;
        if (!keep_axes.empty())
            r = sum(r, keep_axes, true);
        if (!drop_axes.empty())
            r = sum(r, drop_axes, false);
        d[0] = r;
    };
    // scatter g back into zeros: a pad when every dim the slice cuts has a known size (a dim
    // of unknown size taken whole pads by nothing: the gates of a recurrent cell, sliced along
    // their static feature dim over a dynamic batch), else an update of a zero tensor. A pad is
    // what canonicalisation's pad_sum turns back into a concat when the pieces tile a dim.
    t[int(Op::Slice)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        const auto& a = n.attr<SliceAttrs>();
        const Shape& s = n.input(0)->shape();
        int r = n.rank();
        std::vector<int64_t> lo(r), hi(r), interior(r);
        bool pads = true;
        for (int i = 0; i < r; ++i)
            pads &= s[i] >= 0 || (a.start[i] == 0 && a.stop[i] == Index::kEnd && a.step[i] == 1);
        if (pads) {
            for (int i = 0; i < r; ++i) {
                if (s[i] < 0)
                    continue; // taken whole: lo = hi = interior = 0
                auto b = slice_bounds(s[i], a.start[i], a.stop[i], a.step[i]);
                interior[i] = b.count > 0 ? a.step[i] - 1 : 0;
                lo[i] = b.count > 0 ? b.start : 0;
                int64_t covered = b.count > 0 ? (b.count - 1) * a.step[i] + 1 : 0;
                hi[i] = s[i] - lo[i] - covered;
            }
            d[0] = pad(g, lo, hi, interior, 0.0);
            return;
        }
        // the first element's index per dim: known, or a start from the end of a dim of unknown
        // size (x[-3:], a reversed range: Note [Negative steps]) counted when the function runs
        std::vector<int64_t> starts(r);
        bool from_end = false;
        for (int i = 0; i < r; ++i) {
            interior[i] = a.step[i] - 1;
            starts[i] =
                s[i] >= 0 ? slice_bounds(s[i], a.start[i], a.stop[i], a.step[i]).start : a.start[i];
            from_end |= starts[i] < 0;
        }
        Tensor spread =
            pad(g, std::vector<int64_t>(r, 0), std::vector<int64_t>(r, 0), interior, 0.0);
        Tensor start;
        if (!from_end) {
            Array st(DType::I64, {int64_t(r)});
            for (int i = 0; i < r; ++i)
                st.data<int64_t>()[i] = starts[i];
            start = constant(st);
        } else {
            std::vector<Tensor> each;
            for (int i = 0; i < r; ++i) {
                Tensor k = scalar(double(starts[i]), DType::I64);
                if (starts[i] < 0) { // max(size + start, 0), as Python clamps
                    Tensor dim = runtime_dim(x0(n), i);
                    k = maximum(dim + k, zeros_like(dim));
                }
                each.push_back(k);
            }
            start = stack(each);
        }
        d[0] = dynamic_update_slice(zeros_like(x0(n)), spread, start);
    };
    // take the unpadded elements
    t[int(Op::Pad)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        const auto& a = n.attr<PadAttrs>();
        int r = n.rank();
        std::vector<int64_t> start(r), stop(r), step(r);
        for (int i = 0; i < r; ++i) {
            start[i] = a.lo[i];
            stop[i] = a.hi[i] > 0 ? -a.hi[i] : Index::kEnd;
            step[i] = a.interior[i] + 1;
        }
        d[0] = detail::make(Op::Slice, {g}, SliceAttrs{start, stop, step, 0});
    };
    t[int(Op::Flip)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        d[0] = flip(g, n.attr<AxesAttrs>().axes);
    };
    // split g along the axis
    t[int(Op::Concat)].grad = [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        int64_t axis = n.attr<AxisAttrs>().axis;
        int64_t off = 0;
        for (size_t k = 0; k < n.num_inputs(); ++k) {
            int64_t len = n.input(k)->shape()[axis];
            SJ_CHECK(len >= 0 && off >= 0, ShapeError)
                << "gradient of concat: the size of " << n.input(k)->describe() << " along axis "
                << axis << " is unknown until call time";
            d[k] = slice_axis(g, axis, off, off + len);
            off += len;
        }
    };
}

} // namespace

namespace {
// Batching (Note [Batching rules] in src/api/Vmap.cpp): the batch becomes a new leading dim of
// each op's geometry.
std::vector<int64_t> shifted(const std::vector<int64_t>& axes) {
    std::vector<int64_t> out;
    for (int64_t a : axes)
        out.push_back(a + 1);
    return out;
}
template <class T> std::vector<T> prepend(T first, const std::vector<T>& rest) {
    std::vector<T> out{first};
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
}

Tensor batch_reshape(const BatchArgs& b) {
    // an example's -1 dims that its static size fixes (reshape(h, {1, -1}) of a known h) are
    // taken from its type: with a batch of unknown size, the target keeps one -1
    Shape per = b.n.attr<ShapeAttrs>().shape;
    if (b.n.num_inputs() == 1)
        for (size_t i = 0; i < per.size(); ++i)
            if (per[i] < 0 && b.n.shape()[i] >= 0)
                per[i] = b.n.shape()[i];
    Shape s = prepend(b.size, per);
    if (b.n.num_inputs() == 2) {
        // -1 dims take the like's dims: a batched like gives the batch too
        if (!b.batched[1])
            return Tensor();
        s[0] = -1;
        return make(Op::Reshape, {batched_input(b, 0), b.in[1]}, ShapeAttrs{s});
    }
    if (std::count(s.begin(), s.end(), -1) > 1)
        return Tensor();
    return make(Op::Reshape, {b.in[0]}, ShapeAttrs{s});
}
Tensor batch_permute(const BatchArgs& b) {
    return make(Op::Permute, {b.in[0]},
                AxesAttrs{prepend<int64_t>(0, shifted(b.n.attr<AxesAttrs>().axes))});
}
Tensor batch_broadcast(const BatchArgs& b) {
    const auto& a = b.n.attr<BroadcastAttrs>();
    BroadcastAttrs r{prepend(b.size, a.shape), prepend<int64_t>(0, shifted(a.dims))};
    if (b.n.num_inputs() == 2) {
        if (!b.batched[1])
            return Tensor();
        r.shape[0] = -1;
        return make(Op::Broadcast, {batched_input(b, 0), b.in[1]}, r);
    }
    return make(Op::Broadcast, {b.in[0]}, r);
}
Tensor batch_slice(const BatchArgs& b) {
    const auto& a = b.n.attr<SliceAttrs>();
    return make(Op::Slice, {b.in[0]},
                SliceAttrs{prepend<int64_t>(0, a.start), prepend(Index::kEnd, a.stop),
                           prepend<int64_t>(1, a.step), a.index_dims << 1});
}
Tensor batch_pad(const BatchArgs& b) {
    const auto& a = b.n.attr<PadAttrs>();
    return make(Op::Pad, {b.in[0]},
                PadAttrs{prepend<int64_t>(0, a.lo), prepend<int64_t>(0, a.hi),
                         prepend<int64_t>(0, a.interior), a.value});
}
Tensor batch_flip(const BatchArgs& b) {
    return make(Op::Flip, {b.in[0]}, AxesAttrs{shifted(b.n.attr<AxesAttrs>().axes)});
}
Tensor batch_concat(const BatchArgs& b) {
    std::vector<Tensor> in;
    for (size_t i = 0; i < b.in.size(); ++i)
        in.push_back(batched_input(b, i));
    AxisAttrs a = b.n.attr<AxisAttrs>();
    ++a.axis;
    return make(Op::Concat, in, a);
}

} // namespace

void register_movement_ops(OpDef* t) {
    t[int(Op::Reshape)].batch = batch_reshape;
    t[int(Op::Permute)].batch = batch_permute;
    t[int(Op::Broadcast)].batch = batch_broadcast;
    t[int(Op::Slice)].batch = batch_slice;
    t[int(Op::Pad)].batch = batch_pad;
    t[int(Op::Flip)].batch = batch_flip;
    t[int(Op::Concat)].batch = batch_concat;
    t[int(Op::Reshape)].infer = infer_reshape;
    t[int(Op::Permute)].infer = infer_permute;
    t[int(Op::Broadcast)].infer = infer_broadcast;
    t[int(Op::Slice)].infer = infer_slice;
    t[int(Op::Pad)].infer = infer_pad;
    t[int(Op::Flip)].infer = infer_flip;
    t[int(Op::Concat)].infer = infer_concat;
    register_grads(t);
}

} // namespace detail

using detail::make;

Tensor reshape(const Tensor& x, const Shape& shape) {
    if (shape == x.shape() && is_static(shape))
        return x;
    return make(Op::Reshape, {x}, ShapeAttrs{shape});
}

Tensor transpose(const Tensor& x, const Axes& perm) {
    Axes p = perm;
    if (p.empty()) { // NumPy: no axes reverses them
        p.resize(x.rank());
        for (int i = 0; i < x.rank(); ++i)
            p[i] = x.rank() - 1 - i;
    }
    for (auto& a : p)
        a = normalize_axis(a, x.rank(), "transpose");
    bool identity = true;
    for (size_t i = 0; i < p.size(); ++i)
        identity &= p[i] == int64_t(i);
    if (identity && p.size() == size_t(x.rank()))
        return x;
    return make(Op::Permute, {x}, AxesAttrs{p});
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
    SJ_CHECK(shape.size() >= size_t(x.rank()), ShapeError)
        << "broadcast_to(" << x.name() << "): cannot broadcast " << x.type_str() << " to "
        << shape_str(shape) << " (target rank is smaller)";
    if (shape == x.shape())
        return x;
    Axes dims(x.rank());
    std::iota(dims.begin(), dims.end(), int64_t(shape.size() - x.rank()));
    return make(Op::Broadcast, {x}, BroadcastAttrs{shape, dims});
}

Tensor expand_dims(const Tensor& x, int64_t axis) {
    int ax = normalize_axis(axis, x.rank() + 1, "expand_dims");
    Shape s = x.shape();
    s.insert(s.begin() + ax, 1);
    Axes dims;
    for (int i = 0; i <= x.rank(); ++i)
        if (i != ax)
            dims.push_back(i);
    return make(Op::Broadcast, {x}, BroadcastAttrs{s, dims});
}

Tensor squeeze(const Tensor& x, const Axes& axes) {
    Axes ax;
    if (axes.empty()) {
        for (int i = 0; i < x.rank(); ++i)
            if (x.shape()[i] == 1)
                ax.push_back(i);
    } else {
        for (int64_t a : axes) {
            int n = normalize_axis(a, x.rank(), "squeeze");
            SJ_CHECK(x.shape()[n] == 1, ShapeError) << "squeeze(" << x.name() << "): axis " << a
                                                    << " of " << x.type_str() << " is not 1";
            ax.push_back(n);
        }
    }
    if (ax.empty())
        return x;
    Shape s;
    int unknown = 0;
    for (int i = 0; i < x.rank(); ++i)
        if (std::find(ax.begin(), ax.end(), i) == ax.end()) {
            s.push_back(x.shape()[i]);
            unknown += x.shape()[i] < 0;
        }
    if (unknown <= 1)
        return reshape(x, s);
    // several unknown dims: summing over size-1 axes drops them without naming sizes
    Tensor v = x.dtype() == DType::Bool ? any(x, ax) : sum(x, ax);
    return v;
}

Tensor flatten(const Tensor& x, int64_t start_axis) {
    if (x.rank() == 0)
        return reshape(x, {1});
    int s = normalize_axis(start_axis, x.rank(), "flatten");
    Shape out(x.shape().begin(), x.shape().begin() + s);
    int64_t n = 1;
    for (int i = s; i < x.rank(); ++i)
        n = (n < 0 || x.shape()[i] < 0) ? -1 : n * x.shape()[i];
    out.push_back(n);
    return reshape(x, out);
}

Tensor slice(const Tensor& x, const std::vector<int64_t>& start, const std::vector<int64_t>& stop,
             const std::vector<int64_t>& step) {
    return detail::index_slice(x, start, stop, step, 0);
}

namespace detail {

std::optional<std::vector<int64_t>> unit_dims_map(const Shape& from, const Shape& to) {
    auto unknowns = [](const Shape& s) { return std::count(s.begin(), s.end(), int64_t(-1)); };
    if (unknowns(from) > 1 || unknowns(to) > 1)
        return std::nullopt;
    std::vector<int64_t> map(to.size(), -1);
    size_t i = 0;
    for (size_t j = 0; j < to.size(); ++j) {
        if (to[j] == 1)
            continue;
        while (i < from.size() && from[i] == 1)
            ++i;
        if (i == from.size() || from[i] != to[j])
            return std::nullopt;
        map[j] = int64_t(i++);
    }
    while (i < from.size() && from[i] == 1)
        ++i;
    if (i != from.size())
        return std::nullopt;
    return map;
}

Tensor runtime_dim(const Tensor& x, int64_t axis) {
    int64_t d = x.dim(axis);
    if (d >= 0)
        return scalar(double(d), DType::I64);
    std::vector<int64_t> start(x.rank(), 0), stop(x.rank(), 1);
    stop[axis] = Index::kEnd;
    // one line of x along axis (a zero count when another dim is 0)
    return sum(cast(ones_like(slice(x, start, stop)), DType::I64));
}

// Note [Negative steps]
// A range with a negative step, Python's x[start:stop:-k], picks start, start - k, ... down to
// (not including) stop, with bounds clamped as Python clamps them. The slice op keeps step > 0;
// reversing the axis first turns the walk into a forward one: index i of x is index n - 1 - i of
// flip(x), so the range is flip(x)[-1 - start : -1 - stop : k]. The map holds for any bound,
// negative or past either end, and needs no size: -1 - i, for i >= 0, counts from the end, and
// for i < 0 (from the end of x) it is a non-negative index of flip(x); Index::kEnd and
// Index::kBegin swap. In a kernel, flip and slice compose into one affine index map (a negative
// stride), so a reversed range costs what a forward one does.
ForwardRange forward_range(int64_t start, int64_t stop, int64_t step) {
    // a start at or past the last element (kEnd: Python's None) is index 0 of the flipped dim
    return {start == Index::kEnd ? 0 : -1 - start, -1 - stop, -step};
}

Tensor index_slice(const Tensor& x_in, const std::vector<int64_t>& start,
                   const std::vector<int64_t>& stop, const std::vector<int64_t>& step,
                   uint64_t index_dims) {
    Tensor x = x_in;
    int r = x.rank();
    SJ_CHECK(start.size() <= size_t(r) && stop.size() <= size_t(r) && step.size() <= size_t(r),
             ShapeError)
        << "slice(" << x.name() << "): bounds for more dims than " << x.type_str() << " has";
    SliceAttrs a{std::vector<int64_t>(r, 0), std::vector<int64_t>(r, Index::kEnd),
                 std::vector<int64_t>(r, 1), 0};
    for (size_t i = 0; i < start.size(); ++i)
        a.start[i] = start[i];
    for (size_t i = 0; i < stop.size(); ++i)
        a.stop[i] = stop[i];
    for (size_t i = 0; i < step.size(); ++i)
        a.step[i] = step[i];
    Axes reversed;
    for (int i = 0; i < r; ++i) {
        SJ_CHECK(a.step[i] != 0 && a.step[i] != Index::kBegin, ShapeError)
            << "slice of " << x.name() << " " << x.type_str() << ": step " << a.step[i]
            << " on dim " << i << " (a step must be non-zero)";
        if (a.step[i] > 0)
            continue;
        ForwardRange f = forward_range(a.start[i], a.stop[i], a.step[i]);
        a.start[i] = f.start;
        a.stop[i] = f.stop;
        a.step[i] = f.step;
        reversed.push_back(i);
    }
    if (!reversed.empty())
        x = flip(x, reversed);
    // normalise bounds on known dims so equal slices intern to one node
    bool identity = true;
    for (int i = 0; i < r; ++i) {
        int64_t d = x.shape()[i];
        if (d >= 0 && a.step[i] > 0) {
            auto b = slice_bounds(d, a.start[i], a.stop[i], a.step[i]);
            a.start[i] = b.start;
            a.stop[i] = b.start + (b.count > 0 ? (b.count - 1) * a.step[i] + 1 : 0);
            if (b.count <= 1)
                a.step[i] = 1;
            identity &= b.start == 0 && b.count == d && a.step[i] == 1;
        } else {
            identity &= a.start[i] == 0 && a.stop[i] == Index::kEnd && a.step[i] == 1;
        }
    }
    if (identity)
        return x;
    // only unknown dims need the check at call time (known ones were checked by the caller)
    for (int i = 0; i < r && i < 64; ++i)
        if (x.shape()[i] < 0)
            a.index_dims |= index_dims & (uint64_t(1) << i);
    return make(Op::Slice, {x}, std::move(a));
}
} // namespace detail

Tensor slice_axis(const Tensor& x, int64_t axis, int64_t start, int64_t stop, int64_t step) {
    int ax = normalize_axis(axis, x.rank(), "slice_axis");
    std::vector<int64_t> s(x.rank(), 0), e(x.rank(), Index::kEnd), st(x.rank(), 1);
    s[ax] = start;
    e[ax] = stop;
    st[ax] = step;
    return slice(x, s, e, st);
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
           const std::vector<int64_t>& interior, double value) {
    bool nothing = true;
    for (size_t i = 0; i < lo.size(); ++i)
        nothing &= lo[i] == 0 && hi[i] == 0 && interior[i] == 0;
    if (nothing && lo.size() == size_t(x.rank()))
        return x;
    return make(Op::Pad, {x}, PadAttrs{lo, hi, interior, value});
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
           double value) {
    return pad(x, lo, hi, std::vector<int64_t>(lo.size(), 0), value);
}

Tensor flip(const Tensor& x, const Axes& axes) {
    Axes a;
    for (int64_t ax : axes)
        a.push_back(normalize_axis(ax, x.rank(), "flip"));
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
    if (a.empty())
        return x;
    return make(Op::Flip, {x}, AxesAttrs{a});
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
    SJ_CHECK(!xs.empty(), ShapeError) << "concat: no tensors given";
    if (xs.size() == 1)
        return xs[0];
    DType t = xs[0].dtype();
    for (const auto& x : xs)
        t = promote(t, x.dtype());
    std::vector<Tensor> ys;
    for (const auto& x : xs)
        ys.push_back(cast(x, t));
    int ax = normalize_axis(axis, xs[0].rank(), "concat");
    return make(Op::Concat, ys, AxisAttrs{ax, false});
}

Tensor stack(const std::vector<Tensor>& xs, int64_t axis) {
    SJ_CHECK(!xs.empty(), ShapeError) << "stack: no tensors given";
    int ax = normalize_axis(axis, xs[0].rank() + 1, "stack");
    std::vector<Tensor> ys;
    for (const auto& x : xs)
        ys.push_back(expand_dims(x, ax));
    return concat(ys, ax);
}

} // namespace sj
