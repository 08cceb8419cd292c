// Thread counts given by users (src/backend/cpu/ThreadPool.cpp): SJ_NUM_THREADS and --threads
// accept whole numbers >= 1, refuse anything else with a message naming the source, and lower a
// huge count to sj::max_threads() with a warning (100000 threads crashed inside OpenMP).
#include "TestUtil.h"

#include "backend/cpu/ThreadPool.h"

#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include <omp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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

namespace {
/// Waits up to 10 s for `flag`; whether it came.
bool wait_for(const std::atomic<bool>& flag) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!flag.load() && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
    return flag.load();
}
} // namespace

// Note [Tasks stay on their thread]: thread i runs the i-th contiguous block of tasks. Each task
// waits until the other block's task of the same rank has started, so a pool that hands tasks
// out in any other order (the shared counter it had: thread 1 takes task 1) leaves the waits
// unanswered and tasks on the wrong threads; and neither thread is free to take the other's
// tasks before it has started them itself.
TEST(ThreadPool, EachThreadRunsItsOwnContiguousBlockOfTasks) {
    cpu::ThreadPool pool(2);
    std::array<std::thread::id, 4> ran_on{};
    std::array<std::atomic<bool>, 4> started{};
    std::array<bool, 4> answered{};
    pool.run(4, [&](int t) {
        ran_on[size_t(t)] = std::this_thread::get_id();
        started[size_t(t)] = true;
        // thread 0's block: tasks 0 and 1; thread 1's: 2 and 3
        answered[size_t(t)] = wait_for(started[size_t(t ^ 2)]);
    });
    EXPECT_EQ(answered, (std::array<bool, 4>{true, true, true, true}));
    // thread 0 of the team is the caller
    const auto me = std::this_thread::get_id();
    EXPECT_EQ(ran_on[0], me);
    EXPECT_EQ(ran_on[1], me);
    EXPECT_NE(ran_on[2], me);
    EXPECT_EQ(ran_on[3], ran_on[2]);
}

// A thread that never comes (here no region may be active, so OpenMP gives the pool a team of
// one) leaves its block to the others: every task still runs, once, on the thread that came.
TEST(ThreadPool, TheBlocksOfMissingThreadsAreTakenByTheOthers) {
    cpu::ThreadPool pool(2);
    const int levels = omp_get_max_active_levels();
    omp_set_max_active_levels(0);
    std::vector<std::atomic<int>> runs(7);
    std::vector<std::thread::id> ran_on(7);
    pool.run(7, [&](int t) {
        runs[size_t(t)]++;
        ran_on[size_t(t)] = std::this_thread::get_id();
    });
    omp_set_max_active_levels(levels);
    for (const auto& id : ran_on)
        EXPECT_EQ(id, std::this_thread::get_id());
    for (auto& r : runs)
        EXPECT_EQ(r.load(), 1);
}

// Note [Work after a barrier]: run(tasks, fn, then) starts `then` only once every fn has
// returned, whichever thread runs what: thread 1's tasks sleep, so a second phase that began
// when thread 0 finished its own block would see them unfinished. With a team of one (no region
// may be active) the phases run in order on the caller. An exception in the first phase is
// rethrown and the second does not run.
TEST(ThreadPool, TheSecondPhaseStartsWhenEveryTaskOfTheFirstIsDone) {
    cpu::ThreadPool pool(2);
    const int levels = omp_get_max_active_levels();
    for (int active : {levels, 0}) {
        omp_set_max_active_levels(active);
        std::atomic<int> done{0};
        std::vector<int> seen(6, -1);
        pool.run(
            6,
            [&](int t) {
                if (t >= 3)
                    std::this_thread::sleep_for(std::chrono::milliseconds(20));
                done++;
            },
            [&](int t) { seen[size_t(t)] = done.load(); });
        omp_set_max_active_levels(levels);
        EXPECT_EQ(seen, std::vector<int>(6, 6)) << "max active levels " << active;
    }
    std::atomic<int> then_runs{0};
    EXPECT_THROW(pool.run(
                     4,
                     [&](int t) {
                         if (t == 3)
                             throw InputError("task 3");
                     },
                     [&](int) { then_runs++; }),
                 InputError);
    EXPECT_EQ(then_runs.load(), 0);
}

// Note [Forked children]: a process forked after a training step used to hang in the child's
// first call that started a parallel region (GNU OpenMP's team does not survive fork). The
// child now runs everything on its own thread, with the parent's bits, and can compile and run
// new functions. An alarm turns a hang into a failure.
TEST(ThreadPool, ForkedChildrenRunOnOneThread) {
    Scope s("fork_child");
    Variable w(test::random_array(f32, {16, 3, 3, 3}, 61), "w");
    Variable d(test::random_array(f32, {16, 10}, 62), "d");
    Placeholder x({-1, 3, 16, 16}, f32, "x");
    Tensor h = nn::leaky_relu(conv2d(x, w, {}, "SAME"), 0.01);
    Tensor logits = matmul(mean(max_pool2d(h, {2, 2}), {2, 3}), d);
    Tensor loss = sum(logits * logits) + sum(exp(h * 1e-3)); // a 1 MB kernel over the threshold
    std::vector<Tensor> g = gradients(loss, {w, d});
    Function f = function({x}, {loss, g[0], g[1]});
    const Array xv = test::random_array(f32, {64, 3, 16, 16}, 63);
    std::vector<Array> parent = f(xv); // the team has run (on a machine with 2 cores or more)
    ASSERT_FALSE(cpu::ThreadPool::forked_child());

    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::alarm(120);
        int code = 0;
        try {
            if (!cpu::ThreadPool::forked_child() || cpu::ThreadPool::get().threads() != 1)
                code = 2;
            std::vector<Array> child = f(xv);
            for (size_t k = 0; k < parent.size() && !code; ++k) {
                const auto a = parent[k].to_vector<float>(), b = child[k].to_vector<float>();
                if (a != b)
                    code = 3; // the same bits: results do not depend on the thread count
            }
            // a function made in the child: a training step, which updates w and d
            Function step = function({x}, {loss}, {{w, w - 1e-3 * g[0]}, {d, d - 1e-3 * g[1]}});
            step(xv);
            if (!code && f(xv)[0].to_vector<float>() == parent[0].to_vector<float>())
                code = 4;
        } catch (...) {
            code = 5;
        }
        ::_exit(code);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_FALSE(WIFSIGNALED(status)) << "the child was killed by signal " << WTERMSIG(status)
                                      << (WTERMSIG(status) == SIGALRM ? " (it hung)" : "");
    ASSERT_TRUE(WIFEXITED(status));
    const int code = WEXITSTATUS(status);
    EXPECT_NE(code, 2) << "the child does not know it is one, or plans for more threads";
    EXPECT_NE(code, 3) << "the child's results differ from the parent's";
    EXPECT_NE(code, 4) << "the child's training step changed nothing";
    EXPECT_NE(code, 5) << "the child threw";
    EXPECT_EQ(code, 0);
}
