// philox_bits on the cpu target (Note [Philox draws on the team]).
#include "Random.h"

#include "../../ops/ChannelBlocking.h"
#include "../reference/Reference.h"
#include "ThreadPool.h"

#include <symjax/Error.h>
#include <symjax/ir/Attrs.h>

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sj::cpu {

// Note [Philox draws on the team]
// philox_bits ran as the reference kernel: one Philox4x32-10 block (4 words) at a time on the
// calling thread, ~70 cycles a block. In sj-train's MLP step (batch 128, two dropout masks of
// 64K elements) the two draws took 0.28 ms of a 2.3 ms step, the other thread idle meanwhile.
// The bits are counter-based: element i is word i % 4 of the block for counter {i / 4, the
// call's counter} under the node's key, whoever computes it. So the cpu target draws 16 blocks
// at once in the lanes of AVX-512 vectors where the CPU has them (four such vectors in flight,
// whose words are transposed into draw order in registers; one block at a time otherwise), and
// cuts the blocks into tasks of kTaskBlocks for the thread team. A channel-blocked draw (a
// dropout after a convolution) goes by tiles, one image's channel block each: per window of 64
// positions, the channels' words, then the window written position by position (16 x 16
// transposes in registers for 16-channel blocks), so that its lines stay in L1 while they fill;
// where the spatial size is not a multiple of 4 a channel row starts inside a Philox block, and
// the draw walks the logical order, a channel's run of positions at a time. Same rounds as
// ref::philox4x32_10, same element order (plain, or each logical element's bits at its
// channel-blocked position), so the bits equal the reference interpreter's at any thread count;
// tests/unit/RandomCpuTest.cpp checks the rounds, both orders, the three blocked paths, ragged
// ends and task boundaries against it. `bench/run random` measures the draws (docs/
// performance.md, "Philox draws on the team").

namespace {

constexpr int kLanes = 16;
/// Blocks per call of the round function: 4 vectors of 16 in flight, so that one vector's
/// multiplies wait while the others' run.
constexpr int kBlocks = 64;
constexpr int kWords = 4 * kBlocks;
/// Blocks per task: 64 KB of bits; a draw of at most this many blocks (16K elements) stays on
/// the calling thread.
constexpr int64_t kTaskBlocks = 4096;

constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u; // round multipliers
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u; // Weyl key increments

constexpr int kGroups = kBlocks / kLanes;

/// The words of four runs of 16 blocks, q[g] .. q[g] + 15 for g < 4, in draw order
/// (out[64 g + 4 l + w]: word w of block q[g] + l), one block at a time: ref::philox_block.
void philox_words_scalar(const uint64_t q[kGroups], uint32_t key0, uint32_t key1, uint64_t counter,
                         uint32_t out[kWords]) {
    const uint32_t key[2] = {key0, key1};
    for (int l = 0; l < kBlocks; ++l)
        ref::philox_block(key, counter, q[l / kLanes] + uint64_t(l % kLanes), out + 4 * l);
}

#if defined(__x86_64__)
/// The high 32 bits of each lane's 32 x 32-bit product with m.
__attribute__((target("avx512f"))) inline __m512i mulhi_epu32(__m512i c, __m512i m) {
    const __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(c, m), 32);
    const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(c, 32), m);
    return _mm512_mask_blend_epi32(__mmask16(0xAAAA), even, odd);
}

