// Convolutions and pooling on the cuda backend's cuDNN path without a GPU: the mapping of window
// nodes onto cuDNN calls (src/backend/cuda/WindowCall.cpp), the target's choice, the entry
// points libcudnn.so.9 must export, and the runner's window steps run by the host emulator
// against the reference backend. The cuDNN calls themselves need a GPU (docs/gpu.md).
#include "backend/cuda/Cudnn.h"
#include "TestUtil.h"
#include "backend/cuda/CudaTarget.h"
#include "backend/cuda/Device.h"
#include "backend/cuda/WindowCall.h"
#include "backend/reference/Reference.h"
#include "cuda/TestDevices.h"

#include <gtest/gtest.h>
#include <symjax/ir/Node.h>
#include <symjax/symjax.h>

#include <dlfcn.h>

#include <memory>

using namespace sj;
using namespace sj::cuda;
using sj::test::expect_close;
using sj::test::on;
using sj::test::random_array;

namespace {

NodePtr leaf(const Shape& s, DType t = DType::F32) {
    static uint64_t id = 1 << 20; // distinct placeholders
    return Node::make(Op::Placeholder, PlaceholderAttrs{id++, t, s}, {});
}

ConvAttrs conv_attrs(std::vector<int64_t> stride, std::vector<int64_t> lo, std::vector<int64_t> hi,
                     std::vector<int64_t> dilation, int64_t groups = 1, Shape result_spatial = {}) {
    return ConvAttrs{std::move(stride),   std::move(lo), std::move(hi),
                     std::move(dilation), groups,        std::move(result_spatial)};
}

PoolAttrs pool_attrs(PoolKind k, std::vector<int64_t> window, std::vector<int64_t> stride,
                     std::vector<int64_t> lo, std::vector<int64_t> hi, bool include_pad = true,
                     Shape result_spatial = {}) {
    return PoolAttrs{
        k,           std::move(window),        std::move(stride), std::move(lo), std::move(hi),
        include_pad, std::move(result_spatial)};
}

/// window_call_for on n with its inputs' and its own static (concrete) types.
std::optional<WindowCall> map(const NodePtr& n, std::string* why = nullptr) {
    std::vector<TensorType> in;
    for (const auto& i : n->inputs())
        in.push_back(i->type());
    return window_call_for(*n, in, n->type(), why);
}

std::string declined(const NodePtr& n) {
    std::string why;
    EXPECT_FALSE(map(n, &why)) << n->describe();
    return why;
}

} // namespace

// ---- the mapping -------------------------------------------------------------------------------

