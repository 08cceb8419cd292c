// Sums of partial results on the cpu target (src/backend/cpu/Sums.h): the partials added in
// order in double, stored in place or at an element's offset in another layout (Note [Weight
// gradients stored in the caller's layout] in src/backend/cpu/Conv.cpp). Expected values: the
// same double sums written out here, element by element.
#include "backend/cpu/Sums.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

struct Partials {
    std::vector<std::vector<float>> data;
    std::vector<float*> ptrs;
    Partials(int count, int64_t n, unsigned seed) : data(size_t(count)) {
        std::mt19937 g(seed);
        // magnitudes 1e-4..1e4: the f32 rounding of a float sum would differ from the double one
        std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
        std::uniform_int_distribution<int> exp10(-4, 4);
        for (auto& d : data) {
            d.resize(size_t(n));
            for (float& v : d)
                v = mant(g) * std::pow(10.0f, float(exp10(g)));
            ptrs.push_back(d.data());
        }
    }
    float expected(int64_t i) const {
        double acc = data[0][size_t(i)];
        for (size_t c = 1; c < data.size(); ++c)
            acc += data[c][size_t(i)];
        return float(acc);
    }
};

} // namespace

TEST(SumsCpu, AddInDoubleAddsThePartialsInOrder) {
    // ragged ranges: vector blocks of 16 and a scalar tail, from an offset begin
    for (int count : {1, 2, 4, 7})
        for (int64_t n : {int64_t(5), int64_t(37), int64_t(256), int64_t(1000)}) {
            Partials p(count, n, unsigned(count * 1000 + n));
            std::vector<float> sum(size_t(n), -1.0f);
            const int64_t begin = n / 3;
            sj::cpu::add_in_double(p.ptrs.data(), count, begin, n, sum.data());
            for (int64_t i = 0; i < n; ++i)
                ASSERT_EQ(sum[size_t(i)], i < begin ? -1.0f : p.expected(i))
                    << "count " << count << " n " << n << " at " << i;
        }
}

TEST(SumsCpu, AddInDoubleToStoresAtEachElementsOffsetAndSkipsPadding) {
    // a blocked layout with padding, as a conv weight gradient's: element i of the partials goes
    // to offset to[i] of the result, or nowhere when to[i] < 0; the range split in two calls as
    // two tasks split it
    for (int count : {1, 3, 4})
        for (int64_t n : {int64_t(16), int64_t(45), int64_t(300)}) {
            std::mt19937 g(unsigned(count * 7 + n));
            // every third element is padding; the others land on a shuffled [0, kept)
            std::vector<int32_t> to(size_t(n), -1);
            std::vector<int32_t> places;
            for (int64_t i = 0; i < n; ++i)
                if (i % 3 != 2)
                    places.push_back(int32_t(places.size()));
            std::shuffle(places.begin(), places.end(), g);
            for (int64_t i = 0, k = 0; i < n; ++i)
                if (i % 3 != 2)
                    to[size_t(i)] = places[size_t(k++)];
            Partials p(count, n, unsigned(count * 100 + n));
            // a guard element on each side of the result: padding writes nowhere (a store at
            // offset -1 would land on the first)
            std::vector<float> buf(places.size() + 2, -2.0f);
            float* sum = buf.data() + 1;
            sj::cpu::add_in_double_to(p.ptrs.data(), count, 0, n / 2, to.data(), sum);
            sj::cpu::add_in_double_to(p.ptrs.data(), count, n / 2, n, to.data(), sum);
            for (int64_t i = 0; i < n; ++i)
                if (to[size_t(i)] >= 0)
                    ASSERT_EQ(sum[to[size_t(i)]], p.expected(i))
                        << "count " << count << " n " << n << " element " << i;
            EXPECT_EQ(buf.front(), -2.0f) << "count " << count << " n " << n;
            EXPECT_EQ(buf.back(), -2.0f) << "count " << count << " n " << n;
        }
}
