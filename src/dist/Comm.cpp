// The MPI world and the collectives on buffers (OpenMPI; a world of one without it).
#include "Comm.h"

#include <symjax/Dist.h>
#include <symjax/Error.h>

#if SJ_WITH_MPI
// the C API only: OpenMPI's and MPICH's deprecated C++ bindings stay out
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#endif

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace sj::dist {
namespace {

// Note [Collective timeouts]
// A blocking MPI call waits forever when another rank died without taking mpirun down, raised
// an error and went on to something else, or runs a different program. Every collective is
// therefore posted nonblocking (MPI_Iallreduce, ...) and polled with MPI_Test until it completes
// or `timeout` seconds pass; then it throws DistError and marks the world broken: the posted
// request can never be completed or cancelled, so every later collective throws at once and
// finalize() does not call MPI_Finalize (which would wait for it). The process then exits and
// mpirun stops the others. MPI moves the data of a nonblocking collective only inside MPI calls
// (OpenMPI has no progress thread for shared memory), so the loop tests without pause for the
// first millisecond (a collective on loopback takes microseconds to a millisecond), then yields
// the core between tests while data may still be moving, and after a second, when the others
// are clearly late (a slow rank, a rank evaluating), sleeps 1 ms between tests so that the
// waiting rank leaves its core to the others.
//
// Note [Collective signatures]
// Before its data moves, each collective gathers from every rank a signature: the kind, the
// reduction, the root, the dtype and the element count, with the sequence number. Ranks that
// disagree (mismatched graphs, a different order of collectives, different shapes) all see the
// same table and all throw the same DistError naming each rank's collective, instead of mixing
// buffers or hanging. The exchange costs one small allgather (a few us on one machine);
// SJ_DIST_CHECK=0 turns it off.

struct World {
    std::mutex mu; // MPI is initialised with MPI_THREAD_SERIALIZED: one call at a time
    bool initialized = false, mpi = false, finalized = false, check = true;
    int rank = 0, size = 1, local_rank = 0, local_size = 1;
    double timeout = 300;
    uint64_t seq = 0;
    std::string broken; // why the world cannot run collectives any more (empty: it can)
#if SJ_WITH_MPI
    MPI_Comm comm = MPI_COMM_NULL;
#endif
};

World& world() {
    static World* w = new World; // never destroyed: finalize() runs from atexit
    return *w;
}

bool launched_by_mpi() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
        if (std::getenv(v))
            return true;
    return false;
}

#if SJ_WITH_MPI
void finalize_at_exit() {
    finalize();
}
#endif

#if SJ_WITH_MPI
std::string mpi_error(int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        return "MPI error " + std::to_string(rc);
    return std::string(text, size_t(len));
}

void check_mpi(World& w, int rc, const std::string& what) {
    if (rc == MPI_SUCCESS)
        return;
    w.broken = what + ": " + mpi_error(rc);
    throw DistError(what + ": MPI failed: " + mpi_error(rc));
}

void init_mpi(World& w) {
    int already = 0;
    MPI_Initialized(&already);
    if (!already) {
        int provided = 0;
        int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS)
            throw DistError("sj::dist::init: MPI_Init_thread failed: " + mpi_error(rc));
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &w.comm);
    // errors come back as codes (DistError), never as MPI's abort
    MPI_Comm_set_errhandler(w.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(w.comm, &w.rank);
    MPI_Comm_size(w.comm, &w.size);
    MPI_Comm local;
    MPI_Comm_split_type(w.comm, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &w.local_rank);
    MPI_Comm_size(local, &w.local_size);
    MPI_Comm_free(&local);
    w.mpi = true;
}

MPI_Datatype mpi_type(DType t) {
    switch (t) {
    case DType::Bool:
        return MPI_UINT8_T; // 0/1 bytes: max is "any", min is "all"
    case DType::U8:
        return MPI_UINT8_T;
    case DType::I32:
        return MPI_INT32_T;
    case DType::I64:
        return MPI_INT64_T;
    case DType::U32:
        return MPI_UINT32_T;
    case DType::F32:
        return MPI_FLOAT;
    case DType::F64:
        return MPI_DOUBLE;
    }
    return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op) {
    switch (op) {
    case ReduceOp::Sum:
        return MPI_SUM;
    case ReduceOp::Mean:
        return MPI_SUM; // then divided by the size
    case ReduceOp::Max:
        return MPI_MAX;
    case ReduceOp::Min:
        return MPI_MIN;
    }
    return MPI_SUM;
}

std::string describe(const detail::Call& c) {
    std::ostringstream os;
    os << detail::kind_name(c.kind);
    if (c.kind == detail::Kind::AllReduce || c.kind == detail::Kind::ReduceScatter)
        os << " " << reduce_op_name(c.reduce);
    if (c.kind == detail::Kind::Broadcast)
        os << " from rank " << c.root;
    if (c.kind != detail::Kind::Barrier)
        os << " of " << c.count << " " << dtype_name(c.dtype);
    return os.str();
}

/// Waits for `req` under the timeout (Note [Collective timeouts]).
void wait(World& w, MPI_Request& req, const detail::Call& c, const char* phase) {
    using clock = std::chrono::steady_clock;
    auto start = clock::now();
    for (int polls = 0;; ++polls) {
        int done = 0;
        check_mpi(w, MPI_Test(&req, &done, MPI_STATUS_IGNORE), c.what);
        if (done)
            return;
        if (polls % 64 != 63)
            continue;
        double waited = std::chrono::duration<double>(clock::now() - start).count();
        if (waited > 1.0)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        else if (waited > 1e-3)
            std::this_thread::yield();
        if (waited > w.timeout) {
            std::ostringstream os;
            os << c.what << " (" << describe(c) << ", collective #" << w.seq << " of rank "
               << w.rank << "): no answer from the other " << (w.size - 1) << " rank(s) after "
               << w.timeout << " s (" << phase
               << "; sj::dist::set_timeout, SJ_DIST_TIMEOUT): a rank died, raised an error, or "
                  "runs a different program";
            w.broken = os.str();
            throw DistError(os.str());
        }
    }
}

/// Every rank's signatures of `calls` (the collectives it is about to run, in order: one, or the
/// overlapped all_reduces of a plan's call); throws the same DistError on every rank when they
/// disagree (Note [Collective signatures]). One fixed-size block per rank, whatever the number
/// of calls, so that ranks checking different numbers of calls still exchange alike: the count,
/// a hash of every call's signature, the sequence number, and the first kSigCalls signatures
/// for the message.
void check_signatures(World& w, const std::vector<detail::Call>& calls, const std::string& what) {
    if (!w.check || calls.empty())
        return;
    constexpr int kSigCalls = 8, kFields = 5, kInts = 3 + kSigCalls * kFields;
    std::vector<int64_t> mine(kInts, -1);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < calls.size(); ++i) {
        const detail::Call& c = calls[i];
        const int64_t f[kFields] = {int64_t(c.kind), int64_t(c.reduce), c.root, int64_t(c.dtype),
                                    c.count};
        for (int64_t x : f)
            h = (h ^ uint64_t(x)) * 1099511628211ull;
        if (i < size_t(kSigCalls))
            std::copy(f, f + kFields, mine.begin() + 3 + std::ptrdiff_t(i) * kFields);
    }
    mine[0] = int64_t(calls.size());
    mine[1] = int64_t(h);
    mine[2] = int64_t(w.seq);
    std::vector<int64_t> all(size_t(kInts * w.size));
    MPI_Request req;
    check_mpi(w,
              MPI_Iallgather(mine.data(), kInts, MPI_INT64_T, all.data(), kInts, MPI_INT64_T,
                             w.comm, &req),
              what);
    wait(w, req, calls[0], "exchanging signatures");
    bool same = true;
    for (int r = 1; r < w.size && same; ++r)
        same = all[size_t(kInts * r)] == all[0] && all[size_t(kInts * r + 1)] == all[1];
    if (same)
        return;
    std::ostringstream os;
    os << what << ": the ranks run different collectives here (mismatched graphs or programs "
       << "across ranks: every rank must run the same collectives, in the same order, on the "
       << "same shapes and dtypes):";
    for (int r = 0; r < w.size; ++r) {
        const int64_t* s = &all[size_t(kInts * r)];
        os << "\n  rank " << r << ": ";
        for (int64_t i = 0; i < std::min<int64_t>(s[0], kSigCalls); ++i) {
            const int64_t* f = s + 3 + i * kFields;
            detail::Call o;
            o.kind = detail::Kind(f[0]);
            o.reduce = ReduceOp(f[1]);
            o.root = int(f[2]);
            o.dtype = DType(f[3]);
            o.count = f[4];
            os << (i ? ", " : "") << describe(o);
        }
        if (s[0] > kSigCalls)
            os << " and " << (s[0] - kSigCalls) << " more";
        os << (s[0] == 1 ? " (collective #" : " (collectives from #") << s[2] << ")"
           << (r == w.rank ? " <- this rank, " + what : "");
    }
    throw DistError(os.str());
}

