// symjax._core's control flow (include/symjax/ControlFlow.h): scan, fori_loop, while_loop,
// trip_count, cond and switch_ over flat lists of tensors, with Python callables as bodies.
// symjax/tensor.py adds SymJAX's calling conventions (pytrees, unpacked arguments) on top.
#include "Bind.h"

#include <symjax/ControlFlow.h>
#include <symjax/Vmap.h>

namespace sjpy {

namespace {

using Tensors = sj::Tensors;

// Note [Python bodies]
// A body is a Python callable. The C++ loop calls it once, while it traces the body (when the
// loop is built, never when a compiled function runs), from the thread that called the binding:
// the GIL is held then, and gil_scoped_acquire only makes that explicit. An exception raised by
// the callable crosses the C++ loop as py::error_already_set and reaches the caller unchanged;
// the loop builds nothing when its body throws. A body returns tensors or anything to_tensor
// takes (numbers, arrays: constants).

/// The tensors of a Python sequence (a list or tuple of tensors, numbers or arrays).
Tensors tensors_of(py::handle seq, const std::string& loop, const char* what) {
    if (!py::isinstance<py::sequence>(seq) || py::isinstance<py::str>(seq))
        throw sj::TypeError(loop + ": " + what + " must be a list or tuple of tensors, got " +
                            py::str(py::type::handle_of(seq)).cast<std::string>());
    Tensors out;
    for (py::handle h : seq)
        out.push_back(to_tensor(h));
    return out;
}

py::list to_list(const Tensors& ts) {
    py::list l;
    for (const auto& t : ts)
        l.append(py::cast(t));
    return l;
}

sj::BranchFn branch_of(py::function f, const std::string& construct, const std::string& what) {
    return [f, construct, what](const Tensors& operands) {
        py::gil_scoped_acquire gil;
        return tensors_of(f(to_list(operands)), construct, what.c_str());
    };
}

} // namespace

void bind_control_flow(py::module_& m) {
    m.def(
        "scan",
        [](py::function fn, py::handle init, py::handle sequences, py::handle non_sequences,
           std::optional<int64_t> length, bool reverse, const std::string& name,
           int64_t checkpoint_every, int64_t unroll) {
            const std::string loop = name.empty() ? "scan" : name;
            sj::ScanFn step = [fn, loop](const Tensors& carry, const Tensors& args) {
                py::gil_scoped_acquire gil;
                py::object r = fn(to_list(carry), to_list(args));
                if (!py::isinstance<py::tuple>(r) || py::len(r) != 2)
                    throw sj::TypeError(loop + ": the body must return (carries, outputs)");
                auto pair = r.cast<py::tuple>();
                return std::pair{tensors_of(pair[0], loop, "the body's carries"),
                                 tensors_of(pair[1], loop, "the body's outputs")};
            };
            sj::ScanOptions o;
            o.length = length;
            o.reverse = reverse;
            o.name = name;
            o.checkpoint_every = checkpoint_every;
            o.unroll = unroll;
            sj::ScanResult r = sj::scan(step, tensors_of(init, loop, "init"),
                                        tensors_of(sequences, loop, "sequences"),
                                        tensors_of(non_sequences, loop, "non_sequences"), o);
            return py::make_tuple(to_list(r.carry), to_list(r.outputs));
        },
        py::arg("fn"), py::arg("init"), py::arg("sequences"), py::arg("non_sequences"),
        py::arg("length") = py::none(), py::arg("reverse") = false, py::arg("name") = "",
        py::arg("checkpoint_every") = 0, py::arg("unroll") = 1,
        "sj::scan: fn(carry list, slices then non_sequences list) -> (carry list, output list); "
        "returns (final carries, stacked outputs)");
    m.def(
        "fori_loop",
        [](int64_t lower, int64_t upper, py::function fn, py::handle init) {
            sj::ForiFn step = [fn](const sj::Tensor& i, const Tensors& carry) {
                py::gil_scoped_acquire gil;
                return tensors_of(fn(i, to_list(carry)), "fori_loop", "the body's carries");
            };
            return to_list(
                sj::fori_loop(lower, upper, step, tensors_of(init, "fori_loop", "init")));
        },
        py::arg("lower"), py::arg("upper"), py::arg("fn"), py::arg("init"),
        "sj::fori_loop: fn(i, carry list) -> carry list, for i in [lower, upper)");
    m.def(
        "while_loop",
        [](py::function cond_fn, py::function body_fn, py::handle loop_vars,
           py::handle non_sequences, std::optional<int64_t> max_iterations,
           const std::string& name) {
            const std::string loop = name.empty() ? "while_loop" : name;
            sj::CondFn c = [cond_fn](const Tensors& vars, const Tensors& ns) {
                py::gil_scoped_acquire gil;
                return to_tensor(cond_fn(to_list(vars), to_list(ns)));
            };
            sj::BodyFn b = [body_fn, loop](const Tensors& vars, const Tensors& ns) {
                py::gil_scoped_acquire gil;
                return tensors_of(body_fn(to_list(vars), to_list(ns)), loop,
                                  "the body's loop variables");
            };
            sj::WhileOptions o;
            o.max_iterations = max_iterations;
            o.name = name;
            return to_list(sj::while_loop(c, b, tensors_of(loop_vars, loop, "loop_vars"),
                                          tensors_of(non_sequences, loop, "non_sequences"), o));
        },
        py::arg("cond_fn"), py::arg("body_fn"), py::arg("loop_vars"), py::arg("non_sequences"),
        py::arg("max_iterations") = py::none(), py::arg("name") = "",
        "sj::while_loop: cond_fn(vars, non_sequences) -> bool scalar, body_fn(vars, "
        "non_sequences) -> vars; returns the final vars");
    m.def("trip_count", &sj::trip_count, py::arg("result"),
          "The number of iterations of the while_loop that computed `result` (an int64 scalar)");
    m.def(
        "cond",
        [](py::handle pred, py::function true_fn, py::function false_fn, py::handle operands) {
            return to_list(sj::cond(to_tensor(pred), branch_of(true_fn, "cond", "the true branch"),
                                    branch_of(false_fn, "cond", "the false branch"),
                                    tensors_of(operands, "cond", "operands")));
        },
        py::arg("pred"), py::arg("true_fn"), py::arg("false_fn"), py::arg("operands"),
        "sj::cond: true_fn(operands) or false_fn(operands), each returning a list of tensors");
    m.def(
        "switch",
        [](py::handle index, const std::vector<py::function>& branches, py::handle operands) {
            std::vector<sj::BranchFn> fs;
            for (size_t k = 0; k < branches.size(); ++k)
                fs.push_back(branch_of(branches[k], "switch", "branch " + std::to_string(k)));
            return to_list(
                sj::switch_(to_tensor(index), fs, tensors_of(operands, "switch", "operands")));
        },
        py::arg("index"), py::arg("branches"), py::arg("operands"),
        "sj::switch_: branches[clamp(index)](operands), each returning a list of tensors");
    m.def(
        "vmap",
        [](py::function fn, py::handle args, const std::vector<std::optional<int64_t>>& in_axes,
           const std::vector<std::optional<int64_t>>& out_axes, const std::string& name) {
            const std::string what = name.empty() ? "vmap" : name;
            sj::VmapFn f = [fn, what](const Tensors& a) {
                py::gil_scoped_acquire gil;
                return tensors_of(fn(to_list(a)), what, "the function's results");
            };
            return to_list(sj::vmap(f, {in_axes, out_axes, name})(tensors_of(args, what, "args")));
        },
        py::arg("fn"), py::arg("args"), py::arg("in_axes"), py::arg("out_axes"),
        py::arg("name") = "",
        "sj::vmap applied to args: fn(list of per-example tensors) -> list of tensors; in_axes "
        "and out_axes hold an axis or None (not mapped) per argument and result");
}

} // namespace sjpy
