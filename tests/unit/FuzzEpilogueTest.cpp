// Differential fuzzing of the epilogues of library calls (Note [Epilogue fusion] in
// src/compiler/Fusion.cpp): seeded random chains of post-op candidates after a conv or a matmul
// (per-channel and scalar add/sub/mul, relu and leaky-relu selects, max with 0, residual sums,
// scaled residuals, batch statistics), then max or average pools and a second conv, in plain
// layout and in 8- and 16-channel blocks, with intermediates that the function returns or that
// other ops also read. Weights and per-channel operands are placeholders or variables; every
// third graph is a training step that returns the inputs' gradients and updates the variables
// by SGD or momentum. The cpu backend is compared with the reference interpreter: outputs,
// variables after the step, and the caller's arrays, which no call may change.
//
// FuzzFusion (FuzzFusionTest.cpp) covers kernels; this covers which ops a library call may
// absorb, where a wrong decision reads a buffer that was never written (a relu select with a
// third reader segfaulted on AVX2 machines until its readers were counted).
//
// Reproduce a failure with the seed it prints:
//   SJ_FUZZ_SEED=<seed> SJ_FUZZ_COUNT=1 ./build/tests/symjax_tests --gtest_filter=FuzzEpilogue.*
// A crash prints no seed: SJ_FUZZ_VERBOSE=1 names each graph before it runs. SJ_FUZZ_BACKEND=cuda
// (with a GPU, or SJ_CUDA_DEVICE=emulator) runs the graphs on the cuda backend instead, whose
// runner applies the epilogues after cuBLAS and cuDNN calls (docs/gpu.md).
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace sj;
using sj::test::ChannelBlocks;
using sj::test::env_u64;
using sj::test::on;
using sj::test::random_array;

namespace {

/// One random graph: inputs with their values, variables with their first values, and the
/// outputs compared.
struct EpilogueGraph {
    std::vector<Tensor> inputs;
    std::vector<Array> values;
    std::vector<Variable> vars;
    std::vector<Array> var_values;
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
    // weights and per-channel operands: placeholders or (half of them) variables
    auto param = [&](const Shape& s, const std::string& name, double lo, double hi) {
        if (r.chance(0.5))
            return input(s, s, name, lo, hi);
        g.var_values.push_back(random_array(f32, s, value_seed++, lo, hi));
        g.vars.emplace_back(g.var_values.back().clone(), name);
        return Tensor(g.vars.back());
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
        Tensor w = param({ch, cin, k, k}, "w", -0.5, 0.5);
        h = conv2d(x, w, {}, "SAME");
        out = {n, ch, hw, hw};
    } else {
        const int64_t kdim = r.pick(4, 40);
        Tensor x = input({dynamic ? -1 : n * 4, kdim}, {n * 4, kdim}, "x");
        Tensor w = param({kdim, ch}, "w", -0.5, 0.5);
        h = matmul(x, w);
        out = {n * 4, ch};
    }
    // a per-channel operand: [ch] read through [ch, 1, 1] (conv) or as a row (matmul)
    int per_channel = 0;
    auto channel_operand = [&]() {
        Tensor p = param({ch}, "c" + std::to_string(per_channel++), 0.5, 1.5);
        return conv ? reshape(p, {ch, 1, 1}) : p;
    };
    Shape full = out;
    if (dynamic)
        full[0] = -1;
    std::vector<Tensor> earlier = {h};
    const int64_t steps = r.pick(1, 5);
    for (int64_t i = 0; i < steps; ++i) {
        switch (r.pick(0, 12)) { // relu selects twice as often: the multi-reader case
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
        case 12: { // batch statistics: per channel over the batch (and the image)
            // of h plus a random input: a channel of one value (h - h, say) normalises to
            // rounding noise, whose signs a later relu or max pool turns into masks that any
            // two correct implementations may disagree on
            const Axes axes = conv ? Axes{0, 2, 3} : Axes{0};
            Tensor v = h + input(full, out, "s" + std::to_string(i));
            h = (v - mean(v, axes, true)) * rsqrt(var(v, axes, true) + 1e-3);
            break;
        }
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
            p = nn::relu(conv2d(p, param({ch, ch, k, k}, "w2", -0.3, 0.3), {}, "SAME") +
                         channel_operand());
        }
        g.outputs.push_back(p);
    }
    g.outputs.push_back(h);
    g.grads = seed % 3 == 0;
    return g;
}

} // namespace

