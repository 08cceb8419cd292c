// The text IR (src/core/IrText.h): print -> parse -> print is the identity on every graph of the
// op harness and on whole training steps, values read back bit for bit, and bad text is a
// ParseError that says where and what was expected.
#include "TestUtil.h"
#include "ops/OpHarness.h"

#include <gtest/gtest.h>
#include <symjax/ir/Node.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include "backend/cpu/CpuTarget.h"
#include "compiler/Pipeline.h"
#include "core/IrText.h"
#include "core/Verify.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace sj;
using sj::test::random_array;

namespace {

std::vector<NodePtr> roots_of(const std::vector<Tensor>& ts) {
    std::vector<NodePtr> r;
    for (const auto& t : ts)
        r.push_back(t.node());
    return r;
}

/// Empty when the graph under roots prints, parses back, verifies and prints the same; else what
/// went wrong.
std::string round_trip(const std::vector<NodePtr>& roots) {
    std::string text = detail::print_ir(roots);
    try {
        std::vector<NodePtr> parsed = detail::parse_ir(text);
        detail::verify(parsed, "parse");
        std::string again = detail::print_ir(parsed);
        if (again != text)
            return "printed again:\n" + again + "\nfirst print:\n" + text;
    } catch (const Error& e) {
        return std::string(e.what()) + "\nin:\n" + text;
    }
    return "";
}

/// Placeholders for one harness case in `dtype`; with `dynamic`, dims other than 1 are -1.
std::vector<Tensor> placeholders(const test::Case& c, DType dtype, bool dynamic) {
    std::vector<Tensor> phs;
    for (size_t k = 0; k < c.inputs.size(); ++k) {
        Shape s = c.inputs[k].shape;
        if (c.inputs[k].gen == test::Gen::Spd || c.inputs[k].gen == test::Gen::Triangular)
            dynamic = false;
        if (dynamic)
            for (auto& d : s)
                if (d != 1)
                    d = -1;
        phs.push_back(Placeholder(s, c.inputs[k].dtype.value_or(dtype), "x" + std::to_string(k)));
    }
    return phs;
}

} // namespace

// Note: values read back exactly: every float bit pattern class (signed zeros, subnormals, the
// extremes, infinities, NaNs with payloads and sign) and the integer extremes.
TEST(IrText, ConstantsReadBackBitForBit) {
    const float f_nan_payload = [] {
        uint32_t b = 0xffc00001u; // a negative NaN with a payload
        float f;
        std::memcpy(&f, &b, 4);
        return f;
    }();
    std::vector<float> fs = {0.0f,
                             -0.0f,
                             0.1f,
                             -1.5f,
                             1e-45f,
                             std::numeric_limits<float>::min(),
                             std::numeric_limits<float>::max(),
                             std::numeric_limits<float>::lowest(),
                             std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::quiet_NaN(),
                             f_nan_payload,
                             16777217.0f,
                             3.14159274f};
    std::vector<double> ds = {0.1,
                              -0.0,
                              5e-324,
                              std::numeric_limits<double>::max(),
                              1.0 / 3.0,
                              std::numeric_limits<double>::quiet_NaN(),
                              -std::numeric_limits<double>::infinity()};
    std::vector<int64_t> is = {std::numeric_limits<int64_t>::min(), -1, 0,
                               std::numeric_limits<int64_t>::max()};
    std::vector<uint32_t> us = {0, 1, std::numeric_limits<uint32_t>::max()};
    std::vector<bool> bs = {true, false, true};
    std::vector<Tensor> outs = {constant(Array(fs)),
                                constant(Array(ds)),
                                constant(Array(is)),
                                constant(Array(us)),
                                constant(Array(bs)),
                                scalar(0.25, f32),
                                constant(Array::full(f64, {3, 4}, -2.5)),
                                constant(Array(i32, {0, 3}))};
    std::string text = to_text(outs);
    std::vector<NodePtr> parsed = detail::parse_ir(text);
    ASSERT_EQ(parsed.size(), outs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
        const Array& want = outs[i].node()->attr<ConstantAttrs>().value;
        const Array& got = parsed[i]->attr<ConstantAttrs>().value;
        EXPECT_TRUE(got.equals(want)) << i << ": " << text;
    }
    EXPECT_EQ(detail::print_ir(parsed), text);
    EXPECT_CONTAINS(text, "splat(-2.5) : f64[3, 4]");
    EXPECT_CONTAINS(text, "nan(0xffc00001)");
    EXPECT_CONTAINS(text, "constant 0.25 : f32[]");
}

