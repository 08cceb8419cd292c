// The cpu backend's threads: one OpenMP team shared by our kernels, oneDNN and OpenBLAS.
#pragma once

#include <functional>

namespace sj::cpu {

// Note [One team of threads]
// Debian's oneDNN and OpenBLAS run on GNU OpenMP. A pool of our own next to them meant two sets
// of threads on the same cores: after each oneDNN call libgomp's workers spin for a while
// (OMP_WAIT_POLICY's default) while our workers wake up for the next generated kernel, and on a
// 2-core machine the spinning threads took the cores our kernels needed. So our kernels run on
// OpenMP's team too: one set of threads for everything (and a short spin by default, Note
// [OpenMP wait policy] in src/startup/OpenMpWaitPolicy.cpp).
class ThreadPool {
public:
    /// The process-wide pool: SJ_NUM_THREADS threads (checked by parse_thread_count: InputError
    /// unless a whole number >= 1, at most max_threads()), else the number of hardware threads.
    static ThreadPool& get();
    explicit ThreadPool(int threads) : threads_(threads < 1 ? 1 : threads) {}
    int threads() const { return threads_; }
    /// Runs fn(t) for t in [0, tasks) on up to threads() threads, the caller among them; returns
    /// when all are done. Thread i runs the i-th contiguous block of tasks unless it comes late
    /// (Note [Tasks stay on their thread] in ThreadPool.cpp): callers number their tasks in
    /// data order. The first exception thrown by a task is rethrown here. Inside another
    /// parallel region the tasks run one after the other on the calling thread.
    void run(int tasks, const std::function<void(int)>& fn) const;

private:
    int threads_;
};

} // namespace sj::cpu
