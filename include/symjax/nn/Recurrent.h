// Recurrent layers: SimpleRNN, GRU and LSTM, with PyTorch's parameterisation and gate order,
// built on scan (include/symjax/ControlFlow.h). docs/nn.md, "Recurrent layers".
#pragma once

#include <symjax/nn/Module.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sj::nn {

/// SimpleRNN's nonlinearity.
enum class RnnActivation { Tanh, Relu };

struct RecurrentOptions {
    int64_t num_layers = 1;
    bool bidirectional = false;
    /// Inputs and outputs are [N, T, features] instead of [T, N, features].
    bool batch_first = false;
    bool bias = true;
    RnnActivation activation = RnnActivation::Tanh; // SimpleRNN only
    DType dtype = DType::F32;
};

/// What a recurrent layer starts from; every field may be left undefined.
struct RecurrentState {
    Tensor h0;      // [num_layers * directions, N, hidden] (zeros when undefined)
    Tensor c0;      // LSTM only, same shape
    Tensor lengths; // integer [N]: sequence n has lengths[n] valid steps, the rest is padding
};

struct RecurrentOutput {
    /// The last layer's output at every step, [T, N, directions * hidden] ([N, T, ...] with
    /// batch_first); zero at padded steps.
    Tensor output;
    /// Each layer's and direction's final hidden state (at its last valid step),
    /// [num_layers * directions, N, hidden], PyTorch's order (layer-major, forward first).
    Tensor h;
    Tensor c; // LSTM only: the final cell states, like h
};

/// The common part of SimpleRNN, GRU and LSTM: per layer and direction the variables
/// weight_ih_l{k}[_reverse] [gates * hidden, in], weight_hh_l{k}[_reverse] [gates * hidden,
/// hidden], bias_ih_l{k}[_reverse] and bias_hh_l{k}[_reverse] [gates * hidden] (PyTorch's names
/// and layout), initialised uniform in +-1/sqrt(hidden) as PyTorch does. The input projection of
/// every step is one matrix product before the loop; the loop (a scan) does the recurrent part.
class Recurrent : public Module {
public:
    /// The last layer's output sequence (run(x).output).
    Tensor forward(const Tensor& x, Mode mode) const override;
    RecurrentOutput run(const Tensor& x, const RecurrentState& state = {}) const;
    /// A parameter by its PyTorch name ("weight_hh_l0_reverse"); throws naming the known ones.
    const Variable& parameter(const std::string& name) const;
    int64_t input_size() const { return in_; }
    int64_t hidden_size() const { return hidden_; }
    const RecurrentOptions& options() const { return o_; }

protected:
    enum class Cell { Rnn, Gru, Lstm };
    Recurrent(Cell cell, const char* kind, int64_t input_size, int64_t hidden_size,
              RecurrentOptions o);

private:
    struct Direction {
        Variable w_ih, w_hh, b_ih, b_hh;
    };
    /// One layer in one direction over xs [T, N, in]: the outputs [T, N, H] and final h (and c).
    std::vector<Tensor> layer(const Direction& d, const Tensor& xs, const Tensor& h0,
                              const Tensor& c0, const Tensor& mask, bool reverse) const;
    Cell cell_;
    const char* kind_;
    int64_t in_, hidden_;
    RecurrentOptions o_;
    std::vector<Direction> dirs_; // layer-major, forward then reverse
    std::vector<std::pair<std::string, Variable>> named_;
};

/// h' = act(W_ih x + b_ih + W_hh h + b_hh).
class SimpleRNN : public Recurrent {
public:
    SimpleRNN(int64_t input_size, int64_t hidden_size, RecurrentOptions options = {});
};
/// PyTorch's GRU: r = σ(W_ir x + b_ir + W_hr h + b_hr), z = σ(... z ...),
/// n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)), h' = (1 - z) ⊙ n + z ⊙ h. Gates ordered r, z, n.
class GRU : public Recurrent {
public:
    GRU(int64_t input_size, int64_t hidden_size, RecurrentOptions options = {});
};
/// PyTorch's LSTM: gates i, f, g, o; c' = f ⊙ c + i ⊙ g, h' = o ⊙ tanh(c').
class LSTM : public Recurrent {
public:
    LSTM(int64_t input_size, int64_t hidden_size, RecurrentOptions options = {});
};

} // namespace sj::nn
