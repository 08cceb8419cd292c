// The cuda target: the compiler's questions (src/compiler/Target.h) answered for NVPTX kernels
// and cuBLAS.
#pragma once

#include "../../compiler/Target.h"

namespace sj::cuda {

/// The process-wide cuda target.
const compiler::Target& cuda_target();

} // namespace sj::cuda
