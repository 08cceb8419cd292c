// Port of SymJAX's tests/function_test.py.
#include "symjax_suite/SuiteUtil.h"

using namespace sj;

// ones(10).sum() evaluated directly twice, then through a function 100 times. (SymJAX's test
// only runs these; the values are checked here too.)
TEST(SymjaxFunction, Base) {
    Tensor a = ones({10});
    Tensor b = sum(a);
    EXPECT_EQ(b.eval().at(0), 10.0);
    EXPECT_EQ(b.eval().at(0), 10.0);
    Function f = function({}, {b});
    for (int i = 0; i < 100; ++i)
        ASSERT_EQ(f()[0].at(0), 10.0);
}