TEST(CudnnMapping, Conv2dWithPaddingStridesDilationAndGroups) {
    auto n = Node::make(Op::Conv, conv_attrs({2, 1}, {1, 2}, {1, 2}, {1, 2}, 2),
                        {leaf({2, 4, 9, 10}), leaf({6, 2, 3, 3})});
    auto c = map(n);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->kind, WindowKind::Conv);
    EXPECT_EQ(c->x, (Shape{2, 4, 9, 10}));
    EXPECT_EQ(c->w, (Shape{6, 2, 3, 3}));
    EXPECT_EQ(c->y, n->type().shape);
    EXPECT_EQ(c->pad, (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(c->stride, (std::vector<int64_t>{2, 1}));
    EXPECT_EQ(c->dilation, (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(c->groups, 2);
    EXPECT_TRUE(may_be_window_call(*n));
    EXPECT_EQ(cuda_target().library_call(*n), compiler::LibraryCall::Window);
}

TEST(CudnnMapping, OneSpatialDimIsLiftedToTwo) {
    auto n =
        Node::make(Op::Conv, conv_attrs({2}, {1}, {1}, {3}), {leaf({2, 3, 17}), leaf({4, 3, 3})});
    auto c = map(n);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->x, (Shape{2, 3, 1, 17}));
    EXPECT_EQ(c->w, (Shape{4, 3, 1, 3}));
    EXPECT_EQ(c->y, (Shape{2, 4, 1, n->type().shape[2]}));
    EXPECT_EQ(c->pad, (std::vector<int64_t>{0, 1}));
    EXPECT_EQ(c->stride, (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(c->dilation, (std::vector<int64_t>{1, 3}));

    auto p = Node::make(Op::Pool, pool_attrs(PoolKind::Avg, {3}, {2}, {1}, {1}, false),
                        {leaf({2, 3, 11})});
    auto pc = map(p);
    ASSERT_TRUE(pc);
    EXPECT_EQ(pc->x, (Shape{2, 3, 1, 11}));
    EXPECT_EQ(pc->window, (std::vector<int64_t>{1, 3}));
    EXPECT_EQ(pc->pad, (std::vector<int64_t>{0, 1}));
    EXPECT_EQ(pc->stride, (std::vector<int64_t>{1, 2}));
    EXPECT_FALSE(pc->count_include_pad);
    EXPECT_EQ(pc->pool, PoolKind::Avg);
}

TEST(CudnnMapping, ThreeSpatialDims) {
    auto n = Node::make(Op::Conv, conv_attrs({1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}),
                        {leaf({1, 2, 5, 5, 5}), leaf({3, 2, 3, 3, 3})});
    auto c = map(n);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->spatial(), 3u);
    EXPECT_EQ(c->y, (Shape{1, 3, 5, 5, 5}));
}

TEST(CudnnMapping, BackwardOpsTakeTheForwardGeometry) {
    // stride 2 over 10: the forward reads 9 of them; dx keeps the 10th (zeros there)
    auto dy = leaf({2, 4, 4, 4}), w = leaf({4, 3, 3, 3}), x = leaf({2, 3, 10, 9});
    auto bd = Node::make(Op::ConvBackwardData,
                         conv_attrs({2, 2}, {0, 0}, {0, 0}, {1, 1}, 1, {10, 9}), {dy, w});
    auto c = map(bd);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->kind, WindowKind::ConvBackwardData);
    EXPECT_EQ(c->x, (Shape{2, 3, 10, 9}));
    EXPECT_EQ(c->y, (Shape{2, 4, 4, 4}));
    EXPECT_EQ(c->w, (Shape{4, 3, 3, 3}));
    auto bf = Node::make(Op::ConvBackwardFilter,
                         conv_attrs({2, 2}, {0, 0}, {0, 0}, {1, 1}, 1, {3, 3}), {x, dy});
    auto f = map(bf);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->kind, WindowKind::ConvBackwardFilter);
    EXPECT_EQ(f->w, (Shape{4, 3, 3, 3}));

    auto px = leaf({2, 3, 8, 8}), pdy = leaf({2, 3, 4, 4});
    auto mb = Node::make(Op::MaxPoolBackward,
                         pool_attrs(PoolKind::Max, {2, 2}, {2, 2}, {0, 0}, {0, 0}), {px, pdy});
    auto m = map(mb);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->kind, WindowKind::MaxPoolBackward);
    EXPECT_EQ(m->x, (Shape{2, 3, 8, 8}));
    EXPECT_EQ(m->y, (Shape{2, 3, 4, 4}));
    auto ab =
        Node::make(Op::AvgPoolBackward,
                   pool_attrs(PoolKind::Avg, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, {8, 8}), {pdy});
    auto a = map(ab);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->kind, WindowKind::AvgPoolBackward);
    EXPECT_EQ(a->x, (Shape{2, 3, 8, 8}));
    EXPECT_TRUE(a->count_include_pad);
}

TEST(CudnnMapping, DeclinesWhatCudnnCannotComputeExactly) {
    // "SAME" with an even filter pads one side more
    auto asym = Node::make(Op::Conv, conv_attrs({1, 1}, {0, 1}, {1, 1}, {1, 1}),
                           {leaf({1, 2, 6, 6}), leaf({2, 2, 2, 3})});
    EXPECT_EQ(declined(asym), "asymmetric padding");
    EXPECT_FALSE(may_be_window_call(*asym));
    EXPECT_EQ(cuda_target().library_call(*asym), compiler::LibraryCall::None);

    auto f64 = Node::make(Op::Conv, conv_attrs({1, 1}, {0, 0}, {0, 0}, {1, 1}),
                          {leaf({1, 2, 6, 6}, DType::F64), leaf({2, 2, 3, 3}, DType::F64)});
    EXPECT_EQ(declined(f64), "not f32");
    EXPECT_FALSE(may_be_window_call(*f64));

    auto empty = Node::make(Op::Conv, conv_attrs({1, 1}, {0, 0}, {0, 0}, {1, 1}),
                            {leaf({0, 2, 6, 6}), leaf({2, 2, 3, 3})});
    EXPECT_EQ(declined(empty), "an empty tensor or a size over INT_MAX");
    EXPECT_TRUE(may_be_window_call(*empty)); // (shapes decide at bind time)

    auto huge = Node::make(Op::Pool, pool_attrs(PoolKind::Max, {2, 2}, {2, 2}, {0, 0}, {0, 0}),
                           {leaf({1 << 16, 64, 32, 32})});
    EXPECT_EQ(declined(huge), "an empty tensor or a size over INT_MAX");

    auto four = Node::make(
        Op::Pool, pool_attrs(PoolKind::Max, {2, 2, 2, 2}, {1, 1, 1, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}),
        {leaf({1, 1, 3, 3, 3, 3})});
    EXPECT_EQ(declined(four), "not 1, 2 or 3 spatial dims");
    EXPECT_FALSE(may_be_window_call(*four));

    auto pool_asym = Node::make(Op::Pool, pool_attrs(PoolKind::Avg, {2, 2}, {1, 1}, {0, 0}, {1, 1}),
                                {leaf({1, 2, 5, 5})});
    EXPECT_EQ(declined(pool_asym), "asymmetric padding");

    auto other = Node::make(Op::Exp, NoAttrs{}, {leaf({1, 16, 4, 4})});
    EXPECT_EQ(declined(other), "not a window op");
    EXPECT_EQ(cuda_target().library_call(*other), compiler::LibraryCall::None);
}

