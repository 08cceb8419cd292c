// sort on the cpu target (Note [Sorting packed keys] in src/backend/cpu/Sort.cpp): packed
// integer codes, top-k selection, lines over the thread team. Expected values: the reference
// interpreter's stable sort with its spelled-out comparison (itself checked against NumPy by the
// op table's golden rows), element for element, bits included; and a few orders worked out by
// hand from Note [Sort]'s rules.
#include "TestUtil.h"
#include "ops/OpDef.h"

#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

using namespace sj;

using sj::test::on;

namespace {

/// Keys with many ties: for floats also NaN (both signs), +-inf and both zeros.
Array sort_test_keys(DType dt, const Shape& shape, uint64_t seed) {
    Array a(dt, shape);
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    const double pool[] = {NAN, -NAN, INFINITY, -INFINITY, -0.0, 0.0, 1.5, -2.0, 3.0, 7.0, 250.0};
    dispatch(dt, [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* p = static_cast<T*>(a.raw());
        for (int64_t i = 0; i < a.size(); ++i) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t r = s >> 33;
            if constexpr (std::is_floating_point_v<T>)
                p[i] = T(r % 3 == 0 ? double(r % 1000) / 7.0 : pool[r % 11]);
            else if constexpr (std::is_same_v<T, uint8_t>)
                p[i] = T(dt == DType::Bool ? r % 2 : r % 5);
            else
                p[i] = T(int64_t(r % 9) - (std::is_signed_v<T> ? 4 : 0));
        }
    });
    return a;
}

/// The bytes of an array (to compare floats bit for bit: -0.0 against 0.0, NaN payloads).
std::vector<unsigned char> bytes_of(const Array& a) {
    const auto* p = static_cast<const unsigned char*>(a.raw());
    return {p, p + a.nbytes()};
}

void expect_cpu_equals_reference(DType dt, const Shape& shape, int64_t axis, bool descending,
                                 int64_t k) {
    Placeholder x(shape, dt, "keys");
    Array xv = sort_test_keys(dt, shape, uint64_t(shape.size() * 131 + axis * 7 + k + 3));
    std::vector<Tensor> outs;
    if (k < 0) {
        outs = {sort(x, axis, descending), argsort(x, axis, descending)};
    } else {
        auto [v, i] = top_k(x, k);
        outs = {v, i};
    }
    Function cpu_f = function({x}, outs, {}, on("cpu"));
    Function ref_f = function({x}, outs, {}, on("reference"));
    std::vector<Array> got = cpu_f(xv), want = ref_f(xv);
    for (size_t o = 0; o < outs.size(); ++o)
        EXPECT_EQ(bytes_of(got[o]), bytes_of(want[o]))
            << dtype_name(dt) << " " << shape_str(shape) << " axis " << axis
            << (descending ? " descending" : "") << " k " << k << " output " << o;
}

} // namespace

TEST(SortCpu, EqualsTheReferenceForEveryDtypeAndLayout) {
    // empty and one-element lines, a few short lines, lines along an outer axis (strided),
    // long lines and many lines (the thread team)
    for (DType dt :
         {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8, DType::U32, DType::Bool})
        for (bool desc : {false, true}) {
            expect_cpu_equals_reference(dt, {0}, 0, desc, -1);
            expect_cpu_equals_reference(dt, {1}, 0, desc, -1);
            expect_cpu_equals_reference(dt, {5, 33}, 1, desc, -1);
            expect_cpu_equals_reference(dt, {2, 9, 4}, 1, desc, -1);
            expect_cpu_equals_reference(dt, {3, 0}, 1, desc, -1);
            expect_cpu_equals_reference(dt, {2, 30000}, 1, desc, -1);
            expect_cpu_equals_reference(dt, {600, 70}, 0, desc, -1);
        }
}

TEST(SortCpu, TopKSelectsThenSorts) {
    // k of 0, 1, a few (the selection path), more than half the line (the whole sort), all
    for (DType dt : {DType::F32, DType::F64, DType::I64, DType::U8})
        for (int64_t k : {0, 1, 5, 40, 64}) {
            expect_cpu_equals_reference(dt, {3, 64}, -1, true, k);
            expect_cpu_equals_reference(dt, {500, 64}, -1, true, k);
        }
    expect_cpu_equals_reference(DType::F32, {2, 50000}, -1, true, 10);
}