TEST(IrText, AttributesNamesAndLeaves) {
    Placeholder x({-1, 4}, f32, "x");
    Variable w(random_array(f32, {4, 3}, 1), "irtext_w", /*trainable=*/false);
    Tensor y = matmul(x, w);
    Tensor z = sum(exp(y), {1}, true).named("row \"sums\"\n");
    Tensor p = pad(z, {1, 0}, {0, 2}, 0.1);
    std::string text = to_text({p, z});
    EXPECT_CONTAINS(text, "placeholder \"x\" : f32[-1, 4]");
    EXPECT_CONTAINS(text, "variable \"irtext_w\" {trainable=false} : f32[4, 3]");
    EXPECT_CONTAINS(text, "{axes=[1], keepdims=true}");
    EXPECT_CONTAINS(text, "named \"row \\\"sums\\\"\\n\"");
    EXPECT_CONTAINS(text, "value=0.1");
    EXPECT_EQ(round_trip(roots_of({p, z})), "");
    // a live variable of that name is that variable
    std::vector<NodePtr> parsed = detail::parse_ir(text);
    std::vector<const Node*> rs = {parsed[0].get()};
    bool found = false;
    for (const Node* n : topo_order(rs))
        found |= n == w.node().get();
    EXPECT_TRUE(found) << "the parsed graph reads the live variable irtext_w";
}

TEST(IrText, ParsedVariablesHoldZerosAndCompile) {
    std::string text = "%a = placeholder \"a\" : f32[3]\n"
                       "%v = variable \"irtext_fresh_v\" : f32[3]\n"
                       "%one = constant splat(1) : f32[3]\n"
                       "%s = add(%v, %one) : f32[3]\n"
                       "%m = mul(%a, %s) : f32[3]  // a * (v + 1)\n"
                       "return %m\n";
    std::vector<NodePtr> r = detail::parse_ir(text);
    ASSERT_EQ(r.size(), 1u);
    Placeholder a(Tensor(r[0]->input(0)));
    Function f = function({a}, {Tensor(r[0])});
    Array out = f(Array(std::vector<float>{1, 2, 3}))[0];
    EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(get_variables("irtext_fresh_v").size(), 1u);
}

