// Tests of the classification metrics: accuracy and top-k accuracy.
#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

using namespace sj;

TEST(NnMetrics, Accuracy) {
    Placeholder y({-1}, i32, "y");
    Placeholder z({-1, 3}, f32, "z");
    Function f = function({y, z}, {nn::metrics::accuracy(y, z), nn::metrics::correct(y, z)});
    // argmaxes: 2, 0, 1, 0 (the tie in the last row goes to the first maximum)
    Array logits(std::vector<float>{0, 1, 2, 5, -1, 3, 0, 9, 1, 4, 4, 0}, {4, 3});
    auto r = f(Array(std::vector<int32_t>{2, 0, 2, 1}), logits);
    EXPECT_FLOAT_EQ(r[0].item<float>(), 0.5f);
    EXPECT_EQ(r[1].to_vector<float>(), (std::vector<float>{1, 1, 0, 0}));
    Placeholder y64({-1}, i64, "y64");
    Function g = function({y64, z}, {nn::metrics::accuracy(y64, z)});
    EXPECT_FLOAT_EQ(g(Array(std::vector<int64_t>{2, 0, 1, 0}), logits)[0].item<float>(), 1.0f);
}

TEST(NnMetrics, TopKAccuracy) {
    Placeholder y({-1}, i32, "y");
    Placeholder z({-1, 4}, f32, "z");
    Function f = function({y, z}, {nn::metrics::top_k_accuracy(y, z, 1),
                                   nn::metrics::top_k_accuracy(y, z, 2),
                                   nn::metrics::top_k_accuracy(y, z, 3)});
    Array logits(std::vector<float>{0.1f, 0.4f, 0.3f, 0.2f, // label 3: rank 3
                                    5, 1, 2, 3,             // label 0: rank 1
                                    1, 2, 2, 0},            // label 2: tied for first
                 {3, 4});
    auto r = f(Array(std::vector<int32_t>{3, 0, 2}), logits);
    EXPECT_FLOAT_EQ(r[0].item<float>(), 2.0f / 3); // ties count in the example's favour
    EXPECT_FLOAT_EQ(r[1].item<float>(), 2.0f / 3);
    EXPECT_FLOAT_EQ(r[2].item<float>(), 1.0f);
    EXPECT_THROW(nn::metrics::top_k_accuracy(y, z, 0), InputError);
}
