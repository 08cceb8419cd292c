// The cpu backend's threads: one OpenMP team shared by our kernels, oneDNN and OpenBLAS.
#pragma once

#include "../FloatMode.h"

#include <cstdint>
#include <functional>
#include <optional>

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
    /// get()'s is 1 in a process forked after this one loaded symjax (Note [Forked children] in
    /// ThreadPool.cpp).
    int threads() const { return threads_; }
    /// Whether this process is a fork() child of one that had loaded symjax: its OpenMP team
    /// cannot start (Note [Forked children]), so everything runs on the calling thread.
    static bool forked_child();
    /// The fork handler's child side (Note [Forked children]).
    static void single_threaded_after_fork();
    /// Runs fn(t) for t in [0, tasks) on up to threads() threads, the caller among them; returns
    /// when all are done. Thread i runs the i-th contiguous block of tasks unless it comes late
    /// (Note [Tasks stay on their thread] in ThreadPool.cpp): callers number their tasks in
    /// data order. The first exception thrown by a task is rethrown here. Inside another
    /// parallel region the tasks run one after the other on the calling thread.
    void run(int tasks, const std::function<void(int)>& fn) const;
    /// run(tasks, fn), then then(t) for t in [0, tasks) once every fn(t) has returned, in the
    /// same parallel region: a barrier between the two, not a second region (Note [Work after
    /// a barrier] in ThreadPool.cpp). Each phase hands out its tasks as run() does. The first
    /// exception is rethrown; `then` does not run after one.
    void run(int tasks, const std::function<void(int)>& fn,
             const std::function<void(int)>& then) const;

private:
    int threads_;
};

/// The work (bytes moved, plus a weight per arithmetic op) from which a kernel starts the team:
/// 1 MB, or SJ_PARALLEL_WORK (Note [Parallel work threshold] in CpuExecutable.cpp). Our
/// generated kernels and the library kernels that split follow it alike.
int64_t parallel_work();

/// Runs fn(begin, end) over [0, n) in contiguous pieces: on the team when `bytes` (the work's
/// bytes moved) reach parallel_work(), else at once on the calling thread.
template <class F> void split_work(int64_t n, int64_t bytes, F&& fn) {
    const ThreadPool& pool = ThreadPool::get();
    const int64_t most = 4 * int64_t(pool.threads());
    const int tasks = int(n < most ? n : most);
    if (pool.threads() < 2 || tasks < 2 || bytes < parallel_work()) {
        fn(int64_t(0), n);
        return;
    }
    pool.run(tasks, [&](int t) { fn(n * t / tasks, n * (t + 1) / tasks); });
}

/// FunctionOptions::flush_denormals for one call of the cpu backend (Note [Flushing
/// denormals] in src/backend/FloatMode.h): when `on`, sets FTZ and DAZ on the calling thread and
/// each thread of its OpenMP team, and restores each thread's own bits when it goes. Inside a
/// parallel region only the calling thread's; nothing when an enclosing one has set them.
class FlushDenormalsInTeam {
public:
    explicit FlushDenormalsInTeam(bool on);
    ~FlushDenormalsInTeam();
    FlushDenormalsInTeam(const FlushDenormalsInTeam&) = delete;
    FlushDenormalsInTeam& operator=(const FlushDenormalsInTeam&) = delete;

private:
    bool team_ = false;
    std::optional<detail::ScopedFlushDenormals> own_;
};

} // namespace sj::cpu