TEST(CudnnMapping, TheTargetAcceptsUnknownDimsAndTheRunnerDecides) {
    auto n = Node::make(Op::Conv, conv_attrs({1, 1}, {1, 1}, {1, 1}, {1, 1}),
                        {leaf({-1, 3, -1, -1}), leaf({4, 3, 3, 3})});
    EXPECT_TRUE(may_be_window_call(*n));
    EXPECT_EQ(cuda_target().library_call(*n), compiler::LibraryCall::Window);
}

TEST(CudnnMapping, TheAlgorithmKeyNamesShapesAndGeometry) {
    auto a = map(Node::make(Op::Conv, conv_attrs({1, 1}, {0, 0}, {0, 0}, {1, 1}),
                            {leaf({1, 2, 6, 6}), leaf({2, 2, 3, 3})}));
    auto b = map(Node::make(Op::Conv, conv_attrs({1, 1}, {0, 0}, {0, 0}, {1, 1}),
                            {leaf({2, 2, 6, 6}), leaf({2, 2, 3, 3})}));
    auto c = map(Node::make(Op::Conv, conv_attrs({1, 1}, {1, 1}, {1, 1}, {1, 1}),
                            {leaf({1, 2, 6, 6}), leaf({2, 2, 3, 3})}));
    auto a2 = map(Node::make(Op::Conv, conv_attrs({1, 1}, {0, 0}, {0, 0}, {1, 1}),
                             {leaf({1, 2, 6, 6}), leaf({2, 2, 3, 3})}));
    ASSERT_TRUE(a && b && c && a2);
    EXPECT_NE(a->key(), b->key());
    EXPECT_NE(a->key(), c->key());
    EXPECT_EQ(a->key(), a2->key());
}

TEST(CudnnMapping, TheCallRunOnTheHostIsTheNodesReferenceKernel) {
    // run_window_on_host rebuilds the node from the call (lifted to 2-d here): the same values
    // as the original node's reference kernel say the call lost nothing
    struct Case {
        NodePtr n;
        std::vector<Shape> ins;
    };
    std::vector<Case> cases;
    auto x1 = leaf({2, 4, 13}), w1 = leaf({6, 2, 3});
    auto conv1 = Node::make(Op::Conv, conv_attrs({2}, {2}, {2}, {2}, 2), {x1, w1});
    cases.push_back({conv1, {{2, 4, 13}, {6, 2, 3}}});
    const Shape y1 = conv1->type().shape;
    cases.push_back(
        {Node::make(Op::ConvBackwardData, conv_attrs({2}, {2}, {2}, {2}, 2, {13}), {leaf(y1), w1}),
         {y1, {6, 2, 3}}});
    cases.push_back(
        {Node::make(Op::ConvBackwardFilter, conv_attrs({2}, {2}, {2}, {2}, 2, {3}), {x1, leaf(y1)}),
         {{2, 4, 13}, y1}});
    auto px = leaf({2, 3, 7, 6});
    for (bool inc : {true, false}) {
        auto pa = pool_attrs(PoolKind::Avg, {3, 2}, {2, 2}, {1, 1}, {1, 1}, inc);
        auto p = Node::make(Op::Pool, pa, {px});
        cases.push_back({p, {{2, 3, 7, 6}}});
        pa.result_spatial = {7, 6};
        cases.push_back(
            {Node::make(Op::AvgPoolBackward, pa, {leaf(p->type().shape)}), {p->type().shape}});
    }
    auto mp = pool_attrs(PoolKind::Max, {3, 3}, {2, 1}, {1, 1}, {1, 1});
    auto m = Node::make(Op::Pool, mp, {px});
    cases.push_back({m, {{2, 3, 7, 6}}});
    cases.push_back({Node::make(Op::MaxPoolBackward, mp, {px, leaf(m->type().shape)}),
                     {{2, 3, 7, 6}, m->type().shape}});
    uint64_t seed = 7;
    for (const Case& k : cases) {
        auto c = map(k.n);
        ASSERT_TRUE(c) << k.n->describe();
        std::vector<Array> ins;
        for (const Shape& s : k.ins)
            ins.push_back(random_array(DType::F32, s, seed++));
        const Array want = ref::eval_node(*k.n, ins, 0);
        Array got(DType::F32, k.n->type().shape);
        run_window_on_host(*c, ins[0].data<float>(),
                           ins.size() > 1 ? ins[1].data<float>() : nullptr, got.data<float>());
        expect_close(got, want, 0, 0, c->str());
    }
}

