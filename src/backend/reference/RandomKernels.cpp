// Reference kernel of philox_bits, and Philox4x32-10 itself (Salmon et al., SC'11).
#include "../../ops/ChannelBlocking.h"
#include "Iterate.h"
#include "Reference.h"

#include <symjax/ir/Node.h>

namespace sj::ref {

void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u; // round multipliers
    constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u; // Weyl key increments
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += kW0;
            k1 += kW1;
        }
        uint64_t p0 = uint64_t(kM0) * c0;
        uint64_t p1 = uint64_t(kM1) * c2;
        uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
        uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

void philox_block(const uint32_t key[2], uint64_t counter, uint64_t q, uint32_t words[4]) {
    const uint32_t ctr[4] = {uint32_t(q), uint32_t(q >> 32), uint32_t(counter),
                             uint32_t(counter >> 32)};
    philox4x32_10(ctr, key, words);
}

namespace {

// A channel-blocked draw (the cpu layout pass's: Note [Channel-blocked layout] in
// src/ops/ChannelBlocking.h) holds the same bits per logical element, [N, C, s...], in the
// blocked order [N, C / B, s..., B]: a dropout mask drawn blocked equals the user's graph's.
Array philox_bits_kernel(const KernelCtx& c) {
    const auto& a = c.attr<PhiloxAttrs>();
    const uint32_t key[2] = {uint32_t(a.key), uint32_t(a.key >> 32)};
    Array out(DType::U32, c.out.shape);
    uint32_t* po = ptr<uint32_t>(out);
    const int64_t n = out.size();
    uint32_t words[4];
    if (!(detail::blocked_mask(c.node) & detail::kBlockedResult)) {
        for (int64_t block = 0; block * 4 < n; ++block) {
            philox_block(key, c.counter, uint64_t(block), words);
            for (int64_t w = 0; w < 4 && block * 4 + w < n; ++w)
                po[block * 4 + w] = words[w];
        }
        return out;
    }
    // the logical elements in order, each block's 4 words made once
    const Shape& b = c.out.shape; // [N, C / B, s..., B]
    const int64_t B = b.back(), blocks = b[1];
    int64_t spatial = 1;
    for (size_t i = 2; i + 1 < b.size(); ++i)
        spatial *= b[i];
    int64_t i = 0; // the logical index
    for (int64_t img = 0; img < b[0]; ++img)
        for (int64_t ch = 0; ch < blocks * B; ++ch)
            for (int64_t p = 0; p < spatial; ++p, ++i) {
                if (i % 4 == 0)
                    philox_block(key, c.counter, uint64_t(i / 4), words);
                po[((img * blocks + ch / B) * spatial + p) * B + ch % B] = words[i % 4];
            }
    return out;
}

} // namespace

void register_random_kernels(Kernel* table) { table[int(Op::PhiloxBits)] = philox_bits_kernel; }

} // namespace sj::ref
