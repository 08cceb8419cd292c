// Leaf ops (placeholder, variable, constant, rng counter): type rules and constant builders.
#include "../core/Hash.h"
#include "OpDef.h"

#include <symjax/Ops.h>
#include <symjax/Variable.h>
#include <symjax/ir/Node.h>
#include <symjax/ir/VariableState.h>

#include <atomic>
#include <cmath>

namespace sj {
namespace detail {

void register_leaf_ops(OpDef* t) {
    t[int(Op::Placeholder)].infer = [](const InferCtx& c) {
        const auto& a = c.attr<PlaceholderAttrs>();
        return TensorType{a.dtype, a.shape};
    };
    t[int(Op::Variable)].infer = [](const InferCtx& c) {
        const auto& s = *c.attr<VariableAttrs>().state;
        return TensorType{s.dtype, s.shape};
    };
    t[int(Op::Constant)].infer = [](const InferCtx& c) {
        const Array& v = c.attr<ConstantAttrs>().value;
        return TensorType{v.dtype(), v.shape()};
    };
    // The call counter of the running function: an i64 scalar bound by the runtime.
    t[int(Op::RngCounter)].infer = [](const InferCtx&) { return TensorType{DType::I64, {}}; };
}

} // namespace detail

namespace {
uint64_t content_hash(const Array& value) {
    detail::Hasher h;
    h.add(static_cast<uint64_t>(value.dtype()));
    for (int64_t d : value.shape()) h.add(static_cast<uint64_t>(d));
    h.add_bytes(value.raw(), static_cast<size_t>(value.nbytes()));
    return h.h;
}
std::atomic<uint64_t> g_next_constant_id{1};

/// A user constant (a leaf of its own, Note [Constant identity]) holding `owned`, an array no
/// one else can write.
Tensor own_constant(Array owned) {
    uint64_t h = content_hash(owned);
    return detail::make(Op::Constant, {}, ConstantAttrs{std::move(owned), h, g_next_constant_id++});
}
} // namespace

NodePtr detail::shared_constant(const Array& value) {
    // Constants are immutable: copy so later writes to the caller's buffer cannot change them.
    return Node::make(Op::Constant, ConstantAttrs{value.clone(), content_hash(value), 0}, {});
}

NodePtr detail::shared_constant(const Node& c) {
    const auto& a = c.attr<ConstantAttrs>();
    if (a.id == 0) return c.shared_from_this();
    return Node::make(Op::Constant, ConstantAttrs{a.value, a.content_hash, 0}, {});
}

Tensor constant(const Array& value) {
    SJ_CHECK(value.defined(), InputError) << "constant: undefined Array";
    // constants are immutable: copy so later writes to the caller's buffer cannot change them
    return own_constant(value.clone());
}

Tensor::Tensor(const Array& value) : Tensor(constant(value)) {}

Tensor scalar(double v, DType dtype) { return own_constant(Array::full(dtype, {}, v)); }

Tensor scalar_like(double v, const Tensor& t) {
    DType d = t.dtype();
    bool integral = std::isfinite(v) && std::floor(v) == v;
    if (d == DType::Bool || (!is_float(d) && !integral)) d = integral ? DType::I32 : DType::F32;
    if (t.dtype() == DType::Bool && integral && (v == 0 || v == 1)) d = DType::Bool;
    return scalar(v, d);
}

Tensor full(const Shape& shape, double v, DType dtype) {
    SJ_CHECK(is_static(shape), ShapeError)
        << "full: shape " << shape_str(shape) << " has unknown dims; use full_like";
    Tensor s = scalar(v, dtype);
    return shape.empty() ? s : broadcast_to(s, shape);
}
Tensor zeros(const Shape& shape, DType dtype) { return full(shape, 0.0, dtype); }
Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Tensor full_like(const Tensor& t, double v, DType dtype) {
    Tensor s = scalar(v, dtype);
    if (t.rank() == 0) return s;
    if (is_static(t.shape())) return broadcast_to(s, t.shape());
    // Unknown dims follow t at call time (t is only a shape source: no gradient flows to it).
    return detail::make(Op::Broadcast, {s, t}, BroadcastAttrs{t.shape(), {}});
}
Tensor full_like(const Tensor& t, double v) { return full_like(t, v, t.dtype()); }
Tensor zeros_like(const Tensor& t) { return full_like(t, 0.0); }
Tensor ones_like(const Tensor& t) { return full_like(t, 1.0); }

Tensor arange(double start, double stop, double step, DType dtype) {
    SJ_CHECK(step != 0, InputError) << "arange: step must be non-zero";
    int64_t n = static_cast<int64_t>(std::ceil((stop - start) / step));
    if (n < 0) n = 0;
    Array a(DType::F64, {n});
    double* p = a.data<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = start + double(i) * step;
    return own_constant(a.astype(dtype));
}
Tensor arange(int64_t stop, DType dtype) { return arange(0.0, double(stop), 1.0, dtype); }

Tensor linspace(double start, double stop, int64_t num, DType dtype) {
    SJ_CHECK(num >= 0, InputError) << "linspace: num must be >= 0, got " << num;
    Array a(DType::F64, {num});
    double* p = a.data<double>();
    for (int64_t i = 0; i < num; ++i)
        p[i] = num == 1 ? start : start + (stop - start) * double(i) / double(num - 1);
    if (num > 1) p[num - 1] = stop;
    return own_constant(a.astype(dtype));
}

Tensor eye(int64_t n, int64_t m, DType dtype) {
    if (m < 0) m = n;
    SJ_CHECK(n >= 0, InputError) << "eye: n must be >= 0, got " << n;
    Array a(DType::F64, {n, m});
    double* p = a.data<double>();
    for (int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = 1.0;
    return own_constant(a.astype(dtype));
}

} // namespace sj
