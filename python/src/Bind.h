// Shared helpers of the symjax._core bindings: dtype and array conversion, Python values as
// tensors, axes and indices.
#pragma once

#include <symjax/symjax.h>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

namespace sjpy {

namespace py = pybind11;

/// The NumPy dtype of an sj dtype.
py::dtype to_numpy_dtype(sj::DType t);
/// An sj dtype from a NumPy dtype, a type (float, np.float32), or a name ("float32", "f32").
/// TypeError naming the dtype when symjax has no such element type.
sj::DType to_dtype(py::handle h);

/// A NumPy array that owns (shares) the Array's buffer through a capsule: no copy.
py::array to_numpy(const sj::Array& a);
/// An Array from anything NumPy can make an array of. A NumPy array made by symjax (an output,
/// a variable's value) that still covers its whole buffer is taken without a copy; any other is
/// copied once (into a contiguous buffer). With `want`, values are cast to it when NumPy's
/// same_kind rule allows (float64 into float32, as JAX does), else TypeError naming `what`.
sj::Array to_array(py::handle h, std::optional<sj::DType> want = std::nullopt,
                   const std::string& what = "value");

/// True for Python numbers (bool, int, float) and NumPy scalars that are not arrays.
bool is_number(py::handle h);
/// The default dtype of a Python value as a tensor: bool -> bool, int -> int32, float -> float32
/// (JAX's and SymJAX's defaults); NumPy values keep theirs.
/// A tensor from a Tensor, a number or an array-like (a constant).
sj::Tensor to_tensor(py::handle h);
/// Updates as (variable, new value) pairs, which the Python side turns into a dict.
using VarUpdateList = std::vector<std::pair<sj::Variable, sj::Tensor>>;
VarUpdateList to_list(const sj::Updates& u);
/// Axes from None (all), an int, or a sequence of ints.
sj::Axes to_axes(py::handle h);
/// A shape from an int, a sequence of ints, None entries meaning "any size" (-1).
sj::Shape to_shape(py::handle h);
/// Padding from "VALID"/"SAME", an int (p, p on every dim), or a sequence of ints or (lo, hi).
sj::Padding to_padding(py::handle h);
/// (lo, hi) pairs from None (none), an int, or a sequence of ints or (lo, hi) pairs.
std::vector<std::pair<int64_t, int64_t>> to_pairs(py::handle h);
/// A seed from None (the global sequence) or an int.
std::optional<uint64_t> to_seed(py::handle h);
/// "nearest" or "linear" ("bilinear", "trilinear"); InputError naming the method otherwise.
sj::interpolation::Method to_method(const std::string& s);
/// The shape as a tuple, with None for dims known only at call time.
py::tuple shape_tuple(const sj::Shape& s);

/// A binary op with a number on either side (the number takes the tensor's dtype, as the C++
/// overloads) or two tensors.
using BinTT = sj::Tensor (*)(const sj::Tensor&, const sj::Tensor&);
using BinTD = sj::Tensor (*)(const sj::Tensor&, double);
using BinDT = sj::Tensor (*)(double, const sj::Tensor&);
sj::Tensor binary(py::handle a, py::handle b, BinTT tt, BinTD td, BinDT dt);

/// The subscript of x[key] as sj indices, and the positions of `None` (new axes) in the result.
struct Subscript {
    std::vector<sj::Index> idx;
    std::vector<int64_t> new_axes;
};
Subscript to_subscript(const sj::Tensor& x, py::handle key);
/// x[key] (basic and integer-tensor indexing, None and Ellipsis).
sj::Tensor subscript(const sj::Tensor& x, py::handle key);

/// Note [Ctrl-C]: made with the GIL held before a long call releases it. On Python's main thread
/// it installs an sj::InterruptScope whose check takes the GIL back (at most every 10 ms) and runs
/// Python's signal handlers (PyErr_CheckSignals); when one raises (KeyboardInterrupt for
/// Ctrl-C), the check keeps that exception and stops the call, which unwinds as sj::Interrupted
/// before any variable changes, and the translator raises the kept exception. Elsewhere
/// (Python runs signal handlers on the main thread only) it does nothing.
class SignalCheck {
public:
    SignalCheck();

private:
    std::optional<sj::InterruptScope> scope_;
};

void bind_core(py::module_& m);
void bind_tensor(py::module_& m);
void bind_ops(py::module_& m);
void bind_control_flow(py::module_& m);
void bind_nn(py::module_& m);
void bind_data(py::module_& m);
void bind_dist(py::module_& m); // after bind_nn (it adds nn.DataParallel)

} // namespace sjpy
