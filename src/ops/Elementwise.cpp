// Elementwise ops: type rules, gradient rules and the public builders.
#include "OpDef.h"

#include <symjax/Ops.h>
#include <symjax/ir/Node.h>

#include <cmath>

namespace sj {
namespace detail {
namespace {

// The dtype facts come from the op's row: its DTypeClass (what the inputs may be) and the
// kBoolResult trait (compares, isnan, isinf); otherwise the result has the inputs' dtype.
DType result_dtype(Op op, DType in) { return has_trait(op, kBoolResult) ? DType::Bool : in; }

TensorType infer_unary(const InferCtx& c) {
    DType t = c.in[0].dtype;
    if (c.op == Op::Cast) return {c.attr<CastAttrs>().to, c.in[0].shape};
    check_dtype_class(c, 0);
    return {result_dtype(c.op, t), c.in[0].shape};
}

/// At call time a dim that was -1 at build time must not broadcast: gradients were built
/// assuming it would not (Theano's static broadcast pattern).
void check_runtime_broadcast(const InferCtx& c, const Shape& out) {
    if (!c.at_runtime) return;
    for (size_t i = 0; i < c.in.size(); ++i) {
        const Shape& s = c.in[i].shape;
        const Shape& st = c.static_shape(i);
        size_t lead = out.size() - s.size();
        for (size_t d = 0; d < s.size(); ++d)
            SJ_CHECK(!(s[d] == 1 && out[d + lead] != 1 && st[d] != 1), InputError)
                << c.where() << ": dim " << d << " of " << c.name(i)
                << " was declared -1 and bound to 1 at call time, where it would broadcast to "
                << out[d + lead] << "; declare it as 1 to broadcast it";
    }
}

TensorType infer_binary(const InferCtx& c) {
    SJ_CHECK(c.in[0].dtype == c.in[1].dtype, TypeError)
        << c.where() << ": dtypes " << dtype_name(c.in[0].dtype) << " and "
        << dtype_name(c.in[1].dtype) << " differ";
    check_dtype_class(c, 0);
    Shape s = broadcast_shapes(c.in[0].shape, c.in[1].shape, c);
    check_runtime_broadcast(c, s);
    return {result_dtype(c.op, c.in[0].dtype), s};
}

TensorType infer_where(const InferCtx& c) {
    SJ_CHECK(c.in[0].dtype == DType::Bool, TypeError)
        << c.where() << ": the condition must be bool, got " << dtype_name(c.in[0].dtype);
    SJ_CHECK(c.in[1].dtype == c.in[2].dtype, TypeError)
        << c.where() << ": branch dtypes " << dtype_name(c.in[1].dtype) << " and "
        << dtype_name(c.in[2].dtype) << " differ";
    Shape s = broadcast_shapes(broadcast_shapes(c.in[0].shape, c.in[1].shape, c), c.in[2].shape, c);
    check_runtime_broadcast(c, s);
    return {c.in[1].dtype, s};
}

Tensor out(const Node& n) { return Tensor(n.shared_from_this()); }
Tensor x0(const Node& n) { return in(n, 0); }
Tensor x1(const Node& n) { return in(n, 1); }

// Gradient rules. Each returns d(out)/d(input) * g for its inputs.
void unbroadcast(const Node& n, std::vector<Tensor>& d, size_t i, const Tensor& g) {
    accumulate(d[i], sum_to_shape(g, n.input(i)->shape()));
}

void register_unary_grads(OpDef* t) {
    auto set = [&](Op op, GradFn f) { t[int(op)].grad = f; };
    // d(-x) = -1
    set(Op::Neg, [](const Node&, const Tensor& g, std::vector<Tensor>& d) { d[0] = neg(g); });
    // d|x| = sign(x)
    set(Op::Abs, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) { d[0] = g * sign(x0(n)); });
    // d exp(x) = exp(x)
    set(Op::Exp, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) { d[0] = g * out(n); });
    // d expm1(x) = exp(x) = y + 1
    set(Op::Expm1, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) { d[0] = g * (out(n) + 1.0); });
    // d log(x) = 1/x
    set(Op::Log, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) { d[0] = g / x0(n); });
    // d log1p(x) = 1/(1+x)
    set(Op::Log1p, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) { d[0] = g / (x0(n) + 1.0); });
    // d log2(x) = 1/(x ln 2)
    set(Op::Log2, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) { d[0] = g / (x0(n) * M_LN2); });
    // d sqrt(x) = 0.5/sqrt(x)
    set(Op::Sqrt, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) { d[0] = g * 0.5 / out(n); });
    // d x^-1/2 = -0.5 x^-3/2 = -0.5 y / x
    set(Op::Rsqrt, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) { d[0] = g * -0.5 * out(n) / x0(n); });
    // d 1/x = -1/x^2 = -y^2
    set(Op::Reciprocal, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) { d[0] = neg(g * out(n) * out(n)); });
    // d sin = cos
    set(Op::Sin, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) { d[0] = g * cos(x0(n)); });
    // d cos = -sin
    set(Op::Cos, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) { d[0] = neg(g * sin(x0(n))); });
    // d tan = 1 + tan^2
    set(Op::Tan, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) { d[0] = g * (out(n) * out(n) + 1.0); });
    // d tanh = 1 - tanh^2
    set(Op::Tanh, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) { d[0] = g * (1.0 - out(n) * out(n)); });
    // d erf(x) = 2/sqrt(pi) exp(-x^2)
    set(Op::Erf, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        d[0] = g * (2.0 / std::sqrt(M_PI)) * exp(neg(x0(n) * x0(n)));
    });
    // cast between floats passes the gradient through (cast back to the source dtype)
    set(Op::Cast, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        if (is_float(n.input(0)->dtype()) && is_float(n.dtype())) d[0] = cast(g, n.input(0)->dtype());
    });
    // sign, floor, ceil, round, stop_gradient, logical and compare ops: no gradient (grad = nullptr)
}

