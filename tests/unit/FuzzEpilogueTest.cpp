// Differential fuzzing of the epilogues of library calls (Note [Epilogue fusion] in
// src/compiler/Fusion.cpp): seeded random chains of post-op candidates after a conv or a matmul
// (per-channel and scalar add/sub/mul, relu and leaky-relu selects, max with 0, residual sums,
// scaled residuals), then max or average pools and a second conv, in plain layout and in 8- and
// 16-channel blocks, with intermediates that the function returns or that other ops also read,
// and every third graph's gradients. The cpu backend is compared with the reference interpreter.
//
// FuzzFusion (FuzzFusionTest.cpp) covers kernels; this covers which ops a library call may
// absorb, where a wrong decision reads a buffer that was never written (a relu select with a
// third reader segfaulted on AVX2 machines until its readers were counted).
//
// Reproduce a failure with the seed it prints:
//   SJ_FUZZ_SEED=<seed> SJ_FUZZ_COUNT=1 ./build/tests/symjax_tests --gtest_filter=FuzzEpilogue.*
// A crash prints no seed: SJ_FUZZ_VERBOSE=1 names each graph before it runs.
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include "backend/cpu/CpuTarget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace sj;
using sj::test::on;
using sj::test::random_array;

namespace {

/// One random graph: inputs with their values, and the outputs compared.
struct EpilogueGraph {
    std::vector<Tensor> inputs;
    std::vector<Array> values;
    std::vector<Tensor> outputs;
    bool grads = false;
};

struct Rng {
    std::mt19937_64 g;
    explicit Rng(uint64_t seed) : g(seed) {}
    int64_t pick(int64_t lo, int64_t hi) {
        return std::uniform_int_distribution<int64_t>(lo, hi)(g);
    }
    bool chance(double p) { return std::bernoulli_distribution(p)(g); }
    double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(g); }
    template <class T> const T& of(const std::vector<T>& v) {
        return v[size_t(pick(0, int64_t(v.size()) - 1))];
    }
};

EpilogueGraph make_graph(uint64_t seed) {
    Rng r(seed);
    EpilogueGraph g;
    uint64_t value_seed = seed * 1000;
    auto input = [&](const Shape& s, const Shape& bound, const std::string& name, double lo = -1,
                     double hi = 1) {
        Placeholder p(s, f32, name);
        g.inputs.push_back(p);
        g.values.push_back(random_array(f32, bound, value_seed++, lo, hi));
        return Tensor(p);
    };
    const bool conv = r.chance(0.7);
    const bool dynamic = r.chance(0.3); // the batch bound at call time
    const int64_t n = r.pick(1, 3);
    const int64_t ch = r.of<int64_t>({8, 16, 24, 32});
    Shape out; // the call's result, and the per-channel operands' shape
    Tensor h;
    if (conv) {
        const int64_t cin = r.of<int64_t>({3, 8, 16});
        const int64_t k = r.of<int64_t>({1, 3});
        const int64_t hw = r.pick(3, 7);
        Tensor x = input({dynamic ? -1 : n, cin, hw, hw}, {n, cin, hw, hw}, "x");
        Tensor w = input({ch, cin, k, k}, {ch, cin, k, k}, "w", -0.5, 0.5);
        h = conv2d(x, w, {}, "SAME");
        out = {n, ch, hw, hw};
    } else {
        const int64_t kdim = r.pick(4, 40);
        Tensor x = input({dynamic ? -1 : n * 4, kdim}, {n * 4, kdim}, "x");
        Tensor w = input({kdim, ch}, {kdim, ch}, "w", -0.5, 0.5);
        h = matmul(x, w);
        out = {n * 4, ch};
    }
    // a per-channel operand: [ch] read through [ch, 1, 1] (conv) or as a row (matmul)
    int per_channel = 0;
    auto channel_operand = [&]() {
        Tensor p = input({ch}, {ch}, "c" + std::to_string(per_channel++), 0.5, 1.5);
        return conv ? reshape(p, {ch, 1, 1}) : p;
    };
    Shape full = out;
    if (dynamic)
        full[0] = -1;
    std::vector<Tensor> earlier = {h};
    const int64_t steps = r.pick(1, 5);
    for (int64_t i = 0; i < steps; ++i) {
        switch (r.pick(0, 11)) { // relu selects twice as often: the multi-reader case
        case 0:
            h = h + channel_operand();
            break;
        case 1:
            h = h * channel_operand();
            break;
        case 2:
            h = channel_operand() - h;
            break;
        case 3:
            h = h * r.real(-2, 2) + r.real(-1, 1);
            break;
        case 4:
        case 10:
            h = nn::relu(h);
            break;
        case 5:
        case 11:
            h = nn::leaky_relu(h, r.real(0.01, 0.3));
            break;
        case 6:
            h = maximum(h, 0.0);
            break;
        case 7:
            h = h + input(full, out, "z" + std::to_string(i));
            break;
        case 8:
            h = h + r.of(earlier) * r.real(0.5, 2);
            break; // a residual of an earlier value
        case 9:
            h = h - r.of(earlier);
            break;
        }
        earlier.push_back(h);
        // other readers of this step's value: a returned intermediate, or another op
        if (r.chance(0.25))
            g.outputs.push_back(h);
        if (r.chance(0.2))
            g.outputs.push_back(tanh(h));
    }
    // a pool of the chain (a training max pool keeps its workspace for the backward that
    // reads it: Note [Max-pool workspace] in src/backend/cpu/Conv.cpp), sometimes two of one
    // value, then perhaps another conv with its own epilogue
    if (conv && r.chance(0.6)) {
        auto pool = [&](const Tensor& src) {
            const int64_t win = r.pick(2, 3), stride = r.pick(1, 2);
            const Padding pad = r.chance(0.5) ? Padding("SAME") : Padding("VALID");
            return r.chance(0.6) ? max_pool2d(src, {win, win}, {stride, stride}, pad)
                                 : avg_pool2d(src, {win, win}, {stride, stride}, pad);
        };
        const Tensor src = r.chance(0.7) ? h : r.of(earlier);
        Tensor p = pool(src);
        if (r.chance(0.3))
            g.outputs.push_back(pool(src));
        if (r.chance(0.5)) {
            const int64_t k = r.of<int64_t>({1, 3});
            g.outputs.push_back(p);
            p = nn::relu(
                conv2d(p, input({ch, ch, k, k}, {ch, ch, k, k}, "w2", -0.3, 0.3), {}, "SAME") +
                channel_operand());
        }
        g.outputs.push_back(p);
    }
    g.outputs.push_back(h);
    g.grads = seed % 3 == 0;
    return g;
}