/// philox_words_scalar's words, block q[g] + l in lane l of vector group g.
__attribute__((target("avx512f"))) void philox_words_avx512(const uint64_t q[kGroups],
                                                            uint32_t key0, uint32_t key1,
                                                            uint64_t counter,
                                                            uint32_t out[kWords]) {
    static_assert(kLanes == 16 && kBlocks % kLanes == 0);
    constexpr int G = kGroups;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i m0 = _mm512_set1_epi32(int(kM0)), m1 = _mm512_set1_epi32(int(kM1));
    __m512i c0[G], c1[G], c2[G], c3[G];
    for (int g = 0; g < G; ++g) {
        // q[g] + l: the high word carries where the low one wraps
        const uint64_t base = q[g];
        const __m512i lo_base = _mm512_set1_epi32(int(uint32_t(base)));
        const __m512i hi_base = _mm512_set1_epi32(int(uint32_t(base >> 32)));
        c0[g] = _mm512_add_epi32(lo_base, lane);
        const __mmask16 wrapped = _mm512_cmplt_epu32_mask(c0[g], lo_base);
        c1[g] = _mm512_mask_add_epi32(hi_base, wrapped, hi_base, _mm512_set1_epi32(1));
        c2[g] = _mm512_set1_epi32(int(uint32_t(counter)));
        c3[g] = _mm512_set1_epi32(int(uint32_t(counter >> 32)));
    }
    uint32_t k0 = key0, k1 = key1;
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += kW0;
            k1 += kW1;
        }
        const __m512i vk0 = _mm512_set1_epi32(int(k0)), vk1 = _mm512_set1_epi32(int(k1));
        for (int g = 0; g < G; ++g) {
            const __m512i hi0 = mulhi_epu32(c0[g], m0), lo0 = _mm512_mullo_epi32(c0[g], m0);
            const __m512i hi1 = mulhi_epu32(c2[g], m1), lo1 = _mm512_mullo_epi32(c2[g], m1);
            c0[g] = _mm512_xor_si512(_mm512_xor_si512(hi1, c1[g]), vk0);
            c1[g] = lo1;
            c2[g] = _mm512_xor_si512(_mm512_xor_si512(hi0, c3[g]), vk1);
            c3[g] = lo0;
        }
    }
    for (int g = 0; g < G; ++g) {
        // words w of the 16 blocks (c0..c3) to draw order: 4 x 4 transposes within each
        // 128-bit lane (u_k's lane j: block 4 j + k), then of the 128-bit lanes
        const __m512i t0 = _mm512_unpacklo_epi32(c0[g], c1[g]),
                      t1 = _mm512_unpackhi_epi32(c0[g], c1[g]);
        const __m512i t2 = _mm512_unpacklo_epi32(c2[g], c3[g]),
                      t3 = _mm512_unpackhi_epi32(c2[g], c3[g]);
        const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
        const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
        const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i v1 = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(1, 0, 1, 0));
        const __m512i v2 = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(3, 2, 3, 2));
        const __m512i v3 = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(3, 2, 3, 2));
        uint32_t* o = out + 4 * kLanes * g;
        _mm512_storeu_si512(o, _mm512_shuffle_i32x4(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)));
        _mm512_storeu_si512(o + 16, _mm512_shuffle_i32x4(v0, v1, _MM_SHUFFLE(3, 1, 3, 1)));
        _mm512_storeu_si512(o + 32, _mm512_shuffle_i32x4(v2, v3, _MM_SHUFFLE(2, 0, 2, 0)));
        _mm512_storeu_si512(o + 48, _mm512_shuffle_i32x4(v2, v3, _MM_SHUFFLE(3, 1, 3, 1)));
    }
}

/// out[16 k + c] = rows[c][k] for c, k < 16, rows[c] = in + stride * c: 16 positions of 16
/// channels into 16 positions' blocks of a B = 16 channel-blocked tensor.
__attribute__((target("avx512f"))) void transpose16(const uint32_t* in, int64_t stride,
                                                    uint32_t* out) {
    __m512i r[16], t[16];
    for (int c = 0; c < 16; ++c)
        r[c] = _mm512_loadu_si512(in + stride * c);
    for (int c = 0; c < 16; c += 2) { // pairs of rows interleaved
        t[c] = _mm512_unpacklo_epi32(r[c], r[c + 1]);
        t[c + 1] = _mm512_unpackhi_epi32(r[c], r[c + 1]);
    }
    for (int c = 0; c < 16; c += 4) { // u[c + k]'s 128-bit lane j: rows c..c+3 of column 4 j + k
        r[c] = _mm512_unpacklo_epi64(t[c], t[c + 2]);
        r[c + 1] = _mm512_unpackhi_epi64(t[c], t[c + 2]);
        r[c + 2] = _mm512_unpacklo_epi64(t[c + 1], t[c + 3]);
        r[c + 3] = _mm512_unpackhi_epi64(t[c + 1], t[c + 3]);
    }
    for (int h = 0; h < 16; h += 8) // lanes 0, 2 and 1, 3 of rows c..c+3 and c+4..c+7
        for (int k = 0; k < 4; ++k) {
            t[h + k] = _mm512_shuffle_i32x4(r[h + k], r[h + 4 + k], 0x88);
            t[h + 4 + k] = _mm512_shuffle_i32x4(r[h + k], r[h + 4 + k], 0xdd);
        }
    for (int k = 0; k < 8; ++k) { // columns k and k + 8: all 16 rows
        _mm512_storeu_si512(out + 16 * k, _mm512_shuffle_i32x4(t[k], t[8 + k], 0x88));
        _mm512_storeu_si512(out + 16 * (k + 8), _mm512_shuffle_i32x4(t[k], t[8 + k], 0xdd));
    }
}
#endif

