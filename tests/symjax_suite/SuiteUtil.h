// Helpers of the SymJAX suite port: NumPy's comparisons, the expected values written by
// gen_expected.py, and the counter-based generator both sides draw large inputs from.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <symjax/symjax.h>

#include "TestUtil.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace sj::suite {

/// tests/symjax_suite/expected.json, parsed once.
inline const nlohmann::json& expected() {
    static const nlohmann::json j = [] {
        std::string path = std::string(SJ_TEST_DATA_DIR) + "/symjax_suite/expected.json";
        std::ifstream f(path);
        if (!f)
            throw std::runtime_error("cannot open " + path);
        return nlohmann::json::parse(f);
    }();
    return j;
}

/// Flattens nested JSON lists of numbers (row-major).
inline void flatten_json(const nlohmann::json& j, std::vector<double>& out) {
    if (j.is_array()) {
        for (const auto& e : j)
            flatten_json(e, out);
    } else {
        out.push_back(j.get<double>());
    }
}

/// A JSON list (nested as `shape`) as an Array of `dtype`.
inline Array json_array(const nlohmann::json& j, const Shape& shape, DType dtype = DType::F32) {
    std::vector<double> v;
    flatten_json(j, v);
    Array a(DType::F64, shape);
    EXPECT_EQ(int64_t(v.size()), a.size()) << "expected.json entry does not have shape";
    for (int64_t i = 0; i < a.size() && i < int64_t(v.size()); ++i)
        a.data<double>()[i] = v[i];
    return a.astype(dtype);
}

/// gen_expected.py's hash_uniform: splitmix64(seed * 2^32 + i) >> 11, times 2^-53, mapped to
/// [lo, hi), for each flat index i, computed in f64 and then cast to `dtype`.
inline Array hash_uniform(uint64_t seed, const Shape& shape, double lo, double hi,
                          DType dtype = DType::F32) {
    Array a(DType::F64, shape);
    for (int64_t i = 0; i < a.size(); ++i) {
        uint64_t z = (seed << 32) + uint64_t(i) + 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        double u = double(z >> 11) * 0x1p-53;
        a.data<double>()[i] = lo + (hi - lo) * u;
    }
    return a.astype(dtype);
}

/// gen_expected.py's unit(): hash_uniform with mean 0 and variance 1.
inline Array unit(uint64_t seed, const Shape& shape, DType dtype = DType::F32) {
    return hash_uniform(seed, shape, -std::sqrt(3.0), std::sqrt(3.0), dtype);
}

/// np.isclose(a, b, rtol, atol) for one pair: |a - b| <= atol + rtol |b|.
inline bool isclose(double a, double b, double rtol = 1e-5, double atol = 1e-8) {
    return std::fabs(a - b) <= atol + rtol * std::fabs(b);
}

/// np.allclose(a, b, rtol, atol), with b broadcast when it has one element.
inline bool allclose(const Array& a, const Array& b, double rtol = 1e-5, double atol = 1e-8) {
    if (b.size() != 1 && a.size() != b.size())
        return false;
    for (int64_t i = 0; i < a.size(); ++i)
        if (!isclose(a.at(i), b.at(b.size() == 1 ? 0 : i), rtol, atol))
            return false;
    return true;
}
inline bool allclose(const Array& a, double b, double rtol = 1e-5, double atol = 1e-8) {
    Array s(DType::F64, Shape{});
    s.data<double>()[0] = b;
    return allclose(a, s, rtol, atol);
}

/// np.isclose(a, b, rtol, atol).mean(): the fraction of close pairs.
inline double fraction_close(const std::vector<double>& a, const std::vector<double>& b,
                             double rtol = 1e-5, double atol = 1e-8) {
    EXPECT_EQ(a.size(), b.size());
    size_t n = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i)
        n += isclose(a[i], b[i], rtol, atol);
    return a.empty() ? 1.0 : double(n) / double(a.size());
}

/// np.array_equal(a, expected) (shapes and values).
inline ::testing::AssertionResult array_equal(const Array& a, const std::vector<double>& expected,
                                              const Shape& shape) {
    if (a.shape() != shape)
        return ::testing::AssertionFailure()
               << "shape " << shape_str(a.shape()) << ", expected " << shape_str(shape);
    for (int64_t i = 0; i < a.size(); ++i)
        if (a.at(i) != expected[size_t(i)])
            return ::testing::AssertionFailure()
                   << "element " << i << " is " << a.at(i) << ", expected " << expected[size_t(i)];
    return ::testing::AssertionSuccess();
}

/// The values of an array, flat, as doubles (one function with TestUtil.h's, so that a unity
/// batch that sees both names finds one).
using sj::test::values;

/// A 0-d f32 array.
inline Array scalar_f32(double v) {
    Array a(DType::F32, Shape{});
    a.data<float>()[0] = float(v);
    return a;
}

} // namespace sj::suite
