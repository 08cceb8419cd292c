// Integer arithmetic where the hardware traps or C++ overflows: div and mod by 0 and of MIN by
// -1, wrapping add/mul/sums, on every backend and through constant folding. Expected values are
// NumPy's (docs/ops.md): x // 0 == x % 0 == 0, MIN // -1 wraps to MIN, MIN % -1 == 0.
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/ir/Node.h>
#include <symjax/symjax.h>

#include "compiler/Canonicalize.h"

#include <cstdint>
#include <limits>
#include <vector>

using namespace sj;
using sj::test::on;

namespace {

template <class T> struct IntegerEdge : ::testing::Test {};
using IntTypes = ::testing::Types<int32_t, int64_t>;
TYPED_TEST_SUITE(IntegerEdge, IntTypes);

template <class T> struct Cases {
    static constexpr T kMin = std::numeric_limits<T>::min();
    static constexpr T kMax = std::numeric_limits<T>::max();
    // a and b of each case, and the expected a div b (truncating) and a mod b (divisor's sign)
    std::vector<T> a{kMin, kMin, 7, -7, 0, kMax, kMin, -7, 7};
    std::vector<T> b{-1, 0, 0, 0, 0, -1, 1, 2, -2};
    std::vector<T> div{kMin, 0, 0, 0, 0, T(-kMax), kMin, -3, -3};
    std::vector<T> mod{0, 0, 0, 0, 0, 0, 0, 1, -1};
};

/// The value `t` takes after the compiler's canonicalize pass: it must have folded to a constant.
template <class T> std::vector<T> folded(const Tensor& t) {
    std::vector<NodePtr> r = compiler::canonicalize({t.node()});
    EXPECT_TRUE(r[0]->is(Op::Constant)) << "not folded: " << r[0]->describe();
    if (!r[0]->is(Op::Constant))
        return {};
    return r[0]->attr<ConstantAttrs>().value.template to_vector<T>();
}

} // namespace

TYPED_TEST(IntegerEdge, DivModTrapsOnEveryBackend) {
    using T = TypeParam;
    Cases<T> c;
    DType dt = dtype_of<T>();
    Shape s{int64_t(c.a.size())};
    Placeholder a(s, dt, "a"), b(s, dt, "b");
    for (const char* backend : {"reference", "cpu"}) {
        Function f = function({a, b}, {div(a, b), mod(a, b)}, {}, on(backend));
        std::vector<Array> out = f(Array(c.a, s), Array(c.b, s));
        EXPECT_EQ(out[0].to_vector<T>(), c.div) << backend;
        EXPECT_EQ(out[1].to_vector<T>(), c.mod) << backend;
    }
}

TYPED_TEST(IntegerEdge, DivModTrapsInConstantFolding) {
    using T = TypeParam;
    Cases<T> c;
    Tensor a = constant(Array(c.a)), b = constant(Array(c.b));
    EXPECT_EQ(folded<T>(div(a, b)), c.div);
    EXPECT_EQ(folded<T>(mod(a, b)), c.mod);
    // a whole function of constants: folded by the compiler, then returned
    for (const char* backend : {"reference", "cpu"}) {
        std::vector<Array> out = function({}, {div(a, b), mod(a, b)}, {}, on(backend))();
        EXPECT_EQ(out[0].to_vector<T>(), c.div) << backend;
        EXPECT_EQ(out[1].to_vector<T>(), c.mod) << backend;
    }
}

// Fixed-width integers wrap modulo 2^bits (NumPy): MAX + 1 == MIN, MIN * -1 == MIN, -MIN == MIN,
// abs(MIN) == MIN, and sums and products wrap the same way.
TYPED_TEST(IntegerEdge, ArithmeticWraps) {
    using T = TypeParam;
    constexpr T kMin = std::numeric_limits<T>::min(), kMax = std::numeric_limits<T>::max();
    DType dt = dtype_of<T>();
    Placeholder a({3}, dt, "a"), b({3}, dt, "b");
    for (const char* backend : {"reference", "cpu"}) {
        Function f = function({a, b}, {a + b, a * b, -a, abs(a), sum(a), prod(a)}, {}, on(backend));
        std::vector<Array> out =
            f(Array(std::vector<T>{kMax, kMin, kMax}), Array(std::vector<T>{1, -1, 2}));
        EXPECT_EQ(out[0].to_vector<T>(), (std::vector<T>{kMin, kMax, T(kMin + 1)})) << backend;
        EXPECT_EQ(out[1].to_vector<T>(), (std::vector<T>{kMax, kMin, -2})) << backend;
        EXPECT_EQ(out[2].to_vector<T>(), (std::vector<T>{T(-kMax), kMin, T(-kMax)})) << backend;
        EXPECT_EQ(out[3].to_vector<T>(), (std::vector<T>{kMax, kMin, kMax})) << backend;
        // kMax + kMin + kMax = kMax - 1 (mod 2^bits); kMax * kMin * kMax = kMin (kMin is 2^(bits-1)
        // and kMax odd, so the product is 2^(bits-1) * odd == kMin)
        EXPECT_EQ(out[4].item<T>(), T(kMax - 1)) << backend;
        EXPECT_EQ(out[5].item<T>(), kMin) << backend;
    }
}
