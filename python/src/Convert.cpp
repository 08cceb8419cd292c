// Conversions between Python/NumPy values and sj's dtypes, arrays, tensors, axes and subscripts.
#include "Bind.h"

#include <cstring>

namespace sjpy {

namespace {
constexpr const char* kCapsuleName = "symjax.Array";

void delete_array_capsule(PyObject* cap) {
    delete static_cast<sj::Array*>(PyCapsule_GetContext(cap));
}

py::module_& numpy() {
    // leaked on purpose: destroying it after the interpreter has finalised would crash at exit
    static auto* np = new py::module_(py::module_::import("numpy"));
    return *np;
}
} // namespace

py::dtype to_numpy_dtype(sj::DType t) {
    switch (t) {
    case sj::DType::Bool:
        return py::dtype("bool");
    case sj::DType::U8:
        return py::dtype("uint8");
    case sj::DType::I32:
        return py::dtype("int32");
    case sj::DType::I64:
        return py::dtype("int64");
    case sj::DType::U32:
        return py::dtype("uint32");
    case sj::DType::F32:
        return py::dtype("float32");
    case sj::DType::F64:
        return py::dtype("float64");
    }
    return py::dtype("float32"); // unreachable: -Werror=switch covers every enumerator
}

sj::DType to_dtype(py::handle h) {
    if (py::isinstance<py::str>(h)) {
        std::string s = h.cast<std::string>();
        // sj's own names ("f32", "i64", "bool")
        for (sj::DType t : {sj::DType::Bool, sj::DType::U8, sj::DType::I32, sj::DType::I64,
                            sj::DType::U32, sj::DType::F32, sj::DType::F64})
            if (s == sj::dtype_name(t))
                return t;
    }
    if (h.is(py::handle(reinterpret_cast<PyObject*>(&PyFloat_Type))))
        return sj::DType::F32;
    if (h.is(py::handle(reinterpret_cast<PyObject*>(&PyLong_Type))))
        return sj::DType::I32;
    if (h.is(py::handle(reinterpret_cast<PyObject*>(&PyBool_Type))))
        return sj::DType::Bool;
    py::dtype d;
    try {
        d = py::dtype::from_args(py::reinterpret_borrow<py::object>(h));
    } catch (py::error_already_set&) {
        throw sj::TypeError("symjax: " + py::repr(h).cast<std::string>() + " is not a dtype");
    }
    char kind = d.kind();
    auto size = d.itemsize();
    if (kind == 'b')
        return sj::DType::Bool;
    if (kind == 'u' && size == 1)
        return sj::DType::U8;
    if (kind == 'u' && size == 4)
        return sj::DType::U32;
    if (kind == 'i' && size == 4)
        return sj::DType::I32;
    if (kind == 'i' && size == 8)
        return sj::DType::I64;
    if (kind == 'f' && size == 4)
        return sj::DType::F32;
    if (kind == 'f' && size == 8)
        return sj::DType::F64;
    throw sj::TypeError("symjax: dtype " + py::str(d).cast<std::string>() +
                        " is not supported (symjax has bool, uint8, int32, int64, uint32, "
                        "float32, float64; see docs/dtypes.md)");
}

py::array to_numpy(const sj::Array& a) {
    py::dtype dt = to_numpy_dtype(a.dtype());
    std::vector<py::ssize_t> shape(a.shape().begin(), a.shape().end());
    std::vector<py::ssize_t> strides(shape.size());
    py::ssize_t s = dt.itemsize();
    for (size_t i = shape.size(); i-- > 0;) {
        strides[i] = s;
        s *= shape[i];
    }
    if (a.size() == 0 || !a.defined())
        return py::array(dt, shape, strides);
    auto* held = new sj::Array(a);
    PyObject* cap =
        PyCapsule_New(const_cast<void*>(held->raw()), kCapsuleName, delete_array_capsule);
    if (!cap) {
        delete held;
        throw py::error_already_set();
    }
    // the capsule's pointer is the data: to_array recognises the array as symjax's own
    PyCapsule_SetContext(cap, held);
    py::object base = py::reinterpret_steal<py::object>(cap);
    return py::array(dt, shape, strides, held->raw(), base);
}

bool is_number(py::handle h) {
    if (PyBool_Check(h.ptr()) || PyLong_Check(h.ptr()) || PyFloat_Check(h.ptr()))
        return true;
    return py::isinstance(h, numpy().attr("generic"));
}

namespace {
/// The sj dtype of a NumPy array from its type number (no Python calls), or nullopt.
std::optional<sj::DType> fast_dtype(const py::array& a) {
    using api = py::detail::npy_api;
    const auto* d = py::detail::array_descriptor_proxy(a.dtype().ptr());
    if (d->byteorder == '>')
        return std::nullopt;
    switch (d->type_num) {
    case api::NPY_BOOL_:
        return sj::DType::Bool;
    case api::NPY_UBYTE_:
        return sj::DType::U8;
    case api::NPY_INT_:
        return sj::DType::I32;
    case api::NPY_UINT_:
        return sj::DType::U32;
    case api::NPY_LONG_:
    case api::NPY_LONGLONG_:
        return sj::DType::I64;
    case api::NPY_FLOAT_:
        return sj::DType::F32;
    case api::NPY_DOUBLE_:
        return sj::DType::F64;
    }
    return std::nullopt;
}
} // namespace

sj::Array to_array(py::handle h, std::optional<sj::DType> want, const std::string& what) {
    // the common case first: a contiguous array of the wanted dtype, copied once
    if (py::isinstance<py::array>(h)) {
        auto arr = py::reinterpret_borrow<py::array>(h);
        std::optional<sj::DType> t = fast_dtype(arr);
        PyObject* base = py::detail::array_proxy(arr.ptr())->base;
        if (t && (!want || *want == *t) && (arr.flags() & py::array::c_style) &&
            !(base && PyCapsule_CheckExact(base))) {
            sj::Shape shape(arr.shape(), arr.shape() + arr.ndim());
            return sj::Array::from_buffer(*t, shape, arr.data());
        }
    }
    // symjax's own array: a view of an sj::Array's whole buffer
    if (py::isinstance<py::array>(h)) {
        auto arr = py::reinterpret_borrow<py::array>(h);
        py::object base_obj = arr.base();
        PyObject* base = base_obj.ptr();
        if (base && PyCapsule_IsValid(base, kCapsuleName)) {
            auto* held = static_cast<sj::Array*>(PyCapsule_GetContext(base));
            bool whole = held && arr.data() == held->raw() && arr.ndim() == held->rank() &&
                         (arr.flags() & py::array::c_style) != 0;
            for (int i = 0; whole && i < held->rank(); ++i)
                whole = arr.shape(i) == held->shape()[size_t(i)];
            if (whole && to_dtype(arr.dtype()) == held->dtype() &&
                (!want || *want == held->dtype()))
                return *held;
        }
    }
    py::array arr;
    if (py::isinstance<py::array>(h)) {
        arr = py::reinterpret_borrow<py::array>(h);
    } else if (PyFloat_Check(h.ptr()) && !want) {
        arr = numpy().attr("asarray")(h, "float32");
    } else if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr()) && !want) {
        arr = numpy().attr("asarray")(h, "int32");
    } else {
        arr = numpy().attr("asarray")(h);
        // Python floats in a list become float64 in NumPy; SymJAX (JAX) makes them float32
        if (!want && arr.dtype().kind() == 'f' && !py::isinstance(h, numpy().attr("ndarray")) &&
            !py::isinstance(h, numpy().attr("generic")))
            arr = arr.attr("astype")("float32");
        else if (!want && arr.dtype().kind() == 'i' && arr.dtype().itemsize() == 8 &&
                 !py::isinstance(h, numpy().attr("generic")))
            arr = arr.attr("astype")("int32");
    }
    sj::DType have;
    try {
        have = to_dtype(arr.dtype());
    } catch (const sj::TypeError&) {
        if (!want)
            throw;
        have = *want;
        if (!numpy().attr("can_cast")(arr.dtype(), to_numpy_dtype(*want), "same_kind").cast<bool>())
            throw sj::TypeError("symjax: " + what + " has dtype " +
                                py::str(arr.dtype()).cast<std::string>() + ", expected " +
                                sj::dtype_name(*want));
        arr = arr.attr("astype")(to_numpy_dtype(*want));
    }
    if (want && *want != have) {
        if (!numpy().attr("can_cast")(arr.dtype(), to_numpy_dtype(*want), "same_kind").cast<bool>())
            throw sj::TypeError("symjax: " + what + " has dtype " +
                                py::str(arr.dtype()).cast<std::string>() + ", expected " +
                                sj::dtype_name(*want) + " (NumPy's same_kind casting)");
        arr = arr.attr("astype")(to_numpy_dtype(*want));
        have = *want;
    }
    // one copy: from a C-contiguous buffer (a non-contiguous one is made contiguous first)
    if (!(arr.flags() & py::array::c_style))
        arr = numpy().attr("ascontiguousarray")(arr);
    sj::Shape shape(arr.shape(), arr.shape() + arr.ndim());
    return sj::Array::from_buffer(have, shape, arr.data());
}

