// oneDNN plumbing shared by the cpu backend's library calls: the engine and the thread count.
#pragma once

#include <dnnl.hpp>

namespace sj::cpu {

/// The CPU engine (one per process).
const dnnl::engine& dnnl_engine();

/// Gives oneDNN's OpenMP regions started from the calling thread as many threads as our pool
/// has (SJ_NUM_THREADS, else the hardware threads), so a library call and our kernels use the
/// same cores and SJ_NUM_THREADS limits both. Cheap: sets the count once per calling thread.
void match_dnnl_threads();

} // namespace sj::cpu
