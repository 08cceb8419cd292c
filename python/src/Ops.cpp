// The op functions of include/symjax/Ops.h, Random.h, Interpolation.h and Search.h, taking Python
// values.
#include "Bind.h"

namespace sjpy {

namespace {

std::vector<sj::Tensor> to_tensors(py::handle h) {
    std::vector<sj::Tensor> out;
    for (py::handle t : h)
        out.push_back(to_tensor(t));
    return out;
}

sj::interpolation::Boundary to_boundary(const std::string& s) {
    using B = sj::interpolation::Boundary;
    if (s == "constant" || s == "grid-constant")
        return B::Constant;
    if (s == "nearest" || s == "edge")
        return B::Nearest;
    if (s == "wrap" || s == "grid-wrap")
        return B::Wrap;
    if (s == "reflect")
        return B::Reflect;
    if (s == "mirror")
        return B::Mirror;
    throw sj::InputError("symjax: unknown boundary mode '" + s +
                         "' (constant, nearest, wrap, reflect, mirror)");
}
sj::interpolation::UpsampleMode to_upsample_mode(const std::string& s) {
    if (s == "constant")
        return sj::interpolation::UpsampleMode::Constant;
    if (s == "nearest" || s == "repeat")
        return sj::interpolation::UpsampleMode::Nearest;
    if (s == "linear")
        return sj::interpolation::UpsampleMode::Linear;
    throw sj::InputError("symjax: unknown upsample mode '" + s + "' (constant, nearest, linear)");
}

} // namespace

void bind_ops(py::module_& m) {
    // ---- creation ---------------------------------------------------------------------------
    m.def(
        "constant",
        [](py::object v, py::object dtype) {
            std::optional<sj::DType> d;
            if (!dtype.is_none())
                d = to_dtype(dtype);
            return sj::constant(to_array(v, d, "constant"));
        },
        py::arg("value"), py::arg("dtype") = py::none());
    m.def(
        "full",
        [](py::object shape, double v, py::object dtype) {
            return sj::full(to_shape(shape), v, to_dtype(dtype));
        },
        py::arg("shape"), py::arg("fill_value"), py::arg("dtype") = "float32");
    m.def(
        "full_like",
        [](const sj::Tensor& t, double v, py::object dtype) {
            return dtype.is_none() ? sj::full_like(t, v) : sj::full_like(t, v, to_dtype(dtype));
        },
        py::arg("tensor"), py::arg("fill_value"), py::arg("dtype") = py::none());
    m.def("arange", [](double start, double stop, double step, py::object dtype) {
        return sj::arange(start, stop, step, to_dtype(dtype));
    });
    m.def("linspace", [](double start, double stop, int64_t num, py::object dtype) {
        return sj::linspace(start, stop, num, to_dtype(dtype));
    });
    m.def("eye", [](int64_t n, int64_t k_m, int64_t k, py::object dtype) {
        return sj::eye(n, k_m, k, to_dtype(dtype));
    });

    // ---- elementwise ------------------------------------------------------------------------
#define SJ_PY_UNARY(name) m.def(#name, [](py::handle x) { return sj::name(to_tensor(x)); })
    SJ_PY_UNARY(neg);
    SJ_PY_UNARY(abs);
    SJ_PY_UNARY(sign);
    SJ_PY_UNARY(exp);
    SJ_PY_UNARY(expm1);
    SJ_PY_UNARY(log);
    SJ_PY_UNARY(log1p);
    SJ_PY_UNARY(log2);
    SJ_PY_UNARY(sqrt);
    SJ_PY_UNARY(rsqrt);
    SJ_PY_UNARY(reciprocal);
    SJ_PY_UNARY(sin);
    SJ_PY_UNARY(cos);
    SJ_PY_UNARY(tan);
    SJ_PY_UNARY(tanh);
    SJ_PY_UNARY(erf);
    SJ_PY_UNARY(floor);
    SJ_PY_UNARY(ceil);
    SJ_PY_UNARY(round);
    SJ_PY_UNARY(logical_not);
    SJ_PY_UNARY(isnan);
    SJ_PY_UNARY(isinf);
    SJ_PY_UNARY(stop_gradient);
    SJ_PY_UNARY(sigmoid);
    SJ_PY_UNARY(log_sigmoid);
    SJ_PY_UNARY(softplus);
    SJ_PY_UNARY(cholesky);
#undef SJ_PY_UNARY
    m.def("cast", [](py::handle x, py::handle d) { return sj::cast(to_tensor(x), to_dtype(d)); });

#define SJ_PY_BINARY(name)                                                                         \
    m.def(#name, [](py::handle a, py::handle b) {                                                  \
        return binary(a, b, static_cast<BinTT>(&sj::name), static_cast<BinTD>(&sj::name),          \
                      static_cast<BinDT>(&sj::name));                                              \
    })
    SJ_PY_BINARY(add);
    SJ_PY_BINARY(sub);
    SJ_PY_BINARY(mul);
    SJ_PY_BINARY(div);
    SJ_PY_BINARY(pow);
    SJ_PY_BINARY(maximum);
    SJ_PY_BINARY(minimum);
    SJ_PY_BINARY(mod);
    SJ_PY_BINARY(atan2);
    SJ_PY_BINARY(hypot);
    SJ_PY_BINARY(eq);
    SJ_PY_BINARY(ne);
    SJ_PY_BINARY(lt);
    SJ_PY_BINARY(le);
    SJ_PY_BINARY(gt);
    SJ_PY_BINARY(ge);
#undef SJ_PY_BINARY
    m.def("logical_and",
          [](py::handle a, py::handle b) { return sj::logical_and(to_tensor(a), to_tensor(b)); });
    m.def("logical_or",
          [](py::handle a, py::handle b) { return sj::logical_or(to_tensor(a), to_tensor(b)); });
    m.def("logical_xor",
          [](py::handle a, py::handle b) { return sj::logical_xor(to_tensor(a), to_tensor(b)); });
    m.def("where", [](py::handle c, py::handle a, py::handle b) {
        sj::Tensor cond = to_tensor(c);
        bool ta = py::isinstance<sj::Tensor>(a), tb = py::isinstance<sj::Tensor>(b);
        if (ta && !tb && is_number(b))
            return sj::where(cond, a.cast<sj::Tensor>(), b.cast<double>());
        if (tb && !ta && is_number(a))
            return sj::where(cond, a.cast<double>(), b.cast<sj::Tensor>());
        return sj::where(cond, to_tensor(a), to_tensor(b));
    });
    m.def("clip",
          [](py::handle x, double lo, double hi) { return sj::clip(to_tensor(x), lo, hi); });

