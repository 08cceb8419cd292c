// Error tests: each user mistake throws the right sj::Error subclass with a helpful message.
#include "TestUtil.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include <string>
#include <typeinfo>
#include <vector>

using namespace sj;
using ::testing::AllOf;
using ::testing::HasSubstr;
using sj::test::message_of;

namespace {

Array f32v(std::vector<float> v) { return Array(v); }

} // namespace

// ---- graph building -------------------------------------------------------------------------

TEST(Errors, ShapeMismatchNamesOpShapesAndTensors) {
    Placeholder x({4, 3}, f32, "x");
    Variable w(Array(f32, {4, 5}), "W");
    std::string msg = message_of<ShapeError>([&] { (void)(x + w); });
    EXPECT_THAT(msg, AllOf(HasSubstr("add(x, W)"), HasSubstr("[4, 3]"), HasSubstr("[4, 5]")));
    msg = message_of<ShapeError>([&] { (void)(x * w); });
    EXPECT_THAT(msg, AllOf(HasSubstr("mul(x, W)"), HasSubstr("[4, 3]"), HasSubstr("[4, 5]")));
}

TEST(Errors, MatmulInnerDimMismatch) {
    Placeholder x({-1, 3}, f32, "x");
    Variable w(Array(f32, {4, 5}), "W");
    std::string msg = message_of<ShapeError>([&] { (void)matmul(x, w); });
    EXPECT_THAT(msg, AllOf(HasSubstr("matmul(x, W)"), HasSubstr("[-1, 3]"), HasSubstr("[4, 5]")));
}

TEST(Errors, DTypeMismatch) {
    Placeholder i({3}, i32, "ints");
    std::string msg = message_of<TypeError>([&] { (void)exp(i); });
    EXPECT_THAT(msg, AllOf(HasSubstr("exp(ints)"), HasSubstr("i32")));

    Placeholder f({3}, f32, "floats");
    msg = message_of<TypeError>([&] { (void)logical_and(f, f); });
    EXPECT_THAT(msg, AllOf(HasSubstr("logical_and"), HasSubstr("floats"), HasSubstr("bool")));

    msg = message_of<TypeError>([&] { (void)where(f, f, f); });
    EXPECT_THAT(msg, AllOf(HasSubstr("where"), HasSubstr("bool"), HasSubstr("f32")));

    msg = message_of<TypeError>([&] { (void)gather(f, f); });
    EXPECT_THAT(msg, AllOf(HasSubstr("gather"), HasSubstr("floats"), HasSubstr("f32")));

    Placeholder m({3, 3}, i32, "int_matrix");
    msg = message_of<TypeError>([&] { (void)cholesky(m); });
    EXPECT_THAT(msg, AllOf(HasSubstr("cholesky"), HasSubstr("int_matrix"), HasSubstr("i32")));
}

TEST(Errors, ReshapeToAnIncompatibleSize) {
    Placeholder x({2, 3}, f32, "resh_x");
    std::string msg = message_of<ShapeError>([&] { (void)reshape(x, {4, 2}); });
    EXPECT_THAT(msg, AllOf(HasSubstr("reshape"), HasSubstr("resh_x"), HasSubstr("[2, 3]"),
                           HasSubstr("[4, 2]")));
    msg = message_of<ShapeError>([&] { (void)reshape(x, {-1, 4}); });
    EXPECT_THAT(msg, AllOf(HasSubstr("reshape"), HasSubstr("[-1, 4]")));
    EXPECT_THROW((void)reshape(x, {-1, -1}), ShapeError);
}

TEST(Errors, BadAxis) {
    Placeholder x({2, 3}, f32, "axis_x");
    std::string msg = message_of<ShapeError>([&] { (void)sum(x, {2}); });
    EXPECT_THAT(msg, AllOf(HasSubstr("axis"), HasSubstr("2")));
    msg = message_of<ShapeError>([&] { (void)argmax(x, -3); });
    EXPECT_THAT(msg, HasSubstr("axis -3"));
    msg = message_of<ShapeError>([&] { (void)softmax(x, 5); });
    EXPECT_THAT(msg, HasSubstr("axis 5"));
    EXPECT_THROW((void)concat({x, x}, 2), ShapeError);
    EXPECT_THROW((void)x.dim(2), ShapeError);
}