using WordsFn = void (*)(const uint64_t[kGroups], uint32_t, uint32_t, uint64_t, uint32_t[kWords]);

/// The AVX-512 rounds where the CPU has them, else one block at a time.
WordsFn philox_words() {
#if defined(__x86_64__)
    static const WordsFn fn =
        __builtin_cpu_supports("avx512f") ? philox_words_avx512 : philox_words_scalar;
    return fn;
#else
    return philox_words_scalar;
#endif
}

/// One draw: the node's key, the call's counter, its element count, the rounds to use.
struct Draw {
    uint32_t key0, key1;
    uint64_t counter;
    int64_t n;
    WordsFn words_of;
};

/// A channel-blocked draw's shape [N, C / B, s..., B], with S the product of s.
struct BlockedShape {
    explicit BlockedShape(const Shape& s) : images(s[0]), blocks(s[1]), B(s.back()) {
        for (size_t d = 2; d + 1 < s.size(); ++d)
            spatial *= s[d];
    }
    int64_t images, blocks, B, spatial = 1;
};

/// Where the logical elements of a channel-blocked draw go ([N, C, s...] drawn as
/// [N, C / B, s..., B]), walked from a given one: a channel's run of spatial positions at a
/// time, B elements apart.
class BlockedPositions {
public:
    BlockedPositions(const BlockedShape& b, int64_t first)
        : B_(b.B), C_(b.blocks * b.B), spatial_(b.spatial) {
        p_ = first % spatial_;
        ch_ = (first / spatial_) % C_;
        img_ = first / (spatial_ * C_);
    }
    /// Writes the next `count` logical elements' words at their positions in `out`.
    void write(const uint32_t* words, int64_t count, uint32_t* out) {
        while (count > 0) {
            const int64_t run = std::min(count, spatial_ - p_);
            uint32_t* at = out + ((img_ * (C_ / B_) + ch_ / B_) * spatial_ + p_) * B_ + ch_ % B_;
            for (int64_t k = 0; k < run; ++k)
                at[k * B_] = words[k];
            words += run;
            count -= run;
            if ((p_ += run) == spatial_) {
                p_ = 0;
                if (++ch_ == C_) {
                    ch_ = 0;
                    ++img_;
                }
            }
        }
    }

private:
    int64_t B_, C_, spatial_;
    int64_t img_ = 0, ch_ = 0, p_ = 0;
};

/// The words of the kBlocks blocks from q, in draw order.
void consecutive_words(const Draw& d, int64_t q, uint32_t out[kWords]) {
    const uint64_t bases[kGroups] = {uint64_t(q), uint64_t(q) + 16, uint64_t(q) + 32,
                                     uint64_t(q) + 48};
    d.words_of(bases, d.key0, d.key1, d.counter, out);
}

/// A plain draw's blocks [b0, b1).
void draw_plain(int64_t b0, int64_t b1, const Draw& d, uint32_t* po) {
    alignas(64) uint32_t words[kWords];
    for (int64_t q = b0; q < b1; q += kBlocks) {
        const int64_t e0 = q * 4, e1 = std::min(d.n, std::min(b1, q + kBlocks) * 4);
        uint32_t* into = e1 - e0 == kWords ? po + e0 : words; // a whole run: straight in
        consecutive_words(d, q, into);
        if (into == words)
            std::copy(words, words + (e1 - e0), po + e0);
    }
}