    // ---- reductions ---------------------------------------------------------------------------
#define SJ_PY_REDUCE(name)                                                                         \
    m.def(                                                                                         \
        #name,                                                                                     \
        [](py::handle x, py::object axis, bool keepdims) {                                         \
            return sj::name(to_tensor(x), to_axes(axis), keepdims);                                \
        },                                                                                         \
        py::arg("x"), py::arg("axis") = py::none(), py::arg("keepdims") = false)
    SJ_PY_REDUCE(sum);
    SJ_PY_REDUCE(prod);
    SJ_PY_REDUCE(max);
    SJ_PY_REDUCE(min);
    SJ_PY_REDUCE(any);
    SJ_PY_REDUCE(all);
    SJ_PY_REDUCE(mean);
    SJ_PY_REDUCE(logsumexp);
    SJ_PY_REDUCE(nansum);
    SJ_PY_REDUCE(nanmean);
    SJ_PY_REDUCE(nanmax);
    SJ_PY_REDUCE(nanmin);
#undef SJ_PY_REDUCE
    m.def(
        "var",
        [](py::handle x, py::object axis, bool keepdims, int ddof) {
            return sj::var(to_tensor(x), to_axes(axis), keepdims, ddof);
        },
        py::arg("x"), py::arg("axis") = py::none(), py::arg("keepdims") = false,
        py::arg("ddof") = 0);
    m.def("argmax", [](py::handle x, int64_t axis, bool keepdims) {
        return sj::argmax(to_tensor(x), axis, keepdims);
    });
    m.def("argmin", [](py::handle x, int64_t axis, bool keepdims) {
        return sj::argmin(to_tensor(x), axis, keepdims);
    });
    m.def("cumsum", [](py::handle x, int64_t axis, bool reverse) {
        return sj::cumsum(to_tensor(x), axis, reverse);
    });
    m.def("sort", [](py::handle x, int64_t axis, bool descending) {
        return sj::sort(to_tensor(x), axis, descending);
    });
    m.def("argsort", [](py::handle x, int64_t axis, bool descending) {
        return sj::argsort(to_tensor(x), axis, descending);
    });
    m.def("sort_by_key", [](py::handle keys, py::handle values, int64_t axis, bool descending) {
        return sj::sort_by_key(to_tensor(keys), to_tensor(values), axis, descending);
    });
    m.def("take_along_axis", [](py::handle x, py::handle i, int64_t axis) {
        return sj::take_along_axis(to_tensor(x), to_tensor(i), axis);
    });
    m.def("top_k", [](py::handle x, int64_t k) {
        auto [values, indices] = sj::top_k(to_tensor(x), k);
        return py::make_tuple(values, indices);
    });
    // ---- searching and counting (include/symjax/Search.h) ------------------------------------
    m.def("unique_all",
          [](py::handle x, int64_t size, std::optional<double> fill_value, bool equal_nan) {
              sj::Unique u = sj::unique_all(to_tensor(x), size, fill_value, equal_nan);
              return py::make_tuple(u.values, u.indices, u.inverse, u.counts);
          });
    m.def("nonzero", [](py::handle x, int64_t size, int64_t fill_value) {
        return py::tuple(py::cast(sj::nonzero(to_tensor(x), size, fill_value)));
    });
    m.def("argwhere", [](py::handle x, int64_t size, int64_t fill_value) {
        return sj::argwhere(to_tensor(x), size, fill_value);
    });
    m.def("flatnonzero", [](py::handle x, int64_t size, int64_t fill_value) {
        return sj::flatnonzero(to_tensor(x), size, fill_value);
    });
    m.def("lexsort",
          [](py::handle keys, int64_t axis) { return sj::lexsort(to_tensors(keys), axis); });
    m.def("searchsorted", [](py::handle a, py::handle v, bool right) {
        return sj::searchsorted(to_tensor(a), to_tensor(v),
                                right ? sj::Side::Right : sj::Side::Left);
    });
    m.def("digitize", [](py::handle x, py::handle bins, bool right) {
        return sj::digitize(to_tensor(x), to_tensor(bins), right);
    });
    m.def("bincount", [](py::handle x, int64_t length, py::handle weights) {
        std::optional<sj::Tensor> w;
        if (!weights.is_none())
            w = to_tensor(weights);
        return sj::bincount(to_tensor(x), length, w);
    });
    m.def("histogram",
          [](py::handle x, py::handle bins, std::optional<std::pair<double, double>> range,
             py::handle weights, bool density) {
              std::optional<sj::Tensor> w;
              if (!weights.is_none())
                  w = to_tensor(weights);
              auto [hist, edges] =
                  py::isinstance<py::int_>(bins)
                      ? sj::histogram(to_tensor(x), bins.cast<int64_t>(), range, w, density)
                      : sj::histogram(to_tensor(x), to_tensor(bins), w, density);
              return py::make_tuple(hist, edges);
          });
    m.def("quantile",
          [](py::handle x, const std::vector<double>& qs, bool one_q, std::optional<int64_t> axis,
             const std::string& method, bool keepdims, bool skip_nan) {
              using M = sj::QuantileMethod;
              M m = method == "lower"      ? M::Lower
                    : method == "higher"   ? M::Higher
                    : method == "midpoint" ? M::Midpoint
                    : method == "nearest"  ? M::Nearest
                    : method == "linear"
                        ? M::Linear
                        : throw sj::InputError("symjax: unknown quantile method '" + method + "'");
              sj::Tensor t = to_tensor(x);
              if (one_q)
                  return skip_nan ? sj::nanquantile(t, qs.at(0), axis, m, keepdims)
                                  : sj::quantile(t, qs.at(0), axis, m, keepdims);
              return skip_nan ? sj::nanquantile(t, qs, axis, m, keepdims)
                              : sj::quantile(t, qs, axis, m, keepdims);
          });
    m.def("softmax", [](py::handle x, int64_t axis) { return sj::softmax(to_tensor(x), axis); });
    m.def("log_softmax",
          [](py::handle x, int64_t axis) { return sj::log_softmax(to_tensor(x), axis); });