// ---- libcudnn.so.9's entry points ---------------------------------------------------------------

TEST(CudnnLibrary, OpensWithEveryEntryPointOrSaysWhyNot) {
    // cudnn() opens libcudnn.so.9 and resolves every entry point the device calls, which needs
    // no GPU; cudnnGetVersion runs without one too
    if (void* h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL)) {
        dlclose(h);
        const Cudnn& l = cudnn(); // throws naming a missing entry point
        EXPECT_GE(l.get_version(), size_t(90000));
        return;
    }
    // no cuDNN here: the error names the library and what it was for
    const std::string m = test::message_of<Error>([] { cudnn(); });
    EXPECT_NE(m.find("libcudnn.so.9"), std::string::npos) << m;
    EXPECT_NE(m.find("convolutions and pooling"), std::string::npos) << m;
}

// ---- the runner's window steps on the emulator
// ---------------------------------------------------

namespace {

/// f's outputs on "cuda" (on `dev`) and on "reference" for the same inputs agree (f32: the
/// emulator's window calls are the reference kernels, the rest are generated kernels).
void expect_parity(const std::vector<Tensor>& ins, const std::vector<Tensor>& outs,
                   const std::vector<Array>& args, const std::string& what) {
    Function fc = function(ins, outs, {}, on("cuda"));
    Function fr = function(ins, outs, {}, on("reference"));
    const std::vector<Function::Arg> a(args.begin(), args.end());
    const std::vector<Array> got = fc.call(a), want = fr.call(a);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
        expect_close(got[i], want[i], 1e-5, 1e-5, what + " output " + std::to_string(i));
}

} // namespace

TEST(CudnnEmulator, ConvolutionsAndTheirGradientsRunAsWindowCalls) {
    auto dev = std::make_shared<test::CountingEmulator>();
    test::UseDevice use(dev);
    ASSERT_TRUE(use.ok());
    Placeholder x({2, 4, 9, 8}, f32, "x"), w({6, 2, 3, 3}, f32, "w");
    Tensor y = conv2d(x, w, {2, 1}, 1, {1, 2}, 2);
    Tensor loss = sum(y * y);
    auto g = gradients(loss, std::vector<Tensor>{x, w});
    std::vector<Array> args = {random_array(DType::F32, {2, 4, 9, 8}, 1),
                               random_array(DType::F32, {6, 2, 3, 3}, 2)};
    expect_parity({x, w}, {y, g[0], g[1]}, args, "conv2d");
    EXPECT_GE(dev->windows[WindowKind::Conv], 1);
    EXPECT_EQ(dev->windows[WindowKind::ConvBackwardData], 1);
    EXPECT_EQ(dev->windows[WindowKind::ConvBackwardFilter], 1);

    // 1-d and 3-d convolutions too
    Placeholder x1({3, 2, 15}, f32, "x1"), w1({4, 2, 3}, f32, "w1");
    Tensor y1 = conv1d(x1, w1, {2}, 1);
    auto g1 = gradients(sum(y1 * y1), std::vector<Tensor>{x1, w1});
    expect_parity({x1, w1}, {y1, g1[0], g1[1]},
                  {random_array(DType::F32, {3, 2, 15}, 3), random_array(DType::F32, {4, 2, 3}, 4)},
                  "conv1d");
    Placeholder x3({1, 2, 5, 4, 6}, f32, "x3"), w3({3, 2, 3, 2, 3}, f32, "w3");
    Tensor y3 = conv(x3, w3, {1, 2, 1}, 1);
    auto g3 = gradients(sum(y3 * y3), std::vector<Tensor>{x3, w3});
    expect_parity({x3, w3}, {y3, g3[0], g3[1]},
                  {random_array(DType::F32, {1, 2, 5, 4, 6}, 5),
                   random_array(DType::F32, {3, 2, 3, 2, 3}, 6)},
                  "conv3d");
    EXPECT_EQ(dev->windows[WindowKind::ConvBackwardData], 3);
    EXPECT_EQ(dev->windows[WindowKind::ConvBackwardFilter], 3);
}

