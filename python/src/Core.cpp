// symjax._core: the module, the exception hierarchy, compiled functions, variables, scopes,
// autodiff, checkpoints and graph utilities.
#include "Bind.h"

#include <symjax/nn/Module.h>

#include <pybind11/eval.h>

namespace sjpy {

namespace {

// Note [Python exceptions]
// Each sj error becomes a Python exception with the same message. symjax.Error (a RuntimeError)
// is the base; the subclasses also derive from the builtin a Python user would catch:
// ShapeError and InputError are ValueErrors, symjax.TypeError is a TypeError, IOError an OSError,
// OutOfMemoryError a MemoryError. They are made in Python (multiple inheritance from builtins)
// and looked up by the translator.
const char* kErrorDefs = R"(
class Error(RuntimeError):
    """Base of the errors symjax raises (sj::Error)."""
class ShapeError(Error, ValueError):
    """Shapes that do not fit an op (sj::ShapeError)."""
class TypeError(Error, TypeError):
    """A wrong dtype, or an op used on a dtype it does not support (sj::TypeError)."""
class InputError(Error, ValueError):
    """A wrong value passed to a compiled function or kernel (sj::InputError)."""
class IOError(Error, OSError):
    """A file that cannot be read or written, or is malformed (sj::IOError)."""
class ParseError(Error, ValueError):
    """Text that does not follow its grammar (sj::ParseError)."""
class OutOfMemoryError(Error, MemoryError):
    """Memory that could not be allocated (sj::OutOfMemoryError)."""
class InternalError(Error):
    """A bug in symjax (sj::InternalError)."""
)";

// borrowed for the life of the process (never decref'd after the interpreter has finalised)
PyObject* g_errors[8];
enum ErrorSlot { kError, kShape, kType, kInput, kIO, kParse, kOOM, kInternal };

void set_error(ErrorSlot slot, const std::exception& e) {
    PyErr_SetString(g_errors[slot], e.what());
}

// Note [Ctrl-C] (Bind.h): the exception a signal handler raised during a call, kept (type, value,
// traceback; owned references) until the call has unwound.
thread_local PyObject* t_pending[3] = {nullptr, nullptr, nullptr};
unsigned long g_main_thread = 0; // Python's main thread, where signal handlers run
bool g_signal_checks = true;     // off only to measure what they cost (_set_signal_checks)

void drop_pending() {
    for (PyObject*& o : t_pending) {
        Py_XDECREF(o);
        o = nullptr;
    }
}

/// Raises the kept exception with the C++ message as a note (where the call stopped), or a
/// KeyboardInterrupt when none was kept (sj::request_interrupt()).
void set_interrupted(const sj::Interrupted& e) {
    if (!t_pending[0]) {
        PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
        return;
    }
    PyObject *type = t_pending[0], *value = t_pending[1], *tb = t_pending[2];
    t_pending[0] = t_pending[1] = t_pending[2] = nullptr;
    PyErr_NormalizeException(&type, &value, &tb);
    if (value) {
        PyObject* r = PyObject_CallMethod(value, "add_note", "s", e.what());
        if (!r)
            PyErr_Clear();
        Py_XDECREF(r);
    }
    PyErr_Restore(type, value, tb);
}

/// A compiled function as Python calls it: arguments converted to each input's dtype, the GIL
/// released while it runs, outputs returned as NumPy arrays that share the library's buffers.
struct PyFunction {
    sj::Function fn;
    std::vector<sj::DType> in_dtypes;
    std::vector<std::string> in_names;
    bool single = false; // outputs was one tensor: return one array
    bool none = false;   // outputs was empty and not a list: return None

    py::object call(py::args args) const {
        const std::vector<sj::Function::Arg> a = arguments(args);
        std::vector<sj::Array> out;
        {
            SignalCheck ctrl_c;
            py::gil_scoped_release nogil;
            out = fn.call(a);
        }
        if (none)
            return py::none();
        if (single)
            return to_numpy(out.at(0));
        py::list l(out.size());
        for (size_t i = 0; i < out.size(); ++i)
            l[i] = to_numpy(out[i]);
        return l;
    }

    /// Calls the function n times from C++ with the same arguments, dropping the outputs: what a
    /// C++ caller's loop costs, timed in the same process as a Python loop of calls
    /// (python/bench/train_steps.py: the front end's own cost, Python against C++).
    void call_repeated(int64_t n, py::args args) const {
        const std::vector<sj::Function::Arg> a = arguments(args);
        SignalCheck ctrl_c;
        py::gil_scoped_release nogil;
        for (int64_t i = 0; i < n; ++i)
            fn.call(a);
    }