void check_signatures(World& w, const detail::Call& c) {
    check_signatures(w, {c}, c.what);
}

int checked_count(World& w, const detail::Call& c, int64_t n) {
    (void)w;
    if (n <= INT_MAX)
        return int(n);
    throw DistError(c.what + ": " + std::to_string(n) + " elements per rank; MPI counts stop at " +
                    std::to_string(INT_MAX));
}
#endif

/// Locks the world for one collective and checks it can run one.
/// The world's lock, once it is known to be usable for `what` (not broken, not finalised).
std::unique_lock<std::mutex> lock_usable(World& w, const std::string& what) {
    init();
    std::unique_lock<std::mutex> lock(w.mu);
    if (!w.broken.empty())
        throw DistError(what + ": the MPI world is broken since an earlier collective failed (" +
                        w.broken + ")");
    if (w.finalized && w.mpi)
        throw DistError(what + ": sj::dist::finalize() has already run");
    return lock;
}

/// lock_usable for collective c, counting it.
std::unique_lock<std::mutex> begin(World& w, const detail::Call& c) {
    auto lock = lock_usable(w, c.what);
    ++w.seq;
    return lock;
}

void scale_mean(const detail::Call& c, void* dst, int64_t n, int size) {
    if (c.reduce != ReduceOp::Mean)
        return;
    if (c.dtype == DType::F32) {
        float* p = static_cast<float*>(dst);
        for (int64_t i = 0; i < n; ++i)
            p[i] /= float(size);
    } else if (c.dtype == DType::F64) {
        double* p = static_cast<double*>(dst);
        for (int64_t i = 0; i < n; ++i)
            p[i] /= double(size);
    }
}

} // namespace