TEST(CudnnEmulator, PoolingAndItsGradientsRunAsWindowCalls) {
    auto dev = std::make_shared<test::CountingEmulator>();
    test::UseDevice use(dev);
    ASSERT_TRUE(use.ok());
    Placeholder x({2, 3, 7, 8}, f32, "x");
    Tensor m = max_pool2d(x, {3, 3}, {2, 2}, 1);
    Tensor a = avg_pool2d(x, {3, 2}, {2, 1}, 1, true);
    Tensor e = avg_pool2d(x, {3, 3}, {2, 2}, 1, false);
    Tensor loss = sum(m * m) + sum(a * a) + sum(e * e);
    Tensor gx = gradients(loss, x);
    expect_parity({x}, {m, a, e, gx}, {random_array(DType::F32, {2, 3, 7, 8}, 11)}, "pool2d");
    EXPECT_GE(dev->windows[WindowKind::Pool], 3);
    EXPECT_EQ(dev->windows[WindowKind::MaxPoolBackward], 1);
    EXPECT_EQ(dev->windows[WindowKind::AvgPoolBackward], 2);
}

TEST(CudnnEmulator, WhatCudnnCannotTakeRunsOnTheHost) {
    auto dev = std::make_shared<test::CountingEmulator>();
    test::UseDevice use(dev);
    ASSERT_TRUE(use.ok());
    // "SAME" with an even filter: pads (0, 1); the reference kernel runs it on the host
    Placeholder x({1, 2, 6, 6}, f32, "x"), w({3, 2, 2, 2}, f32, "w");
    Tensor y = conv2d(x, w, {}, "SAME");
    expect_parity(
        {x, w}, {y},
        {random_array(DType::F32, {1, 2, 6, 6}, 21), random_array(DType::F32, {3, 2, 2, 2}, 22)},
        "same conv");
    EXPECT_EQ(dev->windows[WindowKind::Conv], 0);
    // an f64 convolution too
    Placeholder xd({1, 2, 6, 6}, f64, "xd"), wd({3, 2, 3, 3}, f64, "wd");
    Tensor yd = conv2d(xd, wd);
    expect_parity(
        {xd, wd}, {yd},
        {random_array(DType::F64, {1, 2, 6, 6}, 23), random_array(DType::F64, {3, 2, 3, 3}, 24)},
        "f64 conv");
    EXPECT_EQ(dev->windows[WindowKind::Conv], 0);
}

TEST(CudnnEmulator, ShapesBoundAtTheCallDecide) {
    auto dev = std::make_shared<test::CountingEmulator>();
    test::UseDevice use(dev);
    ASSERT_TRUE(use.ok());
    Placeholder x({-1, 2, 6, 6}, f32, "x"), w({3, 2, 3, 3}, f32, "w");
    Tensor y = conv2d(x, w, {}, 1);
    Function f = function({x, w}, {y}, {}, on("cuda"));
    Function r = function({x, w}, {y}, {}, on("reference"));
    EXPECT_EQ(f.stats().library_calls, 1u) << f.dump();
    const Array wv = random_array(DType::F32, {3, 2, 3, 3}, 31);
    const Array x2 = random_array(DType::F32, {2, 2, 6, 6}, 32);
    expect_close(f(x2, wv)[0], r(x2, wv)[0], 1e-5, 1e-5, "batch 2");
    EXPECT_EQ(dev->windows[WindowKind::Conv], 1);
    // an empty batch: cuDNN takes no 0 dims, so the host computes it (nothing)
    const Array x0(DType::F32, Shape{0, 2, 6, 6});
    EXPECT_EQ(f(x0, wv)[0].shape(), (Shape{0, 3, 6, 6}));
    EXPECT_EQ(dev->windows[WindowKind::Conv], 1);
}
