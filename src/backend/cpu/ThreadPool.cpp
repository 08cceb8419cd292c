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
#include <vector>

#include <omp.h>
#include <pthread.h>

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

int64_t parallel_work() {
    static const int64_t w = [] {
        const char* e = std::getenv("SJ_PARALLEL_WORK");
        if (!e || !*e)
            return int64_t(1) << 20;
        char* end = nullptr;
        long long v = std::strtoll(e, &end, 10);
        SJ_CHECK(end && *end == 0 && v >= 0, InputError)
            << "SJ_PARALLEL_WORK must be a whole number >= 0 (byte-equivalents), got '" << e << "'";
        return int64_t(v);
    }();
    return w;
}

// Note [Forked children]
// GNU OpenMP keeps its team's threads between parallel regions, and fork() copies only the
// thread that calls it: in the child, libgomp's next region of two threads or more waits at its
// barrier for workers that do not exist, forever. So a program that ran a training step and
// then forked (Python's multiprocessing on Linux, a data-loading worker, a shell-out through
// fork) hung in the child's first symjax call that started a region: a kernel over the
// threshold, a convolution, even the first call's denormal setting (FlushDenormalsInTeam).
// Measured with a two-line program: a region of 2 threads, fork, a region of 2 in the child:
// the child never returns; of 1 thread, or of 2 after omp_set_max_active_levels(0), it does.
// So symjax registers a fork handler when it loads: in the child it caps every region at one
// thread (max-active-levels 0, which also covers oneDNN's own regions, planned in the parent
// for the team) and sets OpenMP's count to 1, and the process's pool (made or still to be made)
// has one thread, so that what the child plans is planned for one thread and ThreadPool::run
// runs its tasks in order on the calling thread. Results do not depend on the thread count (Note
// [Thread-count-independent sums] in CpuExecutable.cpp): the child computes the parent's bits, on
// one core. `ThreadPool.ForkedChildrenRunOnOneThread` forks after a training step and checks the
// child's results against the parent's under an alarm.
namespace {
std::atomic<bool> g_forked_child{false};
ThreadPool* g_pool = nullptr; // ThreadPool::get()'s, once made
[[gnu::constructor]] void register_fork_handler() {
    ::pthread_atfork(nullptr, nullptr, ThreadPool::single_threaded_after_fork);
}
} // namespace

void ThreadPool::single_threaded_after_fork() {
    g_forked_child.store(true, std::memory_order_relaxed);
    omp_set_max_active_levels(0);
    omp_set_num_threads(1);
    if (g_pool)
        g_pool->threads_ = 1; // (the child has one thread: nobody reads it meanwhile)
}

bool ThreadPool::forked_child() {
    return g_forked_child.load(std::memory_order_relaxed);
}

// Passive waits by default: Note [OpenMP wait policy] in src/startup/OpenMpWaitPolicy.cpp.

ThreadPool& ThreadPool::get() {
    // A bad SJ_NUM_THREADS throws from here on every call (a throwing initialiser is retried).
    static ThreadPool* p = [] {
        int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        if (const char* e = std::getenv("SJ_NUM_THREADS"); e && *e)
            n = parse_thread_count(e, "SJ_NUM_THREADS");
        return g_pool = new ThreadPool(forked_child() ? 1 : n);
    }();
    return *p;
}

// Note [Tasks stay on their thread]
// Thread i of the team runs the i-th contiguous block of the tasks ([tasks*i/nt, tasks*(i+1)/nt)),
// and only then takes tasks left in other blocks. Every caller numbers its tasks in data order
// (rows of a kernel's loop 0, images of a batch, pieces of a contraction), so a thread works on
// the same part of the data in consecutive regions, where its previous region left it: in its
// own core's caches. The tasks used to go to whichever thread asked first. On our 2-core VM a
// line moved between the cores can cost as much as one read from memory: a function of an
// MLP's weight-gradient matmul (oneDNN's, on the same team) and the SGD update after it
// (`W - 0.01 * v`, 784x512) took 520 us, the update alone 29 us and the matmul alone 365 us;
// with blocks, 394 us (2026-12-04, AMD EPYC, 2 threads; docs/performance.md, "Tasks stay on
// their thread"). Taking the leftovers keeps what the shared counter gave a loaded machine: a
// thread that arrives late (descheduled) finds its block done by the others.
void ThreadPool::run(int tasks, const std::function<void(int)>& fn) const {
    run(tasks, fn, nullptr);
}