const char* reduce_op_name(ReduceOp op) {
    switch (op) {
    case ReduceOp::Sum:
        return "sum";
    case ReduceOp::Mean:
        return "mean";
    case ReduceOp::Max:
        return "max";
    case ReduceOp::Min:
        return "min";
    }
    return "?";
}

void init() {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    if (w.initialized)
        return;
    w.initialized = true;
    if (const char* t = std::getenv("SJ_DIST_TIMEOUT")) {
        char* end = nullptr;
        double v = std::strtod(t, &end);
        if (end != t && v > 0)
            w.timeout = v;
    }
    if (const char* ch = std::getenv("SJ_DIST_CHECK"))
        w.check = std::strcmp(ch, "0") != 0;
    if (!launched_by_mpi())
        return;
#if SJ_WITH_MPI
    init_mpi(w);
    std::atexit(finalize_at_exit);
#else
    std::cerr << "symjax: started by an MPI launcher, but this libsymjax was built without MPI "
                 "(SJ_WITH_MPI=OFF): this process is a world of one and trains alone\n";
#endif
}

void finalize() {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    if (!w.initialized || w.finalized)
        return;
    w.finalized = true;
#if SJ_WITH_MPI
    if (!w.mpi || !w.broken.empty())
        return; // Note [Collective timeouts]
    int done = 0;
    MPI_Finalized(&done);
    if (done)
        return;
    MPI_Comm_free(&w.comm);
    MPI_Finalize();
#endif
}

