// Op signatures (Note [Op signatures]): each op's attribute struct and input count.
#include "OpSignature.h"

#include <symjax/Error.h>

#include <iterator>
#include <type_traits>

namespace sj::detail {

namespace {
template <class A, size_t I = 0> constexpr size_t index_of() {
    if constexpr (std::is_same_v<std::variant_alternative_t<I, Attrs>, A>)
        return I;
    else
        return index_of<A, I + 1>();
}

template <size_t I = 0> Attrs make_alternative(size_t index) {
    if constexpr (I < std::variant_size_v<Attrs>) {
        if (index == I)
            return Attrs(std::in_place_index<I>);
        return make_alternative<I + 1>(index);
    } else {
        return NoAttrs{};
    }
}

template <class A> constexpr OpSignature row(int lo, int hi) {
    return {index_of<A>(), lo, hi < 0 ? kUnboundedInputs : hi};
}
/// Each op's signature, from the `attrs`, `min_inputs` and `max_inputs` columns of its row.
constexpr OpSignature kSignatures[] = {
#define SJ_OP(Name, str, arity, traits, dtypes, shape_only, fusion, attrs, min_in, max_in)         \
    row<attrs>(min_in, max_in),
#include <symjax/ir/Node.h>
#include <symjax/ir/Ops.def>
#undef SJ_OP
};
static_assert(std::size(kSignatures) == size_t(kNumOps));
} // namespace

OpSignature op_signature(Op op) {
    SJ_ASSERT(static_cast<size_t>(op) < std::size(kSignatures))
        << "op_signature: unknown op " << static_cast<int>(op);
    return kSignatures[static_cast<size_t>(op)];
}

Attrs default_attrs(Op op) {
    return make_alternative(op_signature(op).attrs);
}

} // namespace sj::detail
