// SJ_JIT_CPU: kernels compiled for a named, older CPU than the host (Note [Kernels for an older
// CPU] in src/backend/cpu/Jit.cpp). The JIT reads the variable once per process, so the runs
// with it set are children of these tests (the test binary itself, filtered to
// JitCpuChild.DISABLED_Run); the ctest entry jit_cpu_x86_64_v2 runs the op harness so.
#include "TestUtil.h"

#include "backend/cpu/Jit.h"

#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include <cmath>
#include <cstdlib>
#include <string>

using namespace sj;
using sj::test::message_of;

// Disabled: it runs only in the children of JitCpu.*, or in ctest's jit_cpu_x86_64_v2 entry,
// which set SJ_JIT_CPU.
TEST(JitCpuChild, DISABLED_Run) {
    const char* want = std::getenv("SJ_JIT_CPU");
    ASSERT_NE(want, nullptr) << "SJ_JIT_CPU is set by the parent test or the ctest entry";
    // a reduction and transcendental functions, long enough for vector loops and their tails
    const int64_t n = 4099;
    Placeholder x({n}, f32, "x");
    std::vector<Tensor> outs = {sum(tanh(x) * exp(x * 0.01)), x * 3.0 + 1.0};
    Array v(f32, {n});
    for (int64_t i = 0; i < n; ++i)
        v.data<float>()[i] = float(i % 97) / 50.f - 0.9f;
    FunctionOptions reference;
    reference.backend = "reference";
    auto want_out = function({x}, outs, {}, reference)(v);
    auto got = function({x}, outs)(v);
    EXPECT_NEAR(got[0].item<float>(), want_out[0].item<float>(),
                1e-5 * std::abs(want_out[0].item<float>()) + 1e-4);
    for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(got[1].data<float>()[i], want_out[1].data<float>()[i]) << "element " << i;
    // the kernels were compiled for the named CPU, with its own features
    EXPECT_EQ(cpu::host_cpu_description(), std::string(want) + " ");
}

namespace {
/// Runs JitCpuChild.DISABLED_Run with SJ_JIT_CPU=`cpu` and no disk cache.
std::pair<int, std::string> run_child(const std::string& cpu) {
    return sj::test::run_child_test("SJ_CACHE_DIR=off SJ_JIT_CPU='" + cpu + "'",
                                    "JitCpuChild.DISABLED_Run");
}
} // namespace

// x86-64-v2 (SSE4.2, 4 lanes) runs on every x86-64 machine we build for: its kernels match the
// reference and the JIT reports the CPU it compiled for.
TEST(JitCpu, KernelsForAnOlderCpuMatchTheReference) {
    auto [rc, out] = run_child("x86-64-v2");
    EXPECT_EQ(rc, 0) << out;
    EXPECT_CONTAINS(out, "[  PASSED  ] 1 test");
}

// A name LLVM does not know fails the first call with the name; nothing runs.
TEST(JitCpu, UnknownCpuIsAnError) {
    for (const std::string bad : {"pentium9000", "x86-64-v9", ""}) {
        std::string msg = message_of<InputError>([&] { cpu::check_jit_cpu(bad); });
        EXPECT_CONTAINS(msg, "SJ_JIT_CPU=" + bad + ": LLVM");
        EXPECT_CONTAINS(msg, "knows no such CPU");
    }
    auto [rc, out] = run_child("pentium9000");
    EXPECT_NE(rc, 0) << out;
    EXPECT_CONTAINS(out, "SJ_JIT_CPU=pentium9000: LLVM");
}

// A CPU with an ISA feature the host lacks is refused, naming the feature: its kernels would
// stop on an illegal instruction. The host is told to lack AVX-512F or SSE4.2, so the refusal is
// checked on every machine.
TEST(JitCpu, CpuWithFeaturesTheHostLacksIsAnError) {
    std::string msg =
        message_of<InputError>([] { cpu::check_jit_cpu("skylake-avx512", {"avx512f"}); });
    EXPECT_CONTAINS(msg, "SJ_JIT_CPU=skylake-avx512 needs ");
    EXPECT_CONTAINS(msg, "avx512f");
    EXPECT_CONTAINS(msg, "which this CPU (");
    // x86-64-v2 implies SSE4.2 but not AVX-512F: an absent feature it does not need changes nothing
    EXPECT_NO_THROW(cpu::check_jit_cpu("x86-64-v2", {"avx512f"}));
    msg = message_of<InputError>([] { cpu::check_jit_cpu("x86-64-v2", {"sse4.2"}); });
    EXPECT_CONTAINS(msg, "SJ_JIT_CPU=x86-64-v2 needs sse4.2");
    // through the variable, in a child, for the first of these newer CPUs this host lacks
    // something of (an AVX2 host lacks AVX-512; AVX-512 hosts lack AMX or AVX10)
    for (const std::string newer : {"skylake-avx512", "sapphirerapids", "graniterapids"}) {
        bool runs = true;
        try {
            cpu::check_jit_cpu(newer);
        } catch (const InputError&) {
            runs = false;
        }
        if (runs)
            continue;
        auto [rc, out] = run_child(newer);
        EXPECT_NE(rc, 0) << out;
        EXPECT_CONTAINS(out, "SJ_JIT_CPU=" + newer + " needs ");
        break;
    }
}

// What the host is and what is older than it are accepted.
TEST(JitCpu, OlderCpusAreAccepted) {
    for (const std::string ok : {"x86-64", "x86-64-v2"})
        EXPECT_NO_THROW(cpu::check_jit_cpu(ok)) << ok;
}
