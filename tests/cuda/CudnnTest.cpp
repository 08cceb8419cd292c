// Convolutions and pooling on the cuda backend's cuDNN path without a GPU: the mapping of window
// nodes onto cuDNN calls (src/backend/cuda/WindowCall.cpp), the target's choice, the entry
// points libcudnn.so.9 must export, and the runner's window steps run by the host emulator
// against the reference backend. The cuDNN calls themselves need a GPU (docs/gpu.md).
#include "TestUtil.h"
#include "backend/cuda/CudaTarget.h"
#include "backend/cuda/WindowCall.h"
#include "backend/reference/Reference.h"

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
}

TEST(CudnnMapping, TheTargetAcceptsUnknownDimsAndTheRunnerDecides) {
    auto n = Node::make(Op::Conv, conv_attrs({1, 1}, {1, 1}, {1, 1}, {1, 1}),
                        {leaf({-1, 3, -1, -1}), leaf({4, 3, 3, 3})});
    EXPECT_TRUE(may_be_window_call(*n));
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

TEST(CudnnLibrary, ExportsEveryEntryPointTheDeviceResolves) {
    // what Cudnn.cpp's open_cudnn() resolves, checked without a GPU (the calls need one)
    void* h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        GTEST_SKIP() << "no libcudnn.so.9 here: " << dlerror();
    for (const char* name : {"cudnnGetVersion",
                             "cudnnGetErrorString",
                             "cudnnCreate",
                             "cudnnDestroy",
                             "cudnnSetStream",
                             "cudnnCreateTensorDescriptor",
                             "cudnnSetTensorNdDescriptor",
                             "cudnnDestroyTensorDescriptor",
                             "cudnnCreateFilterDescriptor",
                             "cudnnSetFilterNdDescriptor",
                             "cudnnDestroyFilterDescriptor",
                             "cudnnCreateConvolutionDescriptor",
                             "cudnnSetConvolutionNdDescriptor",
                             "cudnnSetConvolutionGroupCount",
                             "cudnnSetConvolutionMathType",
                             "cudnnDestroyConvolutionDescriptor",
                             "cudnnCreatePoolingDescriptor",
                             "cudnnSetPoolingNdDescriptor",
                             "cudnnDestroyPoolingDescriptor",
                             "cudnnGetConvolutionForwardAlgorithm_v7",
                             "cudnnGetConvolutionBackwardDataAlgorithm_v7",
                             "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                             "cudnnGetConvolutionForwardWorkspaceSize",
                             "cudnnGetConvolutionBackwardDataWorkspaceSize",
                             "cudnnGetConvolutionBackwardFilterWorkspaceSize",
                             "cudnnConvolutionForward",
                             "cudnnConvolutionBackwardData",
                             "cudnnConvolutionBackwardFilter",
                             "cudnnPoolingForward",
                             "cudnnPoolingBackward"})
        EXPECT_NE(dlsym(h, name), nullptr) << name;
    using GetVersion = size_t (*)();
    auto v = reinterpret_cast<GetVersion>(dlsym(h, "cudnnGetVersion"));
    ASSERT_NE(v, nullptr);
    EXPECT_GE(v(), size_t(90000)); // (needs no GPU)
}
