// Reference kernels of the elementwise ops: NumPy broadcasting, floats computed in double.
#include "Iterate.h"
#include "Reference.h"

#include <symjax/ir/Node.h>

#include <cmath>
#include <limits>
#include <type_traits>

namespace sj::ref {
namespace {

template <class T> constexpr bool kFloat = std::is_floating_point_v<T>;

// Note [Integer arithmetic wraps]
// Integer add, sub, mul, neg, sums and products wrap modulo 2^bits, as NumPy's fixed-width
// integers do (and as LLVM's add/mul without nsw flags do in the cpu backend). C++ leaves signed
// overflow undefined, so the reference computes in the unsigned type of at least int's width
// (no promotion back to a signed int) and converts back, which C++20 defines as modular.
// Integer div truncates (C++); mod takes the divisor's sign (Python). The two cases where the
// hardware traps are defined as NumPy defines them: x / 0 == 0 and x % 0 == 0, and for signed
// types MIN / -1 wraps to MIN with MIN % -1 == 0. The cpu backend generates the same selects
// (LlvmRenderer.cpp, emit_int_div_mod).

template <class T> T int_div(T a, T b) {
    if (b == 0)
        return T(0);
    if constexpr (std::is_signed_v<T>)
        if (b == T(-1))
            return wrap<T>(Wide<T>(0) - Wide<T>(a)); // MIN / -1 wraps to MIN
    return T(a / b);
}

template <class T> T int_mod(T a, T b) {
    if (b == 0)
        return T(0);
    if constexpr (std::is_signed_v<T>) {
        if (b == T(-1))
            return T(0); // MIN % -1 traps in hardware; every x % -1 is 0
        T r = T(a % b);
        if (r != 0 && ((r < 0) != (b < 0)))
            r = T(r + b);
        return r;
    } else {
        return T(a % b);
    }
}

/// Converts with defined results where C++ leaves them undefined: NaN -> 0, out of range
/// saturates to the target's limits, to bool is x != 0.
template <class D, class S> D convert(S v, bool to_bool) {
    if (to_bool) return D(v != S(0));
    if constexpr (kFloat<S> && !kFloat<D>) {
        if (std::isnan(v)) return D(0);
        double x = std::trunc(static_cast<double>(v));
        if (x <= static_cast<double>(std::numeric_limits<D>::lowest())) return std::numeric_limits<D>::lowest();
        if (x >= static_cast<double>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
        return static_cast<D>(x);
    } else {
        return static_cast<D>(v);
    }
}

template <class T> T neg_wrap(T v) { return wrap<T>(Wide<T>(0) - Wide<T>(v)); }
template <class T> T add_wrap(T a, T b) { return wrap<T>(Wide<T>(a) + Wide<T>(b)); }
template <class T> T sub_wrap(T a, T b) { return wrap<T>(Wide<T>(a) - Wide<T>(b)); }
template <class T> T mul_wrap(T a, T b) { return wrap<T>(Wide<T>(a) * Wide<T>(b)); }

/// One elementwise op at one point, the definition of every unary, binary and compare op: unary
/// ops read `a`, compares give 1 or 0. Floats compute in double; integers wrap (Note [Integer
/// arithmetic wraps]). An op that breaks out of the switch is not defined on T: the type rules
/// refuse it from the op's dtype class (Ops.def), so it never gets here.
template <class T> T value(Op op, T a, T b) {
    [[maybe_unused]] double x = static_cast<double>(a), y = static_cast<double>(b);
    switch (op) {
    // unary
    case Op::Neg:
        if constexpr (kFloat<T>) return T(-x);
        else return neg_wrap(a);
    case Op::Abs: // abs(MIN) wraps to MIN, as NumPy
        if constexpr (kFloat<T>) return T(std::fabs(x));
        else if constexpr (std::is_signed_v<T>) return a < 0 ? neg_wrap(a) : a;
        else return a;
    case Op::Sign:
        if constexpr (kFloat<T>) return T(std::isnan(x) ? x : (x > 0) - (x < 0));
        else return T((a > 0) - (a < T(0)));
    case Op::Exp: if constexpr (kFloat<T>) return T(std::exp(x)); break;
    case Op::Expm1: if constexpr (kFloat<T>) return T(std::expm1(x)); break;
    case Op::Log: if constexpr (kFloat<T>) return T(std::log(x)); break;
    case Op::Log1p: if constexpr (kFloat<T>) return T(std::log1p(x)); break;
    case Op::Log2: if constexpr (kFloat<T>) return T(std::log2(x)); break;
    case Op::Sqrt: if constexpr (kFloat<T>) return T(std::sqrt(x)); break;
    case Op::Rsqrt: if constexpr (kFloat<T>) return T(1.0 / std::sqrt(x)); break;
    case Op::Reciprocal: if constexpr (kFloat<T>) return T(1.0 / x); break;
    case Op::Sin: if constexpr (kFloat<T>) return T(std::sin(x)); break;
    case Op::Cos: if constexpr (kFloat<T>) return T(std::cos(x)); break;
    case Op::Tan: if constexpr (kFloat<T>) return T(std::tan(x)); break;
    case Op::Tanh: if constexpr (kFloat<T>) return T(std::tanh(x)); break;
    case Op::Erf: if constexpr (kFloat<T>) return T(std::erf(x)); break;
    case Op::Floor: if constexpr (kFloat<T>) return T(std::floor(x)); break;
    case Op::Ceil: if constexpr (kFloat<T>) return T(std::ceil(x)); break;
    case Op::Round: if constexpr (kFloat<T>) return T(std::nearbyint(x)); break; // half to even
    case Op::LogicalNot: if constexpr (!kFloat<T>) return T(!a); break;
    case Op::StopGradient: return a;
    // binary
    case Op::Add:
        if constexpr (kFloat<T>) return T(x + y);
        else return add_wrap(a, b);
    case Op::Sub:
        if constexpr (kFloat<T>) return T(x - y);
        else return sub_wrap(a, b);
    case Op::Mul:
        if constexpr (kFloat<T>) return T(x * y);
        else return mul_wrap(a, b);
    case Op::Div:
        if constexpr (kFloat<T>) return T(x / y);
        else return int_div(a, b);
    case Op::Pow: if constexpr (kFloat<T>) return T(std::pow(x, y)); break;
    case Op::Max:
        if constexpr (kFloat<T>) return (std::isnan(x) || std::isnan(y)) ? T(NAN) : T(x > y ? x : y);
        else return a > b ? a : b;
    case Op::Min:
        if constexpr (kFloat<T>) return (std::isnan(x) || std::isnan(y)) ? T(NAN) : T(x < y ? x : y);
        else return a < b ? a : b;
    case Op::Mod:
        if constexpr (kFloat<T>) {
            double r = std::fmod(x, y);
            if (r != 0 && ((r < 0) != (y < 0))) r += y;
            return T(r);
        } else {
            return int_mod(a, b);
        }
    case Op::Atan2: if constexpr (kFloat<T>) return T(std::atan2(x, y)); break;
    case Op::Hypot: if constexpr (kFloat<T>) return T(std::hypot(x, y)); break;
    case Op::LogicalAnd: if constexpr (!kFloat<T>) return T(a && b); break;
    case Op::LogicalOr: if constexpr (!kFloat<T>) return T(a || b); break;
    case Op::LogicalXor: if constexpr (!kFloat<T>) return T(bool(a) != bool(b)); break;
    // compares, in T
    case Op::Eq: return T(a == b);
    case Op::Ne: return T(a != b);
    case Op::Lt: return T(a < b);
    case Op::Le: return T(a <= b);
    case Op::Gt: return T(a > b);
    case Op::Ge: return T(a >= b);
    // elementwise ops with kernels of their own (unary_kernel, where_kernel)
    case Op::Cast:
    case Op::IsNan:
    case Op::IsInf:
    case Op::Where:
        break;
#define SJ_CASES_OUTSIDE_Elementwise
#include "ops/OpCasesOutside.inc" // Note [Family switches]
        break;
    }
    SJ_THROW(InternalError) << "reference: no elementwise kernel for " << op_name(op) << " on "
                            << (kFloat<T> ? "floats" : "integers");
}

Array unary_kernel(const KernelCtx& c) {
    const Array& x = c.in[0];
    Op op = c.node.op();
    Array out(c.out.dtype, c.out.shape);
    if (op == Op::Cast) {
        bool to_bool = c.out.dtype == DType::Bool;
        dispatch(x.dtype(), [&](auto st) {
            using S = typename decltype(st)::type;
            dispatch(c.out.dtype, [&](auto dt) {
                using D = typename decltype(dt)::type;
                for (int64_t i = 0; i < x.size(); ++i) ptr<D>(out)[i] = convert<D>(ptr<S>(x)[i], to_bool);
            });
        });
        return out;
    }
    dispatch(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* p = ptr<T>(x);
        if (op == Op::IsNan || op == Op::IsInf) {
            for (int64_t i = 0; i < x.size(); ++i) {
                bool r = false;
                if constexpr (kFloat<T>) r = op == Op::IsNan ? std::isnan(p[i]) : std::isinf(p[i]);
                ptr<uint8_t>(out)[i] = r;
            }
            return;
        }
        for (int64_t i = 0; i < x.size(); ++i) ptr<T>(out)[i] = value<T>(op, p[i], T(0));
    });
    return out;
}

Array binary_kernel(const KernelCtx& c) {
    const Array &a = c.in[0], &b = c.in[1];
    Op op = c.node.op();
    Array out(c.out.dtype, c.out.shape);
    std::vector<std::vector<int64_t>> st{broadcast_strides(a.shape(), c.out.shape),
                                         broadcast_strides(b.shape(), c.out.shape)};
    dispatch(a.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T *pa = ptr<T>(a), *pb = ptr<T>(b);
        if (has_trait(op, kCompare)) {
            uint8_t* po = ptr<uint8_t>(out);
            for_each_index(c.out.shape, st, [&](int64_t i, const auto&, const auto& off) {
                po[i] = value<T>(op, pa[off[0]], pb[off[1]]) != T(0);
            });
        } else {
            T* po = ptr<T>(out);
            for_each_index(c.out.shape, st, [&](int64_t i, const auto&, const auto& off) {
                po[i] = value<T>(op, pa[off[0]], pb[off[1]]);
            });
        }
    });
    return out;
}

Array where_kernel(const KernelCtx& c) {
    const Array &cond = c.in[0], &a = c.in[1], &b = c.in[2];
    Array out(c.out.dtype, c.out.shape);
    std::vector<std::vector<int64_t>> st{broadcast_strides(cond.shape(), c.out.shape),
                                         broadcast_strides(a.shape(), c.out.shape),
                                         broadcast_strides(b.shape(), c.out.shape)};
    dispatch(a.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const uint8_t* pc = ptr<uint8_t>(cond);
        const T *pa = ptr<T>(a), *pb = ptr<T>(b);
        T* po = ptr<T>(out);
        for_each_index(c.out.shape, st, [&](int64_t i, const auto&, const auto& off) {
            po[i] = pc[off[0]] ? pa[off[1]] : pb[off[2]];
        });
    });
    return out;
}

} // namespace

void register_elementwise_kernels(Kernel* t) {
    for (int i = 0; i < kNumOps; ++i) {
        Op op = Op(i);
        if (!has_trait(op, kElementwise)) continue;
        int ar = op_arity(op);
        t[i] = ar == 1 ? unary_kernel : ar == 2 ? binary_kernel : where_kernel;
    }
}

} // namespace sj::ref
