// oneDNN engine and thread count (Debian's oneDNN runs on GNU OpenMP).
#include "Dnnl.h"

#include "ThreadPool.h"

#include <omp.h>

namespace sj::cpu {

const dnnl::engine& dnnl_engine() {
    static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}

void match_dnnl_threads() {
    // OpenMP's thread count is per calling thread (its nthreads-var ICV)
    thread_local int set = 0;
    int n = ThreadPool::get().threads();
    if (set != n) {
        omp_set_num_threads(n);
        set = n;
    }
}

} // namespace sj::cpu