    std::vector<sj::Function::Arg> arguments(const py::args& args) const {
        if (args.size() != in_dtypes.size())
            throw sj::InputError("symjax.function: expected " + std::to_string(in_dtypes.size()) +
                                 " arguments, got " + std::to_string(args.size()));
        std::vector<sj::Function::Arg> a;
        a.reserve(args.size());
        for (size_t i = 0; i < args.size(); ++i) {
            py::handle h = args[i];
            if (PyFloat_Check(h.ptr()))
                a.emplace_back(PyFloat_AS_DOUBLE(h.ptr()));
            else if (PyBool_Check(h.ptr()))
                a.emplace_back(h.ptr() == Py_True);
            else if (PyLong_Check(h.ptr()))
                a.emplace_back(h.cast<int64_t>());
            else
                a.emplace_back(to_array(
                    h, in_dtypes[i], "argument " + std::to_string(i) + " (" + in_names[i] + ")"));
        }
        return a;
    }
};

sj::Givens to_givens(py::handle h) {
    sj::Givens g;
    if (h.is_none())
        return g;
    py::iterable items = py::isinstance<py::dict>(h) ? py::iterable(h.attr("items")())
                                                     : py::reinterpret_borrow<py::iterable>(h);
    for (py::handle kv : items) {
        auto pair = py::reinterpret_borrow<py::sequence>(kv);
        sj::Tensor k = pair[0].cast<sj::Tensor>();
        py::object v = pair[1];
        sj::Tensor t = py::isinstance<sj::Tensor>(v)
                           ? v.cast<sj::Tensor>()
                           : sj::constant(to_array(v, k.dtype(), "given"));
        g.emplace_back(k, t);
    }
    return g;
}

/// A Scope as a Python context manager: entered by `with`, re-enterable.
struct PyScope {
    sj::Scope scope;
    std::vector<std::shared_ptr<sj::Scope::Entry>> entries;
};

} // namespace

SignalCheck::SignalCheck() {
    if (!g_signal_checks || PyThread_get_thread_ident() != g_main_thread)
        return;
    drop_pending(); // one a call that swallowed its sj::Interrupted left behind
    scope_.emplace([] {
        py::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() == 0)
            return false;
        PyErr_Fetch(&t_pending[0], &t_pending[1], &t_pending[2]);
        return true;
    });
}

