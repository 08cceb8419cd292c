// Tests of Optimizer::minimize(loss) without a parameter list: the trainable variables the loss
// depends on are found in its graph; others are not touched.
#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

using namespace sj;

TEST(NnOptimAutoParams, CollectsTheTrainableVariablesTheLossUses) {
    Scope s("nnauto");
    Variable w(Array(std::vector<float>{1, -2}), "w");
    Variable b(Array::scalar<float>(0.5f), "b");
    Variable frozen(Array(std::vector<float>{3, 4}), "frozen", false); // used, not trainable
    Variable unused(Array(std::vector<float>{7, 7}), "unused");        // trainable, not used
    Variable count(Array::scalar<int32_t>(2), "count");                // trainable integer
    // loss = 0.5 sum((w - frozen)^2) + b * sum(w) * count: d/dw = w - frozen + b count,
    // d/db = count * sum(w)
    Tensor loss = 0.5 * sum((w - frozen) * (w - frozen)) + b * sum(w) * cast(count, DType::F32);
    std::vector<Variable> found = variables_of({loss}, true);
    ASSERT_EQ(found.size(), 3u); // w, b, count (graph order), each once
    EXPECT_TRUE(variables_of({loss}, false)[0].same(frozen));

    nn::optim::SGD sgd(0.1);
    Updates u = sgd.minimize(loss);
    EXPECT_TRUE(u.get(w).defined());
    EXPECT_TRUE(u.get(b).defined());
    EXPECT_FALSE(u.get(frozen).defined());
    EXPECT_FALSE(u.get(unused).defined());
    EXPECT_FALSE(u.get(count).defined());
    Function step = function({}, {loss}, u);
    // two steps computed here: g_w = w - frozen + b * 2, g_b = 2 * sum(w)
    std::vector<double> wv{1, -2}, fv{3, 4};
    double bv = 0.5;
    for (int t = 0; t < 2; ++t) {
        step();
        std::vector<double> gw(2);
        for (int i = 0; i < 2; ++i)
            gw[i] = wv[i] - fv[i] + bv * 2;
        double gb = 2 * (wv[0] + wv[1]);
        for (int i = 0; i < 2; ++i)
            wv[i] -= 0.1 * gw[i];
        bv -= 0.1 * gb;
        std::vector<float> got = w.value().to_vector<float>();
        EXPECT_NEAR(got[0], wv[0], 1e-5);
        EXPECT_NEAR(got[1], wv[1], 1e-5);
        EXPECT_NEAR(b.value().item<float>(), bv, 1e-5);
    }
    EXPECT_EQ(frozen.value().to_vector<float>(), (std::vector<float>{3, 4}));
    EXPECT_EQ(unused.value().to_vector<float>(), (std::vector<float>{7, 7}));
    EXPECT_EQ(count.value().item<int32_t>(), 2);
}

TEST(NnOptimAutoParams, SameAsTheExplicitList) {
    Scope s("nnauto_adam");
    Variable w(Array(std::vector<float>{0.3f, -0.7f}), "w");
    Variable w2(Array(std::vector<float>{0.3f, -0.7f}), "w2");
    nn::optim::Adam a(0.05), b(0.05);
    Function fa = function({}, {}, a.minimize(sum(w * w * w)));
    Function fb = function({}, {}, b.minimize(sum(w2 * w2 * w2), {w2}));
    for (int i = 0; i < 3; ++i) {
        fa();
        fb();
    }
    EXPECT_EQ(w.value().to_vector<float>(), w2.value().to_vector<float>());
}

TEST(NnOptimAutoParams, ALossWithoutTrainableVariablesIsAnError) {
    Scope s("nnauto_err");
    Variable frozen(Array::scalar<float>(1), "frozen", false);
    nn::optim::SGD sgd(0.1);
    try {
        sgd.minimize(frozen * 2.0);
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("no trainable float variable"), std::string::npos)
            << e.what();
    }
    EXPECT_THROW(sgd.minimize(Tensor()), TypeError);
    Placeholder x({2}, DType::F32, "x");
    EXPECT_THROW(sgd.minimize(sum(x)), InputError);
}