// Note [Work after a barrier]
// Some calls have two phases over the same tasks, the second reading what every task of the
// first wrote: a weight gradient's chunks each write a partial gradient, then the partials are
// added, each task adding its share of the elements over every chunk (Note
// [Thread-count-independent weight gradients] in Conv.cpp). A second run() costs a region start
// and end; the last task to finish adding everything alone reads the other cores' partials
// from one core. So run(tasks, fn, then) runs both phases in one region with OpenMP's barrier
// between them, which waits for the threads the team really has (never for a task nobody will
// run: each phase hands out all its tasks before a thread reaches the barrier). On the AMD EPYC
// VM (Zen 5, 2 threads), a function of one weight gradient (32 -> 32 channels, 3x3, batch 32,
// hot buffers) took 0.048 ms instead of 0.065 at 4x4 and 0.122 instead of 0.137 at 8x8; in the
// brief CNN's step the weight gradients took 2-7% less (docs/performance.md, "Counts beside
// their sums, and weight-gradient partials added on both threads").
void ThreadPool::run(int tasks, const std::function<void(int)>& fn,
                     const std::function<void(int)>& then) const {
    if (tasks <= 0) return;
    int nt = std::min(tasks, threads_);
    if (nt == 1 || omp_in_parallel()) {
        for (int t = 0; t < tasks; ++t) fn(t);
        if (then)
            for (int t = 0; t < tasks; ++t)
                then(t);
        return;
    }
    struct alignas(64) Block { // (a cache line each: the threads bump different counters)
        std::atomic<int> next;
        int end;
    };
    Block local[16]; // (no allocation for the usual team: two phases of up to 8 threads)
    std::vector<Block> more(nt > 8 ? 2 * static_cast<size_t>(nt) : 0);
    Block* blocks = nt > 8 ? more.data() : local;
    for (int i = 0; i < 2 * nt; ++i) {
        const int k = i % nt;
        blocks[i].next.store(int(int64_t(tasks) * k / nt), std::memory_order_relaxed);
        blocks[i].end = int(int64_t(tasks) * (k + 1) / nt);
    }
    std::mutex mu;
    std::exception_ptr error;
    // a phase's tasks: this thread's block first, then what is left in the others'
    auto phase = [&](Block* b, int me, const std::function<void(int)>& f) {
        for (int k = 0; k < nt; ++k) {
            Block& blk = b[(me + k) % nt];
            for (int t; (t = blk.next.fetch_add(1, std::memory_order_relaxed)) < blk.end;) {
                try {
                    f(t);
                } catch (...) {
                    std::lock_guard<std::mutex> lock(mu);
                    if (!error)
                        error = std::current_exception();
                }
            }
        }
    };
#pragma omp parallel num_threads(nt)
    {
        // OpenMP may give fewer threads than asked: the blocks of those that never come are
        // taken like any leftovers
        const int me = omp_get_thread_num();
        phase(blocks, me, fn);
        if (then) {
#pragma omp barrier
            // (every first-phase task is done: `error` is no longer written)
            if (!error)
                phase(blocks + nt, me, then);
        }
    }
    if (error) std::rethrow_exception(error);
}

namespace {

// each thread's own MXCSR while a FlushDenormalsInTeam has set its bits
thread_local uint32_t t_saved_csr = 0;
thread_local bool t_saved = false;
// the calling thread has a FlushDenormalsInTeam already (a call inside a call)
thread_local bool t_team_set = false;

/// Every thread oneDNN, OpenBLAS or our kernels may use: the pool's, and OpenMP's default team
/// (oneDNN's regions ask for omp_get_max_threads()).
int team_size() {
    return std::max(ThreadPool::get().threads(), omp_get_max_threads());
}

} // namespace

FlushDenormalsInTeam::FlushDenormalsInTeam(bool on) {
    if (!on || t_team_set)
        return;
    if (omp_in_parallel()) {
        own_.emplace(true);
        return;
    }
#if defined(__SSE__)
    // The calling thread is set inside the region, with the others: a thread OpenMP creates for
    // this region copies the creator's bits, which must still be its own to be restored to.
    team_ = t_team_set = true;
#pragma omp parallel num_threads(team_size())
    {
        if (!t_saved) {
            t_saved_csr = _mm_getcsr();
            t_saved = true;
            _mm_setcsr(t_saved_csr | detail::kFlushDenormalBits);
        }
    }
#endif
}

FlushDenormalsInTeam::~FlushDenormalsInTeam() {
    if (!team_)
        return;
#if defined(__SSE__)
#pragma omp parallel num_threads(team_size())
    {
        if (t_saved) {
            _mm_setcsr(t_saved_csr);
            t_saved = false;
        }
    }
#endif
    t_team_set = false;
}

} // namespace sj::cpu
