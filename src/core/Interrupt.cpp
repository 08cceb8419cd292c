// The interrupt flag and the per-thread interrupt checks (include/symjax/Interrupt.h).
#include <symjax/Interrupt.h>

#include <atomic>

#include <time.h>

namespace sj {

namespace {
std::atomic<bool> g_requested{false};
// the innermost InterruptScope of this thread (a plain pointer: no TLS guard on each poll). The
// initial-exec model makes reading it one load from the thread pointer; the default model for a
// shared library calls __tls_get_addr, which was a fifth of a small loop step (8 bytes of the
// static TLS surplus glibc keeps for libraries loaded later, as Python loads this one).
__attribute__((tls_model("initial-exec"))) thread_local InterruptScope* t_scope = nullptr;

/// The time, from a clock cheap enough to read at every poll of a loop whose steps take a
/// microsecond: Linux's coarse monotonic clock (a few ns against ~20 for the exact one; it ticks
/// every 1-4 ms, fine for intervals of 10 ms). Same origin as steady_clock (CLOCK_MONOTONIC).
std::chrono::steady_clock::time_point coarse_now() {
#ifdef CLOCK_MONOTONIC_COARSE
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return std::chrono::steady_clock::time_point(std::chrono::seconds(ts.tv_sec) +
                                                 std::chrono::nanoseconds(ts.tv_nsec));
#else
    return std::chrono::steady_clock::now();
#endif
}
} // namespace

void request_interrupt() noexcept {
    g_requested.store(true, std::memory_order_relaxed);
}
void clear_interrupt() noexcept {
    g_requested.store(false, std::memory_order_relaxed);
}
bool interrupt_requested() noexcept {
    return g_requested.load(std::memory_order_relaxed);
}

InterruptScope::InterruptScope(InterruptCheck check, std::chrono::microseconds interval)
    : check_(std::move(check)), interval_(interval), next_(coarse_now() + interval_),
      prev_(t_scope) {
    t_scope = this;
}

InterruptScope::~InterruptScope() {
    t_scope = prev_;
}

bool poll_interrupt() {
    if (g_requested.load(std::memory_order_relaxed))
        return true;
    InterruptScope* s = t_scope;
    if (!s || !s->check_)
        return false;
    const auto now = coarse_now();
    if (now < s->next_)
        return false;
    s->next_ = now + s->interval_;
    return s->check_();
}

} // namespace sj
