// A small persistent thread pool for splitting kernel loops (the caller works too).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sj::cpu {

class ThreadPool {
public:
    /// The process-wide pool: SJ_NUM_THREADS threads, else the number of hardware threads.
    static ThreadPool& get();
    explicit ThreadPool(int threads);
    ~ThreadPool();
    int threads() const { return static_cast<int>(workers_.size()) + 1; }
    /// Runs fn(t) for t in [0, tasks) on the pool and the caller; returns when all are done.
    /// The first exception thrown by a task is rethrown here.
    void run(int tasks, const std::function<void(int)>& fn);

private:
    void work(int id);
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable cv_, done_cv_;
    const std::function<void(int)>* job_ = nullptr;
    int tasks_ = 0, next_ = 0, pending_ = 0;
    uint64_t generation_ = 0;
    bool stop_ = false;
    std::exception_ptr error_;
    std::mutex run_mu_; // one run at a time
};

} // namespace sj::cpu