sj::Tensor to_tensor(py::handle h) {
    if (py::isinstance<sj::Tensor>(h))
        return h.cast<sj::Tensor>();
    return sj::constant(to_array(h));
}

sj::Axes to_axes(py::handle h) {
    if (h.is_none())
        return {};
    if (PyLong_Check(h.ptr()) || py::isinstance(h, numpy().attr("integer")))
        return {h.cast<int64_t>()};
    sj::Axes out;
    for (py::handle a : h)
        out.push_back(a.cast<int64_t>());
    return out;
}

sj::Shape to_shape(py::handle h) {
    if (h.is_none())
        return {};
    if (PyLong_Check(h.ptr()) || py::isinstance(h, numpy().attr("integer")))
        return {h.cast<int64_t>()};
    sj::Shape out;
    for (py::handle a : h)
        out.push_back(a.is_none() ? sj::kAnyDim : a.cast<int64_t>());
    return out;
}

py::tuple shape_tuple(const sj::Shape& s) {
    py::tuple t(s.size());
    for (size_t i = 0; i < s.size(); ++i)
        t[i] = s[i] < 0 ? py::none() : py::object(py::int_(s[i]));
    return t;
}

std::vector<std::pair<int64_t, int64_t>> to_pairs(py::handle h) {
    std::vector<std::pair<int64_t, int64_t>> pairs;
    if (h.is_none())
        return pairs;
    if (PyLong_Check(h.ptr())) {
        int64_t v = h.cast<int64_t>();
        return {{v, v}};
    }
    for (py::handle p : h) {
        if (PyLong_Check(p.ptr())) {
            int64_t v = p.cast<int64_t>();
            pairs.emplace_back(v, v);
        } else {
            auto s = py::reinterpret_borrow<py::sequence>(p);
            pairs.emplace_back(s[0].cast<int64_t>(), s[1].cast<int64_t>());
        }
    }
    return pairs;
}

