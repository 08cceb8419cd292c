// Tests of the interrupt hook (include/symjax/Interrupt.h): the flag, the per-thread checks, and
// the places that poll them: loop steps on both backends, plan steps, the loader's batches.
#include "TestUtil.h"

#include <symjax/symjax.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace sj::test {
namespace {

using Ts = std::vector<Tensor>;
using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::milliseconds;

/// A check, polled at every opportunity (interval 0), that asks to stop at its n-th call.
struct StopAt {
    int n;
    int calls = 0;
    bool operator()() { return ++calls >= n; }
};

TEST(Interrupt, FlagIsRaisedUntilCleared) {
    EXPECT_FALSE(poll_interrupt());
    EXPECT_FALSE(interrupt_requested());
    request_interrupt();
    EXPECT_TRUE(interrupt_requested());
    EXPECT_TRUE(poll_interrupt());
    EXPECT_TRUE(poll_interrupt()); // still raised: every call in progress sees it
    clear_interrupt();
    EXPECT_FALSE(poll_interrupt());
}

TEST(Interrupt, ScopeCallsItsCheckAtMostOncePerInterval) {
    int calls = 0;
    {
        InterruptScope s([&] { return ++calls > 0; }, hours(1));
        for (int i = 0; i < 100; ++i)
            EXPECT_FALSE(poll_interrupt()); // not due before an hour
    }
    EXPECT_EQ(calls, 0);
    {
        InterruptScope s([&] { return ++calls == 3; }, microseconds(0));
        EXPECT_FALSE(poll_interrupt());
        EXPECT_FALSE(poll_interrupt());
        EXPECT_TRUE(poll_interrupt());
    }
    EXPECT_EQ(calls, 3);
    EXPECT_FALSE(poll_interrupt()); // gone with its scope
}

TEST(Interrupt, ScopesNestAndBelongToTheirThread) {
    InterruptScope outer([] { return true; }, microseconds(0));
    {
        InterruptScope inner([] { return false; }, microseconds(0));
        EXPECT_FALSE(poll_interrupt()); // the inner one hides the outer
    }
    EXPECT_TRUE(poll_interrupt()); // the outer one is back
    bool other = true;
    std::thread t([&] { other = poll_interrupt(); });
    t.join();
    EXPECT_FALSE(other); // another thread does not see this thread's check
}

class InterruptCall : public BackendTest {};

/// counts to n in a while_loop, and updates v <- 2 v + 1
struct Counter {
    Placeholder n{{}, DType::F64, "n"};
    Variable v{Array::scalar<float>(5.f), "v"};
    Function f;
    explicit Counter(const FunctionOptions& o) {
        Ts out = while_loop([](const Ts& x, const Ts& ns) { return x[0] < ns[0]; },
                            [](const Ts& x, const Ts&) { return Ts{x[0] + 1.0}; },
                            {scalar(0.0, DType::F64)}, {n}, {.name = "count"});
        f = function({n}, {out[0]}, {{v, v * 2.f + 1.f}}, o);
    }
};

TEST_P(InterruptCall, WhileLoopStopsAndChangesNoVariable) {
    Counter c(opts());
    StopAt stop{1000};
    {
        InterruptScope s(std::ref(stop), microseconds(0));
        std::string msg = message_of<Interrupted>([&] { c.f(1e18); });
        EXPECT_NE(msg.find("interrupted"), std::string::npos) << msg;
        EXPECT_NE(msg.find("no variable was changed"), std::string::npos) << msg;
    }
    EXPECT_EQ(stop.calls, 1000);
    EXPECT_EQ(c.v.value().item<float>(), 5.f);
    // the function works again, and commits its update when it completes
    EXPECT_EQ(c.f(10.0)[0].item<double>(), 10.0);
    EXPECT_EQ(c.v.value().item<float>(), 11.f);
}

TEST_P(InterruptCall, ScanStopsBetweenSteps) {
    Placeholder x({}, DType::F32, "x");
    ScanResult r = scan(
        [](const Ts& carry, const Ts&) {
            return std::pair<Ts, Ts>{Ts{carry[0] + 1.f}, Ts{}};
        },
        {x}, {}, {}, {.length = int64_t(1) << 40, .name = "long_scan"});
    Function f = function({x}, {r.carry[0]}, {}, opts());
    StopAt stop{50};
    InterruptScope s(std::ref(stop), microseconds(0));
    std::string msg = message_of<Interrupted>([&] { f(0.f); });
    EXPECT_NE(msg.find("long_scan: interrupted after"), std::string::npos) << msg;
}

// The flag stops a call running on another thread (a C++ SIGINT handler's way).
TEST_P(InterruptCall, FlagStopsACallOnAnotherThread) {
    Counter c(opts());
    std::atomic<int> outcome{0}; // 1: Interrupted, 2: something else
    std::thread t([&] {
        try {
            c.f(1e18);
        } catch (const Interrupted&) {
            outcome = 1;
            return;
        } catch (...) {
        }
        outcome = 2;
    });
    std::this_thread::sleep_for(milliseconds(50));
    request_interrupt();
    t.join();
    clear_interrupt();
    EXPECT_EQ(outcome.load(), 1);
    EXPECT_EQ(c.v.value().item<float>(), 5.f);
}

INSTANTIATE_TEST_SUITE_P(Backends, InterruptCall, ::testing::Values("reference", "cpu"));

// Note [Interrupts between steps]: the cpu runner polls only before a step that may write a
// variable in place; here the only step does, so the call ignores the check and commits, while
// the reference interpreter (which writes nothing in place) stops.
TEST(Interrupt, CpuCallDoesNotStopAfterAnInPlaceWrite) {
    Placeholder x({4}, DType::F32, "x");
    Variable v(Array(std::vector<float>{1, 2, 3, 4}, Shape{4}), "v");
    Function cpu = function({x}, {}, {{v, v + x}}, on("cpu"));
    Function ref = function({x}, {}, {{v, v + x}}, on("reference"));
    Array ones(std::vector<float>{1, 1, 1, 1}, Shape{4});
    InterruptScope s([] { return true; }, microseconds(0));
    cpu(ones);
    EXPECT_EQ(v.value().at(3), 5.0);
    message_of<Interrupted>([&] { ref(ones); });
    EXPECT_EQ(v.value().at(3), 5.0);
}

// ---- the loader ---------------------------------------------------------------------------

data::Dataset tiny(int64_t n) {
    data::Dataset ds;
    ds.images = Array(DType::U8, {n, 1, 2, 2});
    ds.labels = Array(DType::I32, {n});
    for (int64_t i = 0; i < ds.images.size(); ++i)
        ds.images.data<uint8_t>()[i] = uint8_t(i % 251);
    for (int64_t i = 0; i < n; ++i)
        ds.labels.data<int32_t>()[i] = int32_t(i % 10);
    return ds;
}

TEST(Interrupt, LoaderOnTheCallersThreadLosesNoBatch) {
    data::LoaderOptions o;
    o.batch_size = 8;
    o.workers = 0;
    data::Loader l(tiny(64), o);
    data::Epoch ep = l.epoch(0);
    ASSERT_EQ(ep.next()->index, 0);
    {
        InterruptScope s([] { return true; }, microseconds(0));
        message_of<Interrupted>([&] { ep.next(); });
    }
    EXPECT_EQ(ep.consumed(), 1);
    std::optional<data::Batch> b = ep.next();
    ASSERT_TRUE(b);
    EXPECT_EQ(b->index, 1); // the interrupted batch comes next
    const std::vector<int64_t> order = l.order(0);
    EXPECT_EQ(b->indices, std::vector<int64_t>(order.begin() + 8, order.begin() + 16));
}

TEST(Interrupt, LoaderWaitingForWorkersLosesNoBatch) {
    data::LoaderOptions o;
    o.batch_size = 8;
    o.workers = 1;
    o.transform = [](data::Batch& b) {
        if (b.index == 0)
            std::this_thread::sleep_for(milliseconds(200));
    };
    data::Loader l(tiny(32), o);
    data::Epoch ep = l.epoch(3);
    {
        InterruptScope s([] { return true; }, microseconds(0));
        std::string msg = message_of<Interrupted>([&] { ep.next(); });
        EXPECT_NE(msg.find("waiting for batch 0 of epoch 3"), std::string::npos) << msg;
    }
    EXPECT_EQ(ep.consumed(), 0);
    std::optional<data::Batch> b = ep.next();
    ASSERT_TRUE(b);
    EXPECT_EQ(b->index, 0);
    int64_t n = 1;
    while (ep.next())
        ++n;
    EXPECT_EQ(n, 4);
}

} // namespace
} // namespace sj::test
