// Reference kernel of philox_bits, and Philox4x32-10 itself (Salmon et al., SC'11).
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

namespace {

// element i takes word i % 4 of the block for counter {i / 4, call counter} and the node's key
Array philox_bits_kernel(const KernelCtx& c) {
    const auto& a = c.attr<PhiloxAttrs>();
    Array out(DType::U32, c.out.shape);
    uint32_t* po = ptr<uint32_t>(out);
    const uint32_t key[2] = {uint32_t(a.key), uint32_t(a.key >> 32)};
    int64_t n = out.size();
    for (int64_t block = 0; block * 4 < n; ++block) {
        uint64_t b = uint64_t(block);
        const uint32_t ctr[4] = {uint32_t(b), uint32_t(b >> 32), uint32_t(c.counter),
                                 uint32_t(c.counter >> 32)};
        uint32_t words[4];
        philox4x32_10(ctr, key, words);
        for (int64_t w = 0; w < 4 && block * 4 + w < n; ++w) po[block * 4 + w] = words[w];
    }
    return out;
}

} // namespace

void register_random_kernels(Kernel* table) { table[int(Op::PhiloxBits)] = philox_bits_kernel; }

} // namespace sj::ref
