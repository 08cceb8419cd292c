// Thread counts given by users (src/backend/cpu/ThreadPool.cpp): SJ_NUM_THREADS and --threads
// accept whole numbers >= 1, refuse anything else with a message naming the source, and lower a
// huge count to sj::max_threads() with a warning (100000 threads crashed inside OpenMP).
#include "TestUtil.h"

#include "backend/cpu/ThreadPool.h"

#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include <cstdlib>
#include <thread>

using namespace sj;
using sj::test::message_of;

TEST(ThreadCount, MaxThreadsIsFourPerHardwareThread) {
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    EXPECT_EQ(max_threads(), 4 * hw);
}

TEST(ThreadCount, WholeNumbersFromOneToTheCapAreKept) {
    EXPECT_EQ(parse_thread_count("1", "SJ_NUM_THREADS"), 1);
    EXPECT_EQ(parse_thread_count("3", "SJ_NUM_THREADS"), std::min(3, max_threads()));
    const std::string cap = std::to_string(max_threads());
    testing::internal::CaptureStderr();
    EXPECT_EQ(parse_thread_count(cap, "--threads"), max_threads());
    EXPECT_EQ(testing::internal::GetCapturedStderr(), ""); // the cap itself: no warning
}

TEST(ThreadCount, HugeCountsAreLoweredToTheCapWithAWarning) {
    for (const std::string huge : {"100000", "2147483648", "99999999999999999999999"}) {
        testing::internal::CaptureStderr();
        EXPECT_EQ(parse_thread_count(huge, "SJ_NUM_THREADS"), max_threads()) << huge;
        std::string err = testing::internal::GetCapturedStderr();
        EXPECT_CONTAINS(err, "warning: SJ_NUM_THREADS: " + huge + " threads is more than " +
                                 std::to_string(max_threads()));
        EXPECT_CONTAINS(err, "using " + std::to_string(max_threads()));
    }
}

TEST(ThreadCount, NonNumbersAndCountsBelowOneAreErrors) {
    for (const std::string bad : {"0", "-1", "-99999999999999999999", "", "abc", "4x", " 4", "4 ",
                                  "+4", "1.5", "1e3", "0x10"}) {
        std::string msg = message_of<InputError>([&] { parse_thread_count(bad, "--threads"); });
        EXPECT_CONTAINS(msg,
                        "--threads: expected a whole number of threads >= 1, got '" + bad + "'");
    }
}

// The pool reads SJ_NUM_THREADS once per process: these run in a child (the test binary itself,
// filtered to ThreadCountChild.DISABLED_Run) with the variable set.
// Disabled: it runs only in the child processes of ThreadCount.SjNumThreads*, which ask for it.
TEST(ThreadCountChild, DISABLED_Run) {
    const char* want = std::getenv("SJ_TC_EXPECT");
    ASSERT_NE(want, nullptr) << "SJ_TC_EXPECT is set by the parent test";
    Placeholder x({1 << 16}, f32, "x");
    Function f = function({x}, {sum(exp(x) * 2.0)});
    Array v = Array::full(f32, {1 << 16}, 0.0);
    if (std::string(want) == "error") {
        std::string msg = message_of<InputError>([&] { f(v); });
        EXPECT_CONTAINS(msg, "SJ_NUM_THREADS: expected a whole number of threads >= 1, got '");
        return;
    }
    EXPECT_NEAR(f(v)[0].at(0), 2.0 * (1 << 16), 1e-2); // runs, on a capped team
    EXPECT_EQ(cpu::ThreadPool::get().threads(), std::atoi(want));
}

namespace {
/// Runs ThreadCountChild.DISABLED_Run with SJ_NUM_THREADS=`value`; returns its exit status and output.
std::pair<int, std::string> run_child(const std::string& value, const std::string& expect) {
    return sj::test::run_child_test("SJ_NUM_THREADS='" + value + "' SJ_TC_EXPECT=" + expect,
                                    "ThreadCountChild.DISABLED_Run");
}
} // namespace

TEST(ThreadCount, SjNumThreads100000RunsOnACappedPool) {
    auto [rc, out] = run_child("100000", std::to_string(max_threads()));
    EXPECT_EQ(rc, 0) << out;
    EXPECT_CONTAINS(out, "[  PASSED  ] 1 test");
    EXPECT_CONTAINS(out, "warning: SJ_NUM_THREADS: 100000 threads is more than");
}

TEST(ThreadCount, SjNumThreadsThatIsNotANumberIsAnError) {
    for (const std::string bad : {"zero", "0", "-4"}) {
        auto [rc, out] = run_child(bad, "error");
        EXPECT_EQ(rc, 0) << bad << ": " << out;
        EXPECT_CONTAINS(out, "[  PASSED  ] 1 test");
    }
}