    // ---- movement ---------------------------------------------------------------------------
    m.def("reshape",
          [](py::handle x, py::handle s) { return sj::reshape(to_tensor(x), to_shape(s)); });
    m.def("transpose",
          [](py::handle x, py::handle p) { return sj::transpose(to_tensor(x), to_axes(p)); });
    m.def("broadcast_to",
          [](py::handle x, py::handle s) { return sj::broadcast_to(to_tensor(x), to_shape(s)); });
    m.def("expand_dims", [](py::handle x, int64_t a) { return sj::expand_dims(to_tensor(x), a); });
    m.def("squeeze",
          [](py::handle x, py::handle a) { return sj::squeeze(to_tensor(x), to_axes(a)); });
    m.def("flatten", [](py::handle x, int64_t a) { return sj::flatten(to_tensor(x), a); });
    m.def("slice", [](py::handle x, const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                      const std::vector<int64_t>& c) { return sj::slice(to_tensor(x), a, b, c); });
    m.def("slice_axis", [](py::handle x, int64_t axis, int64_t start, int64_t stop, int64_t step) {
        return sj::slice_axis(to_tensor(x), axis, start, stop, step);
    });
    m.def("pad", [](py::handle x, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
                    const std::vector<int64_t>& interior, double value) {
        if (interior.empty())
            return sj::pad(to_tensor(x), lo, hi, value);
        return sj::pad(to_tensor(x), lo, hi, interior, value);
    });
    m.def("flip", [](py::handle x, py::handle a) { return sj::flip(to_tensor(x), to_axes(a)); });
    m.def("concat", [](py::handle xs, int64_t axis) { return sj::concat(to_tensors(xs), axis); });
    m.def("stack", [](py::handle xs, int64_t axis) { return sj::stack(to_tensors(xs), axis); });
    m.def("subscript", [](py::handle x, py::handle key) { return subscript(to_tensor(x), key); });

