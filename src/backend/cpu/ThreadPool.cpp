// ThreadPool: workers wait for a job generation, take task indices, and report completion.
#include "ThreadPool.h"

#include <cstdlib>
#include <string>

namespace sj::cpu {

ThreadPool& ThreadPool::get() {
    static ThreadPool* p = [] {
        int n = static_cast<int>(std::thread::hardware_concurrency());
        if (const char* e = std::getenv("SJ_NUM_THREADS")) {
            int v = std::atoi(e);
            if (v > 0) n = v;
        }
        return new ThreadPool(n < 1 ? 1 : n);
    }();
    return *p;
}

ThreadPool::ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::work(int) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        while (next_ < tasks_) {
            int t = next_++;
            const auto* job = job_;
            lock.unlock();
            try {
                (*job)(t);
            } catch (...) {
                std::lock_guard<std::mutex> g(mu_);
                if (!error_) error_ = std::current_exception();
            }
            lock.lock();
            if (--pending_ == 0) done_cv_.notify_all();
        }
    }
}

void ThreadPool::run(int tasks, const std::function<void(int)>& fn) {
    if (tasks <= 0) return;
    if (tasks == 1 || workers_.empty()) {
        for (int t = 0; t < tasks; ++t) fn(t);
        return;
    }
    std::lock_guard<std::mutex> serial(run_mu_);
    std::unique_lock<std::mutex> lock(mu_);
    job_ = &fn;
    tasks_ = tasks;
    next_ = 0;
    pending_ = tasks;
    error_ = nullptr;
    ++generation_;
    cv_.notify_all();
    while (next_ < tasks_) {
        int t = next_++;
        lock.unlock();
        try {
            fn(t);
        } catch (...) {
            std::lock_guard<std::mutex> g(mu_);
            if (!error_) error_ = std::current_exception();
        }
        lock.lock();
        --pending_;
    }
    done_cv_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
    tasks_ = 0;
    if (error_) std::rethrow_exception(error_);
}

} // namespace sj::cpu