TEST(Errors, SubscriptOutOfRange) {
    Placeholder x({2, 3}, f32, "sub_x");
    std::string msg = message_of<ShapeError>([&] { (void)x[{0, 3}]; });
    EXPECT_THAT(msg, AllOf(HasSubstr("sub_x"), HasSubstr("index 3")));
    EXPECT_THROW((void)x[(std::vector<Index>{0, 0, 0})], ShapeError);
}

// ---- autodiff ---------------------------------------------------------------------------------

TEST(Errors, GradientOfANonScalarCost) {
    Placeholder x({3}, f32, "ns_x");
    std::string msg = message_of<ShapeError>([&] { (void)gradients(x * 2.0, x); });
    EXPECT_THAT(msg, AllOf(HasSubstr("scalar"), HasSubstr("f32[3]")));
}

TEST(Errors, GradientWithRespectToAnIntegerTensor) {
    Placeholder i({3}, i32, "int_in");
    Tensor cost = sum(cast(i, f32) * 2.0);
    std::string msg = message_of<TypeError>([&] { (void)gradients(cost, i); });
    EXPECT_THAT(msg, AllOf(HasSubstr("int_in"), HasSubstr("i32")));
    Placeholder c({}, i64, "int_cost");
    EXPECT_THROW((void)gradients(c, c), TypeError);
}

// ---- functions --------------------------------------------------------------------------------

TEST(Errors, OutputDependsOnAPlaceholderNotAmongInputs) {
    Placeholder x({3}, f32, "listed_x");
    Placeholder y({3}, f32, "forgotten_y");
    std::string msg = message_of<InputError>([&] { (void)function({x}, {x + y}); });
    EXPECT_THAT(msg, AllOf(HasSubstr("forgotten_y"), HasSubstr("input")));
    // in an update too
    Variable w(Array(f32, {3}), "dep_w");
    msg = message_of<InputError>([&] { (void)function({x}, {}, {{w, w + y}}); });
    EXPECT_THAT(msg, HasSubstr("forgotten_y"));
}

// An input that is not a placeholder is overridden by its argument (docs/functions.md); the
// placeholders above it are then needed only where another output still reads them.
TEST(Errors, FunctionInputThatIsNotAPlaceholder) {
    Placeholder x({3}, f32, "np_x");
    Tensor h = x * 2.0;
    EXPECT_NO_THROW((void)function({h}, {h}));
    std::string msg = message_of<InputError>([&] { (void)function({h}, {h + x}); });
    EXPECT_THAT(msg, HasSubstr("np_x"));
    EXPECT_THROW((void)function({x, x}, {x}), Error);
    EXPECT_THROW((void)function({h, h}, {h}), Error);
}

// A wrong call is rejected before anything runs, naming the placeholder; no variable changes.
TEST(Errors, WrongInputsNamePlaceholderAndChangeNoVariable) {
    Placeholder x({2}, f32, "xin");
    Placeholder k({}, i32, "kin");
    Variable w(f32v({1, 2}), "wrong_in_w");
    Variable steps(Array::scalar<int64_t>(0), "wrong_in_steps", false);
    Function f = function({x, k}, {sum(x)}, {{w, w + x}, {steps, steps + 1.0}});
    auto unchanged = [&] {
        EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{1, 2}));
        EXPECT_EQ(steps.value().item<int64_t>(), 0);
        EXPECT_EQ(f.calls(), 0u);
    };

    std::string msg = message_of<InputError>([&] { f(f32v({1, 1})); }); // count
    EXPECT_THAT(msg, AllOf(HasSubstr("1"), HasSubstr("2"), HasSubstr("xin"), HasSubstr("kin")));
    unchanged();

    msg = message_of<InputError>([&] { f(Array(std::vector<double>{1, 1}), 3); }); // dtype
    EXPECT_THAT(msg, AllOf(HasSubstr("xin"), HasSubstr("f32"), HasSubstr("f64")));
    unchanged();

    msg = message_of<InputError>([&] { f(f32v({1, 1, 1}), 3); }); // shape
    EXPECT_THAT(msg, AllOf(HasSubstr("xin"), HasSubstr("[2]"), HasSubstr("[3]")));
    unchanged();

    msg = message_of<InputError>([&] { f(f32v({1, 1}), Array(std::vector<int32_t>{3})); });
    EXPECT_THAT(msg, AllOf(HasSubstr("kin"), HasSubstr("[]"), HasSubstr("[1]")));
    unchanged();

    msg = message_of<InputError>([&] { f(1.0, 3); }); // a number for a tensor input
    EXPECT_THAT(msg, HasSubstr("xin"));
    unchanged();

    msg = message_of<InputError>([&] { f(f32v({1, 1}), Array()); }); // undefined array
    EXPECT_THAT(msg, HasSubstr("kin"));
    unchanged();

    f(f32v({1, 1}), 3); // a good call still works afterwards
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{2, 3}));
    EXPECT_EQ(steps.value().item<int64_t>(), 1);
}