TEST(SortCpu, OrdersWorkedOutByHand) {
    // ascending: -inf, the zeros in their order, numbers, NaN last (both NaNs, in their order)
    Placeholder x({8}, f32, "x");
    Function f = function({x}, {sort(x), argsort(x), argsort(x, 0, true)}, {}, on("cpu"));
    std::vector<float> xv = {3.0f, NAN, 0.0f, -0.0f, -INFINITY, -NAN, 1.0f, 3.0f};
    auto r = f(Array(xv, {8}));
    std::vector<float> s = r[0].to_vector<float>();
    EXPECT_EQ(r[1].to_vector<int64_t>(), (std::vector<int64_t>{4, 2, 3, 6, 0, 7, 1, 5}));
    EXPECT_FALSE(std::signbit(s[1])); // 0.0 came before -0.0: equal keys keep their order
    EXPECT_TRUE(std::signbit(s[2]));
    EXPECT_TRUE(std::isnan(s[6]) && std::isnan(s[7]));
    // descending: NaNs first (in their order), then 3.0 (index 0 before 7), ..., -inf last
    EXPECT_EQ(r[2].to_vector<int64_t>(), (std::vector<int64_t>{1, 5, 0, 7, 6, 2, 3, 4}));
}

TEST(SortCpu, SixtyFourBitKeysCompareExactly) {
    // keys 1 apart above 2^53 (equal as doubles) and across the sign
    const int64_t big = int64_t(1) << 60;
    std::vector<int64_t> xv = {big + 3,
                               -big,
                               big + 1,
                               big + 2,
                               std::numeric_limits<int64_t>::min(),
                               std::numeric_limits<int64_t>::max(),
                               big + 1,
                               -1,
                               0};
    Placeholder x({9}, i64, "x");
    Function f = function({x}, {argsort(x)}, {}, on("cpu"));
    EXPECT_EQ(f(Array(xv, {9}))[0].to_vector<int64_t>(),
              (std::vector<int64_t>{4, 1, 7, 8, 2, 6, 3, 0, 5}));
}

TEST(SortCpu, KLargerThanADimOfUnknownSizeIsAnInputError) {
    Placeholder x({2, -1}, f32, "scores");
    Function f = function({x}, {top_k(x, 4).first}, {}, on("cpu"));
    EXPECT_EQ(f(Array(f32, {2, 6}))[0].shape(), (Shape{2, 4}));
    try {
        f(Array(f32, {2, 3}));
        FAIL() << "k = 4 of 3 elements ran";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("k = 4 is more than the 3 elements"),
                  std::string::npos)
            << e.what();
    }
}

// The gradient of a values sort with k (the top-k branch of Note [Sort]'s rule, which no public
// builder makes since top_k's values became a gather): the cotangent goes back to the k
// positions the sort picked, zero elsewhere. Expected from a host stable sort.
TEST(SortCpu, GradientOfAValuesSortWithKPadsWithZeros) {
    const int64_t rows = 3, n = 10, k = 4;
    std::vector<double> xv(static_cast<size_t>(rows * n)), wv(static_cast<size_t>(rows * k));
    for (size_t i = 0; i < xv.size(); ++i)
        xv[i] = double((i * 7) % 6) - 2.5; // ties in every row
    for (size_t i = 0; i < wv.size(); ++i)
        wv[i] = 1.0 + double(i);
    for (const char* backend : {"reference", "cpu"}) {
        Placeholder x({rows, n}, f64, "x");
        Tensor top = detail::make(Op::Sort, {x}, SortAttrs{1, true, k, false});
        ASSERT_EQ(top.shape(), (Shape{rows, k}));
        Tensor w = constant(Array(wv, {rows, k}));
        Tensor g = gradients(sum(top * w), x);
        std::vector<Array> r = function({x}, {top, g}, {}, on(backend))(Array(xv, {rows, n}));
        std::vector<double> got_top = r[0].to_vector<double>(), got_g = r[1].to_vector<double>();
        for (int64_t row = 0; row < rows; ++row) {
            std::vector<int64_t> order(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i)
                order[size_t(i)] = i;
            auto at = [&](int64_t i) { return xv[size_t(row * n + i)]; };
            std::stable_sort(order.begin(), order.end(),
                             [&](int64_t a, int64_t b) { return at(a) > at(b); });
            std::vector<double> want_g(static_cast<size_t>(n), 0.0);
            for (int64_t j = 0; j < k; ++j) {
                EXPECT_EQ(got_top[size_t(row * k + j)], at(order[size_t(j)])) << backend;
                want_g[size_t(order[size_t(j)])] = wv[size_t(row * k + j)];
            }
            for (int64_t i = 0; i < n; ++i)
                EXPECT_EQ(got_g[size_t(row * n + i)], want_g[size_t(i)])
                    << backend << " row " << row << " element " << i;
        }
    }
}