// Note: every row, case and dtype of the op harness: the forward graph on static and on -1
// placeholders, the gradient graph of differentiable rows, and the graph the compiler makes of
// them (canonicalized, stabilized, specialized, blocked layouts, merged constants).
// Note [Regions as text]: a scan prints its region as a block before its nodes, and the text
// reads back into a loop that computes the same values (here with its gradient: the backward
// scan's region, and the forward's copy with residuals).
TEST(IrText, RegionsRoundTrip) {
    using Ts = std::vector<Tensor>;
    Placeholder xs({5, 3}, DType::F64, "xs"), W({3, 3}, DType::F64, "W");
    Tensor Wc = W;
    auto [carry, ys] = scan(
        [&](const Ts& h, const Ts& x) {
            Tensor n = tanh(matmul(h[0], Wc) + x[0]);
            return std::pair{Ts{n}, Ts{sum(n)}};
        },
        {zeros({3}, DType::F64)}, {xs}, {}, {.reverse = true, .name = "rnn"});
    Tensor cost = sum(ys[0]) + sum(carry[0] * carry[0]);
    Tensor big = while_loop([](const Ts& v, const Ts&) { return v[0] < 100.0; },
                            [](const Ts& v, const Ts&) { return Ts{v[0] * 2.0}; }, {sum(xs)}, {},
                            {.max_iterations = 20, .name = "doubling"})[0];
    Tensor picked = cond(
        sum(xs) > 0.0, [](const Ts& a) { return Ts{a[0] * 2.0}; },
        [](const Ts& a) { return Ts{-a[0]}; }, {cost})[0];
    Ts outs{cost, big, picked};
    for (const Tensor& g : gradients(cost + big, {xs, W}))
        outs.push_back(g);
    const std::string text = detail::print_ir(roots_of(outs));
    EXPECT_NE(text.find("region @0 = "), std::string::npos) << text;
    EXPECT_NE(text.find("= scan \"rnn\" {carries=1, sequences=1, outputs=1, captured=1, "
                        "reverse=true}"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("= while_loop \"doubling\""), std::string::npos) << text;
    EXPECT_NE(text.find("= cond "), std::string::npos) << text;
    EXPECT_EQ(round_trip(roots_of(outs)), "");
    // the parsed graph computes what the traced one does
    std::vector<NodePtr> parsed = detail::parse_ir(text);
    Ts pts(parsed.begin(), parsed.end());
    std::vector<Tensor> ins;
    for (const char* name : {"xs", "W"})
        for (const Node* n : topo_order(std::vector<const Node*>{parsed[0].get(), parsed[3].get()}))
            if (n->is(Op::Placeholder) && n->name() == name)
                ins.emplace_back(n->shared_from_this());
    ASSERT_EQ(ins.size(), 2u) << text;
    Array xv = test::random_array(DType::F64, {5, 3}, 1),
          wv = test::random_array(DType::F64, {3, 3}, 2, -0.5, 0.5);
    for (const char* backend : {"reference", "cpu"}) {
        auto want = function({xs, W}, outs, {}, test::on(backend))(xv, wv);
        auto got = function(ins, pts, {}, test::on(backend))(xv, wv);
        for (size_t k = 0; k < outs.size(); ++k)
            test::expect_close(got[k], want[k], 0, 0,
                               std::string(backend) + " output " + std::to_string(k));
    }
}

// Region blocks that do not fit their counts, their nodes or the grammar are ParseErrors.
TEST(IrText, BadRegionsAreParseErrors) {
    const std::string body = R"(region @0 = scan "s" {carries=1, sequences=1, outputs=1} {
  %0 = placeholder "c" : f32[]
  %1 = placeholder "x" : f32[]
  %2 = add(%0, %1) : f32[]
  return %2, %2
}
)";
    const std::string use = "%0 = placeholder \"xs\" : f32[4]\n%1 = constant 0 : f32[]\n";
    // the good one parses
    EXPECT_NO_THROW(detail::parse_ir(
        body + use + "%2 = scan(%1, %0) {region=@0, output=1} : f32[4]\nreturn %2\n"));
    struct Bad {
        std::string text, says;
    };
    std::string fewer = body;
    fewer.replace(fewer.find("return %2, %2"), 13, "return %2");
    std::string var = body;
    var.replace(var.find("%2 = add(%0, %1)"), 16,
                "%9 = variable \"v\" : f32[]\n  %2 = add(%0, %9)");
    const std::vector<Bad> bad = {
        {fewer + use + "return %0\n", "has 2 parameters and 1 results; its counts say 2 and 2"},
        {body + use + "%2 = scan(%1, %0) {region=@1, output=1} : f32[4]\nreturn %2\n",
         "no region @1"},
        {body + use + "%2 = scan(%1, %0) {region=@0, output=4} : f32[4]\nreturn %2\n",
         "result 4 of a region with 3"},
        {body + use + "%2 = scan(%1) {region=@0} : f32[]\nreturn %2\n", "takes 2 operands, got 1"},
        {body + use + "%2 = while_loop(%1, %0) {region=@0} : f32[]\nreturn %2\n",
         "while_loop of a scan region"},
        {body + use + "%2 = scan(%1, %0) : f32[]\nreturn %2\n", "needs its region"},
        {body + use + "%2 = scan(%0, %0) {region=@0} : f32[4]\nreturn %2\n",
         "gets f32[4], the body was traced with f32[]"},
        {var + use + "return %0\n", "not a variable"},
        {"region @1 = scan \"s\" {} {\n return\n}\nreturn\n", "expected @0, got @1"},
        {"region @0 = loop \"s\" {} {\n return\n}\nreturn\n", "expected scan, while_loop or cond"},
        {"region @0 = cond \"s\" {reverse=true} {\n return\n} {\n return\n}\nreturn\n",
         "has no sequences"},
        {"region @0 = scan \"s\" {carries=-1} {\n return\n}\nreturn\n", "a region count must be"},
        {use + body + "return %0\n", "a region block goes before every value line"},
    };
    for (const auto& b : bad) {
        std::string msg = test::message_of<ParseError>([&] { detail::parse_ir(b.text); });
        EXPECT_NE(msg.find(b.says), std::string::npos)
            << "expected '" << b.says << "' in: " << msg << "\nfor:\n"
            << b.text;
    }
}