// A failure inside the call (after validation) leaves every variable as it was.
TEST(Errors, RuntimeFailureChangesNoVariable) {
    Placeholder idx({2}, i64, "gather_idx");
    Variable table(f32v({10, 20, 30}), "gather_table");
    Variable count(Array::scalar<int64_t>(0), "gather_count", false);
    Tensor picked = gather(table, idx);
    Function f = function({idx}, {picked}, {{table, table * 2.0}, {count, count + 1.0}});
    std::string msg = message_of<InputError>([&] { f(Array(std::vector<int64_t>{0, 7})); });
    EXPECT_THAT(msg, AllOf(HasSubstr("gather"), HasSubstr("7"), HasSubstr("[0, 3)")));
    EXPECT_EQ(table.value().to_vector<float>(), (std::vector<float>{10, 20, 30}));
    EXPECT_EQ(count.value().item<int64_t>(), 0);

    // the failing node feeds an update rather than an output
    Function g = function({idx}, {}, {{count, count + 1.0}, {table, table + sum(picked)}});
    EXPECT_THROW(g(Array(std::vector<int64_t>{-1, 0})), InputError);
    EXPECT_EQ(table.value().to_vector<float>(), (std::vector<float>{10, 20, 30}));
    EXPECT_EQ(count.value().item<int64_t>(), 0);

    std::vector<Array> out = f(Array(std::vector<int64_t>{2, 0}));
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{30, 10}));
    EXPECT_EQ(table.value().to_vector<float>(), (std::vector<float>{20, 40, 60}));
}

// Two -1 dims that the graph assumes equal, bound to different sizes: an error about the values
// passed (InputError, as for any bad input), naming the op and the shapes; no variable changes.
TEST(Errors, AnyDimBoundInconsistently) {
    Placeholder x({-1, 3}, f32, "bx");
    Placeholder y({-1, 3}, f32, "by");
    Variable acc(Array::scalar(0.0f), "bound_acc");
    Function f = function({x, y}, {x + y}, {{acc, acc + sum(x + y)}});
    std::string msg = message_of<InputError>(
        [&] { f(Array(f32, {2, 3}), Array(f32, {4, 3})); });
    EXPECT_THAT(msg, AllOf(HasSubstr("add"), HasSubstr("bx"), HasSubstr("by"),
                           HasSubstr("[2, 3]"), HasSubstr("[4, 3]")));
    EXPECT_EQ(acc.value().item<float>(), 0.0f);
    // a -1 dim bound to 1 would broadcast silently; it is refused too
    EXPECT_THROW(f(Array(f32, {1, 3}), Array(f32, {4, 3})), InputError);
    EXPECT_EQ(acc.value().item<float>(), 0.0f);
    f(Array::full(f32, {4, 3}, 1.0), Array::full(f32, {4, 3}, 2.0));
    EXPECT_EQ(acc.value().item<float>(), 36.0f);
}

// A -1 dim bound to 1 that lands on a target dim of unknown size binds it (expand_dims and stack
// of a batch of one), and one that would broadcast to a known size is still refused.
TEST(Errors, UnknownDimOfOneBindsAnUnknownTargetDim) {
    Placeholder x({-1, 3}, f32, "one_x");
    Function f = function({x}, {expand_dims(x, 0), stack({x, x}, 1)});
    std::vector<Array> r = f(Array::full(f32, {1, 3}, 2.0));
    EXPECT_EQ(r[0].shape(), (Shape{1, 1, 3}));
    EXPECT_EQ(r[1].shape(), (Shape{1, 2, 3}));
    EXPECT_EQ(r[1].to_vector<float>(), std::vector<float>(6, 2.0f));
    Function g = function({x}, {broadcast_to(x, {4, 3})});
    std::string msg = message_of<InputError>([&] { g(Array(f32, {1, 3})); });
    EXPECT_THAT(msg, AllOf(HasSubstr("one_x"), HasSubstr("declare it as 1")));
    EXPECT_EQ(g(Array(f32, {4, 3}))[0].shape(), (Shape{4, 3}));
}

