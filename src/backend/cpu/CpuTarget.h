// The cpu target: the compiler's questions (src/compiler/Target.h) answered for oneDNN 2.6,
// OpenBLAS/LAPACK and LLVM-generated AVX-512 kernels.
#pragma once

#include "../../compiler/Target.h"

namespace sj::cpu {

/// The process-wide cpu target.
const compiler::Target& cpu_target();

/// Whether the channel-blocking lowering runs: on a CPU with AVX-512, unless SJ_BLOCKED_LAYOUT=0
/// (for measuring what it gains); SJ_BLOCKED_LAYOUT=1 forces it on (the pass's tests).
bool blocked_layout();

} // namespace sj::cpu