TEST(IrText, RoundTripsEveryOpHarnessGraph) {
    size_t graphs = 0, failures = 0;
    for (const test::OpRow& row : test::op_table()) {
        std::vector<test::Case> cases = test::row_cases(row);
        for (size_t ci = 0; ci < cases.size(); ++ci) {
            const test::Case& c = cases[ci];
            for (DType dt : row.dtypes) {
                if (!c.only.empty() && std::find(c.only.begin(), c.only.end(), dt) == c.only.end())
                    continue;
                for (bool dynamic : {false, true}) {
                    if (dynamic && !(row.dynamic && c.dynamic))
                        continue;
                    std::vector<std::vector<NodePtr>> gs;
                    try {
                        std::vector<Tensor> phs = placeholders(c, dt, dynamic);
                        Tensor out = row.build(phs);
                        std::vector<Tensor> outs{out};
                        if (row.grad == test::GradCheck::FiniteDiff && is_float(out.dtype()) &&
                            c.grad) {
                            std::vector<Tensor> wrt;
                            for (const auto& p : phs)
                                if (is_float(p.dtype()))
                                    wrt.push_back(p);
                            Tensor cost =
                                is_static(out.shape())
                                    ? sum(out * constant(random_array(out.dtype(), out.shape(), 7)))
                                    : sum(out * out);
                            for (const Tensor& g : gradients(cost, wrt))
                                outs.push_back(g);
                        }
                        gs.push_back(roots_of(outs));
                        gs.push_back(compiler::compile(roots_of(outs), cpu::cpu_target()).roots);
                    } catch (const Error& e) {
                        continue; // a combination the row does not build (the harness skips it too)
                    }
                    for (const auto& g : gs) {
                        ++graphs;
                        std::string err = round_trip(g);
                        if (!err.empty() && failures++ < 5)
                            ADD_FAILURE() << row.name << " case " << ci << " " << dtype_name(dt)
                                          << (dynamic ? " dynamic" : "") << ": " << err;
                    }
                }
            }
        }
    }
    std::cout << "[ ir text  ] " << graphs << " harness graphs round-trip\n";
    EXPECT_EQ(failures, 0u);
    EXPECT_GT(graphs, 500u);
}

TEST(IrText, RoundTripsTrainingSteps) {
    Scope scope("irtext");
    // MLP with Adam
    {
        nn::Sequential mlp{nn::Dense(8, 16), nn::ReLU(), nn::Dropout(0.2), nn::Dense(16, 4)};
        Placeholder x({-1, 8}, f32, "x");
        Placeholder y({-1}, i32, "y");
        Tensor loss =
            mean(nn::losses::sparse_softmax_crossentropy_logits(y, mlp(x, nn::Mode::Train)));
        nn::optim::Adam adam(1e-3);
        Updates upd = adam.minimize(loss, mlp.trainable_variables()) + state_updates(loss);
        std::vector<Tensor> outs = {loss};
        for (const auto& [v, t] : upd.items())
            outs.push_back(t);
        EXPECT_EQ(round_trip(roots_of(outs)), "");
        EXPECT_EQ(round_trip(compiler::compile(roots_of(outs), cpu::cpu_target()).roots), "");
    }
    // CNN with batch norm (state updates), a residual block and SGD with momentum
    {
        nn::Sequential net;
        const nn::ConvOptions same{.padding = "SAME", .bias = false};
        net.add(nn::Conv2D(3, 16, 3, same))
            .add(nn::BatchNorm(16))
            .add(nn::ReLU())
            .add(nn::MaxPool2D({2, 2}));
        net.add(nn::ResidualBlock(16, 32, {.stride = 2}))
            .add(nn::AvgPool2D({2, 2}))
            .add(nn::GlobalAvgPool());
        net.add(nn::Dense(32, 10));
        Placeholder x({-1, 3, 12, 12}, f32, "images");
        Placeholder y({-1}, i32, "labels");
        Tensor loss =
            mean(nn::losses::sparse_softmax_crossentropy_logits(y, net(x, nn::Mode::Train)));
        nn::optim::SGD sgd(0.01, {.momentum = 0.9});
        Updates upd = sgd.minimize(loss, net.trainable_variables()) + state_updates(loss);
        std::vector<Tensor> outs = {loss};
        for (const auto& [v, t] : upd.items())
            outs.push_back(t);
        EXPECT_EQ(round_trip(roots_of(outs)), "");
        EXPECT_EQ(round_trip(compiler::compile(roots_of(outs), cpu::cpu_target()).roots), "");
    }
}

