// Port of SymJAX's tests/random_test.py: seeded and unseeded draws across calls and rebuilds.
#include "symjax_suite/SuiteUtil.h"

using namespace sj;
using namespace sj::suite;

namespace {

std::vector<double> call3(const Function& f) {
    std::vector<Array> out = f();
    return {out[0].at(0), out[1].at(0), out[2].at(0)};
}

} // namespace

// A 0-d normal draw called 100 times. (SymJAX's test prints the draws; here they are checked to
// be finite and not all equal.)
TEST(SymjaxRandom, Base) {
    Tensor a = random::normal({});
    Function f = function({}, {a});
    std::vector<double> draws;
    for (int i = 0; i < 100; ++i)
        draws.push_back(f()[0].at(0));
    for (double d : draws)
        EXPECT_TRUE(std::isfinite(d));
    EXPECT_NE(*std::min_element(draws.begin(), draws.end()),
              *std::max_element(draws.begin(), draws.end()));
}

// Two draws with seed 10 agree with each other; an unseeded one differs; every call draws anew;
// a rebuilt graph repeats the seeded draws but not the unseeded ones.
//
// SymJAX draws the seed of an unseeded op from only 256 values, so its `not isclose(result1[1],
// result12[1])` fails by chance once in 256 runs; sj takes the next seed of a 64-bit sequence,
// and these checks hold always.
TEST(SymjaxRandom, Seed) {
    auto build = [] {
        Tensor a = random::normal({}, 0, 1, DType::F32, 10);
        Tensor b = random::normal({});
        Tensor c = random::normal({}, 0, 1, DType::F32, 10);
        return function({}, {a, b, c});
    };
    Function f = build();
    std::vector<double> result1 = call3(f), result2 = call3(f);
    EXPECT_EQ(result1[0], result1[2]);
    EXPECT_NE(result1[0], result1[1]);
    EXPECT_EQ(result2[0], result2[2]);
    EXPECT_NE(result2[0], result1[0]);

    // The same graph built again: seeded draws repeat, unseeded ones do not. SymJAX then calls
    // current_graph().reset() and builds it a third time; sj has no global graph to reset, so the
    // third build is simply another build, checked the same way.
    for (int rebuild = 0; rebuild < 2; ++rebuild) {
        Function g = build();
        std::vector<double> result12 = call3(g), result22 = call3(g);
        EXPECT_EQ(result12[0], result12[2]);
        EXPECT_NE(result12[0], result12[1]);
        EXPECT_EQ(result22[0], result22[2]);
        EXPECT_NE(result22[0], result12[0]);

        EXPECT_TRUE(isclose(result1[0], result12[0]));
        EXPECT_TRUE(isclose(result1[2], result12[2]));
        EXPECT_FALSE(isclose(result1[1], result12[1]));

        EXPECT_TRUE(isclose(result2[0], result22[0]));
        EXPECT_TRUE(isclose(result2[2], result22[2]));
        EXPECT_FALSE(isclose(result2[1], result22[1]));
    }
}