sj::Padding to_padding(py::handle h) {
    if (py::isinstance<py::str>(h))
        return sj::Padding(h.cast<std::string>());
    if (PyLong_Check(h.ptr()))
        return sj::Padding(h.cast<int64_t>());
    return sj::Padding(to_pairs(h));
}

std::optional<uint64_t> to_seed(py::handle h) {
    if (h.is_none())
        return std::nullopt;
    return h.cast<uint64_t>();
}

sj::interpolation::Method to_method(const std::string& s) {
    if (s == "nearest")
        return sj::interpolation::Method::Nearest;
    if (s == "linear" || s == "bilinear" || s == "trilinear")
        return sj::interpolation::Method::Linear;
    throw sj::InputError("symjax: unknown interpolation method '" + s +
                         "' (nearest, linear, bilinear, trilinear)");
}

sj::Tensor binary(py::handle a, py::handle b, BinTT tt, BinTD td, BinDT dt) {
    bool ta = py::isinstance<sj::Tensor>(a), tb = py::isinstance<sj::Tensor>(b);
    if (ta && !tb && (PyFloat_Check(b.ptr()) || PyLong_Check(b.ptr())))
        return td(a.cast<const sj::Tensor&>(), b.cast<double>());
    if (tb && !ta && (PyFloat_Check(a.ptr()) || PyLong_Check(a.ptr())))
        return dt(a.cast<double>(), b.cast<const sj::Tensor&>());
    return tt(to_tensor(a), to_tensor(b));
}

