// Smoke test of the build: a tiny graph evaluated by the reference interpreter.
#include <gtest/gtest.h>
#include <symjax/symjax.h>

using namespace sj;

TEST(Smoke, AddEval) {
    Tensor a = constant(Array(std::vector<float>{1, 2, 3}));
    Tensor b = a * 2.0 + 1.0;
    Array r = b.eval();
    EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{3, 5, 7}));
}
