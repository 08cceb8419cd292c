// Helpers shared by the test files: seeded random arrays and backend-selecting options.
#pragma once

#include <symjax/symjax.h>

#include <random>

namespace sj::test {

/// Uniform values in [lo, hi), drawn in f64 from a fixed seed, then cast to `t`.
inline Array random_array(DType t, const Shape& s, uint64_t seed, double lo = -2, double hi = 2) {
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> u(lo, hi);
    Array a(DType::F64, s);
    for (int64_t i = 0; i < a.size(); ++i) a.data<double>()[i] = u(g);
    return a.astype(t);
}

/// FunctionOptions selecting `backend` ("cpu" or "reference").
inline FunctionOptions on(const char* backend) {
    FunctionOptions o;
    o.backend = backend;
    return o;
}

} // namespace sj::test
