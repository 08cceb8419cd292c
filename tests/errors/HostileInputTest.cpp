// Hostile input: sizes that overflow int64, C++ numbers that do not fit an integer input, class
// labels out of range, subscripts out of range once -1 dims are bound, and the NaN guard on every
// backend. Each error says what was expected, what was given and where; a call that throws
// changes no variable.
#include "TestUtil.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace sj;
using sj::test::message_of;
using sj::test::on;
using ::testing::AllOf;
using ::testing::HasSubstr;
namespace L = sj::nn::losses;

namespace {
const char* const kBackends[] = {"reference", "cpu"};
constexpr int64_t kTwo32 = int64_t(1) << 32;
} // namespace

// ---- sizes that overflow int64 --------------------------------------------------------------

TEST(HostileInput, ShapeProductsAreChecked) {
    EXPECT_EQ(numel({0, int64_t(1) << 62, int64_t(1) << 62}), 0); // a 0 dim: no elements
    EXPECT_EQ(numel({-1, 4}), -1);
    EXPECT_EQ(numel({int64_t(1) << 31, int64_t(1) << 31}), int64_t(1) << 62);
    EXPECT_THROW(numel({kTwo32, int64_t(1) << 31}), ShapeError); // 2^63
    EXPECT_THROW(numel({-1, kTwo32, kTwo32}), ShapeError);       // the known dims alone
    EXPECT_EQ(byte_size({int64_t(1) << 61}, 2), int64_t(1) << 62);
    EXPECT_EQ(byte_size({-1, 3}, 8), -1);
    EXPECT_THROW(byte_size({int64_t(1) << 61}, 4), ShapeError);
}

// Array::full(f32, {2^62}) used to segfault (the byte size wrapped to 0).
TEST(HostileInput, ArrayTooLargeIsAShapeError) {
    std::string m = message_of<ShapeError>([] { Array::full(f32, {int64_t(1) << 62}, 0.0); });
    EXPECT_THAT(m, AllOf(HasSubstr("f32"), HasSubstr("[4611686018427387904]"), HasSubstr("bytes")));
    m = message_of<ShapeError>([] { Array(f64, {kTwo32, kTwo32}); });
    EXPECT_THAT(m, HasSubstr("[4294967296, 4294967296]"));
}

// A placeholder f32[2^32, 2^32] used to be accepted with size 0 (sum(a + 1) returned 0).
TEST(HostileInput, PlaceholderTooLargeNamesItself) {
    std::string m = message_of<ShapeError>([] { Placeholder a({kTwo32, kTwo32}, f32, "a"); });
    EXPECT_THAT(m,
                AllOf(HasSubstr("'a'"), HasSubstr("f32"), HasSubstr("[4294967296, 4294967296]")));
    // the known dims alone are too many bytes: f64[-1, 2^61]
    m = message_of<ShapeError>([] { Placeholder b({-1, int64_t(1) << 61}, f64, "b"); });
    EXPECT_THAT(
        m, AllOf(HasSubstr("'b'"), HasSubstr("[-1, 2305843009213693952]"), HasSubstr("bytes")));
}

TEST(HostileInput, OpResultTooLargeNamesTheOp) {
    Placeholder x({kTwo32, 1}, f32, "big_x"); // 16 GiB: a valid type
    Placeholder y({1, kTwo32}, f32, "big_y");
    std::string m = message_of<ShapeError>([&] { (void)(x + y); });
    EXPECT_THAT(m, AllOf(HasSubstr("add(big_x, big_y)"), HasSubstr("[4294967296, 4294967296]")));
}

// ---- C++ numbers for integer inputs ---------------------------------------------------------

