// Layout ops the cpu backend's layout pass inserts (docs/ops.md, "Channel-blocked layout").
// Internal: they name a memory layout, not a computation; include deliberately.
#pragma once

#include <symjax/Tensor.h>

namespace sj {

/// [N, C, spatial...] -> [N, C / B, spatial..., B]: the channels in blocks of B (8 or 16), each
/// block stored innermost (oneDNN's nChw16c or nChw8c as a row-major tensor); C must be a known
/// multiple of B. The cpu backend's layout pass inserts these itself (docs/ops.md,
/// "Channel-blocked layout").
Tensor block_channels(const Tensor& x, int64_t block = 16);
/// The inverse of block_channels: [N, C / B, spatial..., B] -> [N, C, spatial...].
Tensor unblock_channels(const Tensor& b);

} // namespace sj
