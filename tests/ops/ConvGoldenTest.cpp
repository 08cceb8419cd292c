// conv, conv_transpose and pooling against PyTorch: outputs and gradients recorded by
// tests/ops/gen_conv_golden.py (torch.nn.functional in float64), on every backend, f32 and f64.
#include "OpHarness.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

namespace sj::test {
namespace {

using nlohmann::json;

const json& conv_golden() {
    static const json j = [] {
        std::string path = std::string(SJ_TEST_DATA_DIR) + "/ops/golden/conv_torch.json";
        std::ifstream f(path);
        if (!f) return json();
        return json::parse(f);
    }();
    return j;
}

Array to_array(const json& t, DType dtype) {
    Shape s = t.at("shape").get<Shape>();
    Array a(DType::F64, s);
    const json& d = t.at("data");
    for (int64_t i = 0; i < a.size(); ++i)
        static_cast<double*>(a.raw())[i] = d[size_t(i)].get<double>();
    return a.astype(dtype);
}

/// torch's int-or-list arguments; a single value applies to every spatial dim.
Axes axes_arg(const json& args, const char* key, Axes fallback = {}) {
    if (!args.contains(key)) return fallback;
    const json& v = args.at(key);
    if (v.is_number()) return {v.get<int64_t>()};
    return v.get<Axes>();
}

/// torch's padding: p (both sides of every dim), (p_h, p_w) or "same".
Padding padding_arg(const json& args) {
    if (!args.contains("padding")) return "VALID";
    const json& v = args.at("padding");
    if (v.is_string()) return v.get<std::string>(); // "same"
    if (v.is_number()) return v.get<int64_t>();
    std::vector<std::pair<int64_t, int64_t>> pairs;
    for (int64_t p : v.get<Axes>()) pairs.emplace_back(p, p);
    return pairs;
}

/// symjax's version of the case's op.
Tensor build(const json& c, const Tensor& x, const Tensor& w) {
    const std::string op = c.at("op");
    const json& a = c.at("args");
    int64_t groups = a.value("groups", int64_t(1));
    if (op == "conv1d" || op == "conv2d")
        return conv(x, w, axes_arg(a, "stride"), padding_arg(a), axes_arg(a, "dilation"), groups);
    if (op == "conv_transpose1d" || op == "conv_transpose2d")
        return conv_transpose(x, w, axes_arg(a, "stride"), padding_arg(a), axes_arg(a, "dilation"),
                              groups, axes_arg(a, "output_padding"));
    Axes window = axes_arg(a, "kernel_size");
    Axes strides = axes_arg(a, "stride", window);
    if (op == "max_pool1d" || op == "max_pool2d")
        return max_pool(x, window, strides, padding_arg(a));
    if (op == "avg_pool1d" || op == "avg_pool2d")
        return avg_pool(x, window, strides, padding_arg(a), a.value("count_include_pad", true));
    ADD_FAILURE() << "unknown op " << op;
    return x;
}

/// Largest |got - want| - (atol + rtol |want|) over the elements (<= 0: all within tolerance).
std::string mismatch(const Array& got, const Array& want, double atol, double rtol) {
    if (got.shape() != want.shape())
        return "shape " + shape_str(got.shape()) + ", torch has " + shape_str(want.shape());
    int64_t bad = 0;
    std::ostringstream os;
    for (int64_t i = 0; i < got.size(); ++i) {
        double g = got.at(i), w = want.at(i);
        if (std::fabs(g - w) <= atol + rtol * std::fabs(w)) continue;
        if (bad++ < 3) os << " [" << i << "] got " << g << " torch " << w << ";";
    }
    return bad ? std::to_string(bad) + " of " + std::to_string(got.size()) + " differ:" + os.str()
               : "";
}

class ConvGolden : public ::testing::TestWithParam<size_t> {};

TEST(ConvGoldenFile, IsReadable) {
    ASSERT_TRUE(conv_golden().is_object())
        << "cannot read tests/ops/golden/conv_torch.json (regenerate it with "
           "/usr/bin/python3 tests/ops/gen_conv_golden.py)";
    EXPECT_GE(conv_golden().at("cases").size(), 10u);
}

TEST_P(ConvGolden, OutputAndGradientsMatchTorch) {
    ASSERT_TRUE(conv_golden().is_object());
    const json& c = conv_golden().at("cases").at(GetParam());
    bool has_w = c.contains("w");
    for (DType dt : {DType::F32, DType::F64}) {
        // Tolerances. f64: the inputs are multiples of 1/32 (gen_conv_golden.py), so every product
        // and sum is exact; only average pooling's division rounds (to 1 ulp, then summed in the
        // backward pass): 1e-12. f32: the same sums are exact in f32 too; the division and the
        // f32 rounding of the outputs cost a few ulp of 2^-24: 1e-6 relative and absolute.
        double tol = dt == DType::F64 ? 1e-12 : 1e-6;
        Array xv = to_array(c.at("x"), dt);
        Placeholder x(xv.shape(), dt, "x");
        std::vector<Tensor> ins{x}, wrt{x};
        std::vector<Function::Arg> args{xv};
        Tensor w;
        if (has_w) {
            Array wv = to_array(c.at("w"), dt);
            w = Placeholder(wv.shape(), dt, "w");
            ins.push_back(w);
            wrt.push_back(w);
            args.push_back(wv);
        }
        Tensor y = build(c, x, w);
        std::vector<Tensor> outs{y};
        for (const Tensor& g : gradients(sum(y * constant(to_array(c.at("r"), dt))), wrt))
            outs.push_back(g);
        std::vector<std::string> names{"y", "dx", "dw"};
        for (const auto& backend : test_backends()) {
            FunctionOptions o;
            o.backend = backend;
            std::vector<Array> got = function(ins, outs, {}, o).call(args);
            for (size_t k = 0; k < got.size(); ++k) {
                std::string m = mismatch(got[k], to_array(c.at(names[k]), DType::F64), tol, tol);
                EXPECT_EQ(m, "") << c.at("name").get<std::string>() << " " << names[k] << " on "
                                 << backend << " in " << dtype_name(dt);
            }
        }
    }
}

std::vector<size_t> case_indices() {
    std::vector<size_t> v;
    if (conv_golden().is_object())
        for (size_t i = 0; i < conv_golden().at("cases").size(); ++i)
            v.push_back(i);
    return v;
}

INSTANTIATE_TEST_SUITE_P(
    Torch, ConvGolden, ::testing::ValuesIn(case_indices()),
    [](const ::testing::TestParamInfo<size_t>& info) {
        return conv_golden().at("cases").at(info.param).at("name").get<std::string>();
    });

} // namespace
} // namespace sj::test
