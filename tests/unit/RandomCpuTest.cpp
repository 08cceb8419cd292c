// philox_bits on the cpu target (Note [Philox draws on the team] in src/backend/cpu/Random.cpp):
// 16 blocks at a time in vector lanes, over the thread team. Expected bits: the reference
// interpreter's (one Philox4x32-10 block at a time, ref::philox4x32_10, itself checked against
// Random123's known answers in RandomTest.cpp).
#include "backend/cpu/Random.h"
#include "backend/reference/Reference.h"

#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <cstdint>
#include <vector>

using namespace sj;

namespace {

FunctionOptions on(const char* backend) {
    FunctionOptions o;
    o.backend = backend;
    return o;
}

} // namespace

TEST(RandomCpu, BlocksEqualTheReferenceAcrossTheCounterWordCarry) {
    // (the vector rounds where the CPU has AVX-512, and the one-block-at-a-time path of CPUs
    // without it)
    // blocks from 2^32 - 5 and 2^32 - 40: the low counter word wraps inside a vector of 16
    // lanes, and in the third of the four vectors computed together
    const uint32_t key[2] = {0x9e3779b9u, 0x01234567u};
    for (bool one_at_a_time : {false, true})
        for (uint64_t q0 : {uint64_t(0), uint64_t(0xfffffffbu), uint64_t(0xffffffd8u),
                            uint64_t(0x123456789abcull)}) {
            const uint64_t counter = 0xabcdef0012345678ull;
            uint32_t words[256];
            cpu::philox_blocks(q0, key, counter, words, one_at_a_time);
            for (int l = 0; l < 64; ++l) {
                const uint64_t q = q0 + uint64_t(l);
                const uint32_t ctr[4] = {uint32_t(q), uint32_t(q >> 32), uint32_t(counter),
                                         uint32_t(counter >> 32)};
                uint32_t want[4];
                ref::philox4x32_10(ctr, key, want);
                for (int w = 0; w < 4; ++w)
                    EXPECT_EQ(words[4 * l + w], want[w])
                        << "block " << q << " word " << w
                        << (one_at_a_time ? " (one at a time)" : "");
            }
        }
}

TEST(RandomCpu, PlainDrawsEqualTheReference) {
    // ragged ends (not a whole block, not whole lanes), one task exactly (4096 blocks), and
    // several tasks with a ragged last one; two calls each (the counter moves on)
    for (Shape shape : {Shape{1}, Shape{7}, Shape{3, 5}, Shape{65}, Shape{4096 * 4},
                        Shape{3, 4096 * 4 + 5}, Shape{2, 3, 5, 7, 11}}) {
        Tensor b = random::bits(shape, 4321);
        Function cpu_f = function({}, {b}, {}, on("cpu"));
        Function ref_f = function({}, {b}, {}, on("reference"));
        for (int call = 0; call < 2; ++call)
            EXPECT_EQ(cpu_f()[0].to_vector<uint32_t>(), ref_f()[0].to_vector<uint32_t>())
                << shape_str(shape) << " call " << call;
    }
}

TEST(RandomCpu, ChannelBlockedDrawsEqualTheReference) {
    // a dropout after a convolution draws its mask in the channel-blocked order (the layout
    // pass); 3 x 32 x 13 x 17 = 21216 elements: two tasks, positions that are not whole blocks
    // of any spatial row. Equal masks give equal zeros, and values within rounding.
    Scope scope("blocked_draw");
    nn::Conv2D conv(3, 32, 3, {.bias = false});
    nn::Dropout drop(0.5);
    Placeholder x({3, 3, 15, 19}, f32, "x");
    Tensor y = drop(conv(x, nn::Mode::Train), nn::Mode::Train);
    Array xv(f32, {3, 3, 15, 19});
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
            ASSERT_EQ(got[i] == 0, want[i] == 0) << "element " << i << " call " << call;
            ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::abs(want[i]))) << "element " << i;
        }
        EXPECT_GT(zeros, int64_t(got.size()) / 4) << "half the elements dropped";
    }
}