TEST(Errors, CallOfAnEmptyFunction) {
    Function f;
    EXPECT_THROW(f(), Error);
}

// ---- updates ------------------------------------------------------------------------------------

TEST(Errors, UpdatesWithWrongDTypeOrShape) {
    Variable w(f32v({1, 2, 3}), "upd_err_w");
    Placeholder d({3}, f64, "upd_f64");
    Placeholder s({4}, f32, "upd_f32_4");
    std::string msg = message_of<TypeError>([&] { Updates u{{w, d}}; });
    EXPECT_THAT(msg, AllOf(HasSubstr("upd_err_w"), HasSubstr("f64"), HasSubstr("f32")));
    msg = message_of<ShapeError>([&] { Updates u{{w, s}}; });
    EXPECT_THAT(msg, AllOf(HasSubstr("upd_err_w"), HasSubstr("[4]"), HasSubstr("[3]")));
    msg = message_of<ShapeError>([&] { Updates().add(w, sum(w)); });
    EXPECT_THAT(msg, AllOf(HasSubstr("upd_err_w"), HasSubstr("[3]")));
}

// A variable updated twice, in one set or across two merged sets, is refused; get() finds each
// variable's own value among many.
TEST(Errors, VariableUpdatedTwice) {
    Variable w(f32v({1, 2, 3}), "upd_twice_w");
    Variable v(f32v({4, 5, 6}), "upd_twice_v");
    std::string msg = message_of<Error>([&] { Updates u{{w, w + 1.0}, {v, v}, {w, w * 2.0}}; });
    EXPECT_THAT(msg, AllOf(HasSubstr("upd_twice_w"), HasSubstr("updated twice")));
    Updates a{{w, w + 1.0}};
    Updates b{{v, v * 3.0}};
    msg = message_of<Error>([&] { Updates c = a + Updates{{w, w}}; });
    EXPECT_THAT(msg, HasSubstr("upd_twice_w"));
    Updates both = a + b;
    ASSERT_EQ(both.size(), 2u);
    EXPECT_TRUE(both.get(w).same(a.items()[0].second));
    EXPECT_TRUE(both.get(v).same(b.items()[0].second));
    EXPECT_FALSE((Updates{{w, w}}.get(v).defined()));

    std::vector<Variable> many;
    Updates u;
    for (int i = 0; i < 500; ++i) {
        many.emplace_back(Array::scalar(float(i)), "upd_many_" + std::to_string(i));
        u.add(many.back(), many.back() + float(i));
    }
    for (int i : {0, 250, 499}) {
        Function f = function({}, {u.get(many[size_t(i)])});
        EXPECT_EQ(f()[0].item<float>(), 2.0f * float(i)) << i;
    }
    msg = message_of<Error>([&] { u.add(many[123], many[123]); });
    EXPECT_THAT(msg, HasSubstr("upd_many_123"));
}

// A -1 dim in an update value is accepted at build time; a call that binds it to the wrong size
// is refused and changes nothing.
TEST(Errors, UpdateValueOfWrongRuntimeShape) {
    Variable w(f32v({1, 2, 3}), "upd_rt_w");
    Variable other(Array::scalar(5.0f), "upd_rt_other");
    Placeholder x({-1}, f32, "upd_rt_x");
    Function f = function({x}, {}, {{other, other + 1.0}, {w, x}});
    std::string msg = message_of<InputError>([&] { f(f32v({9, 9})); });
    EXPECT_THAT(msg, AllOf(HasSubstr("upd_rt_w"), HasSubstr("[2]"), HasSubstr("[3]")));
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(other.value().item<float>(), 5.0f);
    f(f32v({7, 8, 9}));
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{7, 8, 9}));
    EXPECT_EQ(other.value().item<float>(), 6.0f);
}

// ---- eval, clone, variables, arrays -----------------------------------------------------------

