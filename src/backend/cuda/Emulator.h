// The host emulator of a GPU (Note [The emulator] in Emulator.cpp).
#pragma once

#include <cstdint>

namespace sj::cuda {

/// What an emulated thread's kernel reads in place of NVPTX's special registers and shared
/// memory (the Host code of render_gpu_module; its layout is the renderer's field order).
struct EmuContext {
    int64_t tid = 0, ctaid = 0, ntid = 0, nctaid = 0;
    void* shared = nullptr;
    void (*barrier)(EmuContext*) = nullptr;
};
static_assert(sizeof(EmuContext) == 6 * 8, "the renderer reads EmuContext as six 8-byte fields");

} // namespace sj::cuda
