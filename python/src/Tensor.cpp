// Tensor, Placeholder and Variable, with NumPy's operators, subscripts and methods.
#include "Bind.h"

namespace sjpy {

namespace {

std::string repr(const sj::Tensor& t, const char* kind) {
    std::string s = std::string(kind) + "(name=" + t.name() + ", shape=(";
    const auto& sh = t.shape();
    for (size_t i = 0; i < sh.size(); ++i) {
        s += sh[i] < 0 ? "None" : std::to_string(sh[i]);
        if (sh.size() == 1 || i + 1 < sh.size())
            s += sh.size() == 1 ? "," : ", ";
    }
    s += "), dtype=" + py::str(to_numpy_dtype(t.dtype())).cast<std::string>() + ")";
    return s;
}

/// `x.at[idx]`: an object whose methods are the functional indexed updates.
struct AtHelper {
    sj::Tensor x;
};

sj::Tensor ref_apply(const sj::IndexedRef& r, py::handle v, sj::ScatterMode mode) {
    return sj::index_apply(r.tensor(), r.indices(),
                           py::isinstance<sj::Tensor>(v)
                               ? v.cast<sj::Tensor>()
                               : sj::constant(to_array(v, r.tensor().dtype(), "update value")),
                           mode);
}

sj::IndexedRef at_ref(const sj::Tensor& x, py::handle key) {
    Subscript s = to_subscript(x, key);
    if (!s.new_axes.empty())
        throw sj::InputError("symjax: x.at[...] of tensor " + x.name() +
                             " cannot take None (new axes)");
    return sj::IndexedRef(x, s.idx);
}

/// NumPy's truncating integer division is not Python's: // floors (the sign of the divisor).
sj::Tensor floordiv(const sj::Tensor& a, const sj::Tensor& b) {
    if (sj::is_float(sj::promote(a.dtype(), b.dtype())))
        return sj::floor(sj::div(a, b));
    // floor(a / b) = (a - mod(a, b)) / b exactly for integers
    return sj::div(sj::sub(a, sj::mod(a, b)), b);
}
sj::Tensor floordiv_td(const sj::Tensor& a, double b) {
    return floordiv(a, sj::scalar_like(b, a));
}
sj::Tensor floordiv_dt(double a, const sj::Tensor& b) {
    return floordiv(sj::scalar_like(a, b), b);
}

sj::Tensor truediv(const sj::Tensor& a, const sj::Tensor& b) {
    // Python's / is true division: integers divide as float32 (JAX's rule)
    sj::DType t = sj::promote(a.dtype(), b.dtype());
    if (!sj::is_float(t))
        return sj::div(sj::cast(a, sj::DType::F32), sj::cast(b, sj::DType::F32));
    return sj::div(a, b);
}
sj::Tensor truediv_td(const sj::Tensor& a, double b) {
    return sj::is_float(a.dtype()) ? sj::div(a, b) : sj::div(sj::cast(a, sj::DType::F32), b);
}
sj::Tensor truediv_dt(double a, const sj::Tensor& b) {
    return sj::is_float(b.dtype()) ? sj::div(a, b) : sj::div(a, sj::cast(b, sj::DType::F32));
}

#define SJ_PY_BIN(name)                                                                            \
    [](py::handle a, py::handle b) {                                                               \
        return binary(a, b, static_cast<BinTT>(&sj::name), static_cast<BinTD>(&sj::name),          \
                      static_cast<BinDT>(&sj::name));                                              \
    }
#define SJ_PY_RBIN(name)                                                                           \
    [](py::handle a, py::handle b) {                                                               \
        return binary(b, a, static_cast<BinTT>(&sj::name), static_cast<BinTD>(&sj::name),          \
                      static_cast<BinDT>(&sj::name));                                              \
    }

sj::Tensor matmul_any(py::handle a, py::handle b) {
    return sj::matmul(to_tensor(a), to_tensor(b));
}

sj::Tensor logical(py::handle a, py::handle b, BinTT f) {
    return f(to_tensor(a), to_tensor(b));
}

} // namespace

void bind_tensor(py::module_& m) {
    py::class_<sj::Tensor> tensor(m, "Tensor", py::dynamic_attr());
    tensor.def(py::init([](py::object value) { return to_tensor(value); }), py::arg("value"))
        .def_property_readonly("shape", [](const sj::Tensor& t) { return shape_tuple(t.shape()); })
        .def_property_readonly("dtype",
                               [](const sj::Tensor& t) { return to_numpy_dtype(t.dtype()); })
        .def_property_readonly("ndim", &sj::Tensor::rank)
        .def_property_readonly("rank", &sj::Tensor::rank)
        .def_property_readonly("size",
                               [](const sj::Tensor& t) -> py::object {
                                   int64_t n = sj::numel(t.shape());
                                   return n < 0 ? py::none() : py::object(py::int_(n));
                               })
        .def_property_readonly("name", &sj::Tensor::name)
        .def("named", &sj::Tensor::named)
        .def("type_str", &sj::Tensor::type_str)
        .def("same", &sj::Tensor::same)
        .def("__hash__",
             [](const sj::Tensor& t) { return std::hash<const void*>()(t.node().get()); })
        .def("__repr__", [](const sj::Tensor& t) { return repr(t, "Tensor"); })
        .def("__len__",
             [](const sj::Tensor& t) {
                 if (t.rank() == 0)
                     throw py::type_error("len() of a 0-d tensor");
                 if (t.shape()[0] < 0)
                     throw py::type_error("len() of tensor " + t.name() +
                                          ": its first dim is known only at call time");
                 return t.shape()[0];
             })
        .def("__iter__",
             [](const sj::Tensor& t) {
                 if (t.rank() == 0 || t.shape()[0] < 0)
                     throw py::type_error("iteration over tensor " + t.name() + " of shape " +
                                          sj::shape_str(t.shape()) + " (needs a known first dim)");
                 py::list l;
                 for (int64_t i = 0; i < t.shape()[0]; ++i)
                     l.append(t[sj::Index(i)]);
                 return py::iter(l);
             })
        .def("__getitem__", [](const sj::Tensor& t, py::handle key) { return subscript(t, key); })
        .def("__setitem__",
             [](const sj::Tensor& t, py::handle, py::handle) {
                 throw py::type_error("tensor " + t.name() +
                                      " is immutable: use x.at[index].set(value), which returns "
                                      "a new tensor");
             })
        .def_property_readonly("at", [](const sj::Tensor& t) { return AtHelper{t}; })
        // arithmetic with NumPy's semantics (numbers take the tensor's dtype)
        .def("__add__", SJ_PY_BIN(add))
        .def("__radd__", SJ_PY_RBIN(add))
        .def("__sub__", SJ_PY_BIN(sub))
        .def("__rsub__", SJ_PY_RBIN(sub))
        .def("__mul__", SJ_PY_BIN(mul))
        .def("__rmul__", SJ_PY_RBIN(mul))
        .def("__truediv__",
             [](py::handle a, py::handle b) {
                 return binary(a, b, &truediv, &truediv_td, &truediv_dt);
             })
        .def("__rtruediv__",
             [](py::handle a, py::handle b) {
                 return binary(b, a, &truediv, &truediv_td, &truediv_dt);
             })
        .def("__floordiv__",
             [](py::handle a, py::handle b) {
                 return binary(a, b, &floordiv, &floordiv_td, &floordiv_dt);
             })
        .def("__rfloordiv__",
             [](py::handle a, py::handle b) {
                 return binary(b, a, &floordiv, &floordiv_td, &floordiv_dt);
             })
        .def("__mod__", SJ_PY_BIN(mod))
        .def("__rmod__", SJ_PY_RBIN(mod))
        .def("__pow__", SJ_PY_BIN(pow))
        .def("__rpow__", SJ_PY_RBIN(pow))
        .def("__matmul__", &matmul_any)
        .def("__rmatmul__", [](py::handle a, py::handle b) { return matmul_any(b, a); })
        .def("__neg__", [](const sj::Tensor& t) { return sj::neg(t); })
        .def("__pos__", [](const sj::Tensor& t) { return t; })
        .def("__abs__", [](const sj::Tensor& t) { return sj::abs(t); })
        .def("__invert__",
             [](const sj::Tensor& t) {
                 if (t.dtype() != sj::DType::Bool)
                     throw sj::TypeError("symjax: ~ of tensor " + t.name() + " of dtype " +
                                         sj::dtype_name(t.dtype()) +
                                         ": only bool tensors (logical not) are supported");
                 return sj::logical_not(t);
             })
        .def("__and__", [](py::handle a, py::handle b) { return logical(a, b, &sj::logical_and); })
        .def("__rand__", [](py::handle a, py::handle b) { return logical(b, a, &sj::logical_and); })
        .def("__or__", [](py::handle a, py::handle b) { return logical(a, b, &sj::logical_or); })
        .def("__ror__", [](py::handle a, py::handle b) { return logical(b, a, &sj::logical_or); })
        .def("__xor__", [](py::handle a, py::handle b) { return logical(a, b, &sj::logical_xor); })
        .def("__rxor__", [](py::handle a, py::handle b) { return logical(b, a, &sj::logical_xor); })
        .def("__lt__", SJ_PY_BIN(lt))
        .def("__le__", SJ_PY_BIN(le))
        .def("__gt__", SJ_PY_BIN(gt))
        .def("__ge__", SJ_PY_BIN(ge))
        // Note [== and bool]: == and != are elementwise (NumPy); the result remembers whether the
        // two operands were the same tensor, and bool() of it answers that, so that `t in list`,
        // list.index(t) and dict lookups work by identity. bool() of any other tensor raises.
        .def("__eq__",
             [](py::handle a, py::handle b) -> py::object {
                 if (b.is_none()) // `t == None` is a Python identity test, not an op
                     return py::bool_(false);
                 sj::Tensor r = binary(a, b, static_cast<BinTT>(&sj::eq),
                                       static_cast<BinTD>(&sj::eq), static_cast<BinDT>(&sj::eq));
                 py::object o = py::cast(r);
                 bool same = py::isinstance<sj::Tensor>(b) &&
                             a.cast<const sj::Tensor&>().same(b.cast<const sj::Tensor&>());
                 o.attr("_identity") = py::bool_(same);
                 return o;
             })
        .def("__ne__",
             [](py::handle a, py::handle b) -> py::object {
                 if (b.is_none())
                     return py::bool_(true);
                 sj::Tensor r = binary(a, b, static_cast<BinTT>(&sj::ne),
                                       static_cast<BinTD>(&sj::ne), static_cast<BinDT>(&sj::ne));
                 py::object o = py::cast(r);
                 bool same = py::isinstance<sj::Tensor>(b) &&
                             a.cast<const sj::Tensor&>().same(b.cast<const sj::Tensor&>());
                 o.attr("_identity") = py::bool_(!same);
                 return o;
             })
        .def("__bool__",
             [](py::object self) {
                 if (py::hasattr(self, "_identity"))
                     return self.attr("_identity").cast<bool>();
                 throw py::type_error(
                     "the truth value of a symbolic tensor (" +
                     self.cast<const sj::Tensor&>().name() +
                     ") is unknown until a function runs; use symjax.tensor.where, or .get()");
             })
        // NumPy's methods
        .def_property_readonly("T", [](const sj::Tensor& t) { return sj::transpose(t); })
        .def("transpose",
             [](const sj::Tensor& t, py::args perm) {
                 if (perm.size() == 1 && !PyLong_Check(perm[0].ptr()))
                     return sj::transpose(t, to_axes(perm[0]));
                 return sj::transpose(t, to_axes(perm));
             })
        .def("reshape",
             [](const sj::Tensor& t, py::args shape) {
                 if (shape.size() == 1 && !PyLong_Check(shape[0].ptr()))
                     return sj::reshape(t, to_shape(shape[0]));
                 return sj::reshape(t, to_shape(shape));
             })
        .def("astype", [](const sj::Tensor& t, py::handle d) { return sj::cast(t, to_dtype(d)); })
        .def("flatten", [](const sj::Tensor& t) { return sj::reshape(t, {-1}); })
        .def(
            "squeeze",
            [](const sj::Tensor& t, py::object axis) { return sj::squeeze(t, to_axes(axis)); },
            py::arg("axis") = py::none())
        .def("expand_dims", &sj::expand_dims)
        .def("clip", &sj::clip)
        .def("round", [](const sj::Tensor& t) { return sj::round(t); })
        .def(
            "get",
            [](const sj::Tensor& t, py::object givens) {
                return py::module_::import("symjax._core").attr("eval")(t, givens);
            },
            py::arg("givens") = py::none())
        .def(
            "eval",
            [](const sj::Tensor& t, py::object givens) {
                return py::module_::import("symjax._core").attr("eval")(t, givens);
            },
            py::arg("givens") = py::none())
        .def(
            "clone",
            [](const sj::Tensor& t, py::object givens) {
                return py::module_::import("symjax._core")
                    .attr("clone")(std::vector<sj::Tensor>{t}, givens)
                    .cast<std::vector<sj::Tensor>>()[0];
            },
            py::arg("givens") = py::none());
    // reductions as methods: x.sum(axis=None, keepdims=False)
#define SJ_PY_REDUCE(name)                                                                         \
    tensor.def(                                                                                    \
        #name,                                                                                     \
        [](const sj::Tensor& t, py::object axis, bool keepdims) {                                  \
            return sj::name(t, to_axes(axis), keepdims);                                           \
        },                                                                                         \
        py::arg("axis") = py::none(), py::arg("keepdims") = false)
    SJ_PY_REDUCE(sum);
    SJ_PY_REDUCE(prod);
    SJ_PY_REDUCE(max);
    SJ_PY_REDUCE(min);
    SJ_PY_REDUCE(any);
    SJ_PY_REDUCE(all);
    SJ_PY_REDUCE(mean);
    SJ_PY_REDUCE(logsumexp);
#undef SJ_PY_REDUCE
    tensor.def(
        "var",
        [](const sj::Tensor& t, py::object axis, bool keepdims, int ddof) {
            return sj::var(t, to_axes(axis), keepdims, ddof);
        },
        py::arg("axis") = py::none(), py::arg("keepdims") = false, py::arg("ddof") = 0);
    tensor.def(
        "std",
        [](const sj::Tensor& t, py::object axis, bool keepdims, int ddof) {
            return sj::sqrt(sj::var(t, to_axes(axis), keepdims, ddof));
        },
        py::arg("axis") = py::none(), py::arg("keepdims") = false, py::arg("ddof") = 0);
    tensor.def(
        "argmax",
        [](const sj::Tensor& t, py::object axis, bool keepdims) {
            if (axis.is_none())
                return sj::argmax(sj::reshape(t, {-1}), 0, false);
            return sj::argmax(t, axis.cast<int64_t>(), keepdims);
        },
        py::arg("axis") = py::none(), py::arg("keepdims") = false);
    tensor.def(
        "argmin",
        [](const sj::Tensor& t, py::object axis, bool keepdims) {
            if (axis.is_none())
                return sj::argmin(sj::reshape(t, {-1}), 0, false);
            return sj::argmin(t, axis.cast<int64_t>(), keepdims);
        },
        py::arg("axis") = py::none(), py::arg("keepdims") = false);
    tensor.def(
        "cumsum",
        [](const sj::Tensor& t, py::object axis) {
            if (axis.is_none())
                return sj::cumsum(sj::reshape(t, {-1}), 0);
            return sj::cumsum(t, axis.cast<int64_t>());
        },
        py::arg("axis") = py::none());
    // a sorted copy, as jax.Array.sort (NumPy's ndarray.sort sorts in place; a Tensor is a value);
    // axis None sorts the flattened tensor
    auto sorting = [](sj::Tensor (*f)(const sj::Tensor&, int64_t, bool)) {
        return [f](const sj::Tensor& t, py::object axis, bool descending) {
            return axis.is_none() ? f(sj::reshape(t, {-1}), 0, descending)
                                  : f(t, axis.cast<int64_t>(), descending);
        };
    };
    tensor.def("sort", sorting(&sj::sort), py::arg("axis") = -1, py::kw_only(),
               py::arg("descending") = false);
    tensor.def("argsort", sorting(&sj::argsort), py::arg("axis") = -1, py::kw_only(),
               py::arg("descending") = false);

    py::class_<AtHelper>(m, "_At").def(
        "__getitem__", [](const AtHelper& h, py::handle key) { return at_ref(h.x, key); });
    py::class_<sj::IndexedRef>(m, "IndexedRef")
        .def("get", &sj::IndexedRef::get)
        .def("set", [](const sj::IndexedRef& r,
                       py::handle v) { return ref_apply(r, v, sj::ScatterMode::Set); })
        .def("add", [](const sj::IndexedRef& r,
                       py::handle v) { return ref_apply(r, v, sj::ScatterMode::Add); })
        .def("multiply", [](const sj::IndexedRef& r,
                            py::handle v) { return ref_apply(r, v, sj::ScatterMode::Mul); })
        .def("mul", [](const sj::IndexedRef& r,
                       py::handle v) { return ref_apply(r, v, sj::ScatterMode::Mul); })
        .def("min", [](const sj::IndexedRef& r,
                       py::handle v) { return ref_apply(r, v, sj::ScatterMode::Min); })
        .def("max", [](const sj::IndexedRef& r, py::handle v) {
            return ref_apply(r, v, sj::ScatterMode::Max);
        });
    m.def("index_apply", [](const sj::Tensor& x, py::handle key, py::handle v, int mode) {
        return ref_apply(at_ref(x, key), v, static_cast<sj::ScatterMode>(mode));
    });

    py::class_<sj::Placeholder, sj::Tensor>(m, "Placeholder", py::dynamic_attr())
        .def(py::init([](py::object shape, py::object dtype, py::object name) {
                 std::string n =
                     name.is_none() ? std::string("placeholder") : name.cast<std::string>();
                 return sj::Placeholder(to_shape(shape), to_dtype(dtype), n);
             }),
             py::arg("shape"), py::arg("dtype") = "float32", py::arg("name") = py::none())
        .def("__repr__", [](const sj::Placeholder& t) { return repr(t, "Placeholder"); });

    py::class_<sj::Variable, sj::Tensor>(m, "Variable", py::dynamic_attr())
        .def(py::init([](py::object init, py::object name, bool trainable, py::object dtype) {
                 std::string n =
                     name.is_none() ? std::string("unnamed_variable") : name.cast<std::string>();
                 if (py::isinstance<sj::Tensor>(init)) {
                     sj::Tensor t = init.cast<sj::Tensor>();
                     if (!dtype.is_none() && to_dtype(dtype) != t.dtype())
                         t = sj::cast(t, to_dtype(dtype));
                     return sj::Variable(t, n, trainable);
                 }
                 std::optional<sj::DType> d;
                 if (!dtype.is_none())
                     d = to_dtype(dtype);
                 return sj::Variable(to_array(init, d, "initial value of " + n), n, trainable);
             }),
             py::arg("initializer"), py::arg("name") = py::none(), py::arg("trainable") = true,
             py::arg("dtype") = py::none())
        .def_property_readonly("value", [](const sj::Variable& v) { return to_numpy(v.value()); })
        .def("update",
             [](const sj::Variable& v, py::object value) {
                 v.assign(to_array(value, v.dtype(), "value of " + v.full_name()));
             })
        .def("assign",
             [](const sj::Variable& v, py::object value) {
                 v.assign(to_array(value, v.dtype(), "value of " + v.full_name()));
             })
        .def("reset", &sj::Variable::reset)
        .def_property_readonly("trainable", &sj::Variable::trainable)
        .def_property_readonly("full_name", &sj::Variable::full_name)
        .def_property_readonly("scope",
                               [](const sj::Variable& v) {
                                   const std::string& f = v.full_name();
                                   auto p = f.rfind('/');
                                   return p == std::string::npos ? std::string("/")
                                                                 : "/" + f.substr(0, p) + "/";
                               })
        .def("__repr__", [](const sj::Variable& t) { return repr(t, "Variable"); });
    m.def("as_variable", [](const sj::Tensor& t) { return sj::Variable(t); });
    m.def("as_placeholder", [](const sj::Tensor& t) { return sj::Placeholder(t); });
}

} // namespace sjpy
