// Layout ops the cpu backend's layout pass inserts (docs/ops.md, "Channel-blocked layout").
// Internal: they name a memory layout, not a computation; include deliberately.
#pragma once

#include <symjax/Tensor.h>

namespace sj {

/// [N, C, spatial...] -> [N, C / 16, spatial..., 16]: the channels in blocks of 16, each block
/// stored innermost (oneDNN's nChw16c as a row-major tensor); C must be a known multiple of 16.
/// The cpu backend's layout pass inserts these itself (docs/ops.md, "Channel-blocked layout").
Tensor block_channels(const Tensor& x);
/// The inverse of block_channels: [N, C / 16, spatial..., 16] -> [N, C, spatial...].
Tensor unblock_channels(const Tensor& b);

} // namespace sj
