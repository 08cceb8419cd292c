// ThreadPool on OpenMP (Note [One team of threads]): tasks are handed out through a counter.
#include "ThreadPool.h"

#include <symjax/Error.h>
#include <symjax/Threads.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

#include <omp.h>

namespace sj {

int max_threads() {
    return 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int parse_thread_count(const std::string& text, const std::string& where) {
    long long v = 0;
    const char* end = text.data() + text.size();
    auto [p, ec] = std::from_chars(text.data(), end, v);
    const bool number = !text.empty() && p == end && (ec == std::errc() ||
                                                      ec == std::errc::result_out_of_range);
    SJ_CHECK(number && text[0] != '-' && (ec != std::errc() || v >= 1), InputError)
        << where << ": expected a whole number of threads >= 1, got '" << text << "'";
    const int cap = max_threads();
    if (ec == std::errc() && v <= cap) return static_cast<int>(v);
    std::fprintf(stderr,
                 "symjax: warning: %s: %s threads is more than %d (4 per hardware thread); "
                 "using %d\n",
                 where.c_str(), text.c_str(), cap, cap);
    return cap;
}

} // namespace sj

namespace sj::cpu {

// Passive waits by default: Note [OpenMP wait policy] in src/startup/OpenMpWaitPolicy.cpp.

ThreadPool& ThreadPool::get() {
    // A bad SJ_NUM_THREADS throws from here on every call (a throwing initialiser is retried).
    static ThreadPool* p = [] {
        int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        if (const char* e = std::getenv("SJ_NUM_THREADS"); e && *e)
            n = parse_thread_count(e, "SJ_NUM_THREADS");
        return new ThreadPool(n);
    }();
    return *p;
}

void ThreadPool::run(int tasks, const std::function<void(int)>& fn) const {
    if (tasks <= 0) return;
    int nt = std::min(tasks, threads_);
    if (nt == 1 || omp_in_parallel()) {
        for (int t = 0; t < tasks; ++t) fn(t);
        return;
    }
    std::atomic<int> next{0};
    std::mutex mu;
    std::exception_ptr error;
#pragma omp parallel num_threads(nt)
    {
        // OpenMP may give fewer threads than asked: whoever is there takes the next task
        for (int t; (t = next.fetch_add(1, std::memory_order_relaxed)) < tasks;) {
            try {
                fn(t);
            } catch (...) {
                std::lock_guard<std::mutex> lock(mu);
                if (!error) error = std::current_exception();
            }
        }
    }
    if (error) std::rethrow_exception(error);
}

} // namespace sj::cpu
