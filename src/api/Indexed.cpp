// Tensor indices in subscripts (NumPy advanced indexing) and functional indexed updates
// (x.at(idx).set(v), index_update, index_add, ...): composites of slice, gather, scatter and
// dynamic_update_slice.
#include "../ops/OpDef.h"

#include <symjax/Ops.h>
#include <symjax/Tensor.h>

#include <algorithm>
#include <numeric>
#include <sstream>

namespace sj {

namespace {

// Note [Indexed updates]
// x.at(idx).op(v) lowers by what idx holds:
//   * integers and ranges only (a strided box of x): the box is read with a slice, combined with
//     v elementwise (set: v itself), and written back with dynamic_update_slice when the box is
//     contiguous, else with where(mask, pad(new), x), the pad spreading the box with interior
//     padding. No scatter: every step is a movement or elementwise op.
//
//         x --slice--> box --add(v)--> new --dynamic_update_slice(x, new, starts)--> out
//
//   * tensor indices: the ranges are sliced first (a box of x keeping every dim), the tensor
//     indices (and the integers, which NumPy then treats as advanced indices too) are scattered
//     into that box along one axis (several tensor indices are merged into one axis of the box
//     by a reshape, with the linear index sum_j t_j * stride_j), and the box is written back as
//     above. set, mul, min and max scatter with the `scatter` op; add with scatter_add.
// The read x[idx] is the same walk with gather in place of scatter.

std::string index_str(const Index& ix) {
    std::ostringstream os;
    if (ix.is_tensor()) {
        os << ix.tensor->describe();
    } else if (!ix.is_range) {
        os << ix.start;
    } else {
        // Python's defaults: 0 and the end forwards, the last element and the start backwards
        bool back = ix.step < 0;
        if (ix.start != (back ? Index::kEnd : 0))
            os << ix.start;
        os << ":";
        if (ix.stop != (back ? Index::kBegin : Index::kEnd))
            os << ix.stop;
        if (ix.step != 1)
            os << ":" << ix.step;
    }
    return os.str();
}

/// "x[1:3, t]": the subscript as the user wrote it, for messages.
std::string subscript_str(const Tensor& x, const std::vector<Index>& idx) {
    std::string s = x.name() + "[";
    for (size_t i = 0; i < idx.size(); ++i)
        s += (i ? ", " : "") + index_str(idx[i]);
    return s + "]";
}

/// One advanced index of a subscript, resolved: the dim it indexes and its integer tensor,
/// checked and with negative entries made non-negative.
struct Advanced {
    int64_t axis = 0;
    Tensor index;
};

/// What a subscript means for x: the ranges to slice (every dim kept), and the advanced indices
/// (the tensors and, when a tensor is present, the integers).
struct Resolved {
    /// per dim of flip(x, reversed): ranges with a negative step read the flipped dim forwards
    /// (Note [Negative steps] in src/ops/Movement.cpp)
    std::vector<int64_t> start, stop, step;
    Axes reversed;
    std::vector<Advanced> advanced;
    Axes dropped;     // basic integer indices (no tensor index): dims the result drops
    bool full = true; // the slice is the whole of x
};

Resolved resolve(const Tensor& x, const std::vector<Index>& idx, const std::string& what) {
    int r = x.rank();
    SJ_CHECK(idx.size() <= size_t(r), ShapeError)
        << what << ": " << idx.size() << " indices for " << x.name() << " " << x.type_str()
        << " of rank " << r;
    bool has_tensor =
        std::any_of(idx.begin(), idx.end(), [](const Index& i) { return i.is_tensor(); });
    Resolved out;
    out.start.assign(r, 0);
    out.stop.assign(r, Index::kEnd);
    out.step.assign(r, 1);
    for (size_t i = 0; i < idx.size(); ++i) {
        const Index& ix = idx[i];
        int64_t d = x.dim(int64_t(i));
        if (ix.is_range) {
            SJ_CHECK(ix.step != 0 && ix.step != Index::kBegin, ShapeError)
                << what << ": step " << ix.step << " on dim " << i << " (a step must be non-zero)";
            detail::ForwardRange f = ix.step > 0
                                         ? detail::ForwardRange{ix.start, ix.stop, ix.step}
                                         : detail::forward_range(ix.start, ix.stop, ix.step);
            out.start[i] = f.start;
            out.stop[i] = f.stop;
            out.step[i] = f.step;
            if (ix.step < 0)
                out.reversed.push_back(int64_t(i));
            out.full &= out.start[i] == 0 && out.stop[i] == Index::kEnd && out.step[i] == 1;
            continue;
        }
        if (ix.is_tensor()) {
            Tensor t(ix.tensor);
            SJ_CHECK(is_int(t.dtype()), TypeError)
                << what << ": index " << t.name() << " on dim " << i << " is " << t.type_str()
                << "; tensor indices must be integers (a bool mask selects a data-dependent "
                << "number of elements: use where)";
            if (d >= 0) {
                // NumPy's range, negative indices included, checked when the function runs
                t = detail::make(Op::CheckIndex, {t},
                                 CheckIndexAttrs{d, false, 0,
                                                 what + " (dim " + std::to_string(i) + " of size " +
                                                     std::to_string(d) + "): index",
                                                 true});
            }
            if (is_signed(t.dtype())) {
                Tensor dim = cast(detail::runtime_dim(x, int64_t(i)), t.dtype());
                t = where(lt(t, zeros_like(t)), t + dim, t);
            }
            out.advanced.push_back({int64_t(i), t});
            continue;
        }
        int64_t k = ix.start;
        if (d >= 0) {
            SJ_CHECK(k >= -d && k < d, ShapeError)
                << what << ": index " << k << " out of range for dim " << i << " of size " << d
                << " (" << x.name() << " is " << x.type_str() << ")";
            if (k < 0)
                k += d;
        }
        if (has_tensor) {
            Tensor t = scalar(double(k), DType::I64);
            if (k < 0) // d < 0 here: from the end of the dim, whose size the call gives
                t = t + detail::runtime_dim(x, int64_t(i));
            out.advanced.push_back({int64_t(i), t});
        } else {
            // a dim of unknown size cannot be updated (check_known_dims), so this is a known one
            out.start[i] = k;
            out.stop[i] = k == -1 ? Index::kEnd : k + 1;
            out.dropped.push_back(int64_t(i));
            out.full = false;
        }
    }
    return out;
}

/// The advanced indices merged into one axis of the box: the box permuted so that their dims
/// are adjacent (at the first one's place when they already are, else first, as NumPy places
/// the result's broadcast dims), those dims reshaped into one, and the linear index into it.
struct Merged {
    Axes perm;      // box -> permuted box (empty: identity)
    Shape permuted; // the permuted box's shape
    Tensor box;     // the permuted box with the advanced dims merged
    int64_t axis = 0;
    Tensor index;
};

Merged merge_advanced(const Tensor& box, const std::vector<Advanced>& adv,
                      const std::string& what) {
    Merged m;
    if (adv.size() == 1) {
        m.box = box;
        m.permuted = box.shape();
        m.axis = adv[0].axis;
        m.index = adv[0].index;
        return m;
    }
    bool adjacent = true;
    for (size_t j = 1; j < adv.size(); ++j)
        adjacent &= adv[j].axis == adv[j - 1].axis + 1;
    int r = box.rank();
    Axes perm;
    if (adjacent) {
        perm.resize(r);
        std::iota(perm.begin(), perm.end(), int64_t(0));
        m.axis = adv[0].axis;
    } else {
        for (const auto& a : adv)
            perm.push_back(a.axis);
        for (int i = 0; i < r; ++i)
            if (std::none_of(adv.begin(), adv.end(),
                             [&](const Advanced& a) { return a.axis == i; }))
                perm.push_back(i);
        m.axis = 0;
        m.perm = perm;
    }
    Tensor p = m.perm.empty() ? box : transpose(box, m.perm);
    m.permuted = p.shape();
    // linear index: sum_j t_j * stride_j over the advanced dims (sizes needed at build time)
    int64_t stride = 1;
    Tensor lin;
    for (size_t j = adv.size(); j-- > 0;) {
        int64_t d = box.dim(adv[j].axis);
        SJ_CHECK(d >= 0, ShapeError)
            << what << ": with several tensor indices, the indexed dims must be known when the "
            << "graph is built; dim " << adv[j].axis << " of " << box.name() << " "
            << box.type_str() << " is not";
        Tensor term = cast(adv[j].index, DType::I64) * double(stride);
        lin = lin.defined() ? term + lin : term;
        stride *= d;
    }
    Shape merged(m.permuted.begin(), m.permuted.begin() + m.axis);
    merged.push_back(stride);
    merged.insert(merged.end(), m.permuted.begin() + m.axis + int64_t(adv.size()),
                  m.permuted.end());
    m.box = reshape(p, merged);
    m.index = lin;
    return m;
}

/// Undoes merge_advanced on a tensor of the merged box's shape.
Tensor unmerge(const Tensor& t, const Merged& m, size_t n_advanced) {
    if (n_advanced == 1)
        return t;
    Tensor u = reshape(t, m.permuted);
    if (m.perm.empty())
        return u;
    Axes inv(m.perm.size());
    for (size_t i = 0; i < m.perm.size(); ++i)
        inv[m.perm[i]] = int64_t(i);
    return transpose(u, inv);
}

/// x with the dims of the ranges of negative step reversed: the tensor rs's bounds index.
Tensor oriented(const Tensor& x, const Resolved& rs) {
    return rs.reversed.empty() ? x : flip(x, rs.reversed);
}

/// x[the ranges of rs], every dim kept.
Tensor sliced(const Tensor& x, const Resolved& rs) {
    Tensor o = oriented(x, rs);
    return rs.full ? o : slice(o, rs.start, rs.stop, rs.step);
}

/// x[idx] for a subscript with a tensor index.
Tensor gather_subscript(const Tensor& x, const Resolved& rs, const std::string& what) {
    Tensor box = sliced(x, rs);
    Merged m = merge_advanced(box, rs.advanced, what);
    return gather(m.box, m.index, m.axis);
}

/// v broadcast to `like`'s shape (NumPy's rules), or a ShapeError naming the update.
Tensor broadcast_update(const Tensor& v, const Tensor& like, const std::string& what) {
    const Shape &vs = v.shape(), &ls = like.shape();
    bool ok = vs.size() <= ls.size();
    for (size_t i = 0; ok && i < vs.size(); ++i) {
        int64_t a = vs[vs.size() - 1 - i], b = ls[ls.size() - 1 - i];
        ok = a == b || a == 1 || a == -1 || b == -1;
    }
    SJ_CHECK(ok, ShapeError) << what << ": the update " << v.name() << " " << v.type_str()
                             << " does not broadcast to the indexed shape " << shape_str(ls);
    if (vs == ls && is_static(ls))
        return v;
    if (is_static(ls))
        return broadcast_to(v, ls);
    Axes dims(vs.size());
    std::iota(dims.begin(), dims.end(), int64_t(ls.size() - vs.size()));
    return detail::make(Op::Broadcast, {v, like}, BroadcastAttrs{ls, dims}); // dims follow like
}

/// new combined into `old` elementwise (the box of an update without tensor indices).
Tensor combine(ScatterMode mode, const Tensor& old, const Tensor& v) {
    bool b = old.dtype() == DType::Bool;
    switch (mode) {
    case ScatterMode::Set:
        return v;
    case ScatterMode::Add:
        return b ? logical_or(old, v) : old + v;
    case ScatterMode::Mul:
        return b ? logical_and(old, v) : old * v;
    case ScatterMode::Min:
        return minimum(old, v);
    case ScatterMode::Max:
        return maximum(old, v);
    }
    return v;
}

/// x with its box (the slice rs describes, every dim kept) replaced by `box`.
Tensor place(const Tensor& x, const Tensor& box, const Resolved& rs, const std::string& what) {
    if (rs.full)
        return box;
    int r = x.rank();
    std::vector<int64_t> lo(r), hi(r), interior(r);
    bool contiguous = true;
    for (int i = 0; i < r; ++i) {
        int64_t d = x.dim(i);
        bool whole = rs.start[i] == 0 && rs.stop[i] == Index::kEnd && rs.step[i] == 1;
        if (d < 0) {
            SJ_CHECK(whole, ShapeError)
                << what << ": dim " << i << " of " << x.name() << " " << x.type_str()
                << " is unknown until call time; an indexed update needs the size of every dim "
                << "it indexes (index it whole, with sl(), or give the size)";
            continue;
        }
        auto b = slice_bounds(d, rs.start[i], rs.stop[i], rs.step[i]);
        if (b.count == 0)
            return x; // an empty box: nothing to update
        int64_t step = b.count > 1 ? rs.step[i] : 1;
        lo[i] = b.start;
        interior[i] = step - 1;
        hi[i] = d - b.start - (b.count - 1) * step - 1;
        contiguous &= step == 1;
    }
    if (contiguous && is_static(box.shape())) {
        Array starts(DType::I64, {int64_t(r)});
        for (int i = 0; i < r; ++i)
            starts.data<int64_t>()[i] = lo[i];
        return dynamic_update_slice(x, box, constant(starts));
    }
    Tensor mask = pad(full_like(box, 1.0, DType::Bool), lo, hi, interior, 0.0);
    return where(mask, pad(box, lo, hi, interior, 0.0), x);
}

/// An update writes back a box of x, which needs the size of every dim it does not take whole.
void check_known_dims(const Tensor& x, const std::vector<Index>& idx, const Resolved& rs,
                      const std::string& what) {
    for (size_t i = 0; i < idx.size() && i < size_t(x.rank()); ++i)
        SJ_CHECK(x.dim(int64_t(i)) >= 0 || idx[i].is_tensor() ||
                     (idx[i].is_range && rs.start[i] == 0 && rs.stop[i] == Index::kEnd &&
                      rs.step[i] == 1), // whole, forwards or reversed
                 ShapeError)
            << what << ": dim " << i << " of " << x.name() << " " << x.type_str()
            << " is unknown until call time; an indexed update needs the size of every dim "
            << "it indexes with an integer or a range (index it whole, with sl(), or give the "
            << "size)";
}

std::string update_what(const Tensor& x, const std::vector<Index>& idx, ScatterMode mode) {
    return subscript_str(x, idx) + "." + scatter_mode_name(mode);
}

} // namespace

namespace detail {
Tensor advanced_subscript(const Tensor& x, const std::vector<Index>& idx) {
    std::string what = "subscript " + subscript_str(x, idx);
    return gather_subscript(x, resolve(x, idx, what), what);
}
} // namespace detail

Tensor index_apply(const Tensor& x, const std::vector<Index>& idx, const Tensor& v,
                   ScatterMode mode) {
    std::string what = update_what(x, idx, mode);
    SJ_CHECK(v.defined(), InputError) << what << ": the update is an undefined Tensor";
    Resolved rs = resolve(x, idx, what);
    check_known_dims(x, idx, rs, what);
    Tensor u = cast(v, x.dtype());
    if (rs.advanced.empty()) {
        // a strided box: read it, combine, write it back (Note [Indexed updates])
        Tensor box = sliced(x, rs);
        Tensor region = rs.dropped.empty() ? box : squeeze(box, rs.dropped);
        Tensor ub = broadcast_update(u, region, what);
        for (int64_t a : rs.dropped)
            ub = expand_dims(ub, a);
        return oriented(place(oriented(x, rs), combine(mode, box, ub), rs, what), rs);
    }
    Tensor box = sliced(x, rs);
    Merged m = merge_advanced(box, rs.advanced, what);
    Tensor region = gather(m.box, m.index, m.axis); // only its shape is read
    Tensor ub = broadcast_update(u, region, what);
    Tensor updated = scatter(m.box, m.index, ub, m.axis, mode);
    return oriented(place(oriented(x, rs), unmerge(updated, m, rs.advanced.size()), rs, what), rs);
}

#define SJ_INDEX_OP(name, mode)                                                                    \
    Tensor name(const Tensor& x, const std::vector<Index>& idx, const Tensor& v) {                 \
        return index_apply(x, idx, v, ScatterMode::mode);                                          \
    }                                                                                              \
    Tensor name(const Tensor& x, const std::vector<Index>& idx, double v) {                        \
        return index_apply(x, idx, scalar_like(v, x), ScatterMode::mode);                          \
    }
SJ_INDEX_OP(index_update, Set)
SJ_INDEX_OP(index_add, Add)
SJ_INDEX_OP(index_mul, Mul)
SJ_INDEX_OP(index_min, Min)
SJ_INDEX_OP(index_max, Max)
#undef SJ_INDEX_OP

IndexedRef Tensor::at(Index i) const {
    return IndexedRef(*this, {std::move(i)});
}
IndexedRef Tensor::at(std::initializer_list<Index> idx) const {
    return IndexedRef(*this, std::vector<Index>(idx));
}
IndexedRef Tensor::at(const std::vector<Index>& idx) const {
    return IndexedRef(*this, idx);
}

Tensor IndexedRef::get() const {
    return x_[idx_];
}
Tensor IndexedRef::set(const Tensor& v) const {
    return index_update(x_, idx_, v);
}
Tensor IndexedRef::set(double v) const {
    return index_update(x_, idx_, v);
}
Tensor IndexedRef::add(const Tensor& v) const {
    return index_add(x_, idx_, v);
}
Tensor IndexedRef::add(double v) const {
    return index_add(x_, idx_, v);
}
Tensor IndexedRef::mul(const Tensor& v) const {
    return index_mul(x_, idx_, v);
}
Tensor IndexedRef::mul(double v) const {
    return index_mul(x_, idx_, v);
}
Tensor IndexedRef::min(const Tensor& v) const {
    return index_min(x_, idx_, v);
}
Tensor IndexedRef::min(double v) const {
    return index_min(x_, idx_, v);
}
Tensor IndexedRef::max(const Tensor& v) const {
    return index_max(x_, idx_, v);
}
Tensor IndexedRef::max(double v) const {
    return index_max(x_, idx_, v);
}

} // namespace sj