// ---- errors ------------------------------------------------------------------------------------

namespace {
std::string parse_error(const std::string& text) {
    return test::message_of<ParseError>([&] { detail::parse_ir(text); });
}
} // namespace

TEST(IrText, ErrorsSayWhereAndWhat) {
    EXPECT_CONTAINS(parse_error("%0 = placeholder \"x\" : f32[2]\n%1 = frobnicate(%0) : f32[2]\n"),
                    "line 2:6: unknown op 'frobnicate'");
    EXPECT_CONTAINS(
        parse_error("%0 = placeholder \"x\" : f32[2]\n%1 = neg(%9) : f32[2]\nreturn %1"),
        "line 2:10: use of undefined value %9");
    EXPECT_CONTAINS(parse_error("%0 = placeholder \"x\" : f32[2]\n%1 = add(%0) : f32[2]\n"),
                    "line 2:6: add takes 2 operands, got 1");
    EXPECT_CONTAINS(parse_error("%0 = placeholder \"x\" : f32[2]\n%1 = neg(%0) f32[2]\n"),
                    "line 2:14: expected ':' before the type, got 'f32'");
    EXPECT_CONTAINS(parse_error("%0 = placeholder \"x\" : f32[2, 3]\n"
                                "%1 = reduce_sum(%0) {axis=[1]} : f32[2]\n"),
                    "reduce_sum has no attribute 'axis' (expected one of axes, keepdims)");
    EXPECT_CONTAINS(
        parse_error("%0 = placeholder \"x\" : f32[2]\n%1 = neg(%0) : f32[3]\nreturn %1"),
        "line 2:16: the type says f32[3], neg gives f32[2]");
    EXPECT_CONTAINS(parse_error("%0 = placeholder \"x\" : f32[2, 3]\n"
                                "%1 = permute(%0) {axes=[0, 0]} : f32[2, 2]\nreturn %1"),
                    "line 2:6: permute(x): [0, 0] is not a permutation of 0..1");
    EXPECT_CONTAINS(parse_error("%0 = constant [1, 2] : f32[3]\nreturn %0"),
                    "constant of type f32[3] needs 3 values, got 2");
    EXPECT_CONTAINS(parse_error("%0 = constant 300 : u8[]\nreturn %0"),
                    "a u8 value '300' is out of range");
    EXPECT_CONTAINS(parse_error("%0 = constant 1.5 : i32[]\nreturn %0"),
                    "expected a i32 value (an integer)");
    EXPECT_CONTAINS(parse_error("%0 = constant splat(0) : f32[100000, 100000]\nreturn %0"),
                    "larger than the");
    EXPECT_CONTAINS(parse_error("%0 = placeholder \"x\" : f32[2]\n"), "line 2:1: expected a line");
    EXPECT_CONTAINS(parse_error("%0 = placeholder \"x : f32[2]\n"),
                    "line 1:18: unterminated string");
    EXPECT_CONTAINS(parse_error("%0 = placeholder \"x\" : f32[-2]\n"), "a dim must be >= 0 or -1");
    EXPECT_CONTAINS(parse_error("%0 = placeholder \"x\" : f16[2]\n"), "unknown dtype 'f16'");
    EXPECT_CONTAINS(parse_error("%0 = placeholder \"x\" : f32[2]\n%0 = neg(%0) : f32[2]\n"),
                    "line 2:1: value %0 is defined twice");
    EXPECT_CONTAINS(
        parse_error("%0 = placeholder \"x\" : f32[2]\nreturn %0\n%1 = neg(%0) : f32[2]\n"),
        "line 3:1: expected the end of the text after the return line");
    EXPECT_CONTAINS(parse_error("\x01"), "line 1:1: unexpected character 0x01");
    EXPECT_CONTAINS(parse_error("%0 = constant nan(0x1) : f32[]\nreturn %0"),
                    "0x1 are not the bits of a NaN");
    // a target layout (Note [Target layouts]) on an op that has none, or out of range
    EXPECT_CONTAINS(
        parse_error("%0 = placeholder \"x\" : f32[2]\n%1 = neg(%0) layout 1 : f32[2]\n"),
        "line 2:14: a layout mask is 1..15 (the blocked operands), plus 2048 for 8-channel blocks");
    EXPECT_CONTAINS(parse_error("%0 = placeholder \"x\" : f32[2, 16, 4, 4]\n"
                                "%1 = pool(%0) {window=[2, 2], strides=[2, 2], pad_lo=[0, 0], "
                                "pad_hi=[0, 0]} layout 16 : f32[2, 16, 2, 2]\n"),
                    "pool layout 16");
    // widths: 8 (2048) is the only one spelled out; 16 is the default (no width bits)
    for (const char* mask : {"4096", "1025", "2064"})
        EXPECT_CONTAINS(parse_error(std::string("%0 = placeholder \"x\" : f32[2, 16, 4, 4]\n"
                                                "%1 = block_channels(%0) layout ") +
                                    mask + " : f32[2, 2, 4, 4, 8]\n"),
                        std::string("block_channels layout ") + mask);
    // a blocked operand must have the blocked shape: the op's rule checks it
    EXPECT_CONTAINS(parse_error("%0 = placeholder \"x\" : f32[2, 16, 4, 4]\n"
                                "%1 = pool(%0) {window=[2, 2], strides=[2, 2], pad_lo=[0, 0], "
                                "pad_hi=[0, 0]} layout 9 : f32[2, 1, 2, 2, 16]\n"),
                    "must be channel-blocked");
}

