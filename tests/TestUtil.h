// Helpers shared by the test files: seeded random arrays, backend-selecting options, and
// checks of error messages.
#pragma once

#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include "backend/cpu/CpuTarget.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <typeinfo>
#include <utility>

#include <unistd.h>

namespace sj::test {

/// The unsigned integer in environment variable `name`, or `fallback` when it is unset or empty
/// (the fuzzers' SJ_FUZZ_SEED and SJ_FUZZ_COUNT).
inline uint64_t env_u64(const char* name, uint64_t fallback) {
    const char* e = std::getenv(name);
    return e && *e ? std::strtoull(e, nullptr, 10) : fallback;
}

/// Functions compiled while it lives use the cpu backend's channel blocks of the width given
/// (0: plain layout; otherwise 8 or 16). The suite runs in the machine's own width.
struct ChannelBlocks {
    int64_t saved;
    explicit ChannelBlocks(int64_t block) : saved(cpu::set_channel_block(block)) {}
    ~ChannelBlocks() { cpu::set_channel_block(saved); }
    ChannelBlocks(const ChannelBlocks&) = delete;
    ChannelBlocks& operator=(const ChannelBlocks&) = delete;
};

/// Uniform values in [lo, hi), drawn in f64 from a fixed seed, then cast to `t`.
inline Array random_array(DType t, const Shape& s, uint64_t seed, double lo = -2, double hi = 2) {
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> u(lo, hi);
    Array a(DType::F64, s);
    for (int64_t i = 0; i < a.size(); ++i) a.data<double>()[i] = u(g);
    return a.astype(t);
}

/// a and b agree elementwise within atol + rtol |b| (NaN where the other is NaN).
inline void expect_close(const Array& a, const Array& b, double rtol, double atol,
                         const std::string& what) {
    ASSERT_EQ(a.dtype(), b.dtype()) << what;
    ASSERT_EQ(a.shape(), b.shape()) << what;
    for (int64_t i = 0; i < a.size(); ++i) {
        double x = a.at(i), y = b.at(i);
        if (std::isnan(x) || std::isnan(y)) {
            ASSERT_EQ(std::isnan(x), std::isnan(y)) << what << " at " << i;
            continue;
        }
        ASSERT_NEAR(x, y, atol + rtol * std::fabs(y)) << what << " at " << i;
    }
}

/// The elements of `a` as doubles, in row-major order.
inline std::vector<double> values(const Array& a) {
    return a.to_vector<double>();
}

/// FunctionOptions selecting `backend` ("cpu" or "reference").
inline FunctionOptions on(const char* backend) {
    FunctionOptions o;
    o.backend = backend;
    return o;
}

/// A test run once per backend (INSTANTIATE_TEST_SUITE_P with the backend names): opts() selects
/// it.
class BackendTest : public ::testing::TestWithParam<const char*> {
protected:
    FunctionOptions opts() const { return on(GetParam()); }
};

/// The message of the E that `f` throws (fails the test when it throws nothing or another type).
template <class E, class F> std::string message_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        ADD_FAILURE() << "expected " << typeid(E).name() << ", got " << typeid(e).name() << ": "
                      << e.what();
        return "";
    }
    ADD_FAILURE() << "expected " << typeid(E).name() << ", nothing was thrown";
    return "";
}

/// The message of the IOError `f` throws.
template <class F> std::string io_error(F&& f) { return message_of<IOError>(std::forward<F>(f)); }

/// Sets (or unsets, with nullptr) an environment variable for one scope, then restores it.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name))
            old_ = old;
        if (value)
            ::setenv(name, value, 1);
        else
            ::unsetenv(name);
    }
    ~ScopedEnv() {
        if (old_)
            ::setenv(name_, old_->c_str(), 1);
        else
            ::unsetenv(name_);
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::optional<std::string> old_;
};

/// Runs this test binary's disabled test `test` ("Suite.DISABLED_Name") in a child process with
/// the shell assignments `env` before it ("SJ_NUM_THREADS='4' X=1"): for settings read once per
/// process. Returns the child's exit status and its output, stdout and stderr together.
inline std::pair<int, std::string> run_child_test(const std::string& env, const std::string& test) {
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::string log = (std::filesystem::temp_directory_path() /
                       ("sj_child_" + std::to_string(::getpid()) + ".log"))
                          .string();
    std::string cmd = env + " '" + self +
                      "' --gtest_also_run_disabled_tests --gtest_filter=" + test + " >'" + log +
                      "' 2>&1";
    int rc = std::system(cmd.c_str());
    std::ifstream f(log);
    std::string out((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::filesystem::remove(log);
    return {rc, out};
}

} // namespace sj::test

#define EXPECT_CONTAINS(hay, needle)                                                               \
    EXPECT_NE(std::string(hay).find(needle), std::string::npos)                                    \
        << "message: " << (hay) << "\nexpected to contain: " << (needle)

