// The channel-blocked layout (Note [Channel-blocked layout]): shapes and operand masks, shared by
// the op rules, the reference kernels, the cpu backend and the layout pass.
#pragma once

#include <symjax/Array.h>
#include <symjax/ir/Attrs.h>
#include <symjax/ir/Node.h>

namespace sj::detail {

// Note [Channel-blocked layout]
// oneDNN's fast convolutions read and write activations as nC(d)hw<B>c: the channels split into
// blocks of B, each block stored as [N, spatial..., B], B the f32 lanes of the ISA's vectors (16
// with AVX-512, 8 with AVX2: its kernels take no other width and fall back to im2col GEMMs and
// reference pools on the other). In the graph that buffer is the row-major tensor [N, C / B,
// spatial..., B]: block_channels makes it from [N, C, spatial...], unblock_channels undoes it.
// Conv and pool ops take and give operands in either layout (the node's layout mask, Note
// [Target layouts] in src/core/Node.cpp), and elementwise ops and reductions work on the blocked
// tensor as on any other: a per-channel vector [C] is the [C / B, B] tensor broadcast along the
// other dims. So the cpu backend's layout pass (src/backend/cpu/LayoutPass.cpp) blocks every
// window op whose channels fill whole blocks, then moves the unblocking past the elementwise ops
// and reductions that follow, until a block meets an unblock and both vanish: the reorders are
// left at the chain's boundaries (the network's input, a flatten, a function output). The user's
// graph never holds these ops; the reference backend never sees them.
//
// B is the blocked tensor's last dim. Where no operand gives it (block_channels, a window op
// whose result alone is blocked), the layout mask does: bits kBlockShift.. hold B, and 0 there
// means kChannelBlock, so a mask made before B could vary reads as it did.
inline constexpr int64_t kChannelBlock = 16;
/// Bit of a window node's layout mask for the result (bits 0..2: the inputs).
inline constexpr int64_t kBlockedResult = 1 << 3;
/// The layout mask's block width field: bits 8..15.
inline constexpr int kBlockShift = 8;

/// The block widths a layout may use: the f32 lanes of AVX-512 (16) and AVX2/SSE (8) vectors.
inline bool valid_block(int64_t b) {
    return b == 8 || b == 16;
}
/// The block width a layout mask names.
inline int64_t block_width(int64_t mask) {
    int64_t b = (mask >> kBlockShift) & 0xff;
    return b ? b : kChannelBlock;
}
/// The mask bits that name block width b (none for the default width).
inline int64_t block_bits(int64_t b) {
    return b == kChannelBlock ? 0 : b << kBlockShift;
}

/// [N, C, s...] -> [N, C / B, s..., B] (C a multiple of B; -1 dims stay -1, C included).
inline Shape blocked_shape(const Shape& s, int64_t block) {
    Shape b = s;
    b[1] = s[1] < 0 ? -1 : s[1] / block;
    b.push_back(block);
    return b;
}
/// [N, C / B, s..., B] -> [N, C, s...].
inline Shape unblocked_shape(const Shape& b) {
    Shape s(b.begin(), b.end() - 1);
    s[1] = b[1] < 0 ? -1 : b[1] * b.back();
    return s;
}
/// True when a [N, C, s...] tensor can be blocked by B: rank >= 3 and C a known multiple of B.

/// The channels each group of a conv op's operand i (-1: its result) has when the op's groups
/// follow its channels (ConvAttrs::groups 0, Note [Groups that follow the batch] in
/// src/ops/Conv.cpp): its channel count, unknown when the graph is built, is a multiple of it.
/// 0 for other ops, other operands, and a fixed group count.
inline int64_t channels_per_group(Op op, const Attrs& attrs, int i) {
    const bool fwd = op == Op::Conv, data = op == Op::ConvBackwardData,
               filter = op == Op::ConvBackwardFilter;
    if (!fwd && !data && !filter)
        return 0;
    const auto& a = std::get<ConvAttrs>(attrs);
    if (a.groups != 0)
        return 0;
    if (i == -1)
        return fwd ? a.group_out : data ? a.group_in : 0;
    if (i == 0)
        return data ? a.group_out : a.group_in;
    return filter && i == 1 ? a.group_out : 0;
}
/// True when [N, C, s...] holds whole blocks of B channels: C a known multiple of B, or unknown
/// and a multiple of `per_group` channels (channels_per_group), itself a multiple of B.
inline bool whole_blocks(const Shape& s, int64_t block, int64_t per_group) {
    if (s.size() < 3)
        return false;
    if (s[1] == -1)
        return per_group > 0 && per_group % block == 0;
    return s[1] > 0 && s[1] % block == 0;
}
/// True when a [N, C, s...] tensor can be blocked by B: rank >= 3 and C a known multiple of B.
inline bool blockable(const Shape& s, int64_t block) {
    return whole_blocks(s, block, 0);
}
/// True when s can be a blocked tensor: rank >= 4 and a valid block width last.
inline bool blocked_form(const Shape& s) {
    return s.size() >= 4 && valid_block(s.back());
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