void bind_core(py::module_& m) {
    g_main_thread =
        py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
    py::dict ns;
    ns["__builtins__"] = py::module_::import("builtins");
    ns["__name__"] = "symjax._core";
    py::exec(kErrorDefs, ns);
    const char* names[] = {"Error",   "ShapeError", "TypeError",        "InputError",
                           "IOError", "ParseError", "OutOfMemoryError", "InternalError"};
    for (int i = 0; i < 8; ++i) {
        py::object cls = ns[names[i]];
        cls.attr("__module__") = "symjax";
        m.attr(names[i]) = cls;
        g_errors[i] = cls.inc_ref().ptr();
    }
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p)
                std::rethrow_exception(p);
        } catch (const sj::ShapeError& e) {
            set_error(kShape, e);
        } catch (const sj::TypeError& e) {
            set_error(kType, e);
        } catch (const sj::InputError& e) {
            set_error(kInput, e);
        } catch (const sj::IOError& e) {
            set_error(kIO, e);
        } catch (const sj::ParseError& e) {
            set_error(kParse, e);
        } catch (const sj::OutOfMemoryError& e) {
            set_error(kOOM, e);
        } catch (const sj::Interrupted& e) {
            set_interrupted(e);
        } catch (const sj::InternalError& e) {
            set_error(kInternal, e);
        } catch (const sj::Error& e) {
            set_error(kError, e);
        }
    });

    // ---- functions ------------------------------------------------------------------------
    py::class_<PyFunction>(m, "Function")
        .def("__call__", &PyFunction::call)
        .def("_call_repeated", &PyFunction::call_repeated, py::arg("n"))
        .def_property_readonly("num_inputs", [](const PyFunction& f) { return f.fn.num_inputs(); })
        .def_property_readonly("num_outputs",
                               [](const PyFunction& f) { return f.fn.num_outputs(); })
        .def_property_readonly("calls", [](const PyFunction& f) { return f.fn.calls(); })
        .def("profile_report", [](const PyFunction& f) { return f.fn.profile_report(); })
        .def("dump", [](const PyFunction& f) { return f.fn.dump(); })
        .def_property_readonly("stats", [](const PyFunction& f) {
            const auto& s = f.fn.stats();
            py::dict d;
            d["nodes"] = s.nodes;
            d["kernels"] = s.kernels;
            d["library_calls"] = s.library_calls;
            d["post_ops"] = s.post_ops;
            d["intermediate_bytes"] = s.intermediate_bytes;
            d["peak_arena_bytes"] = s.peak_arena_bytes;
            d["buffer_bytes"] = s.buffer_bytes;
            d["parallel_regions"] = s.parallel_regions;
            d["compiled_loops"] = s.compiled_loops;
            d["step_kernels"] = s.step_kernels;
            d["collective_wait_ms"] = s.collective_wait_ms;
            d["packed_weights"] = s.packed_weights;
            return d;
        });

    m.def(
        "compile",
        [](const std::vector<sj::Tensor>& inputs, const std::vector<sj::Tensor>& outputs,
           const std::vector<std::pair<sj::Tensor, sj::Tensor>>& updates, bool single, bool none,
           std::optional<std::string> backend, bool freeze_rng, uint64_t rng_counter,
           bool nan_guard, bool profile, std::optional<bool> flush_denormals) {
            sj::Updates u;
            for (const auto& [var, value] : updates) {
                SJ_CHECK(var.defined() && var.rank() >= 0, sj::InputError) << "bad update";
                u.add(sj::Variable(var), value);
            }
            sj::FunctionOptions o;
            if (backend)
                o.backend = *backend;
            o.freeze_rng = freeze_rng;
            o.rng_counter = rng_counter;
            o.nan_guard = nan_guard;
            o.profile = profile;
            if (flush_denormals)
                o.flush_denormals = *flush_denormals;
            PyFunction f;
            {
                // the compiler folds loops whose inputs are all constants: that may run long
                SignalCheck ctrl_c;
                f.fn = sj::function(inputs, outputs, u, o);
            }
            for (const auto& t : inputs) {
                f.in_dtypes.push_back(t.dtype());
                f.in_names.push_back(t.name());
            }
            f.single = single;
            f.none = none;
            return f;
        },
        py::arg("inputs"), py::arg("outputs"), py::arg("updates"), py::arg("single"),
        py::arg("none"), py::arg("backend") = py::none(), py::arg("freeze_rng") = false,
        py::arg("rng_counter") = 0, py::arg("nan_guard") = false, py::arg("profile") = false,
        py::arg("flush_denormals") = py::none());
    m.def("available_backends", &sj::available_backends);
    m.def("default_backend", &sj::FunctionOptions::default_backend);

    // ---- variables, placeholders, queries -----------------------------------------------------
    m.def("get_variables", &sj::get_variables, py::arg("glob") = "*",
          py::arg("trainable") = py::none());
    m.def("get_ops", &sj::get_ops, py::arg("glob") = "*");
    m.def("get_placeholders", &sj::get_placeholders, py::arg("glob") = "*");
    m.def("variables_of", &sj::variables_of, py::arg("outputs"), py::arg("trainable") = py::none());
    m.def("reset_variables", &sj::reset_variables, py::arg("glob") = "*");
    m.def("glob_match", &sj::glob_match);

    // ---- scopes -------------------------------------------------------------------------------
    py::class_<PyScope>(m, "Scope")
        .def(py::init([](const std::string& name) {
                 return PyScope{sj::Scope::make(name), {}};
             }),
             py::arg("name"))
        .def_static("at",
                    [](const std::string& p) {
                        return PyScope{sj::Scope::at(p), {}};
                    })
        .def_static("here",
                    [] {
                        return PyScope{sj::Scope::here(), {}};
                    })
        .def(
            "__enter__",
            [](PyScope& s) -> PyScope& {
                s.entries.push_back(std::make_shared<sj::Scope::Entry>(s.scope.enter()));
                return s;
            },
            py::return_value_policy::reference)
        .def("__exit__",
             [](PyScope& s, py::args) {
                 if (!s.entries.empty())
                     s.entries.pop_back();
                 return false;
             })
        .def_property_readonly("path", [](const PyScope& s) { return s.scope.path(); })
        .def_property_readonly("name", [](const PyScope& s) { return s.scope.name(); })
        .def_property_readonly("absolute_name",
                               [](const PyScope& s) { return s.scope.absolute_name(); })
        .def_property_readonly("full_name",
                               [](const PyScope& s) { return s.scope.absolute_name(); })
        .def(
            "variables",
            [](const PyScope& s, std::optional<bool> trainable) {
                return s.scope.variables(trainable);
            },
            py::arg("trainable") = py::none())
        .def_property_readonly("ops", [](const PyScope& s) { return s.scope.ops(); })
        .def_property_readonly("placeholders",
                               [](const PyScope& s) { return s.scope.placeholders(); })
        .def("__repr__", [](const PyScope& s) { return "Scope(" + s.scope.absolute_name() + ")"; });
    m.def("current_scope_path", [] { return sj::Scope::current(); });

    // ---- autodiff -------------------------------------------------------------------------
    m.def(
        "gradients",
        [](const sj::Tensor& cost, const std::vector<sj::Tensor>& wrt) {
            return sj::gradients(cost, wrt);
        },
        py::arg("cost"), py::arg("wrt"));
    m.def("vjp", &sj::vjp);
    m.def("jvp", &sj::jvp);
    m.def("jacobian", &sj::jacobian);
    m.def("hessian_vector_product", &sj::hessian_vector_product);

    // ---- graphs -----------------------------------------------------------------------------
    m.def("clone", [](const std::vector<sj::Tensor>& ts, py::object givens) {
        return sj::clone(ts, to_givens(givens));
    });
    m.def("to_text", &sj::to_text);
    m.def("to_dot", &sj::to_dot);
    m.def("graph_size", &sj::graph_size);
    m.def("state_updates", [](const std::vector<sj::Tensor>& ts) {
        std::vector<std::pair<sj::Variable, sj::Tensor>> out;
        sj::Updates u = sj::nn::state_updates(ts); // kept: items() refers into it
        for (const auto& [v, t] : u.items())
            out.emplace_back(v, t);
        return out;
    });
    m.def(
        "eval",
        [](const sj::Tensor& t, py::object givens) {
            sj::Givens g = to_givens(givens);
            sj::Array a;
            {
                SignalCheck ctrl_c;
                py::gil_scoped_release nogil;
                a = t.eval(g);
            }
            return to_numpy(a);
        },
        py::arg("tensor"), py::arg("givens") = py::none());

    // ---- checkpoints ------------------------------------------------------------------------
    m.def("save_variables", &sj::save_variables, py::arg("path"), py::arg("glob") = "*",
          py::arg("metadata") = std::map<std::string, std::string>{});
    m.def("load_variables", &sj::load_variables, py::arg("path"), py::arg("glob") = "*");
    m.def("read_safetensors", [](const std::string& path) {
        std::map<std::string, std::string> meta;
        auto t = sj::read_safetensors(path, &meta);
        py::dict d;
        for (const auto& [k, v] : t)
            d[py::str(k)] = to_numpy(v);
        return py::make_tuple(d, meta);
    });
    m.def(
        "write_safetensors",
        [](const std::string& path, py::dict tensors,
           const std::map<std::string, std::string>& meta) {
            std::map<std::string, sj::Array> t;
            for (auto [k, v] : tensors)
                t[k.cast<std::string>()] = to_array(v);
            sj::write_safetensors(path, t, meta);
        },
        py::arg("path"), py::arg("tensors"),
        py::arg("metadata") = std::map<std::string, std::string>{});

    // python/bench/interrupt_overhead.py: the same call with and without Ctrl-C's check
    m.def("_set_signal_checks", [](bool on) { g_signal_checks = on; });
    m.def("max_threads", &sj::max_threads);
    m.def("manual_seed", &sj::random::manual_seed);
    // conversions, exposed for tests and the data module
    m.def(
        "as_array",
        [](py::object h, py::object dtype) {
            return to_numpy(to_array(
                h, dtype.is_none() ? std::nullopt : std::optional<sj::DType>(to_dtype(dtype))));
        },
        py::arg("value"), py::arg("dtype") = py::none());
    m.def(
        "empty",
        [](py::object shape, py::object dtype) {
            return to_numpy(sj::Array::uninitialized(to_dtype(dtype), to_shape(shape)));
        },
        py::arg("shape"), py::arg("dtype") = "float32");
    m.def("shares_buffer", [](py::array a, py::array b) {
        sj::Array x = to_array(a), y = to_array(b);
        return x.shares_buffer(y);
    });
}

} // namespace sjpy

PYBIND11_MODULE(_core, m) {
    m.doc() = "symjax's C++ core (bindings of include/symjax/)";
    sjpy::bind_core(m);
    sjpy::bind_tensor(m);
    sjpy::bind_ops(m);
    sjpy::bind_control_flow(m);
    sjpy::bind_nn(m);
    sjpy::bind_data(m);
    sjpy::bind_dist(m);
}