TEST(Errors, EvalWithAnUnboundPlaceholder) {
    Placeholder x({2}, f32, "unbound_x");
    Tensor y = x * 3.0;
    std::string msg = message_of<InputError>([&] { (void)y.eval(); });
    EXPECT_THAT(msg, AllOf(HasSubstr("unbound_x"), HasSubstr("f32[2]"), HasSubstr("givens")));
}

// clone() types the rebuilt graph again (docs/graph.md): a replacement of another dtype or shape
// is fine where every op accepts it, and an error naming the op and the replacement where not.
TEST(Errors, CloneWithIncompatibleReplacement) {
    Placeholder x({2}, f32, "cl_x");
    Placeholder wrong_type({2}, i32, "cl_i32");
    Placeholder wrong_shape({3}, f32, "cl_3");
    Variable w(f32v({1, 2}), "cl_w");
    EXPECT_EQ(clone(x * 2.0, {{x, wrong_shape}}).shape(), (Shape{3})); // well-typed
    std::string msg = message_of<TypeError>([&] { (void)clone(log(x), {{x, wrong_type}}); });
    EXPECT_THAT(msg, AllOf(HasSubstr("cl_x"), HasSubstr("cl_i32"), HasSubstr("log")));
    msg = message_of<ShapeError>([&] { (void)clone(x * w, {{x, wrong_shape}}); });
    EXPECT_THAT(msg, AllOf(HasSubstr("cl_x"), HasSubstr("cl_3"), HasSubstr("mul")));
}

TEST(Errors, VariableAssignMismatch) {
    Variable w(f32v({1, 2}), "assign_w");
    std::string msg = message_of<ShapeError>([&] { w.assign(f32v({1, 2, 3})); });
    EXPECT_THAT(msg, AllOf(HasSubstr("assign_w"), HasSubstr("[3]"), HasSubstr("[2]")));
    msg = message_of<TypeError>([&] { w.assign(Array(std::vector<int32_t>{1, 2})); });
    EXPECT_THAT(msg, AllOf(HasSubstr("assign_w"), HasSubstr("i32"), HasSubstr("allow_cast")));
    EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{1, 2}));
    EXPECT_THROW(Variable(f32v({1}), ""), Error);
    EXPECT_THROW(Placeholder({2, -3}, f32, "neg_dim"), ShapeError);
}

TEST(Errors, ArrayItemOnANonScalar) {
    Array a = f32v({1, 2, 3});
    std::string msg = message_of<InputError>([&] { (void)a.item<float>(); });
    EXPECT_THAT(msg, AllOf(HasSubstr("item"), HasSubstr("f32[3]"), HasSubstr("3 elements")));
    EXPECT_THROW((void)a.data<double>(), TypeError);
    EXPECT_THROW((void)a.at(3), InputError);
    EXPECT_THROW(Array(std::vector<float>{1, 2, 3}, {2, 2}), InputError);
    EXPECT_THROW(Array(f32, {2, -1}), InputError);
}

TEST(Errors, RandomShapeMustBeKnown) {
    std::string msg = message_of<ShapeError>([&] { (void)random::normal({-1, 3}); });
    EXPECT_THAT(msg, AllOf(HasSubstr("normal"), HasSubstr("_like")));
    EXPECT_THROW((void)random::uniform({3}, 0, 1, i32), TypeError);
}

// ---- convolution and pooling ----------------------------------------------------------------

TEST(Errors, ConvChannelsNameOpShapesAndTensors) {
    Placeholder x({-1, 3, 32, 32}, f32, "images");
    Variable w(Array(f32, {16, 4, 3, 3}), "kernel");
    std::string msg = message_of<ShapeError>([&] { (void)conv2d(x, w); });
    EXPECT_THAT(msg, AllOf(HasSubstr("conv(images, kernel)"), HasSubstr("[-1, 3, 32, 32]"),
                           HasSubstr("[16, 4, 3, 3]"), HasSubstr("3 channels")));
    // groups must split the filters' output channels too
    Placeholder x4({-1, 4, 8, 8}, f32, "x4");
    Variable dw(Array(f32, {6, 1, 3, 3}), "dw");
    msg = message_of<ShapeError>([&] { (void)conv2d(x4, dw, {}, 1, {}, 4); });
    EXPECT_THAT(msg, AllOf(HasSubstr("conv(x4, dw)"), HasSubstr("6 output channels"),
                           HasSubstr("4 groups")));
}

