// Random ops (philox_bits): the type rule. Distributions are composites in src/api/Random.cpp.
#include "OpDef.h"

#include <symjax/Ops.h>
#include <symjax/ir/Node.h>

namespace sj::detail {
namespace {

// philox_bits(counter[, like]): u32 bits of shape attrs.shape; -1 dims take like's dims.
TensorType infer_philox_bits(const InferCtx& c) {
    const auto& a = c.attr<PhiloxAttrs>();
    SJ_CHECK(c.in.size() == 1 || c.in.size() == 2, ShapeError)
        << c.where() << ": philox_bits takes (counter) or (counter, like), got " << c.in.size()
        << " inputs";
    SJ_CHECK(c.in[0].dtype == DType::I64 && c.in[0].shape.empty(), TypeError)
        << c.where() << ": input 0 must be the i64 scalar call counter, got "
        << type_str(c.in[0]);
    Shape out = a.shape;
    for (int64_t d : out)
        SJ_CHECK(d >= -1, ShapeError)
            << c.where() << ": shape " << shape_str(a.shape) << " has a negative dim";
    if (c.in.size() == 2) {
        const Shape& like = c.in[1].shape;
        SJ_CHECK(like.size() == out.size(), ShapeError)
            << c.where() << ": shape source " << c.name(1) << " has shape " << shape_str(like)
            << " (rank " << like.size() << "), the output " << shape_str(out) << " has rank "
            << out.size();
        for (size_t i = 0; i < out.size(); ++i) {
            if (out[i] == -1) {
                out[i] = like[i];
                continue;
            }
            SJ_CHECK(like[i] == -1 || like[i] == out[i], ShapeError)
                << c.where() << ": dim " << i << " of shape source " << c.name(1) << " "
                << shape_str(like) << " is " << like[i] << ", the output "
                << shape_str(a.shape) << " has " << out[i];
        }
    }
    if (c.at_runtime) {
        for (int64_t d : out)
            SJ_CHECK(d >= 0, InputError) << c.where() << ": output shape " << shape_str(a.shape)
                                         << " has a -1 dim that no input binds";
    }
    return {DType::U32, out};
}

} // namespace

namespace {
// Batching (Note [Batching rules] in src/api/Vmap.cpp): a draw traced inside vmap's function
// draws for the whole batch at once, the batch its first dim, so each example gets its own
// numbers (the counter-based bits of element (b, i) differ from those of (b', i)).
Tensor batch_philox_bits(const BatchArgs& b) {
    PhiloxAttrs a = b.n.attr<PhiloxAttrs>();
    Shape s{b.size};
    s.insert(s.end(), a.shape.begin(), a.shape.end());
    a.shape = s;
    if (b.n.num_inputs() == 2) {
        a.shape[0] = -1;
        return make(Op::PhiloxBits, {b.in[0], batched_input(b, 1)}, a);
    }
    if (b.size >= 0)
        return make(Op::PhiloxBits, {b.in[0]}, a);
    // the batch is bound at call time: the draw's shape comes from a like of the batch's size
    Tensor like = broadcast_batch(b, broadcast_to(constant(Array::scalar(0.0f)), b.n.shape()));
    a.shape[0] = -1;
    return make(Op::PhiloxBits, {b.in[0], like}, a);
}

} // namespace

void register_random_ops(OpDef* t) {
    t[int(Op::PhiloxBits)].infer = infer_philox_bits;
    t[int(Op::PhiloxBits)].batch = batch_philox_bits;
    // no gradient: random bits do not depend differentiably on anything
}

} // namespace sj::detail
