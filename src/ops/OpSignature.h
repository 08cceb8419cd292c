// Op signatures: which attribute struct each op's node carries and how many inputs it takes.
#pragma once

#include <symjax/ir/Attrs.h>
#include <symjax/ir/Node.h>
#include <symjax/ir/Op.h>

#include <cstddef>
#include <limits>

namespace sj::detail {

// Note [Op signatures]
// A node built through the op API always has the attribute struct its type rule reads and an
// input count the rule expects, so the rules do not re-check them (a rule reads c.attr<A>()
// and c.in[0]). Text (the IR parser, src/core/IrText.h) and the IR verifier (src/core/Verify.h)
// build and check nodes without that API, so they need both facts as data: the `attrs`,
// `min_inputs` and `max_inputs` columns of the op's row in Ops.def.

/// What a node of `op` looks like: `attrs` is the index of its Attrs alternative; it takes
/// between min_inputs and max_inputs inputs (equal for a fixed arity).
struct OpSignature {
    size_t attrs = 0;
    int min_inputs = 0;
    int max_inputs = 0;
};
inline constexpr int kUnboundedInputs = std::numeric_limits<int>::max();

OpSignature op_signature(Op op);
/// A default-constructed value of op's attribute struct.
Attrs default_attrs(Op op);

} // namespace sj::detail