namespace {
bool is_int_scalar(py::handle h) {
    return (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) ||
           py::isinstance(h, numpy().attr("integer"));
}
} // namespace

Subscript to_subscript(const sj::Tensor& x, py::handle key) {
    std::vector<py::object> items;
    if (py::isinstance<py::tuple>(key))
        for (py::handle k : key)
            items.push_back(py::reinterpret_borrow<py::object>(k));
    else
        items.push_back(py::reinterpret_borrow<py::object>(key));
    // Ellipsis expands to the dims no other entry names
    int named = 0, ellipses = 0;
    for (auto& k : items) {
        if (k.is(py::ellipsis()))
            ++ellipses;
        else if (!k.is_none())
            ++named;
    }
    if (ellipses > 1)
        throw sj::InputError("symjax: an index can only have a single ellipsis ('...'), got " +
                             py::repr(key).cast<std::string>());
    Subscript out;
    int64_t out_axis = 0;
    for (auto& k : items) {
        if (k.is(py::ellipsis())) {
            for (int i = named; i < x.rank(); ++i, ++out_axis)
                out.idx.push_back(sj::sl());
        } else if (k.is_none()) {
            out.new_axes.push_back(out_axis++);
        } else if (is_int_scalar(k)) {
            out.idx.push_back(sj::Index(k.cast<int64_t>()));
        } else if (py::isinstance<py::slice>(k)) {
            py::object start = k.attr("start"), stop = k.attr("stop"), step = k.attr("step");
            int64_t st = step.is_none() ? 1 : step.cast<int64_t>();
            if (st == 0)
                throw py::value_error("symjax: slice " + py::repr(k).cast<std::string>() +
                                      " of tensor " + x.name() + ": slice step cannot be zero");
            // Python's defaults: from 0 to the end, or with a negative step from the last element
            // through index 0 (Note [Negative steps] in src/ops/Movement.cpp)
            bool back = st < 0;
            out.idx.push_back(
                sj::sl(start.is_none() ? (back ? sj::Index::kEnd : 0) : start.cast<int64_t>(),
                       stop.is_none() ? (back ? sj::Index::kBegin : sj::Index::kEnd)
                                      : stop.cast<int64_t>(),
                       st));
            ++out_axis;
        } else {
            sj::Tensor t = to_tensor(k);
            if (t.dtype() == sj::DType::Bool)
                throw sj::InputError("symjax: boolean mask index of tensor " + x.name() +
                                     ": the result's shape would depend on the values; use "
                                     "symjax.tensor.where");
            out.idx.push_back(sj::Index(t));
            out_axis += t.rank();
        }
    }
    return out;
}

sj::Tensor subscript(const sj::Tensor& x, py::handle key) {
    Subscript s = to_subscript(x, key);
    sj::Tensor y = s.idx.empty() ? x : x[s.idx];
    for (int64_t a : s.new_axes)
        y = sj::expand_dims(y, a);
    return y;
}

} // namespace sjpy
