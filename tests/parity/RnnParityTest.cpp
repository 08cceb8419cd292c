// Recurrent layers against torch.nn.RNN/GRU/LSTM with the same weights (gen_rnn_parity.py writes
// rnn/rnn_parity.json): outputs, final states, the gradients of the inputs, initial states and
// every parameter, and 5 SGD steps. Multi-layer, bidirectional, batch_first and variable-length
// (packed) cases, on every backend. Bounds: 1e-5 relative in f64 (the issue's; in fact rounding
// leaves ~1e-14) and 1e-4 in f32, relative to the largest magnitude of the compared tensor (an
// element near zero carries the rounding of the larger terms it sums).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <algorithm>
#include <cmath>
#include <fstream>

using namespace sj;
using nlohmann::json;

namespace {

const json& data() {
    static const json j = [] {
        const std::string path = std::string(SJ_TEST_DATA_DIR) + "/parity/rnn/rnn_parity.json";
        std::ifstream f(path);
        if (!f)
            throw std::runtime_error("cannot open " + path);
        return json::parse(f);
    }();
    return j;
}

Array rnn_array(const json& j, const Shape& shape, DType dtype) {
    return Array(j.get<std::vector<double>>(), shape).astype(dtype);
}

void expect_close(const Array& got, const json& want, double rtol, const std::string& what) {
    std::vector<double> g = got.to_vector<double>(), w = want.get<std::vector<double>>();
    ASSERT_EQ(g.size(), w.size()) << what;
    double scale = 0;
    for (double x : w)
        scale = std::max(scale, std::abs(x));
    for (size_t i = 0; i < g.size(); ++i)
        ASSERT_LE(std::abs(g[i] - w[i]), rtol * std::max(scale, 1e-30))
            << what << " at " << i << ": " << g[i] << " vs " << w[i];
}

struct Built {
    std::shared_ptr<nn::Recurrent> layer;
    Tensor x, h0, c0, lengths;
    std::vector<Tensor> inputs;
    Tensor loss;
    nn::RecurrentOutput out;
};

Built build(const json& c, DType dt) {
    const json& top = data();
    const int64_t T = top["T"], N = top["N"], in = top["in"], H = top["hidden"];
    nn::RecurrentOptions o{.num_layers = c["layers"],
                           .bidirectional = c["bidirectional"],
                           .batch_first = c["batch_first"],
                           .dtype = dt};
    o.activation = c["nonlinearity"] == "relu" ? nn::RnnActivation::Relu : nn::RnnActivation::Tanh;
    Built b{};
    const std::string kind = c["kind"];
    if (kind == "LSTM")
        b.layer = std::make_shared<nn::LSTM>(in, H, o);
    else if (kind == "GRU")
        b.layer = std::make_shared<nn::GRU>(in, H, o);
    else
        b.layer = std::make_shared<nn::SimpleRNN>(in, H, o);
    for (auto& [name, v] : c["params"].items())
        b.layer->parameter(name).assign(rnn_array(v, c["shapes"][name].get<Shape>(), dt));
    const int64_t d = o.bidirectional ? 2 : 1, L = o.num_layers;
    const Shape xs = o.batch_first ? Shape{N, T, in} : Shape{T, N, in};
    b.x = Placeholder({-1, -1, in}, dt, "x"); // batch and time bound per call
    b.inputs = {b.x};
    nn::RecurrentState s;
    if (!c["h0"].is_null()) {
        b.h0 = Placeholder({L * d, -1, H}, dt, "h0");
        s.h0 = b.h0;
        b.inputs.push_back(b.h0);
    }
    if (!c["c0"].is_null()) {
        b.c0 = Placeholder({L * d, -1, H}, dt, "c0");
        s.c0 = b.c0;
        b.inputs.push_back(b.c0);
    }
    if (!c["lengths"].is_null()) {
        b.lengths = Placeholder({-1}, DType::I64, "lengths");
        s.lengths = b.lengths;
        b.inputs.push_back(b.lengths);
    }
    b.out = b.layer->run(b.x, s);
    const Shape os = o.batch_first ? Shape{N, T, d * H} : Shape{T, N, d * H};
    b.loss = sum(b.out.output * constant(rnn_array(c["R"], os, dt))) +
             sum(b.out.h * constant(rnn_array(c["S"], {L * d, N, H}, dt)));
    if (b.out.c.defined())
        b.loss = b.loss + sum(b.out.c * constant(rnn_array(c["U"], {L * d, N, H}, dt)));
    (void)xs;
    return b;
}

std::vector<Array> args_of(const json& c, DType dt) {
    const json& top = data();
    const int64_t T = top["T"], N = top["N"], in = top["in"], H = top["hidden"];
    const int64_t d = c["bidirectional"] ? 2 : 1, L = c["layers"];
    std::vector<Array> a{
        rnn_array(c["x"], c["batch_first"] ? Shape{N, T, in} : Shape{T, N, in}, dt)};
    if (!c["h0"].is_null())
        a.push_back(rnn_array(c["h0"], {L * d, N, H}, dt));
    if (!c["c0"].is_null())
        a.push_back(rnn_array(c["c0"], {L * d, N, H}, dt));
    if (!c["lengths"].is_null())
        a.push_back(Array(c["lengths"].get<std::vector<int64_t>>(), Shape{N}));
    return a;
}

class RnnParity : public ::testing::TestWithParam<std::tuple<int, const char*, DType>> {};

TEST_P(RnnParity, OutputsStatesAndGradientsMatchPyTorch) {
    const auto [ci, backend, dt] = GetParam();
    const json& c = data()["cases"][size_t(ci)];
    SCOPED_TRACE(c["name"].get<std::string>());
    const double rtol = dt == DType::F64 ? 1e-5 : 1e-4;
    Built b = build(c, dt);
    std::vector<Tensor> wrt = b.inputs;
    if (b.lengths.defined())
        wrt.pop_back(); // no gradient for the lengths
    std::vector<std::string> names;
    for (auto& [name, v] : c["params"].items()) {
        names.push_back(name);
        wrt.push_back(b.layer->parameter(name));
    }
    std::vector<Tensor> g = gradients(b.loss, wrt);
    std::vector<Tensor> outs{b.loss, b.out.output, b.out.h};
    if (b.out.c.defined())
        outs.push_back(b.out.c);
    const size_t ng = outs.size();
    outs.insert(outs.end(), g.begin(), g.end());
    FunctionOptions fo;
    fo.backend = backend;
    Function f = function(b.inputs, outs, {}, fo);
    std::vector<Array> a = args_of(c, dt);
    std::vector<Array> r = f.call({a.begin(), a.end()});
    EXPECT_NEAR(r[0].at(0), c["loss"].get<double>(),
                rtol * std::max(1.0, std::abs(c["loss"].get<double>())));
    expect_close(r[1], c["output"], rtol, "output");
    expect_close(r[2], c["h_n"], rtol, "h_n");
    if (b.out.c.defined())
        expect_close(r[3], c["c_n"], rtol, "c_n");
    size_t k = ng;
    expect_close(r[k++], c["grad_x"], rtol, "d loss / d x");
    if (b.h0.defined())
        expect_close(r[k++], c["grad_h0"], rtol, "d loss / d h0");
    if (b.c0.defined())
        expect_close(r[k++], c["grad_c0"], rtol, "d loss / d c0");
    for (const auto& n : names)
        expect_close(r[k++], c["grads"][n], rtol, "d loss / d " + n);
}

TEST_P(RnnParity, FiveSgdStepsMatchPyTorch) {
    const auto [ci, backend, dt] = GetParam();
    const json& c = data()["cases"][size_t(ci)];
    SCOPED_TRACE(c["name"].get<std::string>());
    const double rtol = dt == DType::F64 ? 1e-5 : 1e-4;
    Built b = build(c, dt);
    Updates up;
    std::vector<Variable> params = b.layer->trainable_variables();
    std::vector<Tensor> ps(params.begin(), params.end());
    std::vector<Tensor> g = gradients(b.loss, ps);
    for (size_t i = 0; i < params.size(); ++i)
        up.add(params[i], params[i] - 0.01 * g[i]);
    FunctionOptions fo;
    fo.backend = backend;
    Function step = function(b.inputs, {b.loss}, up, fo);
    std::vector<Array> a = args_of(c, dt);
    for (int s = 0; s < 5; ++s) {
        double l = step.call({a.begin(), a.end()})[0].at(0);
        double want = c["sgd_losses"][size_t(s)];
        EXPECT_NEAR(l, want, rtol * std::max(1.0, std::abs(want))) << "step " << s;
    }
    for (auto& [name, v] : c["sgd_params"].items())
        expect_close(b.layer->parameter(name).value(), v, rtol, name + " after 5 steps");
}

std::string param_name(const ::testing::TestParamInfo<RnnParity::ParamType>& i) {
    const auto& [ci, backend, dt] = i.param;
    return data()["cases"][size_t(ci)]["name"].get<std::string>() + "_" + backend + "_" +
           dtype_name(dt);
}

INSTANTIATE_TEST_SUITE_P(Cases, RnnParity,
                         ::testing::Combine(::testing::Range(0, 5),
                                            ::testing::Values("reference", "cpu"),
                                            ::testing::Values(DType::F64, DType::F32)),
                         param_name);

} // namespace