// f(1e30) for an i32 input used to give 2147483647 and f(NaN) 0.
TEST(HostileInput, NumbersThatDoNotFitAnIntegerInput) {
    constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
    constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
    Placeholder n32({}, i32, "n32"), n64({}, i64, "n64"), nu8({}, u8, "nu8"), nb({}, boolean, "nb");
    Placeholder nf({}, f32, "nf");
    for (const char* b : kBackends) {
        Function f32_ = function({n32}, {n32}, {}, on(b));
        EXPECT_EQ(f32_(-2147483648.0)[0].item<int32_t>(), kMin32) << b;
        EXPECT_EQ(f32_(7)[0].item<int32_t>(), 7) << b;
        auto in32 = [&](auto v) { return message_of<InputError>([&] { f32_(v); }); };
        EXPECT_THAT(in32(1e30), AllOf(HasSubstr("'n32'"), HasSubstr("1e+30"), HasSubstr("i32")));
        EXPECT_THAT(in32(2147483648.0),
                    HasSubstr("out of the range of i32 [-2147483648, 2147483647]"));
        EXPECT_THAT(in32(std::nan("")), AllOf(HasSubstr("'n32'"), HasSubstr("nan")));
        EXPECT_THAT(in32(-INFINITY), HasSubstr("-inf"));
        EXPECT_THAT(in32(2.5), HasSubstr("2.5 is not an integer"));
        EXPECT_THAT(in32(kTwo32), HasSubstr("4294967296 is out of the range of i32"));

        Function f64_ = function({n64}, {n64}, {}, on(b));
        EXPECT_EQ(f64_(kMax64)[0].item<int64_t>(), kMax64) << b; // exact: not through a double
        EXPECT_EQ(f64_(-9223372036854775808.0)[0].item<int64_t>(),
                  std::numeric_limits<int64_t>::min());
        EXPECT_THAT(message_of<InputError>([&] { f64_(9223372036854775808.0); }),
                    AllOf(HasSubstr("'n64'"), HasSubstr("out of the range of i64")));
        EXPECT_THAT(message_of<InputError>([&] { f64_(std::numeric_limits<uint64_t>::max()); }),
                    HasSubstr("out of the range of i64"));

        Function fu8 = function({nu8}, {nu8}, {}, on(b));
        EXPECT_EQ(fu8(255)[0].item<int>(), 255) << b;
        EXPECT_THAT(message_of<InputError>([&] { fu8(-1); }),
                    AllOf(HasSubstr("'nu8'"), HasSubstr("-1 is out of the range of u8 [0, 255]")));
        EXPECT_THAT(message_of<InputError>([&] { fu8(256.0); }),
                    HasSubstr("256 is out of the range"));

        Function fb = function({nb}, {nb}, {}, on(b));
        EXPECT_EQ(fb(true)[0].item<int>(), 1) << b;
        EXPECT_EQ(fb(0)[0].item<int>(), 0) << b;
        EXPECT_THAT(message_of<InputError>([&] { fb(2); }),
                    AllOf(HasSubstr("'nb'"), HasSubstr("a bool input takes"), HasSubstr("got 2")));
        EXPECT_THROW(fb(std::nan("")), InputError);

        // float inputs take any number, as C++ converts it
        Function ff = function({nf}, {nf}, {}, on(b));
        EXPECT_EQ(ff(1e30)[0].item<float>(), 1e30f) << b;
        EXPECT_TRUE(std::isnan(ff(std::nan(""))[0].item<float>())) << b;
    }
}

// ---- class labels out of range --------------------------------------------------------------

// Out-of-range labels used to give loss 0 and zero gradient silently. Now the call throws,
// naming the label and its position, and no variable is updated (also when only the update
// reads the labels).
TEST(HostileInput, CrossEntropyLabelOutOfRange) {
    for (const char* b : kBackends) {
        Placeholder y({-1}, i32, "labels"), x({-1, 2}, f32, "feats");
        Array w0(std::vector<float>{0.5f, -0.25f, 1.0f, 0.75f, 0.1f, -0.3f}, {2, 3});
        Variable w(w0, std::string("ce_w_") + b);
        Tensor loss = mean(L::sparse_softmax_crossentropy_logits(y, matmul(x, w)));
        Updates upd{{w, w - 0.5 * gradients(loss, {w})[0]}};
        Function step = function({y, x}, {loss}, upd, on(b));
        Function step_only = function({y, x}, {}, upd, on(b));
        Array xs(std::vector<float>{1, 2, -1, 0.5f}, {2, 2});
        for (const Function& f : {step, step_only}) {
            std::string m = message_of<InputError>([&] {
                f(Array(std::vector<int32_t>{1, 3}), xs);
            });
            EXPECT_THAT(m, AllOf(HasSubstr("sparse_softmax_crossentropy_logits"),
                                 HasSubstr("label 3 at position [1] of labels i32[2]"),
                                 HasSubstr("out of range [0, 3)")))
                << b;
            EXPECT_TRUE(w.value().equals(w0)) << b << ": a call that threw changed a variable";
            m = message_of<InputError>([&] { f(Array(std::vector<int32_t>{-1, 0}), xs); });
            EXPECT_THAT(m, HasSubstr("label -1 at position [0]")) << b;
            EXPECT_TRUE(w.value().equals(w0)) << b;
        }
        step(Array(std::vector<int32_t>{1, 2}), xs); // valid labels: the update happens
        EXPECT_FALSE(w.value().equals(w0)) << b;

        // with ignore_index, that value passes and any other out-of-range label still throws
        Tensor li = L::sparse_softmax_crossentropy_logits(y, matmul(x, w), -1);
        Function fi = function({y, x}, {li}, {}, on(b));
        EXPECT_EQ(fi(Array(std::vector<int32_t>{-1, 0}), xs)[0].to_vector<float>()[0], 0.0f) << b;
        EXPECT_THAT(
            message_of<InputError>([&] {
                fi(Array(std::vector<int32_t>{-2, 0}), xs);
            }),
            AllOf(HasSubstr("label -2 at position [0]"), HasSubstr("is not the ignore_index -1")))
            << b;
    }
}

