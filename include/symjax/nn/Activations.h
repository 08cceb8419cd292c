// Activation functions, as functions of a tensor and as parameter-free modules.
#pragma once

#include <symjax/Ops.h>
#include <symjax/nn/Module.h>

#include <functional>

namespace sj::nn {

// The activations sj already defines are the same functions here.
using sj::log_softmax;
using sj::sigmoid;
using sj::softmax;
using sj::softplus;
using sj::tanh;

/// max(x, 0).
Tensor relu(const Tensor &x);
/// min(max(x, 0), 6).
Tensor relu6(const Tensor &x);
/// x for x >= 0, slope * x below.
Tensor leaky_relu(const Tensor &x, double slope = 0.01);
/// x for x > 0, alpha (exp(x) - 1) below (Clevert et al. 2016).
Tensor elu(const Tensor &x, double alpha = 1.0);
/// scale * elu(x, alpha) with the self-normalising constants of Klambauer et al. (2017).
Tensor selu(const Tensor &x);
/// x Phi(x) = x (1 + erf(x / sqrt 2)) / 2; with `approximate`, Hendrycks and Gimpel's tanh form
/// x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2.
Tensor gelu(const Tensor &x, bool approximate = false);
/// x sigmoid(x) (also called swish).
Tensor silu(const Tensor &x);
/// The same as silu.
Tensor swish(const Tensor &x);
/// clip(x, lo, hi).
Tensor hard_tanh(const Tensor &x, double lo = -1.0, double hi = 1.0);
/// relu6(x + 3) / 6 (PyTorch's definition).
Tensor hard_sigmoid(const Tensor &x);

/// A module from any function of a tensor: nn::Lambda([](const Tensor& x) { return x * 2.0; }).
class Lambda : public Module {
public:
    explicit Lambda(std::function<Tensor(const Tensor &)> fn) : fn_(std::move(fn)) {}
    Tensor forward(const Tensor &x, Mode) const override { return fn_(x); }

private:
    std::function<Tensor(const Tensor &)> fn_;
};

class ReLU : public Module {
public:
    Tensor forward(const Tensor &x, Mode) const override { return relu(x); }
};
class ReLU6 : public Module {
public:
    Tensor forward(const Tensor &x, Mode) const override { return relu6(x); }
};
class LeakyReLU : public Module {
public:
    explicit LeakyReLU(double slope = 0.01) : slope_(slope) {}
    Tensor forward(const Tensor &x, Mode) const override { return leaky_relu(x, slope_); }

private:
    double slope_;
};
class ELU : public Module {
public:
    explicit ELU(double alpha = 1.0) : alpha_(alpha) {}
    Tensor forward(const Tensor &x, Mode) const override { return elu(x, alpha_); }

private:
    double alpha_;
};
class SELU : public Module {
public:
    Tensor forward(const Tensor &x, Mode) const override { return selu(x); }
};
class GELU : public Module {
public:
    explicit GELU(bool approximate = false) : approximate_(approximate) {}
    Tensor forward(const Tensor &x, Mode) const override { return gelu(x, approximate_); }

private:
    bool approximate_;
};
class SiLU : public Module {
public:
    Tensor forward(const Tensor &x, Mode) const override { return silu(x); }
};
using Swish = SiLU;
class Softplus : public Module {
public:
    Tensor forward(const Tensor &x, Mode) const override { return softplus(x); }
};
class Sigmoid : public Module {
public:
    Tensor forward(const Tensor &x, Mode) const override { return sigmoid(x); }
};
class Tanh : public Module {
public:
    Tensor forward(const Tensor &x, Mode) const override { return tanh(x); }
};
class Softmax : public Module {
public:
    explicit Softmax(int64_t axis = -1) : axis_(axis) {}
    Tensor forward(const Tensor &x, Mode) const override { return softmax(x, axis_); }

private:
    int64_t axis_;
};
class LogSoftmax : public Module {
public:
    explicit LogSoftmax(int64_t axis = -1) : axis_(axis) {}
    Tensor forward(const Tensor &x, Mode) const override { return log_softmax(x, axis_); }

private:
    int64_t axis_;
};
class HardTanh : public Module {
public:
    explicit HardTanh(double lo = -1.0, double hi = 1.0) : lo_(lo), hi_(hi) {}
    Tensor forward(const Tensor &x, Mode) const override { return hard_tanh(x, lo_, hi_); }

private:
    double lo_, hi_;
};
class HardSigmoid : public Module {
public:
    Tensor forward(const Tensor &x, Mode) const override { return hard_sigmoid(x); }
};

} // namespace sj::nn
