// Op signatures (Note [Op signatures]): each op's attribute struct and input count.
#include "OpSignature.h"

#include "OpDef.h"

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
    // the elementwise ops, from their rows: no attrs (cast: its dtype), the row's arity
#define SJ_SIG_Elementwise(Name) case Op::Name:
#define SJ_SIG_Leaf(Name)
#define SJ_SIG_Movement(Name)
#define SJ_SIG_Reduce(Name)
#define SJ_SIG_View(Name)
#define SJ_SIG_Dot(Name)
#define SJ_SIG_Window(Name)
#define SJ_SIG_Fallback(Name)
#define SJ_OP(Name, str, arity, traits, dtypes, shape_only, fusion) SJ_SIG_##fusion(Name)
#include <symjax/Ops.def>
#undef SJ_OP
#undef SJ_SIG_Elementwise
#undef SJ_SIG_Leaf
#undef SJ_SIG_Movement
#undef SJ_SIG_Reduce
#undef SJ_SIG_View
#undef SJ_SIG_Dot
#undef SJ_SIG_Window
#undef SJ_SIG_Fallback
        return op == Op::Cast ? fixed<CastAttrs>(1) : fixed<NoAttrs>(op_def(op).arity);
    case Op::Cholesky:
    case Op::BlockChannels:
    case Op::UnblockChannels: return fixed<NoAttrs>(1);
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
