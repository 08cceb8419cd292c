// symjax._core.dist and symjax._core.nn.DataParallel: data-parallel training from Python under
// mpirun (include/symjax/Dist.h, include/symjax/nn/DataParallel.h; docs/distributed.md).
#include "Bind.h"

#include <symjax/Dist.h>
#include <symjax/nn/DataParallel.h>

namespace sjpy {

namespace {

sj::dist::ReduceOp to_reduce(const std::string& s) {
    if (s == "sum")
        return sj::dist::ReduceOp::Sum;
    if (s == "mean")
        return sj::dist::ReduceOp::Mean;
    if (s == "max")
        return sj::dist::ReduceOp::Max;
    if (s == "min")
        return sj::dist::ReduceOp::Min;
    SJ_THROW(sj::InputError) << "symjax.dist: unknown reduction '" << s
                             << "' (sum, mean, max or min)";
}

/// A collective on a tensor (a node of the graph) or, for anything else, on a host array now.
template <class OnTensor, class OnArray>
py::object collective(py::handle x, OnTensor on_tensor, OnArray on_array) {
    if (py::isinstance<sj::Tensor>(x))
        return py::cast(on_tensor(x.cast<sj::Tensor>()));
    sj::Array a = to_array(x);
    sj::Array r;
    {
        py::gil_scoped_release release; // the other ranks may take a while
        r = on_array(a);
    }
    return to_numpy(r);
}

} // namespace

void bind_dist(py::module_& root) {
    namespace d = sj::dist;
    py::module_ m = root.def_submodule("dist", "sj::dist");
    m.def("init", &d::init);
    m.def("finalize", &d::finalize);
    m.def("initialized", &d::initialized);
    m.def("built_with_mpi", &d::built_with_mpi);
    m.def("using_mpi", &d::using_mpi);
    m.def("rank", &d::rank);
    m.def("size", &d::size);
    m.def("local_rank", &d::local_rank);
    m.def("local_size", &d::local_size);
    m.def("is_root", &d::is_root);
    m.def("timeout", &d::timeout);
    m.def("set_timeout", &d::set_timeout, py::arg("seconds"));
    m.def("barrier", [] {
        py::gil_scoped_release release;
        d::barrier();
    });
    m.def(
        "all_reduce",
        [](py::handle x, const std::string& op) {
            const d::ReduceOp r = to_reduce(op);
            return collective(
                x, [r](const sj::Tensor& t) { return d::all_reduce(t, r); },
                [r](const sj::Array& a) { return d::all_reduce(a, r); });
        },
        py::arg("x"), py::arg("op") = "sum");
    m.def(
        "all_gather",
        [](py::handle x) {
            return collective(
                x, [](const sj::Tensor& t) { return d::all_gather(t); },
                [](const sj::Array& a) { return d::all_gather(a); });
        },
        py::arg("x"));
    m.def(
        "broadcast",
        [](py::handle x, int root_rank) {
            return collective(
                x, [root_rank](const sj::Tensor& t) { return d::broadcast(t, root_rank); },
                [root_rank](const sj::Array& a) { return d::broadcast(a, root_rank); });
        },
        py::arg("x"), py::arg("root") = 0);
    m.def(
        "reduce_scatter",
        [](py::handle x, const std::string& op) {
            const d::ReduceOp r = to_reduce(op);
            return collective(
                x, [r](const sj::Tensor& t) { return d::reduce_scatter(t, r); },
                [r](const sj::Array& a) { return d::reduce_scatter(a, r); });
        },
        py::arg("x"), py::arg("op") = "sum");

    // ---- data-parallel training ---------------------------------------------------------------
    py::module_ nn = root.attr("nn").cast<py::module_>();
    nn.def("average_gradients", &sj::nn::average_gradients, py::arg("grads"),
           py::arg("bucket_bytes") = int64_t(25) << 20);
    nn.def("broadcast_variables", &sj::nn::broadcast_variables, py::arg("variables"),
           py::arg("root") = 0);
    py::class_<sj::nn::DataParallel>(nn, "DataParallel")
        .def(py::init([](sj::nn::optim::Optimizer& o, int64_t bucket_bytes, bool broadcast) {
                 return sj::nn::DataParallel(o, {bucket_bytes, broadcast});
             }),
             py::arg("optimizer"), py::arg("bucket_bytes") = int64_t(25) << 20,
             py::arg("broadcast_parameters") = true,
             py::keep_alive<1, 2>()) // the wrapper refers to the optimizer
        .def(
            "minimize",
            [](sj::nn::DataParallel& dp, const sj::Tensor& loss, py::object params) {
                if (params.is_none())
                    return to_list(dp.minimize(loss));
                return to_list(dp.minimize(loss, params.cast<std::vector<sj::Variable>>()));
            },
            py::arg("loss"), py::arg("params") = py::none())
        .def(
            "apply",
            [](sj::nn::DataParallel& dp, const std::vector<sj::Tensor>& g,
               const std::vector<sj::Variable>& p) { return to_list(dp.apply(g, p)); },
            py::arg("grads"), py::arg("params"))
        .def_property_readonly("bucket_bytes", [](const sj::nn::DataParallel& dp) {
            return dp.options().bucket_bytes;
        });
}

} // namespace sjpy