// The fuzz target's promise on a few hand-made hostile texts: an sj::Error, never a crash.
TEST(IrText, HostileTextIsAnError) {
    const char* texts[] = {
        "",
        "%",
        "%0 =",
        "%0 = constant [",
        "%0 = constant splat(",
        "return %",
        "\"",
        "%0 = concat() : f32[1]",
        "%0 = placeholder \"x\" : f32[9223372036854775807, 9223372036854775807]\nreturn %0",
        "%0 = placeholder \"x\" : f32[99999999999999999999]",
        "%0 = rng_counter : i64[]\n%1 = philox_bits(%0) {shape=[4611686018427387904, 4]} : u32[1]",
        "%0 = placeholder \"x\" : f32[2]\n%1 = slice(%0) {start=[-9223372036854775808], "
        "stop=[9223372036854775807], step=[9223372036854775807]} : f32[1]\nreturn %1",
        "%0 = placeholder \"x\" : f32[2]\n%1 = pad(%0) {lo=[9223372036854775807], hi=[1], "
        "interior=[0]} : f32[1]",
        "%0 = placeholder \"x\" : f32[2]\n%1 = reduce_sum(%0) {axes=[5]} : f32[]",
        "%0 = placeholder \"x\" : f32[2, 2]\n%1 = conv(%0, %0) : f32[1]",
        "%0 = variable \"\" : f32[2]",
        "%0 = variable \"v\" : f32[-1]",
        "%0 = constant [true, 2] : bool[2]",
    };
    for (const char* t : texts) {
        try {
            detail::parse_ir(t);
        } catch (const Error&) {
        } catch (const std::exception& e) {
            ADD_FAILURE() << "not an sj::Error on " << t << ": " << e.what();
        }
    }
}

// ---- the verifier ------------------------------------------------------------------------------

TEST(Verify, AcceptsBuiltGraphsAndNamesThePassOnABadNode) {
    Placeholder x({2, 3}, f32, "x");
    Tensor y = exp(x) * 2.0;
    EXPECT_NO_THROW(detail::verify(roots_of({y, x}), "test"));
    // a node whose attribute struct is not its op's: built by hand, as a buggy pass might (neg's
    // type rule never reads its attrs, so Node::make accepts it; only the verifier can object)
    NodePtr bad = Node::make(Op::Neg, ReduceAttrs{{0}, false}, {x.node()});
    std::string msg = test::message_of<InternalError>([&] { detail::verify({bad}, "my_pass"); });
    EXPECT_CONTAINS(msg, "IR verifier, after my_pass: node neg");
    EXPECT_CONTAINS(msg, "attribute struct");
}

TEST(Verify, IsOnInTheTestSuite) {
    EXPECT_TRUE(detail::verify_ir_enabled());
}

// Every test compiles with the IR verifier on: Pipeline.cpp checks the graph after each pass.
[[maybe_unused]] static const bool kVerifyEveryPass = (detail::set_verify_ir(true), true);