/// Functions compiled while it lives use channel blocks of the width given (0: plain).
struct ChannelBlocks {
    int64_t saved;
    explicit ChannelBlocks(int64_t block) : saved(cpu::set_channel_block(block)) {}
    ~ChannelBlocks() { cpu::set_channel_block(saved); }
};

uint64_t env_u64(const char* name, uint64_t fallback) {
    const char* e = std::getenv(name);
    return e && *e ? std::strtoull(e, nullptr, 10) : fallback;
}

} // namespace

TEST(FuzzEpilogue, RandomChainsAfterLibraryCallsMatchReference) {
    const uint64_t first = env_u64("SJ_FUZZ_SEED", 1), count = env_u64("SJ_FUZZ_COUNT", 150);
    int with_post_ops = 0;
    for (uint64_t seed = first; seed < first + count; ++seed) {
        const int64_t block =
            std::vector<int64_t>{0, 8, 16}[(seed / 3) % 3]; // grads: seed % 3 == 0
        ChannelBlocks blocks(block);
        if (std::getenv("SJ_FUZZ_VERBOSE"))
            std::fprintf(stderr, "FuzzEpilogue: seed %llu\n", (unsigned long long)seed);
        EpilogueGraph g = make_graph(seed);
        std::vector<Tensor> outs = g.outputs;
        if (g.grads) {
            Tensor total = sum(g.outputs[0]);
            for (size_t i = 1; i < g.outputs.size(); ++i)
                total = total + sum(g.outputs[i]);
            for (const Tensor& d : gradients(total, g.inputs))
                outs.push_back(d);
        }
        const std::string where =
            "seed " + std::to_string(seed) + " (rerun: SJ_FUZZ_SEED=" + std::to_string(seed) +
            " SJ_FUZZ_COUNT=1), channel block " + std::to_string(block) + "\n" + to_text(outs);
        std::vector<Function::Arg> args(g.values.begin(), g.values.end());
        std::vector<Array> got, want;
        try {
            Function f = function(g.inputs, outs, {}, on("cpu"));
            got = f.call(args);
            with_post_ops += f.dump().find("post-ops:") != std::string::npos;
            want = function(g.inputs, outs, {}, on("reference")).call(args);
        } catch (const std::exception& e) {
            ADD_FAILURE() << where << "threw: " << e.what();
            continue;
        }
        ASSERT_EQ(got.size(), want.size()) << where;
        // oneDNN and the GEMMs accumulate in f32 in their own order (the reference in double), and
        // the chains subtract values of the same size: each output is compared against its own
        // scale, to the 1e-4 that tests/parity/CnnParityTest.cpp holds against PyTorch
        for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_EQ(got[i].shape(), want[i].shape()) << "output " << i << " of " << where;
            double scale = 0, err = 0;
            int64_t worst = 0;
            for (int64_t k = 0; k < want[i].size(); ++k) {
                scale = std::max(scale, std::fabs(want[i].at(k)));
                double e = std::fabs(got[i].at(k) - want[i].at(k));
                if (e > err || std::isnan(e))
                    err = e, worst = k;
            }
            EXPECT_LE(err, 1e-4 * std::max(scale, 1.0))
                << "output " << i << " element " << worst << ": " << got[i].at(worst) << " vs "
                << want[i].at(worst) << ", of " << where;
        }
    }
    // the generator must reach the path under test: most graphs end in a foldable op
    if (count >= 30)
        EXPECT_GE(with_post_ops, int(count / 3)) << "graphs with post-ops: " << with_post_ops;
}
