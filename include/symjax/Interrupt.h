// Stopping long calls: a process-wide flag and a per-thread check that the runtime polls between
// loop steps, plan steps and loader batches, throwing sj::Interrupted when either asks to stop.
//
//   // a SIGINT handler may raise the flag (an atomic store):
//   std::signal(SIGINT, [](int) { sj::request_interrupt(); });
//   try {
//       f(x);                          // a while_loop of 10^9 steps
//   } catch (const sj::Interrupted& e) {
//       sj::clear_interrupt();         // no variable changed: the call can be made again
//   }
//
//   // or a check of one's own, on this thread, for the scope's lifetime:
//   sj::InterruptScope scope([&] { return stop_button_pressed(); });
#pragma once

#include <symjax/Error.h>

#include <chrono>
#include <functional>

namespace sj {

/// A call stopped before its end because an interrupt was asked for (request_interrupt(), or an
/// InterruptCheck that returned true: Ctrl-C in Python). Like every error, it leaves every
/// variable as it was before the call. (Declared here rather than in Error.h, with the API that
/// raises it.)
class Interrupted : public Error {
public:
    using Error::Error;
};

/// Makes every call in progress, and every later one, throw sj::Interrupted at its next poll,
/// until clear_interrupt(). Async-signal-safe (one atomic store): a signal handler may call it.
void request_interrupt() noexcept;
/// Lowers the flag request_interrupt() raised.
void clear_interrupt() noexcept;
/// Whether the flag is raised.
bool interrupt_requested() noexcept;

/// A check the runtime calls on the thread that installed it; true stops the work in progress,
/// which then throws sj::Interrupted (any exception it throws itself propagates the same way).
using InterruptCheck = std::function<bool()>;

/// Installs `check` on the calling thread for this object's lifetime; the one installed before
/// comes back when it is destroyed (scopes nest). The runtime calls the check at most once per
/// `interval`, the first time `interval` after the scope was made (a shorter call never calls
/// it), so a check may be slow (Python's takes the GIL) without slowing a loop whose steps take
/// a microsecond. Work done on other threads (the loader's workers) never calls it.
class InterruptScope {
public:
    explicit InterruptScope(InterruptCheck check,
                            std::chrono::microseconds interval = std::chrono::milliseconds(10));
    ~InterruptScope();
    InterruptScope(const InterruptScope&) = delete;
    InterruptScope& operator=(const InterruptScope&) = delete;

private:
    friend bool poll_interrupt();
    InterruptCheck check_;
    std::chrono::steady_clock::duration interval_;
    std::chrono::steady_clock::time_point next_{};
    InterruptScope* prev_;
};

/// What the runtime polls between steps: true when the flag is raised, or when this thread's
/// check is due and returns true. The poller then throws sj::Interrupted naming where it stopped,
/// at a point where no variable has been written. Costs an atomic load and a thread-local read
/// when no check is installed, and a clock read when one is.
bool poll_interrupt();

} // namespace sj
