// Same build, same seed, any thread count: the same bits (Note [Thread-count-independent sums] in
// src/backend/cpu/CpuExecutable.cpp, docs/reliability.md). The test runs its own binary twice,
// with 1 and with 2 threads, on a hidden test that prints a digest of every result, and compares.
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>

using namespace sj;
using sj::test::random_array;

namespace {

uint64_t digest(const Array& a) {
    // FNV-1a over the bytes: equal digests mean equal bits (with overwhelming probability)
    uint64_t h = 1469598103934665603ull;
    const auto* p = static_cast<const unsigned char*>(a.raw());
    for (int64_t i = 0; i < a.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

void print(const std::string& what, const Array& a) {
    std::printf("digest %s %016llx\n", what.c_str(), static_cast<unsigned long long>(digest(a)));
}

/// Runs this binary's hidden digest test with `threads` threads; its digest lines by name.
std::map<std::string, std::string> digests_with(int threads) {
    std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::string cmd = "SJ_NUM_THREADS=" + std::to_string(threads) +
                      " OMP_NUM_THREADS=" + std::to_string(threads) + " '" + self +
                      "' --gtest_also_run_disabled_tests --gtest_filter=Determinism.DISABLED_Digests";
    std::map<std::string, std::string> out;
    FILE* f = ::popen(cmd.c_str(), "r");
    if (!f) return out;
    char line[512];
    while (std::fgets(line, sizeof line, f)) {
        std::istringstream is(line);
        std::string tag, name, hex;
        if (is >> tag >> name >> hex && tag == "digest") out[name] = hex;
    }
    ::pclose(f);
    return out;
}

} // namespace

TEST(Determinism, DISABLED_Digests) {
    // big enough that every kernel and library call runs on several threads when it may
    Placeholder x({64, 16, 32, 32}, f32, "x");
    Variable w(random_array(f32, {32, 16, 3, 3}, 1, -0.1, 0.1), "det_w");
    Tensor y = conv2d(x, w, {}, "SAME");
    Tensor loss = mean(y * y);
    auto g = gradients(loss, {x, w});
    Array xv = random_array(f32, {64, 16, 32, 32}, 2);
    auto r = function({x}, {y, loss, g[0], g[1]})(xv);
    print("conv_fwd", r[0]);
    print("conv_loss", r[1]);
    print("conv_bwd_data", r[2]);
    // oneDNN 2.6's backward-weights convolution splits its sum over the batch by thread count;
    // ours runs it on fixed chunks of the batch (Note [Thread-count-independent weight gradients]
    // in src/backend/cpu/Conv.cpp)
    print("conv_bwd_filter", r[3]);
    // 8 channels per group: oneDNN's GEMM-based convolution on plain layouts (Note [Conv
    // layouts]), chunked as the direct one above
    Placeholder xg({64, 16, 16, 16}, f32, "xg");
    Variable wg(random_array(f32, {16, 8, 3, 3}, 6, -0.1, 0.1), "det_wg");
    Tensor yg = conv(xg, wg, {}, "SAME", {}, 2);
    auto gg = gradients(mean(yg * yg), {xg, wg});
    auto rg = function({xg}, {yg, gg[0], gg[1]})(random_array(f32, {64, 16, 16, 16}, 7));
    print("grouped_conv_fwd", rg[0]);
    print("grouped_conv_bwd_data", rg[1]);
    print("grouped_conv_bwd_filter", rg[2]);
    // one image: chunks of its two groups (Note [Weight gradients of a batch of one])
    Placeholder x1({1, 16, 96, 96}, f32, "x1");
    Tensor y1 = conv(x1, wg, {}, "SAME", {}, 2);
    print("one_image_conv_bwd_filter", function({x1}, {gradients(mean(y1 * y1), {wg})[0]})(
                                           random_array(f32, {1, 16, 96, 96}, 8))[0]);

    Placeholder a({256, 3136}, f32, "a");
    Variable m(random_array(f32, {3136, 128}, 3, -0.05, 0.05), "det_m");
    Tensor z = matmul(a, m);
    auto gz = gradients(mean(z * z), {a, m});
    auto rz = function({a}, {z, gz[0], gz[1]})(random_array(f32, {256, 3136}, 4));
    print("matmul", rz[0]);
    print("matmul_bwd_lhs", rz[1]);
    print("matmul_bwd_rhs", rz[2]);
    // a dense layer's weight gradient at a large batch: a long contraction into a small result,
    // which oneDNN splits between threads (Note [Long contractions] in src/backend/cpu/Dot.cpp)
    for (int64_t batch : {2048, 8192}) {
        Placeholder al({batch, 256}, f32, "al");
        Variable ml(random_array(f32, {256, 10}, 11, -0.05, 0.05), "det_ml");
        Tensor zl = matmul(al, ml);
        Tensor gl = gradients(mean(zl * zl), {ml})[0];
        print("matmul_long_contraction_" + std::to_string(batch),
              function({al}, {gl})(random_array(f32, {batch, 256}, 12))[0]);
    }

    // reductions over the batch of a [N, C, H, W] tensor: batch-norm statistics and gradients
    Placeholder t({64, 32, 16, 16}, f32, "t");
    Tensor mu = mean(t, {0, 2, 3});
    Tensor var = mean((t - reshape(mu, {1, 32, 1, 1})) * (t - reshape(mu, {1, 32, 1, 1})), {0, 2, 3});
    auto gt = gradients(sum(var * var) + sum(t * t * 0.5), {t});
    auto rt = function({t}, {mu, var, gt[0], sum(t), sum(t, {0})})(random_array(f32, {64, 32, 16, 16}, 5));
    for (size_t i = 0; i < rt.size(); ++i) print("reduce" + std::to_string(i), rt[i]);

    // weight gradients of a batch of one, cut along their output channels (Note [Weight
    // gradients of a batch of one] in src/backend/cpu/Conv.cpp): one conv without groups, and
    // per-example gradients under vmap (the examples in the groups)
    Placeholder xo({1, 16, 32, 32}, f32, "xo");
    Variable wo(random_array(f32, {64, 16, 3, 3}, 13, -0.1, 0.1), "det_wo");
    Tensor yo = conv2d(xo, wo, {}, "SAME");
    print("conv_filter_batch_of_one", function({xo}, {gradients(sum(yo * yo), {wo})[0]})(
                                          random_array(f32, {1, 16, 32, 32}, 14))[0]);
    Placeholder xe({32, 3, 16, 16}, f32, "xe");
    Variable we(random_array(f32, {16, 3, 3, 3}, 15, -0.3, 0.3), "det_we");
    Tensor ge = vmap([&](const std::vector<Tensor>& a) {
        Tensor ye = conv2d(expand_dims(a[0], 0), we, {}, "SAME");
        return std::vector<Tensor>{gradients(sum(ye * ye), {we})[0]};
    })({xe})[0];
    print("per_example_conv_grads",
          function({xe}, {ge})(random_array(f32, {32, 3, 16, 16}, 16))[0]);

    // a few training steps of a small CNN: conv, batch norm, relu, max pool, dense, Adam; every
    // variable after them (weights, batch-norm statistics, Adam's moments and step)
    Scope scope("det_cnn");
    const nn::ConvOptions same{.padding = "SAME", .bias = false};
    nn::Sequential net{nn::Conv2D(3, 32, 3, same),
                       nn::BatchNorm(32),
                       nn::ReLU(),
                       nn::MaxPool2D({2, 2}),
                       nn::Conv2D(32, 32, 3, same),
                       nn::BatchNorm(32),
                       nn::ReLU(),
                       nn::MaxPool2D({2, 2}),
                       nn::Flatten(),
                       nn::Dense(32 * 8 * 8, 10)};
    Placeholder images({-1, 3, 32, 32}, f32, "images");
    Placeholder labels({-1}, i32, "labels");
    nn::optim::Adam adam(1e-3);
    Tensor ce = mean(nn::losses::sparse_softmax_crossentropy_logits(labels, net(images)));
    Function step = function({images, labels}, {ce},
                             adam.minimize(ce, net.trainable_variables()) + state_updates(ce));
    Array yb(i32, {64});
    for (int64_t i = 0; i < 64; ++i)
        yb.data<int32_t>()[i] = int32_t((i * 7) % 10);
    for (int s = 0; s < 3; ++s)
        print("cnn_loss" + std::to_string(s),
              step(random_array(f32, {64, 3, 32, 32}, 10 + s), yb)[0]);
    // the trained network in inference: its 3x3 conv of 32 channels a side runs as Winograd on
    // AVX-512, in training too (Note [Winograd convolutions] in src/backend/cpu/Conv.cpp)
    print("cnn_eval", function({images}, {net(images, nn::Mode::Eval)})(
                          random_array(f32, {64, 3, 32, 32}, 20))[0]);
    for (const Variable& v : net.variables())
        print(v.full_name(), v.value());
    for (const Variable& v : adam.variables())
        print(v.full_name(), v.value());
}

TEST(Determinism, OneAndTwoThreadsGiveTheSameBits) {
    auto one = digests_with(1), two = digests_with(2);
    ASSERT_FALSE(one.empty()) << "the digest run printed nothing";
    ASSERT_EQ(one.size(), two.size());
    for (const auto& [name, hex] : one) EXPECT_EQ(hex, two[name]) << name << " differs between 1 and 2 threads";
}