void register_binary_grads(OpDef* t) {
    auto set = [&](Op op, GradFn f) { t[int(op)].grad = f; };
    // d(a+b) = 1, 1
    set(Op::Add, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        unbroadcast(n, d, 0, g);
        unbroadcast(n, d, 1, g);
    });
    // d(a-b) = 1, -1
    set(Op::Sub, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        unbroadcast(n, d, 0, g);
        unbroadcast(n, d, 1, neg(g));
    });
    // d(a*b)/da = b, d(a*b)/db = a
    set(Op::Mul, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        unbroadcast(n, d, 0, g * x1(n));
        unbroadcast(n, d, 1, g * x0(n));
    });
    // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2 = -y/b
    set(Op::Div, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        unbroadcast(n, d, 0, g / x1(n));
        unbroadcast(n, d, 1, neg(g * out(n) / x1(n)));
    });
    // d a^b / da = b a^(b-1), d a^b / db = a^b log(a)  (taken as 0 where a <= 0)
    set(Op::Pow, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        Tensor a = x0(n), b = x1(n);
        unbroadcast(n, d, 0, g * b * pow(a, b - 1.0));
        Tensor safe_log = log(where(a > 0.0, a, 1.0));
        unbroadcast(n, d, 1, g * out(n) * safe_log);
    });
    // d max(a,b) = [a > b] (+ 1/2 on ties), likewise for b
    set(Op::Max, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        Tensor a = x0(n), b = x1(n);
        Tensor wa = cast(a > b, g.dtype()) + 0.5 * cast(eq(a, b), g.dtype());
        unbroadcast(n, d, 0, g * wa);
        unbroadcast(n, d, 1, g * (1.0 - wa));
    });
    set(Op::Min, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        Tensor a = x0(n), b = x1(n);
        Tensor wa = cast(a < b, g.dtype()) + 0.5 * cast(eq(a, b), g.dtype());
        unbroadcast(n, d, 0, g * wa);
        unbroadcast(n, d, 1, g * (1.0 - wa));
    });
    // mod(a,b) = a - b floor(a/b): d/da = 1, d/db = -floor(a/b)
    set(Op::Mod, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        unbroadcast(n, d, 0, g);
        if (is_float(n.dtype())) unbroadcast(n, d, 1, neg(g * floor(x0(n) / x1(n))));
    });
    // atan2(y, x): d/dy = x/(x^2+y^2), d/dx = -y/(x^2+y^2)
    set(Op::Atan2, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        Tensor y = x0(n), x = x1(n);
        Tensor r2 = x * x + y * y;
        unbroadcast(n, d, 0, g * x / r2);
        unbroadcast(n, d, 1, neg(g * y / r2));
    });
    // hypot(a, b) = sqrt(a^2 + b^2) = y: d/da = a/y, d/db = b/y
    set(Op::Hypot, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        unbroadcast(n, d, 0, g * x0(n) / out(n));
        unbroadcast(n, d, 1, g * x1(n) / out(n));
    });
    // where(c, a, b): the gradient goes to the branch that was taken (Note [Relu masks])
    set(Op::Where, [](const Node& n, const Tensor& g, std::vector<Tensor>& d) {
        Tensor c = output_mask(n) ? le(out(n), in(*n.input(0), 1)) : in(n, 0);
        Tensor z = zeros_like(g);
        unbroadcast(n, d, 1, where(c, g, z));
        unbroadcast(n, d, 2, where(c, z, g));
    });
}

} // namespace