    // ---- indexing -----------------------------------------------------------------------------
    m.def("gather", [](py::handle x, py::handle i, int64_t axis) {
        return sj::gather(to_tensor(x), to_tensor(i), axis);
    });
    m.def("scatter", [](py::handle x, py::handle i, py::handle u, int64_t axis, int mode) {
        return sj::scatter(to_tensor(x), to_tensor(i), to_tensor(u), axis,
                           static_cast<sj::ScatterMode>(mode));
    });
    m.def("dynamic_slice", [](py::handle x, py::handle s, py::handle sizes) {
        return sj::dynamic_slice(to_tensor(x), to_tensor(s), to_shape(sizes));
    });
    m.def("dynamic_update_slice", [](py::handle x, py::handle u, py::handle s) {
        return sj::dynamic_update_slice(to_tensor(x), to_tensor(u), to_tensor(s));
    });
    m.def("one_hot", [](py::handle i, int64_t depth, py::object dtype) {
        return sj::one_hot(to_tensor(i), depth, to_dtype(dtype));
    });
    m.def("check_index",
          [](py::handle i, int64_t depth, std::optional<int64_t> ignore, const std::string& what) {
              return sj::check_index(to_tensor(i), depth, ignore, what);
          });
    m.def("diagonal", [](py::handle x, int64_t o, int64_t a1, int64_t a2) {
        return sj::diagonal(to_tensor(x), o, a1, a2);
    });
    m.def("diag", [](py::handle x, int64_t k) { return sj::diag(to_tensor(x), k); });
    m.def("trace", [](py::handle x, int64_t o, int64_t a1, int64_t a2) {
        return sj::trace(to_tensor(x), o, a1, a2);
    });

