// Dense (fully connected) and Flatten layers.
#include <symjax/Ops.h>
#include <symjax/nn/Layers.h>

namespace sj::nn {

Dense::Dense(int64_t in, int64_t out, DenseOptions o) : in_(in), out_(out) {
    SJ_CHECK(in > 0 && out > 0, ShapeError)
        << "nn::Dense: sizes must be positive, got in = " << in << ", out = " << out;
    open_scope("dense");
    w_ = add_variable("W", o.init({in, out}, o.dtype));
    if (o.bias)
        b_ = add_variable("b", Array(o.dtype, {out}));
}

Tensor Dense::forward(const Tensor &x, Mode) const {
    SJ_CHECK(x.rank() >= 1 && (x.dim(-1) == in_ || x.dim(-1) == -1), ShapeError)
        << "nn::Dense '" << scope() << "': input " << x.name() << " " << x.type_str()
        << " must end with a dim of " << in_ << " (W is [" << in_ << ", " << out_ << "])";
    Tensor y = matmul(x, w_);
    return b_.defined() ? y + b_ : y;
}

Tensor Flatten::forward(const Tensor &x, Mode) const {
    SJ_CHECK(x.rank() >= 1, ShapeError)
        << "nn::Flatten: input " << x.name() << " " << x.type_str() << " needs a batch axis";
    return x.rank() == 2 ? x : flatten(x, 1);
}

} // namespace sj::nn
