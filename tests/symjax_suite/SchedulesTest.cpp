// Port of SymJAX's tests/schedules_test.py.
#include "symjax_suite/SuiteUtil.h"

#include <symjax/nn.h>

using namespace sj;

// PiecewiseConstant(0, {4: 1, 8: 2}) driven by a step counter the function increments. SymJAX's
// PiecewiseConstant creates the counter and returns it; sj's schedules are functions of a step
// tensor, so the test makes the counter.
TEST(SymjaxSchedules, Pc) {
    Variable cpt(Array::scalar<int64_t>(0), "cpt", false);
    Tensor a = nn::schedules::piecewise_constant(cpt, {4, 8}, {0, 1, 2});
    Function f = function({}, {a}, Updates{{cpt, cpt + 1.0}});
    for (int i = 0; i < 10; ++i) {
        double value = f()[0].at(0);
        if (i < 4)
            EXPECT_EQ(value, 0.0) << i;
        else if (i < 8)
            EXPECT_EQ(value, 1.0) << i;
        else
            EXPECT_EQ(value, 2.0) << i;
    }
}
