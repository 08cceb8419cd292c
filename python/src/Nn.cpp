// symjax._core.nn: layers (modules), initializers, activations, losses, metrics, optimizers,
// schedules and moving averages of include/symjax/nn/.
#include "Bind.h"

#include <symjax/nn.h>

namespace sjpy {

VarUpdateList to_list(const sj::Updates& u) {
    VarUpdateList out;
    for (const auto& [v, t] : u.items())
        out.emplace_back(v, t);
    return out;
}

namespace {

using UpdateList = std::vector<std::pair<sj::Tensor, sj::Tensor>>;
sj::Updates to_updates(const UpdateList& l) {
    sj::Updates u;
    for (const auto& [v, t] : l)
        u.add(sj::Variable(v), t);
    return u;
}

sj::nn::Mode to_mode(py::handle mode, py::handle deterministic) {
    if (!deterministic.is_none())
        return deterministic.cast<bool>() ? sj::nn::Mode::Eval : sj::nn::Mode::Train;
    if (mode.is_none())
        return sj::nn::Mode::Train;
    std::string s = mode.cast<std::string>();
    if (s == "train")
        return sj::nn::Mode::Train;
    if (s == "eval")
        return sj::nn::Mode::Eval;
    throw sj::InputError("symjax.nn: mode must be 'train' or 'eval', got '" + s + "'");
}

sj::nn::Initializer to_init(py::handle h, const sj::nn::Initializer& fallback) {
    if (h.is_none())
        return fallback;
    return h.cast<sj::nn::Initializer>();
}

sj::nn::optim::LearningRate to_lr(py::object h) {
    if (py::isinstance<sj::Tensor>(h))
        return sj::nn::optim::LearningRate(h.cast<sj::Tensor>());
    if (PyCallable_Check(h.ptr())) {
        // a schedule: called (with the GIL, while the optimizer builds its graph) on the step
        return sj::nn::optim::LearningRate(
            std::function<sj::Tensor(const sj::Tensor&)>([h](const sj::Tensor& step) {
                py::gil_scoped_acquire gil;
                return to_tensor(h(step));
            }));
    }
    return sj::nn::optim::LearningRate(h.cast<double>());
}

using Module = sj::nn::Module;
using ModulePtr = std::shared_ptr<Module>;

/// A module made from a Python callable (nn.Lambda).
class PyLambda : public Module {
public:
    explicit PyLambda(py::object fn) : fn_(std::move(fn)) {}
    sj::Tensor forward(const sj::Tensor& x, sj::nn::Mode) const override {
        py::gil_scoped_acquire gil;
        return to_tensor(fn_(x));
    }

private:
    py::object fn_;
};

} // namespace

void bind_nn(py::module_& root) {
    py::module_ m = root.def_submodule("nn", "sj::nn");

    // ---- initializers -------------------------------------------------------------------------
    py::class_<sj::nn::Initializer>(m, "Initializer")
        .def(
            "__call__",
            [](const sj::nn::Initializer& i, py::handle shape, py::handle dtype) {
                return i(to_shape(shape), to_dtype(dtype));
            },
            py::arg("shape"), py::arg("dtype") = "float32")
        .def(
            "array",
            [](const sj::nn::Initializer& i, py::handle shape, py::handle dtype) {
                return to_numpy(i.array(to_shape(shape), to_dtype(dtype)));
            },
            py::arg("shape"), py::arg("dtype") = "float32");
    py::module_ inits = m.def_submodule("init");
    inits.def("constant", &sj::nn::init::constant);
    inits.def("zeros", &sj::nn::init::zeros);
    inits.def("ones", &sj::nn::init::ones);
    inits.def("uniform", &sj::nn::init::uniform, py::arg("lo") = -0.05, py::arg("hi") = 0.05,
              py::arg("seed") = py::none());
    inits.def("normal", &sj::nn::init::normal, py::arg("stddev") = 1.0, py::arg("mean") = 0.0,
              py::arg("seed") = py::none());
    inits.def("truncated_normal", &sj::nn::init::truncated_normal, py::arg("stddev") = 1.0,
              py::arg("seed") = py::none());
    inits.def("glorot_uniform", &sj::nn::init::glorot_uniform, py::arg("gain") = 1.0,
              py::arg("seed") = py::none());
    inits.def("glorot_normal", &sj::nn::init::glorot_normal, py::arg("gain") = 1.0,
              py::arg("seed") = py::none());
    inits.def("he_uniform", &sj::nn::init::he_uniform, py::arg("seed") = py::none());
    inits.def("he_normal", &sj::nn::init::he_normal, py::arg("seed") = py::none());
    inits.def("lecun_normal", &sj::nn::init::lecun_normal, py::arg("seed") = py::none());
    inits.def("lecun_uniform", &sj::nn::init::lecun_uniform, py::arg("seed") = py::none());
    inits.def("orthogonal", &sj::nn::init::orthogonal, py::arg("gain") = 1.0,
              py::arg("seed") = py::none());
    inits.def("compute_fans", [](py::handle shape) {
        auto f = sj::nn::init::compute_fans(to_shape(shape));
        return py::make_tuple(f.in, f.out);
    });

    // ---- modules --------------------------------------------------------------------------------
    py::class_<Module, ModulePtr>(m, "Module")
        .def(
            "__call__",
            [](const Module& mod, py::handle x, py::handle mode, py::handle deterministic) {
                return mod(to_tensor(x), to_mode(mode, deterministic));
            },
            py::arg("x"), py::arg("mode") = py::none(), py::arg("deterministic") = py::none())
        .def("variables", &Module::variables)
        .def("trainable_variables", &Module::trainable_variables)
        .def_property_readonly("scope", &Module::scope);

    py::class_<sj::nn::Sequential, Module, std::shared_ptr<sj::nn::Sequential>>(m, "Sequential")
        .def(py::init([](const std::vector<ModulePtr>& layers) {
                 auto s = std::make_shared<sj::nn::Sequential>();
                 for (const auto& l : layers)
                     s->add(sj::nn::AnyModule(std::shared_ptr<const Module>(l)));
                 return s;
             }),
             py::arg("layers") = std::vector<ModulePtr>{})
        .def("add", [](sj::nn::Sequential& s,
                       ModulePtr l) { s.add(sj::nn::AnyModule(std::shared_ptr<const Module>(l))); })
        .def("__len__", &sj::nn::Sequential::size);
    py::class_<PyLambda, Module, std::shared_ptr<PyLambda>>(m, "Lambda")
        .def(py::init<py::object>());

    py::class_<sj::nn::Dense, Module, std::shared_ptr<sj::nn::Dense>>(m, "Dense")
        .def(py::init([](int64_t in, int64_t out, bool bias, py::handle init, py::handle dtype) {
                 sj::nn::DenseOptions o;
                 o.bias = bias;
                 o.init = to_init(init, o.init);
                 o.dtype = to_dtype(dtype);
                 return std::make_shared<sj::nn::Dense>(in, out, o);
             }),
             py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true,
             py::arg("init") = py::none(), py::arg("dtype") = "float32")
        .def_property_readonly("W", &sj::nn::Dense::weights)
        .def_property_readonly("b", &sj::nn::Dense::bias);
    py::class_<sj::nn::Dropout, Module, std::shared_ptr<sj::nn::Dropout>>(m, "Dropout")
        .def(py::init([](double p, py::handle seed) {
                 return std::make_shared<sj::nn::Dropout>(p, sj::nn::DropoutOptions{to_seed(seed)});
             }),
             py::arg("p"), py::arg("seed") = py::none())
        .def_property_readonly("p", &sj::nn::Dropout::p);
    py::class_<sj::nn::Flatten, Module, std::shared_ptr<sj::nn::Flatten>>(m, "Flatten")
        .def(py::init<>());
    py::class_<sj::nn::Embedding, Module, std::shared_ptr<sj::nn::Embedding>>(m, "Embedding")
        .def(py::init([](int64_t num, int64_t dim, py::handle init, py::handle dtype) {
                 sj::nn::EmbeddingOptions o;
                 o.init = to_init(init, o.init);
                 o.dtype = to_dtype(dtype);
                 return std::make_shared<sj::nn::Embedding>(num, dim, o);
             }),
             py::arg("num"), py::arg("dim"), py::arg("init") = py::none(),
             py::arg("dtype") = "float32")
        .def_property_readonly("table", &sj::nn::Embedding::table);
    py::class_<sj::nn::LayerNorm, Module, std::shared_ptr<sj::nn::LayerNorm>>(m, "LayerNorm")
        .def(py::init([](int64_t dim, double eps, py::handle dtype) {
                 return std::make_shared<sj::nn::LayerNorm>(
                     dim, sj::nn::LayerNormOptions{eps, to_dtype(dtype)});
             }),
             py::arg("dim"), py::arg("eps") = 1e-5, py::arg("dtype") = "float32")
        .def_property_readonly("gamma", &sj::nn::LayerNorm::gamma)
        .def_property_readonly("beta", &sj::nn::LayerNorm::beta);
    py::class_<sj::nn::BatchNorm, Module, std::shared_ptr<sj::nn::BatchNorm>>(m, "BatchNorm")
        .def(py::init([](int64_t features, double momentum, double eps, py::handle dtype) {
                 return std::make_shared<sj::nn::BatchNorm>(
                     features, sj::nn::BatchNormOptions{momentum, eps, to_dtype(dtype)});
             }),
             py::arg("features"), py::arg("momentum") = 0.99, py::arg("eps") = 1e-5,
             py::arg("dtype") = "float32")
        .def_property_readonly("gamma", &sj::nn::BatchNorm::gamma)
        .def_property_readonly("beta", &sj::nn::BatchNorm::beta)
        .def_property_readonly("running_mean", &sj::nn::BatchNorm::running_mean)
        .def_property_readonly("running_var", &sj::nn::BatchNorm::running_var);

    auto conv_options = [](py::handle strides, py::handle padding, py::handle dilation,
                           int64_t groups, bool bias, py::handle init, py::handle dtype) {
        sj::nn::ConvOptions o;
        o.strides = to_axes(strides);
        o.padding = to_padding(padding);
        o.dilation = to_axes(dilation);
        o.groups = groups;
        o.bias = bias;
        o.init = to_init(init, o.init);
        o.dtype = to_dtype(dtype);
        return o;
    };
    py::class_<sj::nn::Conv, Module, std::shared_ptr<sj::nn::Conv>>(m, "Conv")
        .def(py::init([conv_options](int64_t in, int64_t out, py::handle kernel, py::handle s,
                                     py::handle p, py::handle d, int64_t g, bool b, py::handle i,
                                     py::handle t) {
                 return std::make_shared<sj::nn::Conv>(in, out, to_axes(kernel),
                                                       conv_options(s, p, d, g, b, i, t));
             }),
             py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel"),
             py::arg("strides") = py::none(), py::arg("padding") = "VALID",
             py::arg("dilation") = py::none(), py::arg("groups") = 1, py::arg("bias") = true,
             py::arg("init") = py::none(), py::arg("dtype") = "float32")
        .def_property_readonly("W", &sj::nn::Conv::weights)
        .def_property_readonly("b", &sj::nn::Conv::bias);
    py::class_<sj::nn::Conv1D, sj::nn::Conv, std::shared_ptr<sj::nn::Conv1D>>(m, "Conv1D")
        .def(py::init([conv_options](int64_t in, int64_t out, int64_t kernel, py::handle s,
                                     py::handle p, py::handle d, int64_t g, bool b, py::handle i,
                                     py::handle t) {
                 return std::make_shared<sj::nn::Conv1D>(in, out, kernel,
                                                         conv_options(s, p, d, g, b, i, t));
             }),
             py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel"),
             py::arg("strides") = py::none(), py::arg("padding") = "VALID",
             py::arg("dilation") = py::none(), py::arg("groups") = 1, py::arg("bias") = true,
             py::arg("init") = py::none(), py::arg("dtype") = "float32");
    py::class_<sj::nn::Conv2D, sj::nn::Conv, std::shared_ptr<sj::nn::Conv2D>>(m, "Conv2D")
        .def(py::init([conv_options](int64_t in, int64_t out, py::handle kernel, py::handle s,
                                     py::handle p, py::handle d, int64_t g, bool b, py::handle i,
                                     py::handle t) {
                 return std::make_shared<sj::nn::Conv2D>(in, out, to_axes(kernel),
                                                         conv_options(s, p, d, g, b, i, t));
             }),
             py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel"),
             py::arg("strides") = py::none(), py::arg("padding") = "VALID",
             py::arg("dilation") = py::none(), py::arg("groups") = 1, py::arg("bias") = true,
             py::arg("init") = py::none(), py::arg("dtype") = "float32");
    py::class_<sj::nn::Conv2DTranspose, Module, std::shared_ptr<sj::nn::Conv2DTranspose>>(
        m, "Conv2DTranspose")
        .def(py::init([](int64_t in, int64_t out, py::handle kernel, py::handle s, py::handle p,
                         py::handle d, int64_t g, py::handle op, bool b, py::handle i,
                         py::handle t) {
                 sj::nn::ConvTransposeOptions o;
                 o.strides = to_axes(s);
                 o.padding = to_padding(p);
                 o.dilation = to_axes(d);
                 o.groups = g;
                 o.output_padding = to_axes(op);
                 o.bias = b;
                 o.init = to_init(i, o.init);
                 o.dtype = to_dtype(t);
                 sj::Axes k = to_axes(kernel);
                 if (k.size() == 1)
                     k.push_back(k[0]);
                 return std::make_shared<sj::nn::Conv2DTranspose>(in, out, k, o);
             }),
             py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel"),
             py::arg("strides") = py::none(), py::arg("padding") = "VALID",
             py::arg("dilation") = py::none(), py::arg("groups") = 1,
             py::arg("output_padding") = py::none(), py::arg("bias") = true,
             py::arg("init") = py::none(), py::arg("dtype") = "float32")
        .def_property_readonly("W", &sj::nn::Conv2DTranspose::weights)
        .def_property_readonly("b", &sj::nn::Conv2DTranspose::bias);

    auto pool = [](sj::nn::Pool::Kind kind, py::handle window, py::handle strides,
                   py::handle padding, bool count_include_pad) {
        sj::nn::PoolOptions o;
        o.strides = to_axes(strides);
        o.padding = to_padding(padding);
        o.count_include_pad = count_include_pad;
        return std::make_shared<sj::nn::Pool>(kind, to_axes(window), o);
    };
    py::class_<sj::nn::Pool, Module, std::shared_ptr<sj::nn::Pool>>(m, "Pool").def(
        py::init([pool](const std::string& kind, py::handle w, py::handle s, py::handle p, bool c) {
            if (kind != "max" && kind != "avg")
                throw sj::InputError("symjax.nn.Pool: kind must be 'max' or 'avg', got '" + kind +
                                     "'");
            return pool(kind == "max" ? sj::nn::Pool::Kind::Max : sj::nn::Pool::Kind::Avg, w, s, p,
                        c);
        }),
        py::arg("kind"), py::arg("window"), py::arg("strides") = py::none(),
        py::arg("padding") = "VALID", py::arg("count_include_pad") = true);
    py::class_<sj::nn::GlobalAvgPool, Module, std::shared_ptr<sj::nn::GlobalAvgPool>>(
        m, "GlobalAvgPool")
        .def(py::init<>());
    py::class_<sj::nn::ResidualBlock, Module, std::shared_ptr<sj::nn::ResidualBlock>>(
        m, "ResidualBlock")
        .def(py::init([](int64_t in, int64_t out, int64_t stride, py::handle dtype) {
                 return std::make_shared<sj::nn::ResidualBlock>(
                     in, out, sj::nn::ResidualBlockOptions{stride, to_dtype(dtype)});
             }),
             py::arg("in_channels"), py::arg("out_channels"), py::arg("stride") = 1,
             py::arg("dtype") = "float32");
    py::class_<sj::nn::RandomFlip, Module, std::shared_ptr<sj::nn::RandomFlip>>(m, "RandomFlip")
        .def(py::init([](double p, py::handle axes, py::handle seed) {
                 sj::nn::RandomFlipOptions o;
                 o.p = p;
                 o.axes = to_axes(axes);
                 o.seed = to_seed(seed);
                 return std::make_shared<sj::nn::RandomFlip>(o);
             }),
             py::arg("p") = 0.5, py::arg("axes") = -1, py::arg("seed") = py::none());
    py::class_<sj::nn::RandomCrop, Module, std::shared_ptr<sj::nn::RandomCrop>>(m, "RandomCrop")
        .def(py::init([](py::handle padding, py::handle size, py::handle axes, py::handle seed) {
                 sj::nn::RandomCropOptions o;
                 o.padding = to_pairs(padding);
                 o.size = to_shape(size);
                 o.axes = to_axes(axes);
                 o.seed = to_seed(seed);
                 return std::make_shared<sj::nn::RandomCrop>(o);
             }),
             py::arg("padding") = py::none(), py::arg("size") = py::none(),
             py::arg("axes") = std::vector<int64_t>{-2, -1}, py::arg("seed") = py::none());
    py::class_<sj::nn::Upsample1D, Module, std::shared_ptr<sj::nn::Upsample1D>>(m, "Upsample1D")
        .def(py::init([](int64_t scale, const std::string& method, bool align) {
                 return std::make_shared<sj::nn::Upsample1D>(
                     scale, sj::nn::UpsampleOptions{to_method(method), align});
             }),
             py::arg("scale"), py::arg("method") = "nearest", py::arg("align_corners") = false);
    py::class_<sj::nn::Upsample2D, Module, std::shared_ptr<sj::nn::Upsample2D>>(m, "Upsample2D")
        .def(py::init([](py::handle scale, const std::string& method, bool align) {
                 return std::make_shared<sj::nn::Upsample2D>(
                     to_axes(scale), sj::nn::UpsampleOptions{to_method(method), align});
             }),
             py::arg("scale"), py::arg("method") = "nearest", py::arg("align_corners") = false);

    // recurrent layers: PyTorch's keyword options and run() convention
    using Recurrent = sj::nn::Recurrent;
    py::class_<Recurrent, Module, std::shared_ptr<Recurrent>>(m, "Recurrent")
        .def(
            "run",
            [](const Recurrent& r, py::handle x, py::handle h0, py::handle c0,
               py::handle lengths) -> py::tuple {
                sj::nn::RecurrentState s;
                if (!h0.is_none())
                    s.h0 = to_tensor(h0);
                if (!c0.is_none())
                    s.c0 = to_tensor(c0);
                if (!lengths.is_none())
                    s.lengths = to_tensor(lengths);
                sj::nn::RecurrentOutput o = r.run(to_tensor(x), s);
                if (o.c.defined()) // LSTM: (output, (h, c)), as PyTorch
                    return py::make_tuple(o.output, py::make_tuple(o.h, o.c));
                return py::make_tuple(o.output, o.h);
            },
            py::arg("x"), py::arg("h0") = py::none(), py::arg("c0") = py::none(),
            py::arg("lengths") = py::none(),
            "(output, h), or (output, (h, c)) for an LSTM: the last layer's output at every step "
            "and each layer's and direction's final states [num_layers * directions, N, hidden]")
        .def("parameter", &Recurrent::parameter, py::arg("name"),
             "A parameter by its PyTorch name (\"weight_hh_l0_reverse\")")
        .def(
            "named_parameters",
            [](const Recurrent& r) {
                // the names of Recurrent's constructor, in its (and PyTorch's) order
                const auto& o = r.options();
                py::list out;
                for (int64_t l = 0; l < o.num_layers; ++l)
                    for (int d = 0; d < (o.bidirectional ? 2 : 1); ++d) {
                        const std::string sfx = "_l" + std::to_string(l) + (d ? "_reverse" : "");
                        for (const char* w : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
                            if (!o.bias && w[0] == 'b')
                                continue;
                            out.append(py::make_tuple(w + sfx, r.parameter(w + sfx)));
                        }
                    }
                return out;
            },
            "[(name, Variable)] in PyTorch's order: per layer and direction weight_ih, "
            "weight_hh, bias_ih, bias_hh")
        .def_property_readonly("input_size", &Recurrent::input_size)
        .def_property_readonly("hidden_size", &Recurrent::hidden_size)
        .def_property_readonly("num_layers",
                               [](const Recurrent& r) { return r.options().num_layers; })
        .def_property_readonly("bidirectional",
                               [](const Recurrent& r) { return r.options().bidirectional; })
        .def_property_readonly("batch_first",
                               [](const Recurrent& r) { return r.options().batch_first; })
        .def_property_readonly("bias", [](const Recurrent& r) { return r.options().bias; })
        .def_property_readonly(
            "dtype", [](const Recurrent& r) { return to_numpy_dtype(r.options().dtype); });
    auto recurrent_options = [](int64_t num_layers, bool bias, bool batch_first, bool bidirectional,
                                py::handle dtype) {
        sj::nn::RecurrentOptions o;
        o.num_layers = num_layers;
        o.bias = bias;
        o.batch_first = batch_first;
        o.bidirectional = bidirectional;
        o.dtype = to_dtype(dtype);
        return o;
    };
    py::class_<sj::nn::SimpleRNN, Recurrent, std::shared_ptr<sj::nn::SimpleRNN>>(m, "SimpleRNN")
        .def(py::init([recurrent_options](int64_t in, int64_t hidden, int64_t layers,
                                          const std::string& nonlinearity, bool bias, bool bf,
                                          bool bidir, py::handle dtype) {
                 sj::nn::RecurrentOptions o = recurrent_options(layers, bias, bf, bidir, dtype);
                 if (nonlinearity == "tanh")
                     o.activation = sj::nn::RnnActivation::Tanh;
                 else if (nonlinearity == "relu")
                     o.activation = sj::nn::RnnActivation::Relu;
                 else
                     throw sj::InputError("symjax.nn.SimpleRNN: nonlinearity must be 'tanh' or "
                                          "'relu', got '" +
                                          nonlinearity + "'");
                 return std::make_shared<sj::nn::SimpleRNN>(in, hidden, o);
             }),
             py::arg("input_size"), py::arg("hidden_size"), py::arg("num_layers") = 1,
             py::kw_only(), py::arg("nonlinearity") = "tanh", py::arg("bias") = true,
             py::arg("batch_first") = false, py::arg("bidirectional") = false,
             py::arg("dtype") = "float32")
        .def_property_readonly("nonlinearity", [](const sj::nn::SimpleRNN& r) {
            return r.options().activation == sj::nn::RnnActivation::Tanh ? "tanh" : "relu";
        });
    py::class_<sj::nn::GRU, Recurrent, std::shared_ptr<sj::nn::GRU>>(m, "GRU").def(
        py::init([recurrent_options](int64_t in, int64_t hidden, int64_t layers, bool bias, bool bf,
                                     bool bidir, py::handle dtype) {
            return std::make_shared<sj::nn::GRU>(in, hidden,
                                                 recurrent_options(layers, bias, bf, bidir, dtype));
        }),
        py::arg("input_size"), py::arg("hidden_size"), py::arg("num_layers") = 1, py::kw_only(),
        py::arg("bias") = true, py::arg("batch_first") = false, py::arg("bidirectional") = false,
        py::arg("dtype") = "float32");
    py::class_<sj::nn::LSTM, Recurrent, std::shared_ptr<sj::nn::LSTM>>(m, "LSTM").def(
        py::init([recurrent_options](int64_t in, int64_t hidden, int64_t layers, bool bias, bool bf,
                                     bool bidir, py::handle dtype) {
            return std::make_shared<sj::nn::LSTM>(
                in, hidden, recurrent_options(layers, bias, bf, bidir, dtype));
        }),
        py::arg("input_size"), py::arg("hidden_size"), py::arg("num_layers") = 1, py::kw_only(),
        py::arg("bias") = true, py::arg("batch_first") = false, py::arg("bidirectional") = false,
        py::arg("dtype") = "float32");

    // activation modules
#define SJ_PY_ACT_MODULE(T)                                                                        \
    py::class_<sj::nn::T, Module, std::shared_ptr<sj::nn::T>>(m, #T).def(py::init<>())
    SJ_PY_ACT_MODULE(ReLU);
    SJ_PY_ACT_MODULE(ReLU6);
    SJ_PY_ACT_MODULE(SELU);
    SJ_PY_ACT_MODULE(SiLU);
    SJ_PY_ACT_MODULE(Softplus);
    SJ_PY_ACT_MODULE(Sigmoid);
    SJ_PY_ACT_MODULE(Tanh);
    SJ_PY_ACT_MODULE(HardSigmoid);
#undef SJ_PY_ACT_MODULE
    py::class_<sj::nn::LeakyReLU, Module, std::shared_ptr<sj::nn::LeakyReLU>>(m, "LeakyReLU")
        .def(py::init<double>(), py::arg("slope") = 0.01);
    py::class_<sj::nn::ELU, Module, std::shared_ptr<sj::nn::ELU>>(m, "ELU").def(
        py::init<double>(), py::arg("alpha") = 1.0);
    py::class_<sj::nn::GELU, Module, std::shared_ptr<sj::nn::GELU>>(m, "GELU").def(
        py::init<bool>(), py::arg("approximate") = false);
    py::class_<sj::nn::Softmax, Module, std::shared_ptr<sj::nn::Softmax>>(m, "Softmax")
        .def(py::init<int64_t>(), py::arg("axis") = -1);
    py::class_<sj::nn::LogSoftmax, Module, std::shared_ptr<sj::nn::LogSoftmax>>(m, "LogSoftmax")
        .def(py::init<int64_t>(), py::arg("axis") = -1);
    py::class_<sj::nn::HardTanh, Module, std::shared_ptr<sj::nn::HardTanh>>(m, "HardTanh")
        .def(py::init<double, double>(), py::arg("lo") = -1.0, py::arg("hi") = 1.0);

    // ---- activations, losses, metrics, schedules (functions) -----------------------------------
    py::module_ act = m.def_submodule("activations");
    act.def("relu", [](py::handle x) { return sj::nn::relu(to_tensor(x)); });
    act.def("relu6", [](py::handle x) { return sj::nn::relu6(to_tensor(x)); });
    act.def(
        "leaky_relu", [](py::handle x, double s) { return sj::nn::leaky_relu(to_tensor(x), s); },
        py::arg("x"), py::arg("slope") = 0.01);
    act.def(
        "elu", [](py::handle x, double a) { return sj::nn::elu(to_tensor(x), a); }, py::arg("x"),
        py::arg("alpha") = 1.0);
    act.def("selu", [](py::handle x) { return sj::nn::selu(to_tensor(x)); });
    act.def(
        "gelu", [](py::handle x, bool a) { return sj::nn::gelu(to_tensor(x), a); }, py::arg("x"),
        py::arg("approximate") = false);
    act.def("silu", [](py::handle x) { return sj::nn::silu(to_tensor(x)); });
    act.def("swish", [](py::handle x) { return sj::nn::swish(to_tensor(x)); });
    act.def(
        "hard_tanh",
        [](py::handle x, double lo, double hi) { return sj::nn::hard_tanh(to_tensor(x), lo, hi); },
        py::arg("x"), py::arg("lo") = -1.0, py::arg("hi") = 1.0);
    act.def("hard_sigmoid", [](py::handle x) { return sj::nn::hard_sigmoid(to_tensor(x)); });

    py::module_ losses = m.def_submodule("losses");
    losses.def(
        "sparse_softmax_crossentropy_logits",
        [](py::handle labels, py::handle logits, std::optional<int64_t> ignore) {
            return sj::nn::losses::sparse_softmax_crossentropy_logits(to_tensor(labels),
                                                                      to_tensor(logits), ignore);
        },
        py::arg("labels"), py::arg("logits"), py::arg("ignore_index") = py::none());
#define SJ_PY_LOSS(name)                                                                           \
    losses.def(#name, [](py::handle a, py::handle b) {                                             \
        return sj::nn::losses::name(to_tensor(a), to_tensor(b));                                   \
    })
    SJ_PY_LOSS(softmax_crossentropy_logits);
    SJ_PY_LOSS(sigmoid_crossentropy_logits);
    SJ_PY_LOSS(mse);
    SJ_PY_LOSS(mae);
    SJ_PY_LOSS(hinge);
    SJ_PY_LOSS(kl_divergence);
#undef SJ_PY_LOSS
    losses.def(
        "huber",
        [](py::handle a, py::handle b, double d) {
            return sj::nn::losses::huber(to_tensor(a), to_tensor(b), d);
        },
        py::arg("targets"), py::arg("predictions"), py::arg("delta") = 1.0);
    losses.def(
        "multiclass_hinge",
        [](py::handle a, py::handle b, double margin) {
            return sj::nn::losses::multiclass_hinge(to_tensor(a), to_tensor(b), margin);
        },
        py::arg("labels"), py::arg("scores"), py::arg("margin") = 1.0);

    py::module_ metrics = m.def_submodule("metrics");
    metrics.def("accuracy", [](py::handle a, py::handle b) {
        return sj::nn::metrics::accuracy(to_tensor(a), to_tensor(b));
    });
    metrics.def("correct", [](py::handle a, py::handle b) {
        return sj::nn::metrics::correct(to_tensor(a), to_tensor(b));
    });
    metrics.def("top_k_accuracy", [](py::handle a, py::handle b, int64_t k) {
        return sj::nn::metrics::top_k_accuracy(to_tensor(a), to_tensor(b), k);
    });

    py::module_ sch = m.def_submodule("schedules");
    sch.def(
        "piecewise_constant",
        [](py::handle step, const std::vector<double>& b, const std::vector<double>& v,
           py::handle dtype) {
            return sj::nn::schedules::piecewise_constant(to_tensor(step), b, v, to_dtype(dtype));
        },
        py::arg("step"), py::arg("boundaries"), py::arg("values"), py::arg("dtype") = "float32");
    sch.def(
        "exponential_decay",
        [](py::handle step, double init, double steps, double rate, bool staircase,
           py::handle dtype) {
            return sj::nn::schedules::exponential_decay(to_tensor(step), init, steps, rate,
                                                        staircase, to_dtype(dtype));
        },
        py::arg("step"), py::arg("init"), py::arg("decay_steps"), py::arg("rate"),
        py::arg("staircase") = false, py::arg("dtype") = "float32");
    sch.def(
        "cosine_decay",
        [](py::handle step, double init, double steps, double alpha, double warmup,
           py::handle dtype) {
            return sj::nn::schedules::cosine_decay(to_tensor(step), init, steps, alpha, warmup,
                                                   to_dtype(dtype));
        },
        py::arg("step"), py::arg("init"), py::arg("decay_steps"), py::arg("alpha") = 0.0,
        py::arg("warmup_steps") = 0.0, py::arg("dtype") = "float32");
    sch.def(
        "linear_warmup",
        [](py::handle step, double peak, double warmup, double start, py::handle dtype) {
            return sj::nn::schedules::linear_warmup(to_tensor(step), peak, warmup, start,
                                                    to_dtype(dtype));
        },
        py::arg("step"), py::arg("peak"), py::arg("warmup_steps"), py::arg("start") = 0.0,
        py::arg("dtype") = "float32");

    // ---- moving averages ----------------------------------------------------------------------
    auto averaged = [](const sj::nn::Averaged& a) {
        return py::make_tuple(a.value, a.average, to_list(a.updates), a.variables);
    };
    sch.def(
        "exponential_moving_average",
        [averaged](py::handle value, double alpha, py::handle init, bool debias,
                   bool start_at_first, bool decay_min, const std::string& name) {
            sj::nn::EmaOptions o;
            if (!init.is_none())
                o.init = to_tensor(init);
            o.debias = debias;
            o.start_at_first = start_at_first;
            o.decay_min = decay_min;
            o.name = name;
            return averaged(sj::nn::exponential_moving_average(to_tensor(value), alpha, o));
        },
        py::arg("value"), py::arg("alpha"), py::arg("init") = py::none(), py::arg("debias") = true,
        py::arg("start_at_first") = false, py::arg("decay_min") = false, py::arg("name") = "ema");
    sch.def(
        "simple_moving_average",
        [averaged](py::handle value, int64_t window, const std::string& name) {
            return averaged(sj::nn::simple_moving_average(to_tensor(value), window, name));
        },
        py::arg("value"), py::arg("window"), py::arg("name") = "sma");

    // ---- optimizers -------------------------------------------------------------------------
    namespace op = sj::nn::optim;
    py::module_ opt = m.def_submodule("optim");
    opt.def("global_norm", &op::global_norm);
    opt.def("clip_by_global_norm", &op::clip_by_global_norm);
    opt.def("clip_by_value", &op::clip_by_value);
    py::class_<op::Optimizer, std::shared_ptr<op::Optimizer>>(opt, "Optimizer")
        .def(
            "minimize",
            [](op::Optimizer& o, const sj::Tensor& loss, py::object params) {
                if (params.is_none())
                    return to_list(o.minimize(loss));
                return to_list(o.minimize(loss, params.cast<std::vector<sj::Variable>>()));
            },
            py::arg("loss"), py::arg("params") = py::none())
        .def("apply", [](op::Optimizer& o, const std::vector<sj::Tensor>& g,
                         const std::vector<sj::Variable>& p) { return to_list(o.apply(g, p)); })
        .def(
            "clip_by_global_norm",
            [](op::Optimizer& o, double n) -> op::Optimizer& { return o.clip_by_global_norm(n); },
            py::return_value_policy::reference_internal)
        .def(
            "clip_by_value",
            [](op::Optimizer& o, double n) -> op::Optimizer& { return o.clip_by_value(n); },
            py::return_value_policy::reference_internal)
        .def_property_readonly("step", &op::Optimizer::step)
        .def(
            "learning_rate",
            [](const op::Optimizer& o, py::handle d) { return o.learning_rate(to_dtype(d)); },
            py::arg("dtype") = "float32")
        .def("variables", &op::Optimizer::variables)
        .def_property_readonly("scope", &op::Optimizer::scope);
    py::class_<op::SGD, op::Optimizer, std::shared_ptr<op::SGD>>(opt, "SGD")
        .def(py::init([](py::object lr, double momentum, double dampening, bool nesterov, double wd,
                         const std::string& name) {
                 return std::make_shared<op::SGD>(
                     to_lr(lr), op::SGDOptions{momentum, dampening, nesterov, wd}, name);
             }),
             py::arg("lr"), py::arg("momentum") = 0.0, py::arg("dampening") = 0.0,
             py::arg("nesterov") = false, py::arg("weight_decay") = 0.0, py::arg("name") = "sgd");
    py::class_<op::Adam, op::Optimizer, std::shared_ptr<op::Adam>>(opt, "Adam")
        .def(py::init([](py::object lr, double b1, double b2, double eps, double wd, bool ams,
                         const std::string& name) {
                 return std::make_shared<op::Adam>(to_lr(lr), op::AdamOptions{b1, b2, eps, wd, ams},
                                                   name);
             }),
             py::arg("lr") = 1e-3, py::arg("beta1") = 0.9, py::arg("beta2") = 0.999,
             py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.0, py::arg("amsgrad") = false,
             py::arg("name") = "adam");
    py::class_<op::AdamW, op::Adam, std::shared_ptr<op::AdamW>>(opt, "AdamW")
        .def(py::init([](py::object lr, double b1, double b2, double eps, double wd, bool ams,
                         const std::string& name) {
                 return std::make_shared<op::AdamW>(to_lr(lr),
                                                    op::AdamWOptions{b1, b2, eps, wd, ams}, name);
             }),
             py::arg("lr") = 1e-3, py::arg("beta1") = 0.9, py::arg("beta2") = 0.999,
             py::arg("eps") = 1e-8, py::arg("weight_decay") = 1e-2, py::arg("amsgrad") = false,
             py::arg("name") = "adamw");
    py::class_<op::RMSprop, op::Optimizer, std::shared_ptr<op::RMSprop>>(opt, "RMSprop")
        .def(py::init([](py::object lr, double alpha, double eps, double momentum, bool centered,
                         double wd, const std::string& name) {
                 return std::make_shared<op::RMSprop>(
                     to_lr(lr), op::RMSpropOptions{alpha, eps, momentum, centered, wd}, name);
             }),
             py::arg("lr") = 1e-2, py::arg("alpha") = 0.99, py::arg("eps") = 1e-8,
             py::arg("momentum") = 0.0, py::arg("centered") = false, py::arg("weight_decay") = 0.0,
             py::arg("name") = "rmsprop");
    py::class_<op::Adagrad, op::Optimizer, std::shared_ptr<op::Adagrad>>(opt, "Adagrad")
        .def(py::init([](py::object lr, double lr_decay, double init_acc, double eps, double wd,
                         const std::string& name) {
                 return std::make_shared<op::Adagrad>(
                     to_lr(lr), op::AdagradOptions{lr_decay, init_acc, eps, wd}, name);
             }),
             py::arg("lr") = 1e-2, py::arg("lr_decay") = 0.0, py::arg("initial_accumulator") = 0.0,
             py::arg("eps") = 1e-10, py::arg("weight_decay") = 0.0, py::arg("name") = "adagrad");
    py::class_<op::ExponentialMovingAverage, std::shared_ptr<op::ExponentialMovingAverage>>(
        opt, "ExponentialMovingAverage")
        .def(py::init<double, bool, const std::string&>(), py::arg("decay"),
             py::arg("use_num_updates") = false, py::arg("name") = "ema")
        .def(
            "apply",
            [](op::ExponentialMovingAverage& e, const std::vector<sj::Variable>& vars,
               const UpdateList& after) { return to_list(e.apply(vars, to_updates(after))); },
            py::arg("variables"), py::arg("after") = UpdateList{})
        .def("average", &op::ExponentialMovingAverage::average)
        .def("variables", &op::ExponentialMovingAverage::variables);
}

} // namespace sjpy
