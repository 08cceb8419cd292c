// Activation functions as composites of primitive ops.
#include <symjax/nn/Activations.h>

#include <cmath>

namespace sj::nn {

// relu and leaky relu as selects on x <= 0: NaN passes through, the gradient at 0 is PyTorch's
// (0 and the slope), and their backward reads the output, not x (Note [Relu masks] in
// src/ops/Elementwise.cpp)
Tensor relu(const Tensor &x) {
    return where(x <= 0.0, 0.0, x);
}

Tensor relu6(const Tensor &x) {
    return minimum(maximum(x, 0.0), 6.0);
}

Tensor leaky_relu(const Tensor &x, double slope) {
    return slope > 0 ? where(x <= 0.0, x * slope, x) : where(x >= 0.0, x, x * slope);
}

Tensor elu(const Tensor &x, double alpha) {
    // expm1 of min(x, 0): the branch where() drops stays finite, so its zero gradient is not
    // multiplied by an infinite derivative (which would give NaN)
    return where(x > 0.0, x, alpha * expm1(minimum(x, 0.0)));
}

Tensor selu(const Tensor &x) {
    // Klambauer et al. (2017), the constants to 16 digits
    constexpr double kAlpha = 1.6732632423543772, kScale = 1.0507009873554805;
    return kScale * elu(x, kAlpha);
}

Tensor gelu(const Tensor &x, bool approximate) {
    if (approximate) {
        const double c = std::sqrt(2.0 / M_PI);
        return 0.5 * x * (1.0 + sj::tanh(c * (x + 0.044715 * x * x * x)));
    }
    return 0.5 * x * (1.0 + erf(x * M_SQRT1_2));
}

Tensor silu(const Tensor &x) {
    return x * sj::sigmoid(x);
}

Tensor swish(const Tensor &x) {
    return silu(x);
}

Tensor hard_tanh(const Tensor &x, double lo, double hi) {
    return clip(x, lo, hi);
}

Tensor hard_sigmoid(const Tensor &x) {
    return relu6(x + 3.0) / 6.0;
}

} // namespace sj::nn
