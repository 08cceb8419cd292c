// The cpu target: the compiler's questions (src/compiler/Target.h) answered for oneDNN 2.6,
// OpenBLAS/LAPACK and LLVM-generated AVX-512 kernels.
#pragma once

#include "../../compiler/Target.h"

namespace sj::cpu {

/// The process-wide cpu target.
const compiler::Target& cpu_target();

/// The channel block oneDNN's direct convolutions take on this CPU: 16 (AVX-512's f32 lanes),
/// else 8 (AVX2's).
int64_t isa_channel_block();

/// The channel block of the layout lowering (Note [Channel-blocked layout]), 0 when it is off:
/// isa_channel_block() unless SJ_BLOCKED_LAYOUT says otherwise (0: off, for measuring what it
/// gains; 8 or 16: that width whatever the CPU, as the test suite asks for plans that are the
/// same on every machine; 1: on, the CPU's width).
int64_t channel_block();
/// Whether the channel-blocking lowering runs: channel_block() != 0.
bool blocked_layout();
/// Sets channel_block() for the functions compiled from now on (0, 8 or 16), for tests and
/// benchmarks that compare widths in one process; returns the previous value.
int64_t set_channel_block(int64_t block);

} // namespace sj::cpu
