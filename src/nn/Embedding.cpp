// Embedding: a table of vectors looked up by integer indices.
#include <symjax/Ops.h>
#include <symjax/nn/Layers.h>

namespace sj::nn {

Embedding::Embedding(int64_t num, int64_t dim, EmbeddingOptions o) {
    SJ_CHECK(num > 0 && dim > 0, ShapeError)
        << "nn::Embedding: sizes must be positive, got num = " << num << ", dim = " << dim;
    open_scope("embedding");
    table_ = add_variable("table", o.init({num, dim}, o.dtype));
}

Tensor Embedding::forward(const Tensor &indices, Mode) const {
    SJ_CHECK(is_int(indices.dtype()), TypeError)
        << "nn::Embedding '" << scope() << "': indices " << indices.name() << " "
        << indices.type_str() << " must have an integer dtype";
    return gather(table_, indices, 0);
}

} // namespace sj::nn