bool initialized() {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    return w.initialized;
}

bool built_with_mpi() {
#if SJ_WITH_MPI
    return true;
#else
    return false;
#endif
}

bool using_mpi() {
    init();
    return world().mpi;
}

int rank() {
    init();
    return world().rank;
}
int size() {
    init();
    return world().size;
}
int local_rank() {
    init();
    return world().local_rank;
}
int local_size() {
    init();
    return world().local_size;
}

double timeout() {
    init();
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    return w.timeout;
}

void set_timeout(double seconds) {
    SJ_CHECK(seconds > 0, InputError)
        << "sj::dist::set_timeout: the timeout must be positive, got " << seconds << " s";
    init();
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    w.timeout = seconds;
}

void barrier() {
    World& w = world();
    detail::Call c{detail::Kind::Barrier, ReduceOp::Sum, 0, DType::U8, 0, "sj::dist::barrier()"};
    auto lock = begin(w, c);
#if SJ_WITH_MPI
    if (!w.mpi)
        return;
    check_signatures(w, c);
    MPI_Request req;
    check_mpi(w, MPI_Ibarrier(w.comm, &req), c.what);
    wait(w, req, c, "waiting for the other ranks");
#endif
}

namespace detail {

const char* kind_name(Kind k) {
    switch (k) {
    case Kind::AllReduce:
        return "all_reduce";
    case Kind::AllGather:
        return "all_gather";
    case Kind::Broadcast:
        return "broadcast";
    case Kind::ReduceScatter:
        return "reduce_scatter";
    case Kind::Barrier:
        return "barrier";
    }
    return "?";
}

uint64_t collectives_run() {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    return w.seq;
}

void all_reduce(const Call& c, const void* src, void* dst) {
    World& w = world();
    auto lock = begin(w, c);
    size_t bytes = size_t(c.count) * dtype_size(c.dtype);
    if (dst != src && bytes)
        std::memcpy(dst, src, bytes);
#if SJ_WITH_MPI
    if (w.mpi) {
        check_signatures(w, c);
        // in chunks of at most INT_MAX elements (MPI counts are int)
        for (int64_t at = 0; at < c.count; at += INT_MAX) {
            int n = int(std::min<int64_t>(c.count - at, INT_MAX));
            char* p = static_cast<char*>(dst) + size_t(at) * dtype_size(c.dtype);
            MPI_Request req;
            check_mpi(w,
                      MPI_Iallreduce(MPI_IN_PLACE, p, n, mpi_type(c.dtype), mpi_op(c.reduce),
                                     w.comm, &req),
                      c.what);
            wait(w, req, c, "reducing");
        }
    }
#endif
    scale_mean(c, dst, c.count, w.size);
}

struct Request {
    Call call;
    void* dst = nullptr;
    bool done = false;
#if SJ_WITH_MPI
    MPI_Request req = MPI_REQUEST_NULL;
#endif
};

void check_collectives(const std::vector<Call>& calls, const std::string& what) {
#if SJ_WITH_MPI
    if (!using_mpi())
        return;
    World& w = world();
    auto lock = lock_usable(w, what);
    check_signatures(w, calls, what);
#else
    (void)calls;
    (void)what;
#endif
}

std::shared_ptr<Request> start_all_reduce(const Call& c, const void* src, void* dst, bool checked) {
    auto r = std::make_shared<Request>();
    r->call = c;
    r->dst = dst;
#if SJ_WITH_MPI
    if (using_mpi() && c.count > 0 && c.count <= INT_MAX) {
        World& w = world();
        auto lock = begin(w, c);
        size_t bytes = size_t(c.count) * dtype_size(c.dtype);
        if (dst != src)
            std::memcpy(dst, src, bytes);
        if (!checked)
            check_signatures(w, c);
        check_mpi(w,
                  MPI_Iallreduce(MPI_IN_PLACE, dst, int(c.count), mpi_type(c.dtype),
                                 mpi_op(c.reduce), w.comm, &r->req),
                  c.what);
        return r;
    }
#endif
    all_reduce(c, src, dst);
    r->done = true;
    return r;
}

bool progress(Request& r) {
    if (r.done)
        return true;
#if SJ_WITH_MPI
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    int complete = 0;
    check_mpi(w, MPI_Test(&r.req, &complete, MPI_STATUS_IGNORE), r.call.what);
    if (!complete)
        return false;
    scale_mean(r.call, r.dst, r.call.count, w.size);
#endif
    r.done = true;
    return true;
}

void finish(Request& r) {
    if (r.done)
        return;
#if SJ_WITH_MPI
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    wait(w, r.req, r.call, "reducing");
    scale_mean(r.call, r.dst, r.call.count, w.size);
#endif
    r.done = true;
}

void all_gather(const Call& c, const void* src, void* dst) {
    World& w = world();
    auto lock = begin(w, c);
    size_t bytes = size_t(c.count) * dtype_size(c.dtype);
#if SJ_WITH_MPI
    if (w.mpi) {
        check_signatures(w, c);
        int n = checked_count(w, c, int64_t(bytes));
        MPI_Request req;
        check_mpi(w, MPI_Iallgather(src, n, MPI_BYTE, dst, n, MPI_BYTE, w.comm, &req), c.what);
        wait(w, req, c, "gathering");
        return;
    }
#endif
    if (bytes)
        std::memcpy(dst, src, bytes);
}

void broadcast(const Call& c, void* buf) {
    World& w = world();
    auto lock = begin(w, c);
    if (c.root < 0 || c.root >= w.size)
        throw DistError(c.what + ": root " + std::to_string(c.root) + " is not a rank of this " +
                        std::to_string(w.size) + "-process world");
#if SJ_WITH_MPI
    if (w.mpi) {
        check_signatures(w, c);
        size_t bytes = size_t(c.count) * dtype_size(c.dtype);
        for (size_t at = 0; at < bytes; at += size_t(INT_MAX)) {
            int n = int(std::min<size_t>(bytes - at, size_t(INT_MAX)));
            MPI_Request req;
            check_mpi(w,
                      MPI_Ibcast(static_cast<char*>(buf) + at, n, MPI_BYTE, c.root, w.comm, &req),
                      c.what);
            wait(w, req, c, "broadcasting");
        }
    }
#else
    (void)buf;
#endif
}

void reduce_scatter(const Call& c, const void* src, void* dst) {
    World& w = world();
    auto lock = begin(w, c);
    size_t bytes = size_t(c.count) * dtype_size(c.dtype);
#if SJ_WITH_MPI
    if (w.mpi) {
        check_signatures(w, c);
        int n = checked_count(w, c, c.count);
        MPI_Request req;
        check_mpi(w,
                  MPI_Ireduce_scatter_block(src, dst, n, mpi_type(c.dtype), mpi_op(c.reduce),
                                            w.comm, &req),
                  c.what);
        wait(w, req, c, "reducing");
        scale_mean(c, dst, c.count, w.size);
        return;
    }
#endif
    if (bytes)
        std::memcpy(dst, src, bytes);
}

} // namespace detail
} // namespace sj::dist