TEST(Errors, ConvWindowLargerThanThePaddedInput) {
    Placeholder x({1, 1, 4, 4}, f32, "small");
    Variable w(Array(f32, {1, 1, 5, 3}), "big");
    std::string msg = message_of<ShapeError>([&] { (void)conv2d(x, w); });
    EXPECT_THAT(msg, AllOf(HasSubstr("conv(small, big)"), HasSubstr("spatial dim 0"),
                           HasSubstr("larger than the padded input")));
    EXPECT_NO_THROW((void)conv2d(x, w, {}, 1)); // padding makes it fit
    msg = message_of<ShapeError>([&] { (void)max_pool2d(x, {5, 2}); });
    EXPECT_THAT(msg, AllOf(HasSubstr("pool(small)"), HasSubstr("does not fit")));
}

TEST(Errors, ConvAndPoolArguments) {
    Placeholder x({2, 3, 8, 8}, f32, "x");
    Variable w(Array(f32, {4, 3, 3, 3}), "w");
    std::string msg = message_of<ShapeError>([&] { (void)conv2d(x[0], w); });
    EXPECT_THAT(msg,
                AllOf(HasSubstr("conv2d"), HasSubstr("[N, C, H, W]"), HasSubstr("f32[3, 8, 8]")));
    msg = message_of<ShapeError>([&] { (void)conv2d(x, w, {}, {{1, 1}, {1, 1}, {1, 1}}); });
    EXPECT_THAT(msg,
                AllOf(HasSubstr("conv(x, w)"), HasSubstr("3 (lo, hi) pairs for 2 spatial dims")));
    msg = message_of<ShapeError>([&] { (void)conv2d(x, w, {1, 2, 3}); });
    EXPECT_THAT(msg, AllOf(HasSubstr("strides [1, 2, 3]"), HasSubstr("one value per spatial dim")));
    msg = message_of<ShapeError>([&] { (void)conv2d(x, w, {}, -1); });
    EXPECT_THAT(msg, HasSubstr("negative pad"));
    msg = message_of<ShapeError>([&] { (void)conv2d(x, w, {0}); });
    EXPECT_THAT(msg, HasSubstr("must be >= 1"));
    msg = message_of<Error>([&] { (void)conv2d(x, w, {}, "FULL"); });
    EXPECT_THAT(msg, AllOf(HasSubstr("unknown mode"), HasSubstr("FULL")));
    Placeholder dyn({-1, 3, -1, -1}, f32, "dyn");
    msg = message_of<ShapeError>([&] { (void)conv2d(dyn, w, {}, "SAME"); });
    EXPECT_THAT(msg, AllOf(HasSubstr("conv(dyn, w)"), HasSubstr("SAME padding needs")));
    Placeholder ints({2, 3, 8, 8}, i32, "ints");
    msg = message_of<TypeError>([&] { (void)max_pool2d(ints, {2, 2}); });
    EXPECT_THAT(msg, AllOf(HasSubstr("ints"), HasSubstr("float tensor"), HasSubstr("i32")));
    msg = message_of<ShapeError>([&] { (void)max_pool2d(x, {2, 2}, {}, 2); });
    EXPECT_THAT(msg, HasSubstr("smaller than the window"));
    msg = message_of<ShapeError>([&] { (void)conv_transpose(x, w, {2}, 1, {}, 1, {2}); });
    EXPECT_THAT(msg, AllOf(HasSubstr("conv_transpose(x, w)"), HasSubstr("output_padding")));
}

TEST(Errors, ConvShapeClashAtCallTimeIsAnInputError) {
    Placeholder x({-1, -1, -1, -1}, f32, "frames");
    Variable w(Array(f32, {4, 3, 5, 5}), "filters");
    Function f = function({x}, {conv2d(x, w)});
    std::string msg = message_of<InputError>([&] { f(Array(f32, {1, 3, 3, 8})); });
    EXPECT_THAT(msg, AllOf(HasSubstr("frames"), HasSubstr("filters"),
                           HasSubstr("larger than the padded input")));
    msg = message_of<InputError>([&] { f(Array(f32, {1, 2, 8, 8})); });
    EXPECT_THAT(msg, AllOf(HasSubstr("[1, 2, 8, 8]"), HasSubstr("2 channels")));
    EXPECT_EQ(f(Array(f32, {2, 3, 6, 7}))[0].shape(), (Shape{2, 4, 2, 3}));
}
