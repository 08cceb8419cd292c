// symjax._core.data: the dataset readers and the prefetching loader of include/symjax/Data.h.
#include "Bind.h"

namespace sjpy {

namespace {

using sj::data::Batch;
using sj::data::Dataset;
using sj::data::Epoch;
using sj::data::Loader;

// symjax.data._Batch (a tuple subclass with no Python constructor), set when symjax.data loads
PyObject* g_batch_type = nullptr;

/// (x, y) as a _Batch with .x, .y, .indices, .index and .epoch, made without running Python code
/// (Note [Ctrl-C]: no signal handler can run between taking a batch and handing it over).
py::object batch_tuple(Batch b) {
    py::object x = to_numpy(b.x), y = to_numpy(b.y);
    if (!g_batch_type)
        return py::make_tuple(x, y, b.indices, b.index, b.epoch);
    py::object out = py::reinterpret_borrow<py::object>(g_batch_type)(py::make_tuple(x, y));
    out.attr("x") = x;
    out.attr("y") = y;
    out.attr("indices") = py::cast(b.indices);
    out.attr("index") = b.index;
    out.attr("epoch") = b.epoch;
    return out;
}

/// One epoch as a Python iterator; next() waits for the workers without the GIL. Ctrl-C loses no
/// batch (Note [Ctrl-C]): a signal already pending raises before a batch is taken, one during the
/// wait stops it with the batch left for the next call, and the batch is handed over without any
/// Python code running after it was taken.
struct PyEpoch {
    std::shared_ptr<Epoch> ep;
    py::object next() {
        if (PyErr_CheckSignals() != 0)
            throw py::error_already_set();
        std::optional<Batch> b;
        {
            SignalCheck ctrl_c;
            py::gil_scoped_release nogil;
            b = ep->next();
        }
        if (!b)
            throw py::stop_iteration();
        return batch_tuple(std::move(*b));
    }
};

} // namespace

void bind_data(py::module_& root) {
    py::module_ m = root.def_submodule("data", "sj::data");
    py::class_<Dataset>(m, "Dataset")
        .def(py::init([](py::handle images, py::handle labels, std::vector<std::string> classes) {
                 Dataset d;
                 d.images = to_array(images, sj::DType::U8, "images");
                 d.labels = to_array(labels, sj::DType::I32, "labels");
                 d.classes = std::move(classes);
                 SJ_CHECK(d.images.rank() == 4, sj::ShapeError)
                     << "symjax.data.Dataset: images must be [N, C, H, W], got "
                     << sj::shape_str(d.images.shape());
                 SJ_CHECK(d.labels.rank() == 1 && d.labels.shape()[0] == d.images.shape()[0],
                          sj::ShapeError)
                     << "symjax.data.Dataset: labels must be [N] with N = " << d.images.shape()[0]
                     << ", got " << sj::shape_str(d.labels.shape());
                 return d;
             }),
             py::arg("images"), py::arg("labels"), py::arg("classes") = std::vector<std::string>{})
        .def_property_readonly("images", [](const Dataset& d) { return to_numpy(d.images); })
        .def_property_readonly("labels", [](const Dataset& d) { return to_numpy(d.labels); })
        .def_readonly("classes", &Dataset::classes)
        .def("__len__", &Dataset::size)
        .def("slice", &Dataset::slice)
        .def("take", &Dataset::take);
    m.def("_set_batch_type", [](py::object t) { g_batch_type = t.inc_ref().ptr(); });
    m.def("fashion_mnist_classes", &sj::data::fashion_mnist_classes);
    m.def("cifar10_classes", &sj::data::cifar10_classes);
    m.def("read_idx", [](const std::string& p) { return to_numpy(sj::data::read_idx(p)); });
    m.def("load_mnist_like", &sj::data::load_mnist_like, py::arg("dir"), py::arg("train"),
          py::arg("classes") = std::vector<std::string>{});
    m.def("read_cifar10_binary", &sj::data::read_cifar10_binary);
    m.def(
        "read_image",
        [](const std::string& p, int c) { return to_numpy(sj::data::read_image(p, c)); },
        py::arg("path"), py::arg("channels") = 0);
    m.def("read_image_folder", &sj::data::read_image_folder, py::arg("root"),
          py::arg("channels") = 0, py::arg("threads") = 0,
          py::call_guard<py::gil_scoped_release>());
    m.def("read_image_list", &sj::data::read_image_list, py::arg("root"),
          py::arg("metadata") = "metadata.json", py::arg("channels") = 0, py::arg("threads") = 0,
          py::call_guard<py::gil_scoped_release>());
    m.def("shuffled_order", &sj::data::shuffled_order);
    m.def(
        "resample_images",
        [](py::list images, py::handle shape, const std::string& method, bool keep_aspect) {
            std::vector<sj::Array> imgs;
            for (py::handle i : images)
                imgs.push_back(to_array(i));
            return to_numpy(
                sj::data::resample_images(imgs, to_shape(shape), to_method(method), keep_aspect));
        },
        py::arg("images"), py::arg("shape"), py::arg("method") = "linear",
        py::arg("keep_aspect") = true);

    py::class_<PyEpoch>(m, "Epoch")
        .def(
            "__iter__", [](PyEpoch& e) -> PyEpoch& { return e; },
            py::return_value_policy::reference_internal)
        .def("__next__", &PyEpoch::next)
        .def("__len__", [](const PyEpoch& e) { return e.ep->size(); })
        .def_property_readonly("consumed", [](const PyEpoch& e) { return e.ep->consumed(); });
    py::class_<Loader, std::shared_ptr<Loader>>(m, "Loader")
        .def(py::init([](const Dataset& data, int64_t batch_size, bool shuffle, bool drop_last,
                         uint64_t seed, int workers, int prefetch, int crop_padding,
                         bool horizontal_flip, std::vector<float> mean, std::vector<float> std,
                         int shard_rank, int shard_count) {
                 sj::data::LoaderOptions o;
                 o.batch_size = batch_size;
                 o.shuffle = shuffle;
                 o.drop_last = drop_last;
                 o.seed = seed;
                 o.workers = workers;
                 o.prefetch = prefetch;
                 o.augment.crop_padding = crop_padding;
                 o.augment.horizontal_flip = horizontal_flip;
                 o.mean = std::move(mean);
                 o.std = std::move(std);
                 o.shard_rank = shard_rank;
                 o.shard_count = shard_count;
                 return std::make_shared<Loader>(data, o);
             }),
             py::arg("data"), py::arg("batch_size") = 128, py::arg("shuffle") = true,
             py::arg("drop_last") = false, py::arg("seed") = 0, py::arg("workers") = 1,
             py::arg("prefetch") = 4, py::arg("crop_padding") = 0,
             py::arg("horizontal_flip") = false, py::arg("mean") = std::vector<float>{},
             py::arg("std") = std::vector<float>{}, py::arg("shard_rank") = 0,
             py::arg("shard_count") = 1)
        .def(
            "epoch",
            [](Loader& l, int64_t e) {
                std::shared_ptr<Epoch> ep;
                {
                    py::gil_scoped_release nogil;
                    ep = std::make_shared<Epoch>(l.epoch(e));
                }
                return PyEpoch{ep};
            },
            py::keep_alive<0, 1>())
        .def_property_readonly("batches_per_epoch", &Loader::batches_per_epoch)
        .def_property_readonly("samples_per_epoch", &Loader::samples_per_epoch)
        .def("order", &Loader::order)
        .def_property_readonly("dataset", &Loader::dataset, py::return_value_policy::copy);
}

} // namespace sjpy
