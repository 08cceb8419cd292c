// Port of SymJAX's tests/vmap_test.py. Its tests never call a vmap: they build graphs on
// placeholders whose batch dim is unknown (SymJAX writes it 0, sj -1) and call them with several
// batch sizes, which sj does today.
#include "symjax_suite/SuiteUtil.h"

using namespace sj;
using namespace sj::suite;

// p = x.sum(1) for x [?, 2], and the update w <- x.sum().
TEST(SymjaxVmap, Vectorize) {
    Placeholder x({-1, 2}, DType::F32, "x");
    Variable w(scalar_f32(1.0), "w");
    Tensor p = sum(x, {1});
    Function f = function({x}, {p}, Updates{{w, sum(x)}});

    EXPECT_TRUE(array_equal(f(Array::full(DType::F32, {1, 2}, 1.0))[0], {2.0}, {1}));
    EXPECT_EQ(w.value().at(0), 2.0);
    EXPECT_TRUE(array_equal(f(Array::full(DType::F32, {2, 2}, 1.0))[0], {2.0, 2.0}, {2}));
    EXPECT_EQ(w.value().at(0), 4.0);
}

// Gradient descent on mean((x w - y)^2) with batches of 1 to 10: the loss decreases, and the
// gradient of sum(x w) is the column sums of x.
TEST(SymjaxVmap, VectorizeSgd) {
    Placeholder x({-1, 2}, DType::F32, "x");
    Placeholder y({-1}, DType::F32, "y");
    // T.Variable((1, 1)): a vector [1, 1]
    Variable w(Array(std::vector<float>{1, 1}, Shape{2}), "w");
    Tensor loss = mean(pow(matmul(x, w) - y, 2.0));
    Tensor g = gradients(loss, {w})[0];
    Tensor other_g = gradients(sum(matmul(x, w)), {w})[0];

    Function f = function({x, y}, {loss}, Updates{{w, w - 0.1 * g}});
    Function other_f = function({x}, {other_g});

    std::vector<double> L{10};
    for (int64_t i = 0; i < 10; ++i) {
        Array xs = Array::full(DType::F32, {i + 1, 2}, 1.0);
        L.push_back(f(xs, Array::full(DType::F32, {i + 1}, -1.0))[0].at(0));
        EXPECT_LT(L.back(), L[L.size() - 2]) << i;
        EXPECT_TRUE(array_equal(other_f(xs)[0], {i + 1.0, i + 1.0}, {2})) << i;
    }
}