// ---- subscripts on dims bound at call time --------------------------------------------------

// x[5] on a -1 dim used to fail with an internal reshape error when the dim was <= 5.
TEST(HostileInput, SubscriptOutOfRangeOnAnUnknownDim) {
    Placeholder x({-1, 3}, f32, "rows");
    Placeholder x2({2, -1}, f32, "cols");
    for (const char* b : kBackends) {
        Function f = function({x}, {x[5]}, {}, on(b));
        Array six(std::vector<float>(18, 1.0f), {6, 3});
        EXPECT_EQ(f(six)[0].shape(), (Shape{3})) << b;
        std::string m = message_of<InputError>([&] { f(Array(f32, {3, 3})); });
        EXPECT_THAT(m, AllOf(HasSubstr("subscript of rows"),
                             HasSubstr("index 5 out of range for dim 0 of size 3"),
                             HasSubstr("f32[3, 3]")))
            << b;
        Function g = function({x2}, {x2[{1, 7}]}, {}, on(b));
        EXPECT_THAT(message_of<InputError>([&] {
                        g(Array(f32, {2, 7}));
                    }),
                    AllOf(HasSubstr("subscript of cols"),
                          HasSubstr("index 7 out of range for dim 1 of size 7")))
            << b;
    }
    // a static dim: when the graph is built
    Placeholder s({3, 3}, f32, "s3");
    EXPECT_THAT(
        message_of<ShapeError>([&] { (void)s[5]; }),
        AllOf(HasSubstr("subscript of s3"), HasSubstr("index 5 out of range for dim 0 of size 3")));
}

// ---- the NaN guard --------------------------------------------------------------------------

// nan_guard used to do nothing on the reference backend. On both it names the first node that
// produced a NaN, and (with an update read alongside) the variable keeps its value.
// SJ_NAN_GUARD=1 in the environment turns the guard on for functions made without asking for
// it (a whole program, sj-train included, debugged without a rebuild); 0 or unset leaves it off.
TEST(HostileInput, NanGuardFromTheEnvironment) {
    struct Env {
        std::string old;
        bool had;
        Env() : had(std::getenv("SJ_NAN_GUARD") != nullptr) {
            if (had) old = std::getenv("SJ_NAN_GUARD");
        }
        ~Env() { had ? setenv("SJ_NAN_GUARD", old.c_str(), 1) : unsetenv("SJ_NAN_GUARD"); }
    } restore;
    Placeholder x({2}, f32, "env_nan_x");
    Tensor y = log(x).named("env_log");
    const Array bad(std::vector<float>{1, -1}, {2});
    unsetenv("SJ_NAN_GUARD");
    EXPECT_FALSE(FunctionOptions{}.nan_guard);
    EXPECT_TRUE(std::isnan(function({x}, {y})(bad)[0].at(1)));
    setenv("SJ_NAN_GUARD", "0", 1);
    EXPECT_FALSE(FunctionOptions{}.nan_guard);
    setenv("SJ_NAN_GUARD", "1", 1);
    EXPECT_TRUE(FunctionOptions{}.nan_guard);
    std::string m = message_of<Error>([&] { function({x}, {y})(bad); });
    EXPECT_THAT(m, HasSubstr("NaN guard: env_log"));
}

TEST(HostileInput, NanGuardOnEveryBackend) {
    for (const char* b : kBackends) {
        Placeholder x({2, 2}, f32, "nan_x");
        Variable v(Array(std::vector<float>{1, 2, 3, 4}, {2, 2}), std::string("nan_v_") + b);
        Tensor lx = log(x).named("log_of_x");
        Tensor w = constant(Array(std::vector<float>{1, 0, 0, 1}, {2, 2}));
        FunctionOptions o = on(b);
        o.nan_guard = true;
        Function f = function({x}, {matmul(lx, w)}, {{v, v + x}}, o);
        Array good(std::vector<float>{1, 2, 3, 4}, {2, 2});
        Array before = v.value();
        f(good);
        EXPECT_FALSE(v.value().equals(before)) << b;
        before = v.value();
        std::string m = message_of<Error>([&] {
            f(Array(std::vector<float>{1, -1, 3, 4}, {2, 2}));
        });
        EXPECT_THAT(m, AllOf(HasSubstr("NaN guard: log_of_x"), HasSubstr("flat index 1"))) << b;
        EXPECT_TRUE(v.value().equals(before)) << b << ": a call that threw changed a variable";
    }
}