TEST(FuzzEpilogue, RandomChainsAfterLibraryCallsMatchReference) {
    const uint64_t first = env_u64("SJ_FUZZ_SEED", 1), count = env_u64("SJ_FUZZ_COUNT", 150);
    const char* env_backend = std::getenv("SJ_FUZZ_BACKEND");
    const char* backend = env_backend && *env_backend ? env_backend : "cpu";
    int with_post_ops = 0;
    for (uint64_t seed = first; seed < first + count; ++seed) {
        const int64_t block =
            std::vector<int64_t>{0, 8, 16}[(seed / 3) % 3]; // grads: seed % 3 == 0
        ChannelBlocks blocks(block);
        if (std::getenv("SJ_FUZZ_VERBOSE"))
            std::fprintf(stderr, "FuzzEpilogue: seed %llu\n", (unsigned long long)seed);
        EpilogueGraph g = make_graph(seed);
        std::vector<Tensor> outs = g.outputs;
        // a training step: the gradients of the outputs' sum w.r.t. the inputs are returned and
        // each variable takes an SGD step, or (odd seeds) a momentum step through its own
        // velocity variable (the updates the sum post-op may fold into the gradient's call)
        Updates updates;
        std::vector<Variable> state = g.vars; // the variables compared after the step
        std::vector<Array> state_values = g.var_values;
        if (g.grads) {
            Tensor total = sum(g.outputs[0]);
            for (size_t i = 1; i < g.outputs.size(); ++i)
                total = total + sum(g.outputs[i]);
            std::vector<Tensor> wrt = g.inputs;
            wrt.insert(wrt.end(), g.vars.begin(), g.vars.end());
            std::vector<Tensor> ds = gradients(total, wrt);
            outs.insert(outs.end(), ds.begin(), ds.begin() + std::ptrdiff_t(g.inputs.size()));
            for (size_t j = 0; j < g.vars.size(); ++j) {
                const Tensor& d = ds[g.inputs.size() + j];
                if (seed % 2 == 0) {
                    updates.add(g.vars[j], g.vars[j] - 0.1 * d);
                    continue;
                }
                state_values.push_back(Array(f32, g.vars[j].shape()));
                state.emplace_back(state_values.back().clone(), "velocity");
                Tensor m = state.back() * 0.9 + d;
                updates.add(state.back(), m);
                updates.add(g.vars[j], g.vars[j] - 0.1 * m);
            }
        } else {
            for (const Variable& v : g.vars) // read as well as the function's inputs
                outs.push_back(v * 1.0);
        }
        const std::string where =
            "seed " + std::to_string(seed) + " (rerun: SJ_FUZZ_SEED=" + std::to_string(seed) +
            " SJ_FUZZ_COUNT=1), channel block " + std::to_string(block) + "\n" + to_text(outs);
        std::vector<Function::Arg> args(g.values.begin(), g.values.end());
        std::vector<Array> before;
        for (const Array& v : g.values)
            before.push_back(v.clone());
        // one step on a backend from the variables' first values: the outputs, then the
        // variables' new values
        auto step = [&](const char* backend, bool* post_ops) {
            for (size_t i = 0; i < state.size(); ++i)
                state[i].assign(state_values[i].clone());
            Function f = function(g.inputs, outs, updates, on(backend));
            std::vector<Array> r = f.call(args);
            for (const Variable& v : state)
                r.push_back(v.value());
            if (post_ops)
                *post_ops = f.dump().find("post-ops:") != std::string::npos;
            return r;
        };
        std::vector<Array> got, want;
        try {
            bool post_ops = false;
            got = step(backend, &post_ops);
            with_post_ops += post_ops;
            // a sum post-op accumulates into a copy of its operand, never into the caller's array
            for (size_t i = 0; i < before.size(); ++i)
                for (int64_t k = 0; k < before[i].size(); ++k)
                    ASSERT_EQ(g.values[i].at(k), before[i].at(k))
                        << "input " << g.inputs[i].name() << " changed at " << k << " by " << where;
            want = step("reference", nullptr);
        } catch (const std::exception& e) {
            ADD_FAILURE() << where << backend << " or the reference threw: " << e.what();
            continue;
        }
        ASSERT_EQ(got.size(), want.size()) << where;
        // oneDNN and the GEMMs accumulate in f32 in their own order (the reference in double), and
        // the chains subtract values of the same size: each output is compared against its own
        // scale, to the 1e-4 that tests/parity/CnnParityTest.cpp holds against PyTorch
        for (size_t i = 0; i < got.size(); ++i) {
            // outputs, then the variables after the step
            ASSERT_EQ(got[i].shape(), want[i].shape()) << "result " << i << " of " << where;
            double scale = 0, err = 0;
            int64_t worst = 0;
            for (int64_t k = 0; k < want[i].size(); ++k) {
                scale = std::max(scale, std::fabs(want[i].at(k)));
                double e = std::fabs(got[i].at(k) - want[i].at(k));
                if (e > err || std::isnan(e))
                    err = e, worst = k;
            }
            EXPECT_LE(err, 1e-4 * std::max(scale, 1.0))
                << "result " << i << " element " << worst << ": " << got[i].at(worst) << " vs "
                << want[i].at(worst) << ", of " << where;
        }
    }
    // the generator must reach the path under test: most graphs end in a foldable op (the cpu
    // backend's dump lists post-ops; the cuda runner's does not)
    if (count >= 30 && std::string(backend) == "cpu")
        EXPECT_GE(with_post_ops, int(count / 3)) << "graphs with post-ops: " << with_post_ops;
}
