// The calling thread's handling of denormal floats, for FunctionOptions::flush_denormals.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include <cstdint>

namespace sj::detail {

// Note [Flushing denormals]
// A float below the normal range (|x| < 2^-126 in f32) takes a microcode assist on x86 CPUs: an
// instruction that reads or writes one runs 10-100x slower. Training on a batch it has learnt
// drives gradients there: symjax_bench cnn_train repeats one random batch, its loss falls towards
// 0, and on the AMD EPYC (Zen 5) one 8x8 layer's weight gradient ran 3x slower (0.54 against
// 0.18 ms a call) in two of three processes, from whichever layer's gradients went denormal
// first (docs/performance.md, "Denormals"). Two bits of the SSE control register MXCSR make the
// CPU treat them as zero instead: FTZ (a result below the range is written as 0) and DAZ (an
// input below it is read as 0). They are per thread, and a new thread copies its creator's.
// FunctionOptions::flush_denormals sets both for one call: the reference backend on the calling
// thread (ScopedFlushDenormals), the cpu backend on the calling thread and each thread of its
// OpenMP team, which oneDNN and OpenBLAS share (FlushDenormalsInTeam in ThreadPool.cpp); each
// thread's own bits come back when the call returns or throws, so code the user runs between
// calls keeps IEEE arithmetic. The team's bits are set and restored in a parallel region each
// (a few microseconds a call, only with the option), the caller's inside it: a thread OpenMP
// creates for that region copies the caller's bits before they change.
// TensorFlow flushes in its thread pools by default; PyTorch has torch.set_flush_denormal. We
// keep IEEE by default (what the reference interpreter computes); the option trades the values
// below 1.2e-38 (f32) and 2.2e-308 (f64) for speed. GPU kernels are not affected. On CPUs without
// SSE the option does nothing.

/// MXCSR's flush-to-zero and denormals-are-zero bits.
constexpr uint32_t kFlushDenormalBits = 0x8040;

/// Sets FTZ and DAZ on the calling thread while it lives (when `on`), then restores its bits.
class ScopedFlushDenormals {
public:
    explicit ScopedFlushDenormals(bool on) {
#if defined(__SSE__)
        if (on) {
            saved_ = _mm_getcsr();
            active_ = true;
            _mm_setcsr(saved_ | kFlushDenormalBits);
        }
#else
        (void)on;
#endif
    }
    ~ScopedFlushDenormals() {
#if defined(__SSE__)
        if (active_)
            _mm_setcsr(saved_);
#endif
    }
    ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
    ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

private:
    uint32_t saved_ = 0;
    bool active_ = false;
};

/// Whether the calling thread flushes denormals (both bits set).
inline bool flushing_denormals() {
#if defined(__SSE__)
    return (_mm_getcsr() & kFlushDenormalBits) == kFlushDenormalBits;
#else
    return false;
#endif
}

} // namespace sj::detail
