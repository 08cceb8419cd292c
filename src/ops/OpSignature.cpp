// Op signatures (Note [Op signatures]): each op's attribute struct and input count.
#include "OpSignature.h"

#include <symjax/Error.h>

#include <type_traits>

namespace sj::detail {

namespace {
template <class A, size_t I = 0> constexpr size_t index_of() {
    if constexpr (std::is_same_v<std::variant_alternative_t<I, Attrs>, A>)
        return I;
    else
        return index_of<A, I + 1>();
}
template <class A> constexpr OpSignature fixed(int n) {
    return {index_of<A>(), n, n};
}
template <class A> constexpr OpSignature between(int lo, int hi) {
    return {index_of<A>(), lo, hi};
}

template <size_t I = 0> Attrs make_alternative(size_t index) {
    if constexpr (I < std::variant_size_v<Attrs>) {
        if (index == I) return Attrs(std::in_place_index<I>);
        return make_alternative<I + 1>(index);
    } else {
        return NoAttrs{};
    }
}
} // namespace

OpSignature op_signature(Op op) {
    switch (op) {
    case Op::Placeholder: return fixed<PlaceholderAttrs>(0);
    case Op::Variable: return fixed<VariableAttrs>(0);
    case Op::Constant: return fixed<ConstantAttrs>(0);
    case Op::RngCounter: return fixed<NoAttrs>(0);
    case Op::Neg:
    case Op::Abs:
    case Op::Sign:
    case Op::Exp:
    case Op::Expm1:
    case Op::Log:
    case Op::Log1p:
    case Op::Sqrt:
    case Op::Rsqrt:
    case Op::Reciprocal:
    case Op::Sin:
    case Op::Cos:
    case Op::Tan:
    case Op::Tanh:
    case Op::Erf:
    case Op::Floor:
    case Op::Ceil:
    case Op::Round:
    case Op::LogicalNot:
    case Op::IsNan:
    case Op::IsInf:
    case Op::StopGradient:
    case Op::Cholesky:
    case Op::BlockChannels:
    case Op::UnblockChannels: return fixed<NoAttrs>(1);
    case Op::Cast: return fixed<CastAttrs>(1);
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::Pow:
    case Op::Max:
    case Op::Min:
    case Op::Mod:
    case Op::Atan2:
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::LogicalAnd:
    case Op::LogicalOr:
    case Op::LogicalXor: return fixed<NoAttrs>(2);
    case Op::Where:
    case Op::DynamicUpdateSlice: return fixed<NoAttrs>(3);
    case Op::ReduceSum:
    case Op::ReduceProd:
    case Op::ReduceMax:
    case Op::ReduceMin:
    case Op::ReduceAny:
    case Op::ReduceAll:
    case Op::ArgMax:
    case Op::ArgMin: return fixed<ReduceAttrs>(1);
    case Op::Reshape: return between<ShapeAttrs>(1, 2);
    case Op::Permute:
    case Op::Flip: return fixed<AxesAttrs>(1);
    case Op::Broadcast: return between<BroadcastAttrs>(1, 2);
    case Op::Slice: return fixed<SliceAttrs>(1);
    case Op::Pad: return fixed<PadAttrs>(1);
    case Op::Concat: return between<AxisAttrs>(1, kUnboundedInputs);
    case Op::Gather: return fixed<AxisAttrs>(2);
    case Op::ScatterAdd: return fixed<AxisAttrs>(3);
    case Op::Cumsum: return fixed<AxisAttrs>(1);
    case Op::DynamicSlice: return fixed<DynamicSliceAttrs>(2);
    case Op::OneHot: return fixed<OneHotAttrs>(1);
    case Op::CheckIndex: return fixed<CheckIndexAttrs>(1);
    case Op::DotGeneral: return fixed<DotAttrs>(2);
    case Op::Conv: return fixed<ConvAttrs>(2);
    case Op::ConvBackwardData:
    case Op::ConvBackwardFilter: return between<ConvAttrs>(2, 3);
    case Op::Pool: return fixed<PoolAttrs>(1);
    case Op::MaxPoolBackward: return fixed<PoolAttrs>(2);
    case Op::AvgPoolBackward: return between<PoolAttrs>(1, 2);
    case Op::TriangularSolve: return fixed<TriangularSolveAttrs>(2);
    case Op::PhiloxBits: return between<PhiloxAttrs>(1, 2);
    }
    SJ_ASSERT(false) << "op_signature: unknown op " << static_cast<int>(op);
    return {};
}

Attrs default_attrs(Op op) {
    return make_alternative(op_signature(op).attrs);
}

} // namespace sj::detail