    // ---- linear algebra -------------------------------------------------------------------------
    m.def("matmul",
          [](py::handle a, py::handle b) { return sj::matmul(to_tensor(a), to_tensor(b)); });
    m.def("dot_general", [](py::handle a, py::handle b, const sj::Axes& lb, const sj::Axes& rb,
                            const sj::Axes& lc, const sj::Axes& rc) {
        return sj::dot_general(to_tensor(a), to_tensor(b), sj::DotDims{lb, rb, lc, rc});
    });
    m.def("triangular_solve",
          [](py::handle a, py::handle b, bool left, bool lower, bool trans, bool unit) {
              return sj::triangular_solve(to_tensor(a), to_tensor(b), left, lower, trans, unit);
          });

    // ---- convolution and pooling --------------------------------------------------------------
    m.def("conv", [](py::handle x, py::handle w, py::handle strides, py::handle padding,
                     py::handle dilation, int64_t groups) {
        return sj::conv(to_tensor(x), to_tensor(w), to_axes(strides), to_padding(padding),
                        to_axes(dilation), groups);
    });
    m.def("conv_transpose", [](py::handle x, py::handle w, py::handle strides, py::handle padding,
                               py::handle dilation, int64_t groups, py::handle output_padding) {
        return sj::conv_transpose(to_tensor(x), to_tensor(w), to_axes(strides), to_padding(padding),
                                  to_axes(dilation), groups, to_axes(output_padding));
    });
    m.def("max_pool", [](py::handle x, py::handle window, py::handle strides, py::handle padding) {
        return sj::max_pool(to_tensor(x), to_axes(window), to_axes(strides), to_padding(padding));
    });
    m.def("avg_pool", [](py::handle x, py::handle window, py::handle strides, py::handle padding,
                         bool count_include_pad) {
        return sj::avg_pool(to_tensor(x), to_axes(window), to_axes(strides), to_padding(padding),
                            count_include_pad);
    });

    // ---- random ---------------------------------------------------------------------------------
    py::module_ r = m.def_submodule("random", "sj::random");
    r.def("manual_seed", &sj::random::manual_seed);
    r.def("bits", [](py::handle shape, py::handle seed) {
        return sj::random::bits(to_shape(shape), to_seed(seed));
    });
    r.def("uniform", [](py::handle shape, double lo, double hi, py::handle dtype, py::handle seed) {
        return sj::random::uniform(to_shape(shape), lo, hi, to_dtype(dtype), to_seed(seed));
    });
    r.def("normal",
          [](py::handle shape, double mean, double std, py::handle dtype, py::handle seed) {
              return sj::random::normal(to_shape(shape), mean, std, to_dtype(dtype), to_seed(seed));
          });
    r.def("bernoulli", [](py::handle shape, double p, py::handle seed) {
        return sj::random::bernoulli(to_shape(shape), p, to_seed(seed));
    });
    r.def("truncated_normal",
          [](py::handle shape, double lo, double hi, py::handle dtype, py::handle seed) {
              return sj::random::truncated_normal(to_shape(shape), lo, hi, to_dtype(dtype),
                                                  to_seed(seed));
          });

    // ---- interpolation --------------------------------------------------------------------------
    py::module_ ip = m.def_submodule("interpolation", "sj::interpolation");
    ip.def("map_coordinates", [](py::handle input, py::handle coords, int order,
                                 const std::string& mode, double cval) {
        return sj::interpolation::map_coordinates(to_tensor(input), to_tensor(coords), order,
                                                  to_boundary(mode), cval);
    });
    ip.def("resize",
           [](py::handle x, py::handle shape, const std::string& method, bool align_corners) {
               return sj::interpolation::resize(to_tensor(x), to_shape(shape), to_method(method),
                                                align_corners);
           });
    ip.def("upsample_1d", [](py::handle x, int64_t repeat, int64_t axis, const std::string& mode,
                             double value, const std::string& boundary) {
        return sj::interpolation::upsample_1d(to_tensor(x), repeat, axis, to_upsample_mode(mode),
                                              value, to_boundary(boundary));
    });
    ip.def("upsample_2d", [](py::handle x, py::handle repeats, py::handle axes,
                             const std::string& mode, double value, const std::string& boundary) {
        return sj::interpolation::upsample_2d(to_tensor(x), to_axes(repeats), to_axes(axes),
                                              to_upsample_mode(mode), value, to_boundary(boundary));
    });
}

} // namespace sjpy