// Note [Relu masks]
// nn::relu is where(x <= 0, 0, x) and nn::leaky_relu where(x <= 0, x * s, x) (s > 0): NaN
// passes through both, and the gradient at 0 is PyTorch's and jax.nn.relu's (0, and s). Their
// backward needs the mask x <= 0, and read from x it keeps the pre-activation alive until the
// backward pass: the bias add and the relu that make it cannot run inside the matmul or
// convolution as its epilogue (Note [Epilogue fusion] in src/compiler/Fusion.cpp), and x is one
// more activation stored per layer. The same mask is out <= 0, read from the output the
// backward needs anyway: x <= 0 gives out = 0 (or x * s <= 0, -0 on underflow) and x > 0 gives
// out = x > 0, NaN gives NaN on both sides. So the gradient of such a where uses out <= 0.
// Where x is a normalisation of a value the backward reads anyway (batch norm's d = y - mean(y)),
// the compiler turns the mask back into x <= 0, computed from y in the kernels that read it
// (Note [Masks of a normalised relu] in src/compiler/Specialize.cpp).
bool output_mask(const Node& n) {
    const Node& c = *n.input(0);
    const NodePtr& x = n.input(2);
    double k, s;
    if (!c.is(Op::Le) || c.input(0) != x || !splat_value(*c.input(1), &k) || k != 0)
        return false;
    if (x->shape() != n.shape() || !is_float(n.dtype()))
        return false;
    const Node& a = *n.input(1);
    if (splat_value(a, &s))
        return s == 0;
    if (!a.is(Op::Mul))
        return false;
    for (int i = 0; i < 2; ++i)
        if (a.input(size_t(i)) == x && splat_value(*a.input(size_t(1 - i)), &s))
            return s > 0;
    return false;
}

void register_elementwise_ops(OpDef* t) {
    for (int i = 0; i < kNumOps; ++i) {
        Op op = Op(i);
        if (!has_trait(op, kElementwise)) continue;
        int ar = op_arity(op);
        t[i].infer = ar == 1 ? infer_unary : ar == 2 ? infer_binary : infer_where;
        t[i].batch = batch_elementwise;
    }
    register_unary_grads(t);
    register_binary_grads(t);
    // Gradients only flow through float-valued results.
    for (int i = 0; i < kNumOps; ++i)
        if (has_trait(Op(i), kBoolResult) || dtype_class(Op(i)) == DTypeClass::Bool)
            t[i].grad = nullptr;
}

} // namespace detail

// ---- public builders -------------------------------------------------------------------------
using detail::make;

namespace {
Tensor unary(Op op, const Tensor& x) { return make(op, {x}); }
/// Promotes mixed dtypes with explicit casts so the primitive sees equal dtypes.
std::pair<Tensor, Tensor> promoted(const Tensor& a, const Tensor& b) {
    SJ_CHECK(a.defined() && b.defined(), Error) << "binary op on an undefined Tensor";
    if (a.dtype() == b.dtype()) return {a, b};
    DType t = promote(a.dtype(), b.dtype());
    return {a.dtype() == t ? a : cast(a, t), b.dtype() == t ? b : cast(b, t)};
}
Tensor binary(Op op, const Tensor& a, const Tensor& b) {
    auto [x, y] = promoted(a, b);
    return make(op, {x, y});
}
} // namespace

