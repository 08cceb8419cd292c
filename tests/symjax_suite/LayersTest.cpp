// Port of SymJAX's tests/layers_test.py. SymJAX's layers take `deterministic` as a runtime bool
// placeholder; sj chooses the mode when the graph is built (nn::Mode), so where SymJAX calls one
// function with deterministic = 0 and = 1, the port builds one function per mode.
#include "symjax_suite/SuiteUtil.h"

#include <symjax/nn.h>

using namespace sj;
using namespace sj::suite;

// Train-mode batch norm over ten batches of 5 x 2: each output is (batch - mean) /
// sqrt(0.001 + var), and the running mean follows 0.99 m + 0.01 mean (gen_expected.py computes
// both from test_bn's own data).
TEST(SymjaxLayers, Bn) {
    const auto& e = expected()["batch_norm"];
    const int64_t batch_size = 5, dim = 2;
    Placeholder input({batch_size, dim}, DType::F32, "input");
    // SymJAX's default epsilon is the 0.001 its check uses; sj's is 1e-5, so it is given.
    nn::BatchNorm bn(dim, {.momentum = 0.99, .eps = 1e-3});
    Tensor out = bn(input, nn::Mode::Train);
    Function update = function({input}, {out}, state_updates(out));

    Array data = json_array(e["data"], {50, dim});
    Array outputs = json_array(e["outputs"], {10, batch_size, dim});
    std::vector<double> actual_means(size_t(dim), 0.0);
    for (int64_t i = 0; i < 10; ++i) {
        Array batch = Array::from_buffer(DType::F32, {batch_size, dim},
                                         data.data<float>() + i * batch_size * dim);
        Array expect = Array::from_buffer(DType::F32, {batch_size, dim},
                                          outputs.data<float>() + i * batch_size * dim);
        Array output = update(batch)[0];
        EXPECT_TRUE(allclose(output, expect, 1e-4)) << "batch " << i;
        for (double m : values(bn.running_mean().value()))
            actual_means.push_back(m);
    }
    Array true_means = json_array(e["true_means"], {11, dim}, DType::F64);
    EXPECT_TRUE(allclose(Array(actual_means, {11, dim}), true_means));
}

// Dropout(p = 0.2) of ones: two training calls draw different masks whose average keeps the
// mean at 1; inference keeps every element.
TEST(SymjaxLayers, Dropout) {
    const int64_t batch_size = 4096, dim = 8;
    Placeholder input({batch_size, dim}, DType::F32, "input");
    nn::Dropout dropout(0.2);
    Function train = function({input}, {dropout(input, nn::Mode::Train)});
    Function infer = function({input}, {dropout(input, nn::Mode::Eval)});

    Array data = Array::full(DType::F32, {batch_size, dim}, 1.0);
    Array output1 = train(data)[0];
    Array output2 = train(data)[0];
    Array output3 = infer(data)[0];

    EXPECT_FALSE(allclose(output1, output2, 1e-1));
    // output1.mean(0) / 2 + output2.mean(0) / 2
    std::vector<double> avg(size_t(dim), 0.0);
    for (int64_t i = 0; i < batch_size; ++i)
        for (int64_t j = 0; j < dim; ++j)
            avg[size_t(j)] += (output1.at(i * dim + j) + output2.at(i * dim + j)) / 2 / batch_size;
    EXPECT_TRUE(allclose(Array(avg, {dim}), 1.0, 0.08));
    for (double v : values(output3))
        ASSERT_NE(v, 0.0);
}

// Three dense layers 8 -> 64 -> 128 -> 256 on a batch of 4096.
TEST(SymjaxLayers, GlobalPool) {
    const int64_t batch_size = 4096, dim = 8;
    Placeholder input({batch_size, dim}, DType::F32, "input");
    Tensor output = nn::Dense(dim, 64)(input);
    output = nn::Dense(output.dim(-1), output.dim(-1) * 2)(output);
    output = nn::Dense(output.dim(-1), output.dim(-1) * 2)(output);
    Function get = function({input}, {output});
    EXPECT_EQ(get(Array::full(DType::F32, {batch_size, dim}, 1.0))[0].shape(),
              (Shape{batch_size, 64 * 4}));
}

// RandomFlip(axis=2, p=0.5) of [2048, 8, 8] images whose first 4 columns are 0: two training
// calls flip different examples, on average half of each column is 1; inference is the identity.
TEST(SymjaxLayers, Flip) {
    const int64_t batch_size = 2048, dim = 8;
    Placeholder input({batch_size, dim, dim}, DType::F32, "input");
    nn::RandomFlip flip(nn::RandomFlipOptions{.p = 0.5, .axes = {2}});
    Function train = function({input}, {flip(input, nn::Mode::Train)});
    Function infer = function({input}, {flip(input, nn::Mode::Eval)});

    Array data = Array::full(DType::F32, {batch_size, dim, dim}, 1.0);
    for (int64_t i = 0; i < batch_size * dim; ++i)
        for (int64_t j = 0; j < dim / 2; ++j)
            data.data<float>()[i * dim + j] = 0;
    Array output1 = train(data)[0];
    Array output2 = train(data)[0];
    Array output3 = infer(data)[0];

    EXPECT_FALSE(allclose(output1, output2, 1e-1));
    // output1.mean(0) / 2 + output2.mean(0) / 2
    std::vector<double> avg(size_t(dim * dim), 0.0);
    for (int64_t i = 0; i < batch_size; ++i)
        for (int64_t j = 0; j < dim * dim; ++j)
            avg[size_t(j)] +=
                (output1.at(i * dim * dim + j) + output2.at(i * dim * dim + j)) / 2 / batch_size;
    EXPECT_TRUE(allclose(Array(avg, {dim, dim}), 0.5, 0.05));
    EXPECT_TRUE(allclose(data, output3, 1e-6));
}
