// philox_bits on the cpu target (Note [Philox draws on the team] in src/backend/cpu/Random.cpp):
// 16 blocks at a time in vector lanes, over the thread team. Expected bits: the reference
// interpreter's (one Philox4x32-10 block at a time, ref::philox4x32_10, itself checked against
// Random123's known answers in RandomTest.cpp).
#include "TestUtil.h"
#include "backend/cpu/Random.h"
#include "backend/reference/Reference.h"

#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <cstdint>
#include <vector>

using namespace sj;

using sj::test::on;

TEST(RandomCpu, BlocksEqualTheReferenceAcrossTheCounterWordCarry) {
    // four runs of 16 blocks per call, each from its own base: the low counter word wraps inside
    // a run (2^32 - 5), at a run's start (2^32), and inside the third of the four runs; the
    // vector rounds where the CPU has AVX-512, and the one-block-at-a-time path of CPUs without
    const uint32_t key[2] = {0x9e3779b9u, 0x01234567u};
    const uint64_t runs[][4] = {{0, 16, 32, 48},
                                {0xfffffffbu, 7, 0x100000000ull, 0x123456789abcull},
                                {0xffffffb8u, 0xffffffc8u, 0xfffffff8u, 0xffffffe8u}};
    for (bool one_at_a_time : {false, true})
        for (const auto& q : runs) {
            const uint64_t counter = 0xabcdef0012345678ull;
            uint32_t words[256];
            cpu::philox_blocks(q, key, counter, words, one_at_a_time);
            for (int l = 0; l < 64; ++l) {
                const uint64_t b = q[l / 16] + uint64_t(l % 16);
                const uint32_t ctr[4] = {uint32_t(b), uint32_t(b >> 32), uint32_t(counter),
                                         uint32_t(counter >> 32)};
                uint32_t want[4];
                ref::philox4x32_10(ctr, key, want);
                for (int w = 0; w < 4; ++w)
                    EXPECT_EQ(words[4 * l + w], want[w])
                        << "block " << b << " word " << w
                        << (one_at_a_time ? " (one at a time)" : "");
            }
        }
}

TEST(RandomCpu, PlainDrawsEqualTheReference) {
    // empty draws, ragged ends (not a whole block, not whole lanes), one task exactly (4096
    // blocks), and several tasks with a ragged last one; two calls each (the counter moves on)
    for (Shape shape : {Shape{0}, Shape{2, 0, 3}, Shape{1}, Shape{7}, Shape{3, 5}, Shape{65},
                        Shape{4096 * 4}, Shape{3, 4096 * 4 + 5}, Shape{2, 3, 5, 7, 11}}) {
        Tensor b = random::bits(shape, 4321);
        Function cpu_f = function({}, {b}, {}, on("cpu"));
        Function ref_f = function({}, {b}, {}, on("reference"));
        for (int call = 0; call < 2; ++call)
            EXPECT_EQ(cpu_f()[0].to_vector<uint32_t>(), ref_f()[0].to_vector<uint32_t>())
                << shape_str(shape) << " call " << call;
    }
}

namespace {

/// dropout(conv(x)) in training mode on the cpu backend (the layout pass draws the mask
/// channel-blocked) against the reference interpreter, two calls: equal masks give equal zeros,
/// and values within rounding.
void blocked_dropout_matches_reference(int64_t images, int64_t channels, int64_t h, int64_t w) {
    Scope scope("blocked_draw");
    nn::Conv2D conv(3, channels, 3, {.padding = "SAME", .bias = false});
    nn::Dropout drop(0.5);
    Placeholder x({images, 3, h, w}, f32, "x");
    Tensor y = drop(conv(x, nn::Mode::Train), nn::Mode::Train);
    Array xv(f32, {images, 3, h, w});
    for (int64_t i = 0; i < xv.size(); ++i)
        xv.data<float>()[i] = float((i * 37) % 101) / 50.0f - 1.0f;
    Function cpu_f = function({x}, {y}, {}, on("cpu"));
    Function ref_f = function({x}, {y}, {}, on("reference"));
    for (int call = 0; call < 2; ++call) {
        std::vector<float> got = cpu_f(xv)[0].to_vector<float>(),
                           want = ref_f(xv)[0].to_vector<float>();
        ASSERT_EQ(got.size(), want.size());
        int64_t zeros = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            zeros += want[i] == 0;
            ASSERT_EQ(got[i] == 0, want[i] == 0)
                << "element " << i << " call " << call << " of " << h << "x" << w;
            ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::abs(want[i]))) << "element " << i;
        }
        EXPECT_GT(zeros, int64_t(got.size()) / 4) << "half the elements dropped";
    }
}

} // namespace

TEST(RandomCpu, ChannelBlockedDrawsEqualTheReference) {
    // 13 x 17: channel rows start inside Philox blocks (the logical-order walk), 3 x 32 x 221
    // elements over two tasks; 12 x 12: whole blocks, 144 positions = two windows of 64 and a
    // ragged one of 16; 10 x 10: a last window of 36 = two transposes of 16 and 4 positions
    // one at a time; 16 x 16: whole windows, several tiles per task
    blocked_dropout_matches_reference(3, 32, 13, 17);
    blocked_dropout_matches_reference(3, 32, 12, 12);
    blocked_dropout_matches_reference(2, 32, 10, 10);
    blocked_dropout_matches_reference(4, 32, 16, 16);
}

TEST(RandomCpu, ChannelBlockedDrawsEqualTheReferenceInEightChannelBlocks) {
    test::ChannelBlocks eight(8);
    blocked_dropout_matches_reference(3, 16, 13, 17);
    blocked_dropout_matches_reference(2, 24, 12, 12);
}
