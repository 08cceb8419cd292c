// SimpleRNN, GRU and LSTM: PyTorch's parameterisation over scan.
#include <symjax/ControlFlow.h>
#include <symjax/Ops.h>
#include <symjax/nn/Activations.h>
#include <symjax/nn/Init.h>
#include <symjax/nn/Recurrent.h>

#include <cmath>

namespace sj::nn {

namespace {
using Ts = std::vector<Tensor>;

/// Columns [k h, (k + 1) h) of the last dim of a [N, G h] tensor: gate k.
Tensor gate(const Tensor& g, int64_t k, int64_t h) {
    return g[{sl(), sl(k * h, (k + 1) * h)}];
}
} // namespace

Recurrent::Recurrent(Cell cell, const char* kind, int64_t in, int64_t hidden, RecurrentOptions o)
    : cell_(cell), kind_(kind), in_(in), hidden_(hidden), o_(o) {
    SJ_CHECK(in > 0 && hidden > 0 && o.num_layers > 0, ShapeError)
        << "nn::" << kind << ": sizes must be positive, got input_size = " << in
        << ", hidden_size = " << hidden << ", num_layers = " << o.num_layers;
    SJ_CHECK(is_float(o.dtype), TypeError) << "nn::" << kind << ": dtype must be f32 or f64";
    open_scope(kind == std::string("SimpleRNN") ? "rnn"
               : kind == std::string("GRU")     ? "gru"
                                                : "lstm");
    const int64_t gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
    const double bound = 1.0 / std::sqrt(double(hidden));
    const Initializer init = init::uniform(-bound, bound);
    const int dirs = o.bidirectional ? 2 : 1;
    for (int64_t l = 0; l < o.num_layers; ++l)
        for (int d = 0; d < dirs; ++d) {
            const std::string sfx = "_l" + std::to_string(l) + (d ? "_reverse" : "");
            const int64_t layer_in = l == 0 ? in : dirs * hidden;
            Direction dir;
            dir.w_ih = add_variable("weight_ih" + sfx, init({gates * hidden, layer_in}, o.dtype));
            dir.w_hh = add_variable("weight_hh" + sfx, init({gates * hidden, hidden}, o.dtype));
            named_.emplace_back("weight_ih" + sfx, dir.w_ih);
            named_.emplace_back("weight_hh" + sfx, dir.w_hh);
            if (o.bias) {
                dir.b_ih = add_variable("bias_ih" + sfx, init({gates * hidden}, o.dtype));
                dir.b_hh = add_variable("bias_hh" + sfx, init({gates * hidden}, o.dtype));
                named_.emplace_back("bias_ih" + sfx, dir.b_ih);
                named_.emplace_back("bias_hh" + sfx, dir.b_hh);
            }
            dirs_.push_back(dir);
        }
}

const Variable& Recurrent::parameter(const std::string& name) const {
    std::string known;
    for (const auto& [n, v] : named_) {
        if (n == name)
            return v;
        known += (known.empty() ? "" : ", ") + n;
    }
    SJ_THROW(Error) << "nn::" << kind_ << " '" << scope() << "' has no parameter '" << name
                    << "' (it has " << known << ")";
}

Tensor Recurrent::forward(const Tensor& x, Mode) const {
    return run(x).output;
}

std::vector<Tensor> Recurrent::layer(const Direction& d, const Tensor& xs, const Tensor& h0,
                                     const Tensor& c0, const Tensor& mask, bool reverse) const {
    const int64_t h = hidden_;
    // the input projection of every step at once: [T, N, G h]
    Tensor xw = matmul(xs, transpose(d.w_ih));
    if (d.b_ih.defined())
        xw = xw + d.b_ih;
    const Tensor whh = transpose(d.w_hh);
    const Tensor bhh = d.b_hh;
    const Cell cell = cell_;
    const RnnActivation act = o_.activation;
    const bool masked = mask.defined();
    ScanFn step = [&](const Ts& carry, const Ts& a) {
        const Tensor& hp = carry[0];
        Tensor hw = matmul(hp, whh);
        if (bhh.defined())
            hw = hw + bhh;
        const Tensor& x = a[0];
        Tensor hn, cn;
        switch (cell) {
        case Cell::Rnn:
            hn = act == RnnActivation::Tanh ? tanh(x + hw) : relu(x + hw);
            break;
        case Cell::Gru: {
            Tensor r = sigmoid(gate(x, 0, h) + gate(hw, 0, h));
            Tensor z = sigmoid(gate(x, 1, h) + gate(hw, 1, h));
            Tensor n = tanh(gate(x, 2, h) + r * gate(hw, 2, h));
            hn = (1.0 - z) * n + z * hp;
            break;
        }
        case Cell::Lstm: {
            Tensor g = x + hw;
            Tensor i = sigmoid(gate(g, 0, h)), f = sigmoid(gate(g, 1, h));
            Tensor c = tanh(gate(g, 2, h)), o = sigmoid(gate(g, 3, h));
            cn = f * carry[1] + i * c;
            hn = o * tanh(cn);
            break;
        }
        }
        Tensor out = hn;
        if (masked) { // padded steps leave the state as it was and output zeros
            const Tensor& m = a[1];
            out = hn * m;
            hn = out + hp * (1.0 - m);
            if (cn.defined())
                cn = cn * m + carry[1] * (1.0 - m);
        }
        Ts next{hn};
        if (cn.defined())
            next.push_back(cn);
        return std::pair{next, Ts{out}};
    };
    Ts init{h0};
    if (cell_ == Cell::Lstm)
        init.push_back(c0);
    Ts seqs{xw};
    if (masked)
        seqs.push_back(mask);
    ScanResult r =
        scan(step, init, seqs, {}, {.reverse = reverse, .name = std::string("nn::") + kind_});
    Ts out{r.outputs[0], r.carry[0]};
    if (cell_ == Cell::Lstm)
        out.push_back(r.carry[1]);
    return out;
}

RecurrentOutput Recurrent::run(const Tensor& x_in, const RecurrentState& s) const {
    SJ_CHECK(x_in.defined() && x_in.rank() == 3, ShapeError)
        << "nn::" << kind_ << " '" << scope() << "': input "
        << (x_in.defined() ? x_in.name() : "undefined") << " "
        << (x_in.defined() ? x_in.type_str() : "") << " must be [T, N, " << in_ << "]"
        << (o_.batch_first ? " ([N, T, features] with batch_first)" : "");
    SJ_CHECK(x_in.dim(-1) == in_ || x_in.dim(-1) == -1, ShapeError)
        << "nn::" << kind_ << " '" << scope() << "': input " << x_in.name() << " "
        << x_in.type_str() << " has " << x_in.dim(-1) << " features, the layer takes " << in_;
    const int dirs = o_.bidirectional ? 2 : 1;
    const int64_t states = o_.num_layers * dirs;
    Tensor x = cast(o_.batch_first ? transpose(x_in, {1, 0, 2}) : x_in, o_.dtype);
    auto check_state = [&](const Tensor& t, const char* what) {
        SJ_CHECK(t.rank() == 3 && (t.dim(0) == states || t.dim(0) == -1) &&
                     (t.dim(2) == hidden_ || t.dim(2) == -1),
                 ShapeError)
            << "nn::" << kind_ << " '" << scope() << "': " << what << " " << t.name() << " "
            << t.type_str() << " must be [" << states << ", N, " << hidden_ << "]";
    };
    if (s.h0.defined())
        check_state(s.h0, "h0");
    if (s.c0.defined()) {
        SJ_CHECK(cell_ == Cell::Lstm, Error) << "nn::" << kind_ << ": c0 is only for LSTM";
        check_state(s.c0, "c0");
    }
    // zeros [N, hidden] with N known at call time: a slice of the first step's projection shape
    Tensor zero_state = zeros_like(matmul(x[0], zeros({in_, hidden_}, o_.dtype)));
    Tensor mask;
    if (s.lengths.defined()) {
        SJ_CHECK(s.lengths.rank() == 1 && is_int(s.lengths.dtype()), TypeError)
            << "nn::" << kind_ << ": lengths " << s.lengths.name() << " " << s.lengths.type_str()
            << " must be an integer vector [N]";
        Tensor steps = cumsum(ones_like(x[{sl(), 0, 0}]), 0) - 1.0; // 0, 1, ..., T - 1
        Tensor valid = expand_dims(steps, 1) < expand_dims(cast(s.lengths, o_.dtype), 0);
        mask = expand_dims(cast(valid, o_.dtype), 2); // [T, N, 1]
    }
    Ts hs, cs;
    Tensor input = x;
    for (int64_t l = 0; l < o_.num_layers; ++l) {
        Ts outs;
        for (int d = 0; d < dirs; ++d) {
            const int64_t k = l * dirs + d;
            Tensor h0 = s.h0.defined() ? cast(s.h0[k], o_.dtype) : zero_state;
            Tensor c0 = cell_ != Cell::Lstm ? Tensor()
                        : s.c0.defined()    ? cast(s.c0[k], o_.dtype)
                                            : zero_state;
            Ts r = layer(dirs_[size_t(k)], input, h0, c0, mask, d == 1);
            outs.push_back(r[0]);
            hs.push_back(r[1]);
            if (cell_ == Cell::Lstm)
                cs.push_back(r[2]);
        }
        input = dirs == 1 ? outs[0] : concat(outs, 2);
    }
    RecurrentOutput out;
    out.output = o_.batch_first ? transpose(input, {1, 0, 2}) : input;
    out.h = stack(hs, 0);
    if (cell_ == Cell::Lstm)
        out.c = stack(cs, 0);
    return out;
}

SimpleRNN::SimpleRNN(int64_t in, int64_t hidden, RecurrentOptions o)
    : Recurrent(Cell::Rnn, "SimpleRNN", in, hidden, o) {}
GRU::GRU(int64_t in, int64_t hidden, RecurrentOptions o)
    : Recurrent(Cell::Gru, "GRU", in, hidden, o) {}
LSTM::LSTM(int64_t in, int64_t hidden, RecurrentOptions o)
    : Recurrent(Cell::Lstm, "LSTM", in, hidden, o) {}

} // namespace sj::nn
