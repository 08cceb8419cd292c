// ThreadPool on OpenMP (Note [One team of threads]): tasks are handed out through a counter.
#include "ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

#include <omp.h>

namespace sj::cpu {

// Passive waits by default: Note [OpenMP wait policy] in src/startup/OpenMpWaitPolicy.cpp.

ThreadPool& ThreadPool::get() {
    static ThreadPool* p = [] {
        int n = static_cast<int>(std::thread::hardware_concurrency());
        if (const char* e = std::getenv("SJ_NUM_THREADS")) {
            int v = std::atoi(e);
            if (v > 0) n = v;
        }
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
