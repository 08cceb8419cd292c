// Scale tests: building, differentiating, printing and dropping 100k-node graphs stays linear.
#include <gtest/gtest.h>
#include <symjax/ir/Node.h>
#include <symjax/symjax.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

using namespace sj;

namespace {

constexpr double kA = 1.0001; // x <- x * kA + kB
constexpr double kB = 0.5;

/// x_n after n steps of x <- x * a + b, starting from x0 (each step makes its own two constants).
Tensor affine_chain(Tensor x, int64_t n) {
    for (int64_t k = 0; k < n; ++k) x = x * kA + kB;
    return x;
}
/// The same chain over two given constant leaves.
Tensor affine_chain(Tensor x, int64_t n, const Tensor& a, const Tensor& b) {
    for (int64_t k = 0; k < n; ++k) x = x * a + b;
    return x;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

// A 100k-step chain: 400k nodes (each step's two constants are leaves of their own, Note
// [Constant identity]), a 100k-node gradient, both evaluated and checked against the closed
// form, printed, then dropped without deep recursion.
TEST(Scale, HundredThousandNodeChain) {
    constexpr int64_t kSteps = 100000;
    const size_t base = live_node_count();
    auto t0 = std::chrono::steady_clock::now();
    {
        Placeholder x0({}, f64, "chain_x0");
        Tensor x = affine_chain(x0, kSteps);
        // x0, and two constants, one mul and one add per step
        size_t built = graph_size({x});
        EXPECT_EQ(built, size_t(4 * kSteps + 1));
        EXPECT_EQ(live_node_count() - base, built);
        {
            // over the same two constants the chain has 2n + 3 nodes, and building it again finds
            // every node (hash-consing): nothing new is made
            Tensor a = scalar(kA, f64), b = scalar(kB, f64);
            Tensor shared = affine_chain(x0, kSteps, a, b);
            EXPECT_EQ(graph_size({shared}), size_t(2 * kSteps + 3));
            const size_t live = live_node_count();
            Tensor again = affine_chain(x0, kSteps, a, b);
            EXPECT_TRUE(again.same(shared));
            EXPECT_EQ(live_node_count(), live);
        }
        EXPECT_EQ(live_node_count() - base, built);

        Tensor g = gradients(x, x0); // d x_n / d x0 = a^n
        size_t total = graph_size({x, g});
        std::cout << "[ scale    ] chain " << built << " nodes, with gradient " << total
                  << " nodes\n";
        EXPECT_LE(total, built + size_t(2 * kSteps) + 8); // the gradient is linear in size

        std::string text = to_text({x, g});
        size_t lines = 0;
        for (char c : text) lines += c == '\n';
        EXPECT_EQ(lines, total + 1); // one line per node, then "return %a, %b"

        // The interpreter runs the 300k-node program: this test is about the graph machinery
        // (the compiler's own scaling is checked on a shorter chain below).
        FunctionOptions reference;
        reference.backend = "reference";
        Function f = function({x0}, {x, g}, {}, reference);
        const double x0v = 2.0;
        std::vector<Array> out = f(x0v);
        const double an = std::pow(kA, double(kSteps));
        const double xn = an * x0v + kB * (an - 1.0) / (kA - 1.0);
        EXPECT_NEAR(out[0].item<double>(), xn, 1e-8 * std::abs(xn));
        EXPECT_NEAR(out[1].item<double>(), an, 1e-8 * an);

        // clone is iterative too: substitute the start of the chain
        Placeholder y0({}, f64, "chain_y0");
        Tensor y = clone(x, {{x0, y0 * 2.0}});
        EXPECT_EQ(graph_size({y}), size_t(4 * kSteps + 3)); // y0, 2, mul(y0, 2) and the chain
        double yv = function({y0}, {y}, {}, reference)(1.0)[0].item<double>();
        EXPECT_NEAR(yv, xn, 1e-8 * std::abs(xn));
    }
    // every handle is gone: the whole graph is freed, iteratively (no stack overflow)
    EXPECT_EQ(live_node_count(), base);
    std::cout << "[ scale    ] chain test took " << seconds_since(t0) << " s\n";
}

// The same chain, 20k steps, through the default backend (fusion and code generation on a long
// dependency chain).
TEST(Scale, LongChainOnTheDefaultBackend) {
    constexpr int64_t kSteps = 20000;
    const size_t base = live_node_count();
    auto t0 = std::chrono::steady_clock::now();
    {
        Placeholder x0({3}, f64, "dchain_x0");
        Tensor x = affine_chain(x0, kSteps);
        Tensor g = gradients(sum(x), x0); // a^n for each element
        Function f = function({x0}, {x, g});
        std::vector<double> x0v{-1.0, 0.0, 2.0};
        std::vector<Array> out = f(Array(x0v));
        const double an = std::pow(kA, double(kSteps));
        for (int i = 0; i < 3; ++i) {
            const double xn = an * x0v[i] + kB * (an - 1.0) / (kA - 1.0);
            EXPECT_NEAR(out[0].at(i), xn, 1e-9 * std::abs(xn)) << i;
            EXPECT_NEAR(out[1].at(i), an, 1e-9 * an) << i;
        }
    }
    EXPECT_EQ(live_node_count(), base);
    std::cout << "[ scale    ] 20k-step chain on the default backend took " << seconds_since(t0)
              << " s\n";
}

// 200k nodes built in a loop: exactly one node per op made, structurally distinct hashes (so the
// intern table stays O(1) per lookup), and all freed on drop.
TEST(Scale, BuildingIsLinear) {
    constexpr int64_t kSteps = 100000; // two nodes per step
    const size_t base = live_node_count();
    auto t0 = std::chrono::steady_clock::now();
    {
        Placeholder x0({4}, f32, "lin_x0");
        Tensor x = x0;
        for (int64_t k = 0; k < kSteps; ++k) x = tanh(x) + x;
        size_t n = graph_size({x}); // tanh and add per step, and the placeholder
        EXPECT_EQ(n, size_t(2 * kSteps + 1));
        EXPECT_EQ(live_node_count() - base, n);
        // distinct nodes have distinct hashes: a degenerate hash would make interning quadratic
        std::unordered_set<uint64_t> hashes;
        for (const Node* node : topo_order({x.node().get()})) hashes.insert(node->hash());
        EXPECT_GE(hashes.size() + 8, n);
    }
    EXPECT_EQ(live_node_count(), base);
    std::cout << "[ scale    ] 200k-node build took " << seconds_since(t0) << " s\n";
}

// The variable name table hands out unique names ("w", "w_1", ...) without scanning all taken
// suffixes on each creation (that would make building a model with many layers quadratic).
TEST(Scale, ManyVariablesWithTheSameName) {
    constexpr int kVars = 5000;
    Scope s("scale_same_name");
    auto t0 = std::chrono::steady_clock::now();
    std::vector<Variable> vars;
    vars.reserve(kVars);
    for (int i = 0; i < kVars; ++i) vars.emplace_back(Array::scalar(float(i)), "w");
    double secs = seconds_since(t0);
    EXPECT_EQ(vars.front().full_name(), "scale_same_name/w");
    EXPECT_EQ(vars[1].full_name(), "scale_same_name/w_1");
    EXPECT_EQ(vars.back().full_name(), "scale_same_name/w_" + std::to_string(kVars - 1));
    std::unordered_set<std::string> names;
    for (const auto& v : vars) names.insert(v.full_name());
    EXPECT_EQ(names.size(), size_t(kVars));
    EXPECT_EQ(get_variables("scale_same_name/*").size(), size_t(kVars));
    std::cout << "[ scale    ] " << kVars << " same-named variables took " << secs << " s\n";
    // Linear work is ~5k hash lookups (milliseconds); scanning every taken suffix on each
    // creation is ~1.25e7 string builds and lookups (seconds). The bound is 40x above linear.
    EXPECT_LT(secs, 1.0) << "creating same-named variables looks quadratic";
}

// Nodes are made and dropped on several threads at once (Note [Node pool] in
// src/core/Node.cpp): each thread builds chains over shared leaves, so the threads find each
// other's nodes in the intern table while others drop them, and every block goes back to the
// pool on whichever thread drops it last. Each chain must have its closed-form size and value,
// and every node must be gone at the end.
TEST(Scale, ThreadsMakeAndDropNodesTogether) {
    constexpr int kThreads = 4, kRounds = 6;
    constexpr int64_t kSteps = 3000;
    const size_t base = live_node_count();
    {
        Placeholder x0({}, f64, "pool_x0");
        Tensor a = scalar(kA, f64), b = scalar(kB, f64);
        std::vector<std::string> errors(kThreads);
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back([&, t] {
                for (int r = 0; r < kRounds && errors[size_t(t)].empty(); ++r) {
                    // shared with every other thread: the same nodes (hash-consing)
                    Tensor shared = affine_chain(x0, kSteps, a, b);
                    // this thread's own: its step constants are leaves of their own
                    Tensor own = affine_chain(x0, kSteps / 3);
                    if (graph_size({shared}) != size_t(2 * kSteps + 3) ||
                        graph_size({own}) != size_t(4 * (kSteps / 3) + 1))
                        errors[size_t(t)] = "round " + std::to_string(r) + ": wrong graph size";
                }
                // a short chain evaluated: the blocks the pool handed out hold what was built
                FunctionOptions reference;
                reference.backend = "reference";
                Tensor y = affine_chain(x0, 40, a, b);
                Function f = function({x0}, {y}, {}, reference);
                double got = f(Array::scalar(2.0))[0].item<double>();
                double want = 2.0;
                for (int k = 0; k < 40; ++k)
                    want = want * kA + kB;
                if (std::abs(got - want) > 1e-9 * std::abs(want))
                    errors[size_t(t)] =
                        "chain value " + std::to_string(got) + ", expected " + std::to_string(want);
            });
        for (auto& th : threads)
            th.join();
        for (int t = 0; t < kThreads; ++t)
            EXPECT_EQ(errors[size_t(t)], "") << "thread " << t;
    }
    EXPECT_EQ(live_node_count(), base);
}