/// Tiles [t0, t1) of a channel-blocked draw whose channel rows start on whole blocks (the
/// spatial size S a multiple of 4): a tile is one image's channel block, [S, B] in the output.
/// Per window of 64 positions, the B channels' words (16 blocks each, 4 channels per call of the
/// rounds), then written position by position: 16 x 16 transposes in AVX-512 registers for
/// B = 16, else each channel's words B apart within the window (which stays in L1).
void draw_blocked_tiles(int64_t t0, int64_t t1, const Draw& d, const BlockedShape& b,
                        uint32_t* po) {
    constexpr int64_t kMaxB = 16;
    alignas(64) uint32_t words[kMaxB * kBlocks]; // [channel][position] of the window
#if defined(__x86_64__)
    const bool transpose = b.B == 16 && d.words_of == philox_words_avx512;
#else
    const bool transpose = false;
#endif
    for (int64_t tile = t0; tile < t1; ++tile) {
        const int64_t img = tile / b.blocks, cb = tile % b.blocks;
        uint32_t* base = po + tile * b.spatial * b.B;
        for (int64_t p0 = 0; p0 < b.spatial; p0 += kBlocks) {
            const int64_t len = std::min<int64_t>(kBlocks, b.spatial - p0);
            for (int64_t c0 = 0; c0 < b.B; c0 += kGroups) {
                uint64_t bases[kGroups];
                for (int g = 0; g < kGroups; ++g) // (the logical element of (img, c, p0)) / 4
                    bases[g] =
                        uint64_t(((img * b.blocks + cb) * b.B + c0 + g) * b.spatial + p0) / 4;
                d.words_of(bases, d.key0, d.key1, d.counter, words + c0 * kBlocks);
            }
            int64_t p = 0;
#if defined(__x86_64__)
            for (; transpose && p + 16 <= len; p += 16)
                transpose16(words + p, kBlocks, base + (p0 + p) * 16);
#endif
            for (int64_t c = 0; c < b.B; ++c)
                for (int64_t q = p; q < len; ++q)
                    base[(p0 + q) * b.B + c] = words[c * kBlocks + q];
        }
    }
}

} // namespace

void philox_bits(const Node& node, const std::vector<Array>&, Array& out, uint64_t counter) {
    SJ_CHECK(out.dtype() == DType::U32, InternalError)
        << "philox_bits: the result must be u32, got " << out.type_str();
    const auto& a = node.attr<PhiloxAttrs>();
    const Draw d{uint32_t(a.key), uint32_t(a.key >> 32), counter, out.size(), philox_words()};
    if (d.n == 0) // (nothing to draw; a blocked shape with an empty dim has no tiles to size)
        return;
    uint32_t* po = static_cast<uint32_t*>(out.raw());
    const ThreadPool& pool = ThreadPool::get();
    const int64_t blocks = (d.n + 3) / 4;
    if (!(sj::detail::blocked_mask(node) & sj::detail::kBlockedResult)) {
        const int64_t tasks = (blocks + kTaskBlocks - 1) / kTaskBlocks;
        pool.run(int(tasks), [&](int t) {
            const int64_t b0 = int64_t(t) * kTaskBlocks;
            draw_plain(b0, std::min(blocks, b0 + kTaskBlocks), d, po);
        });
        return;
    }
    const BlockedShape b(out.shape());
    if (b.spatial % 4 == 0 && b.B % kGroups == 0 && b.B <= 16) {
        // whole tiles per task, about kTaskBlocks blocks each
        const int64_t tiles = b.images * b.blocks;
        const int64_t per_task = std::max<int64_t>(1, kTaskBlocks * 4 / (b.spatial * b.B));
        const int64_t tasks = (tiles + per_task - 1) / per_task;
        pool.run(int(tasks), [&](int t) {
            const int64_t t0 = int64_t(t) * per_task;
            draw_blocked_tiles(t0, std::min(tiles, t0 + per_task), d, b, po);
        });
        return;
    }
    // channel rows that start inside a block: the logical order, each run of a channel's
    // positions written B apart
    const int64_t tasks = (blocks + kTaskBlocks - 1) / kTaskBlocks;
    pool.run(int(tasks), [&](int t) {
        const int64_t b0 = int64_t(t) * kTaskBlocks, b1 = std::min(blocks, b0 + kTaskBlocks);
        BlockedPositions pos(b, b0 * 4);
        alignas(64) uint32_t words[kWords];
        for (int64_t q = b0; q < b1; q += kBlocks) {
            const int64_t e0 = q * 4, e1 = std::min(d.n, std::min(b1, q + kBlocks) * 4);
            consecutive_words(d, q, words);
            pos.write(words, e1 - e0, po);
        }
    });
}

void philox_blocks(const uint64_t q[4], const uint32_t key[2], uint64_t counter, uint32_t out[256],
                   bool one_at_a_time) {
    static_assert(kGroups == 4 && kWords == 256);
    (one_at_a_time ? philox_words_scalar : philox_words())(q, key[0], key[1], counter, out);
}

} // namespace sj::cpu
