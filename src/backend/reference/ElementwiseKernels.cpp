// Reference kernels of the elementwise ops: NumPy broadcasting, floats computed in double.
#include "Iterate.h"
#include "Reference.h"

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

template <class T> T unary_value(Op op, T x, const Node& n) {
    if constexpr (kFloat<T>) {
        double v = static_cast<double>(x);
        switch (op) {
        case Op::Neg: return T(-v);
        case Op::Abs: return T(std::fabs(v));
        case Op::Sign: return T(std::isnan(v) ? v : (v > 0) - (v < 0));
        case Op::Exp: return T(std::exp(v));
        case Op::Expm1: return T(std::expm1(v));
        case Op::Log: return T(std::log(v));
        case Op::Log1p: return T(std::log1p(v));
        case Op::Sqrt: return T(std::sqrt(v));
        case Op::Rsqrt: return T(1.0 / std::sqrt(v));
        case Op::Reciprocal: return T(1.0 / v);
        case Op::Sin: return T(std::sin(v));
        case Op::Cos: return T(std::cos(v));
        case Op::Tan: return T(std::tan(v));
        case Op::Tanh: return T(std::tanh(v));
        case Op::Erf: return T(std::erf(v));
        case Op::Floor: return T(std::floor(v));
        case Op::Ceil: return T(std::ceil(v));
        case Op::Round: return T(std::nearbyint(v)); // half to even in the default mode
        case Op::StopGradient: return x;
        default: break;
        }
    } else {
        switch (op) {
        case Op::Neg:
            return wrap<T>(Wide<T>(0) - Wide<T>(x));
        case Op::Abs: // abs(MIN) wraps to MIN, as NumPy
            if constexpr (std::is_signed_v<T>)
                return x < 0 ? wrap<T>(Wide<T>(0) - Wide<T>(x)) : x;
            else return x;
        case Op::Sign: return T((x > 0) - (x < T(0)));
        case Op::LogicalNot: return T(!x);
        case Op::StopGradient: return x;
        default: break;
        }
    }
    SJ_THROW(InternalError) << "reference: no unary kernel for " << op_name(op) << " on "
                            << dtype_name(n.input(0)->dtype());
}

template <class T> T binary_value(Op op, T a, T b) {
    if constexpr (kFloat<T>) {
        double x = a, y = b;
        switch (op) {
        case Op::Add: return T(x + y);
        case Op::Sub: return T(x - y);
        case Op::Mul: return T(x * y);
        case Op::Div: return T(x / y);
        case Op::Pow: return T(std::pow(x, y));
        case Op::Max: return (std::isnan(x) || std::isnan(y)) ? T(NAN) : T(x > y ? x : y);
        case Op::Min: return (std::isnan(x) || std::isnan(y)) ? T(NAN) : T(x < y ? x : y);
        case Op::Mod: {
            double r = std::fmod(x, y);
            if (r != 0 && ((r < 0) != (y < 0))) r += y;
            return T(r);
        }
        case Op::Atan2: return T(std::atan2(x, y));
        default: break;
        }
    } else {
        using U = Wide<T>;
        switch (op) {
        case Op::Add:
            return wrap<T>(U(a) + U(b));
        case Op::Sub:
            return wrap<T>(U(a) - U(b));
        case Op::Mul:
            return wrap<T>(U(a) * U(b));
        case Op::Div:
            return int_div(a, b);
        case Op::Max: return a > b ? a : b;
        case Op::Min: return a < b ? a : b;
        case Op::Mod:
            return int_mod(a, b);
        case Op::LogicalAnd: return T(a && b);
        case Op::LogicalOr: return T(a || b);
        case Op::LogicalXor: return T(bool(a) != bool(b));
        default: break;
        }
    }
    SJ_THROW(InternalError) << "reference: no binary kernel for " << op_name(op);
}

template <class T> bool compare_value(Op op, T a, T b) {
    switch (op) {
    case Op::Eq: return a == b;
    case Op::Ne: return a != b;
    case Op::Lt: return a < b;
    case Op::Le: return a <= b;
    case Op::Gt: return a > b;
    case Op::Ge: return a >= b;
    default: return false;
    }
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
        for (int64_t i = 0; i < x.size(); ++i) ptr<T>(out)[i] = unary_value<T>(op, p[i], c.node);
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
                po[i] = compare_value<T>(op, pa[off[0]], pb[off[1]]);
            });
        } else {
            T* po = ptr<T>(out);
            for_each_index(c.out.shape, st, [&](int64_t i, const auto&, const auto& off) {
                po[i] = binary_value<T>(op, pa[off[0]], pb[off[1]]);
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
