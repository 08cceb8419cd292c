// The channel-blocked layout (Note [Channel-blocked layout]): shapes and operand masks, shared by
// the op rules, the reference kernels, the cpu backend and the layout pass.
#pragma once

#include <symjax/Array.h>
#include <symjax/ir/Attrs.h>
#include <symjax/ir/Node.h>

namespace sj::detail {

// Note [Channel-blocked layout]
// oneDNN's fast convolutions on AVX-512 read and write activations as nC(d)hw16c: the channels
// split into blocks of 16, each block stored as [N, spatial..., 16]. In the graph that buffer is
// the row-major tensor [N, C / 16, spatial..., 16]: block_channels makes it from [N, C,
// spatial...], unblock_channels undoes it. Conv and pool ops take and give operands in either
// layout (the node's layout mask, Note [Target layouts] in src/core/Node.cpp), and elementwise ops
// and reductions work on the blocked tensor as on any other: a per-channel vector [C] is the [C /
// 16, 16] tensor broadcast along the other dims. So the cpu backend's layout pass
// (src/compiler/Layout.cpp) blocks every window op whose channels fill whole blocks, then moves the
// unblocking past the elementwise ops and reductions that follow, until a block meets an unblock
// and both vanish: the reorders are left at the chain's boundaries (the network's input, a flatten,
// a function output). The user's graph never holds these ops; the reference backend never sees
// them.
inline constexpr int64_t kChannelBlock = 16;
/// Bit of a window node's layout mask for the result (bits 0..2: the inputs).
inline constexpr int64_t kBlockedResult = 1 << 3;

/// [N, C, s...] -> [N, C / 16, s..., 16] (C a known multiple of 16; -1 dims stay -1).
inline Shape blocked_shape(const Shape& s) {
    Shape b = s;
    b[1] = s[1] / kChannelBlock;
    b.push_back(kChannelBlock);
    return b;
}
/// [N, C / 16, s..., 16] -> [N, C, s...].
inline Shape unblocked_shape(const Shape& b) {
    Shape s(b.begin(), b.end() - 1);
    s[1] = b[1] < 0 ? -1 : b[1] * b.back();
    return s;
}
/// True when a [N, C, s...] tensor can be blocked: rank >= 3 and C a known multiple of 16.
inline bool blockable(const Shape& s) {
    return s.size() >= 3 && s[1] > 0 && s[1] % kChannelBlock == 0;
}

/// Which operands of a window op are blocked (bit i: input i; kBlockedResult: the result): the
/// node's target layout (Note [Target layouts] in src/core/Node.cpp).
inline int64_t blocked_mask(const Node& n) {
    return n.layout();
}
/// The number of spatial dims of a window op or a blocking op (from its logical layout).
inline size_t logical_spatial_rank(const Node& n) {
    bool blocked_result = n.is(Op::BlockChannels) || (blocked_mask(n) & kBlockedResult);
    return n.shape().size() - 2 - (blocked_result ? 1 : 0);
}

} // namespace sj::detail