Tensor neg(const Tensor& x) { return unary(Op::Neg, x); }
Tensor abs(const Tensor& x) { return unary(Op::Abs, x); }
Tensor sign(const Tensor& x) { return unary(Op::Sign, x); }
Tensor exp(const Tensor& x) { return unary(Op::Exp, x); }
Tensor expm1(const Tensor& x) { return unary(Op::Expm1, x); }
Tensor log(const Tensor& x) { return unary(Op::Log, x); }
Tensor log1p(const Tensor& x) { return unary(Op::Log1p, x); }
Tensor log2(const Tensor& x) { return unary(Op::Log2, x); }
Tensor sqrt(const Tensor& x) { return unary(Op::Sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary(Op::Rsqrt, x); }
Tensor reciprocal(const Tensor& x) { return unary(Op::Reciprocal, x); }
Tensor sin(const Tensor& x) { return unary(Op::Sin, x); }
Tensor cos(const Tensor& x) { return unary(Op::Cos, x); }
Tensor tan(const Tensor& x) { return unary(Op::Tan, x); }
Tensor tanh(const Tensor& x) { return unary(Op::Tanh, x); }
Tensor erf(const Tensor& x) { return unary(Op::Erf, x); }
Tensor floor(const Tensor& x) { return unary(Op::Floor, x); }
Tensor ceil(const Tensor& x) { return unary(Op::Ceil, x); }
Tensor round(const Tensor& x) { return unary(Op::Round, x); }
Tensor logical_not(const Tensor& x) { return unary(Op::LogicalNot, x); }
Tensor isnan(const Tensor& x) { return unary(Op::IsNan, x); }
Tensor isinf(const Tensor& x) { return unary(Op::IsInf, x); }
Tensor stop_gradient(const Tensor& x) { return unary(Op::StopGradient, x); }
Tensor cast(const Tensor& x, DType dtype) {
    if (x.dtype() == dtype) return x;
    return make(Op::Cast, {x}, CastAttrs{dtype});
}

Tensor add(const Tensor& a, const Tensor& b) { return binary(Op::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(Op::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(Op::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(Op::Div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(Op::Pow, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(Op::Max, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(Op::Min, a, b); }
Tensor mod(const Tensor& a, const Tensor& b) { return binary(Op::Mod, a, b); }
Tensor atan2(const Tensor& y, const Tensor& x) { return binary(Op::Atan2, y, x); }
Tensor hypot(const Tensor& a, const Tensor& b) { return binary(Op::Hypot, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary(Op::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(Op::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(Op::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(Op::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(Op::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(Op::Ge, a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return binary(Op::LogicalAnd, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return binary(Op::LogicalOr, a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return binary(Op::LogicalXor, a, b); }

#define SJ_SCALAR_OVERLOADS(f)                                                                     \
    Tensor f(const Tensor& a, double b) { return f(a, scalar_like(b, a)); }                       \
    Tensor f(double a, const Tensor& b) { return f(scalar_like(a, b), b); }
SJ_SCALAR_OVERLOADS(add)
SJ_SCALAR_OVERLOADS(sub)
SJ_SCALAR_OVERLOADS(mul)
SJ_SCALAR_OVERLOADS(div)
SJ_SCALAR_OVERLOADS(pow)
SJ_SCALAR_OVERLOADS(maximum)
SJ_SCALAR_OVERLOADS(minimum)
SJ_SCALAR_OVERLOADS(mod)
SJ_SCALAR_OVERLOADS(atan2)
SJ_SCALAR_OVERLOADS(hypot)
SJ_SCALAR_OVERLOADS(eq)
SJ_SCALAR_OVERLOADS(ne)
SJ_SCALAR_OVERLOADS(lt)
SJ_SCALAR_OVERLOADS(le)
SJ_SCALAR_OVERLOADS(gt)
SJ_SCALAR_OVERLOADS(ge)
#undef SJ_SCALAR_OVERLOADS

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) {
    auto [x, y] = promoted(a, b);
    return make(Op::Where, {c, x, y});
}
Tensor where(const Tensor& c, const Tensor& a, double b) { return where(c, a, scalar_like(b, a)); }
Tensor where(const Tensor& c, double a, const Tensor& b) { return where(c, scalar_like(a, b), b); }

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator%(const Tensor& a, const Tensor& b) { return mod(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return logical_xor(a, b); }
Tensor operator!(const Tensor& a) { return logical_not(a); }
Tensor operator+(const Tensor& a, double b) { return add(a, scalar_like(b, a)); }
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(a, b), b); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar_like(b, a)); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(a, b), b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar_like(b, a)); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(a, b), b); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar_like(b, a)); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(a, b), b); }
Tensor operator<(const Tensor& a, double b) { return lt(a, scalar_like(b, a)); }
Tensor operator<=(const Tensor& a, double b) { return le(a, scalar_like(b, a)); }
Tensor operator>(const Tensor& a, double b) { return gt(a, scalar_like(b, a)); }
Tensor operator>=(const Tensor& a, double b) { return ge(a, scalar_like(b, a)); }
Tensor operator%(const Tensor& a, double b) { return mod(a, b); }
Tensor operator%(double a, const Tensor& b) { return mod(a, b); }
Tensor operator<(double a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(double a, const Tensor& b) { return le(a, b); }
Tensor operator>(double a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(double a, const Tensor& b) { return ge(a, b); }

} // namespace sj
