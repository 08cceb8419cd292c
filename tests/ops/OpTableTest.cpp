// The op table: one row per primitive of Ops.def (and per composite), run by the op harness.
#include "OpHarness.h"

#include <symjax/ir/Layout.h>
#include <symjax/ir/Node.h>

#include "ops/OpDef.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <set>

namespace sj::test {
namespace {

using Xs = const std::vector<Tensor>&;

const std::vector<DType> kFloat = {DType::F32, DType::F64};
const std::vector<DType> kInt = {DType::U8, DType::I32, DType::I64, DType::U32};
const std::vector<DType> kNumeric = {DType::U8,  DType::I32, DType::I64,
                                     DType::U32, DType::F32, DType::F64};
const std::vector<DType> kAll = {DType::Bool, DType::U8,  DType::I32, DType::I64,
                                 DType::U32,  DType::F32, DType::F64};
const std::vector<DType> kBool = {DType::Bool};

// 0-d, size 1, odd sizes, and size-0 dims.
const std::vector<Shape> kUnaryShapes = {{}, {0}, {1}, {7}, {3, 5, 7}, {2, 0, 3}};
// Equal shapes, size-1 broadcast dims on either side, rank extension, 0-d and size-0 dims.
const std::vector<std::pair<Shape, Shape>> kBinaryShapes = {
    {{}, {}},     {{7}, {7}},       {{3, 5, 7}, {3, 5, 7}}, {{3, 1, 7}, {5, 1}}, {{}, {2, 3}},
    {{4, 1}, {}}, {{0, 3}, {1, 3}}, {{2, 0}, {2, 1}},       {{1}, {3, 1}}};

In with_shape(In proto, Shape s) {
    proto.shape = std::move(s);
    return proto;
}

std::vector<Case> unary_cases(const In& proto) {
    std::vector<Case> cs;
    for (const auto& s : kUnaryShapes)
        cs.push_back({{with_shape(proto, s)}});
    return cs;
}

std::vector<Case> binary_cases(const In& a, const In& b) {
    std::vector<Case> cs;
    for (const auto& [sa, sb] : kBinaryShapes)
        cs.push_back({{with_shape(a, sa), with_shape(b, sb)}});
    return cs;
}

/// A case from inputs with the given generator.
Case shapes(std::initializer_list<Shape> ss, Gen g = Gen::Any) {
    Case c;
    for (const auto& s : ss)
        c.inputs.push_back(in(s, g));
    return c;
}
std::vector<Case> each(std::initializer_list<Shape> ss, Gen g = Gen::Any) {
    std::vector<Case> cs;
    for (const auto& s : ss)
        cs.push_back({{in(s, g)}});
    return cs;
}
Case forward_only(Case c) {
    c.grad = false;
    return c;
}
Case static_only(Case c) {
    c.dynamic = false;
    return c;
}
const std::vector<DType> kSigned = {DType::I32, DType::I64, DType::F32, DType::F64};
/// A case of negative values: only for the signed dtypes.
Case signed_only(Case c) {
    c.only = kSigned;
    return c;
}

std::vector<OpRow> make_table() {
    std::vector<OpRow> t;

    // ---- elementwise unary, float only ----------------------------------------------------
    struct Unary {
        const char* name;
        Tensor (*f)(const Tensor&);
        In gen;
        GradCheck grad;
    };
    const Unary float_unary[] = {
        {"exp", exp, in_range({}, -3, 3), GradCheck::FiniteDiff},
        {"expm1", expm1, in_range({}, -3, 3), GradCheck::FiniteDiff},
        {"log", log, in({}, Gen::Positive), GradCheck::FiniteDiff},
        {"log1p", log1p, in_range({}, -0.9, 3), GradCheck::FiniteDiff},
        {"log2", log2, in({}, Gen::Positive), GradCheck::FiniteDiff},
        {"sqrt", sqrt, in({}, Gen::Positive), GradCheck::FiniteDiff},
        {"rsqrt", rsqrt, in({}, Gen::Positive), GradCheck::FiniteDiff},
        {"reciprocal", reciprocal, in({}, Gen::NonZero), GradCheck::FiniteDiff},
        {"sin", sin, in({}), GradCheck::FiniteDiff},
        {"cos", cos, in({}), GradCheck::FiniteDiff},
        {"tan", tan, in_range({}, -1.2, 1.2), GradCheck::FiniteDiff}, // away from the poles
        {"tanh", tanh, in({}), GradCheck::FiniteDiff},
        {"erf", erf, in({}), GradCheck::FiniteDiff},
        // piecewise constant: the gradient is zero away from the jumps (random inputs are)
        {"floor", floor, in({}), GradCheck::FiniteDiff},
        {"ceil", ceil, in({}), GradCheck::FiniteDiff},
        {"round", round, in({}), GradCheck::FiniteDiff},
        {"isnan", isnan, in({}), GradCheck::None},
        {"isinf", isinf, in({}), GradCheck::None},
    };
    for (const auto& u : float_unary) {
        auto f = u.f;
        OpRow r{.name = u.name,
                .op = u.name,
                .build = [f](Xs x) { return f(x[0]); },
                .cases = unary_cases(u.gen),
                .dtypes = kFloat,
                .grad = u.grad};
        r.second_order = u.grad == GradCheck::FiniteDiff;
        r.specials = true;
        if (r.name == "round") // halves round to even
            r.cases.push_back(forward_only(
                {{in_values({9}, {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.4999999, -3.5})}}));
        t.push_back(std::move(r));
    }

    // ---- elementwise unary on every numeric dtype ------------------------------------------
    t.push_back({.name = "neg",
                 .op = "neg",
                 .build = [](Xs x) { return neg(x[0]); },
                 .cases = unary_cases(in({})),
                 .dtypes = kNumeric,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true,
                 .specials = true});
    t.push_back({.name = "abs",
                 .op = "abs",
                 .build = [](Xs x) { return abs(x[0]); },
                 .cases = unary_cases(in({}, Gen::NonZero)),
                 .dtypes = kNumeric,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true,
                 .specials = true});
    {
        OpRow r{.name = "sign",
                .op = "sign",
                .build = [](Xs x) { return sign(x[0]); },
                .cases = unary_cases(in({}, Gen::NonZero)),
                .dtypes = kNumeric,
                .grad = GradCheck::FiniteDiff,
                .second_order = true,
                .specials = true};
        r.cases.push_back(signed_only(forward_only({{in_values({4}, {0, -0.0, 2, -3})}})));
        t.push_back(std::move(r));
    }
    t.push_back({.name = "logical_not",
                 .op = "logical_not",
                 .build = [](Xs x) { return logical_not(x[0]); },
                 .cases = unary_cases(in({})),
                 .dtypes = kBool});
    t.push_back({.name = "stop_gradient",
                 .op = "stop_gradient",
                 .build = [](Xs x) { return stop_gradient(x[0]); },
                 .cases = unary_cases(in({})),
                 .dtypes = kAll,
                 .grad = GradCheck::Zero,
                 .specials = true});

    // ---- cast: every source dtype to every target dtype -------------------------------------
    for (DType to : kAll) {
        OpRow r{.name = std::string("cast_to_") + dtype_name(to),
                .op = "cast",
                // negative and > 255 values exercise wrapping (ints) and saturation (floats)
                .build = [to](Xs x) { return cast(x[0], to); },
                .cases = unary_cases(in_range({}, -3.7, 300.5)),
                .dtypes = kAll};
        r.specials = true;
        if (to == DType::F64) {
            // f32 -> f64 passes the gradient through; the f64 cost resolves f32 steps exactly
            r.grad = GradCheck::FiniteDiff;
            r.grad_dtypes = {DType::F32};
        }
        t.push_back(std::move(r));
    }

    // ---- elementwise binary -----------------------------------------------------------------
    struct Binary {
        const char* name;
        Tensor (*f)(const Tensor&, const Tensor&);
        In a, b;
        std::vector<DType> dtypes;
        GradCheck grad;
    };
    const Binary binary[] = {
        {"add", add, in({}), in({}), kNumeric, GradCheck::FiniteDiff},
        {"sub", sub, in({}), in({}), kNumeric, GradCheck::FiniteDiff},
        {"mul", mul, in({}), in({}), kNumeric, GradCheck::FiniteDiff},
        {"div", div, in({}), in({}, Gen::NonZero), kNumeric, GradCheck::FiniteDiff},
        {"pow", pow, in({}, Gen::Positive), in_range({}, -2, 2), kFloat, GradCheck::FiniteDiff},
        {"max", maximum, in({}), in({}), kAll, GradCheck::FiniteDiff},
        {"min", minimum, in({}), in({}), kAll, GradCheck::FiniteDiff},
        {"mod", mod, in({}), in({}, Gen::NonZero), kNumeric, GradCheck::FiniteDiff},
        {"atan2", atan2, in({}), in({}), kFloat, GradCheck::FiniteDiff},
        {"hypot", hypot, in({}, Gen::NonZero), in({}), kFloat, GradCheck::FiniteDiff},
        {"eq", eq, in({}, Gen::Ties), in({}, Gen::Ties), kAll, GradCheck::None},
        {"ne", ne, in({}, Gen::Ties), in({}, Gen::Ties), kAll, GradCheck::None},
        {"lt", lt, in({}, Gen::Ties), in({}, Gen::Ties), kAll, GradCheck::None},
        {"le", le, in({}, Gen::Ties), in({}, Gen::Ties), kAll, GradCheck::None},
        {"gt", gt, in({}, Gen::Ties), in({}, Gen::Ties), kAll, GradCheck::None},
        {"ge", ge, in({}, Gen::Ties), in({}, Gen::Ties), kAll, GradCheck::None},
        {"logical_and", logical_and, in({}), in({}), kBool, GradCheck::None},
        {"logical_or", logical_or, in({}), in({}), kBool, GradCheck::None},
        {"logical_xor", logical_xor, in({}), in({}), kBool, GradCheck::None},
    };
    for (const auto& b : binary) {
        auto f = b.f;
        OpRow r{.name = b.name,
                .op = b.name,
                .build = [f](Xs x) { return f(x[0], x[1]); },
                .cases = binary_cases(b.a, b.b),
                .dtypes = b.dtypes,
                .grad = b.grad};
        r.second_order = b.grad == GradCheck::FiniteDiff;
        r.specials = b.dtypes != kBool;
        if (r.name == "max" || r.name == "min") // ties: forward only (not differentiable there)
            r.cases.push_back(forward_only(shapes({{3, 4}, {3, 4}}, Gen::Ties)));
        t.push_back(std::move(r));
    }
    {
        auto where_case = [](Shape c, Shape a, Shape b) {
            return Case{{in_bool(std::move(c)), in(std::move(a)), in(std::move(b))}};
        };
        t.push_back({.name = "where",
                     .op = "where",
                     .build = [](Xs x) { return where(x[0], x[1], x[2]); },
                     .cases = {where_case({3, 1}, {3, 4}, {4}), where_case({}, {2}, {}),
                               where_case({2, 3}, {2, 3}, {2, 3}), where_case({0, 2}, {1, 2}, {2}),
                               where_case({1}, {}, {5}), where_case({}, {}, {})},
                     .dtypes = kAll,
                     .grad = GradCheck::FiniteDiff,
                     .second_order = true,
                     .specials = true});
    }

    // ---- reductions -------------------------------------------------------------------------
    std::vector<DType> sum_dtypes = kAll; // sum casts bool to i64 first
    t.push_back({.name = "sum_axis1",
                 .op = "reduce_sum",
                 .build = [](Xs x) { return sum(x[0], {1}); },
                 .cases = each({{3, 5, 7}, {2, 0, 3}, {4, 1}, {1, 6}}),
                 .dtypes = sum_dtypes,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true});
    t.push_back({.name = "sum_all",
                 .op = "reduce_sum",
                 .build = [](Xs x) { return sum(x[0]); },
                 .cases = each({{}, {0}, {7}, {3, 5}}),
                 .dtypes = sum_dtypes,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true,
                 .specials = true});
    t.push_back({.name = "sum_keepdims",
                 .op = "reduce_sum",
                 .build =
                     [](Xs x) {
                         return sum(x[0], {0, -1}, true);
                     },
                 .cases = each({{3, 5, 7}, {0, 2, 3}, {2, 3, 0}}),
                 .dtypes = sum_dtypes,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true});
    {
        // zeros exercise the three branches of the gradient (no zero, one zero, two or more);
        // integer values stay small so products do not overflow
        In z = in_range({}, -1.5, 1.5);
        z.gen = Gen::WithZeros;
        std::vector<Case> cs;
        for (Shape s : std::vector<Shape>{{3, 5}, {4, 0}, {0, 3}, {5, 1}})
            cs.push_back({{with_shape(z, s)}});
        cs.push_back(signed_only({{in_values({3, 3}, {0, 2, 3, 0, 0, 1, 1, 2, -1})}}));
        t.push_back({.name = "prod_axis1",
                     .op = "reduce_prod",
                     .build = [](Xs x) { return prod(x[0], {1}); },
                     .cases = cs,
                     .dtypes = kNumeric,
                     .grad = GradCheck::FiniteDiff,
                     .second_order = true});
        std::vector<Case> all;
        for (Shape s : std::vector<Shape>{{}, {6}, {0}, {2, 3}})
            all.push_back({{with_shape(z, s)}});
        t.push_back({.name = "prod_all",
                     .op = "reduce_prod",
                     .build = [](Xs x) { return prod(x[0]); },
                     .cases = all,
                     .dtypes = kNumeric,
                     .grad = GradCheck::FiniteDiff,
                     .second_order = true,
                     .specials = true});
    }
    for (bool is_max : {true, false}) {
        std::string op = is_max ? "reduce_max" : "reduce_min";
        std::string base = is_max ? "max" : "min";
        auto f = is_max ? static_cast<Tensor (*)(const Tensor&, const Axes&, bool)>(max)
                        : static_cast<Tensor (*)(const Tensor&, const Axes&, bool)>(min);
        std::vector<Case> cs = each({{3, 5}, {4, 1}, {0, 3}, {2, 3, 4}}, Gen::Distinct);
        cs.push_back(forward_only(shapes({{4, 6}}, Gen::Ties)));
        t.push_back({.name = base + "_axis1",
                     .op = op,
                     .build = [f](Xs x) { return f(x[0], {1}, false); },
                     .cases = cs,
                     .dtypes = kNumeric,
                     .grad = GradCheck::FiniteDiff,
                     .second_order = true});
        t.push_back({.name = base + "_all_keepdims",
                     .op = op,
                     .build = [f](Xs x) { return f(x[0], {}, true); },
                     .cases = each({{}, {7}, {2, 3}}, Gen::Distinct),
                     .dtypes = kNumeric,
                     .grad = GradCheck::FiniteDiff,
                     .second_order = true,
                     .specials = true});
    }
    t.push_back({.name = "any_axis1",
                 .op = "reduce_any",
                 .build = [](Xs x) { return any(x[0], {1}); },
                 .cases = each({{3, 5}, {2, 0}, {0, 3}, {4, 1}}, Gen::Ties),
                 .dtypes = kAll});
    t.push_back({.name = "all_axis1",
                 .op = "reduce_all",
                 .build = [](Xs x) { return all(x[0], {1}); },
                 .cases = each({{3, 5}, {2, 0}, {0, 3}, {4, 1}}, Gen::Ties),
                 .dtypes = kAll});
    t.push_back({.name = "any_all",
                 .op = "reduce_any",
                 .build = [](Xs x) { return any(x[0]); },
                 .cases = each({{}, {0}, {7}, {2, 3}}, Gen::Ties),
                 .dtypes = kAll,
                 .specials = true});
    t.push_back({.name = "all_all",
                 .op = "reduce_all",
                 .build = [](Xs x) { return all(x[0]); },
                 .cases = each({{}, {0}, {7}, {2, 3}}, Gen::Ties),
                 .dtypes = kAll,
                 .specials = true});
    for (bool is_max : {true, false}) {
        std::string op = is_max ? "argmax" : "argmin";
        auto f = is_max ? argmax : argmin;
        std::vector<Case> cs = each({{3, 5}, {4, 1}, {0, 3}, {2, 3, 4}});
        cs.push_back(shapes({{4, 6}}, Gen::Ties)); // ties: the first occurrence wins
        t.push_back({.name = op + "_axis1",
                     .op = op,
                     .build = [f](Xs x) { return f(x[0], 1, false); },
                     .cases = cs,
                     .dtypes = kNumeric});
        t.push_back({.name = op + "_axis0_keepdims",
                     .op = op,
                     .build = [f](Xs x) { return f(x[0], 0, true); },
                     .cases = each({{5}, {3, 4}, {1}}, Gen::Ties),
                     .dtypes = kNumeric,
                     .specials = true}); // NaN: the first NaN wins, as NumPy
    }
    t.push_back({.name = "cumsum_axis1",
                 .op = "cumsum",
                 .build = [](Xs x) { return cumsum(x[0], 1); },
                 .cases = each({{3, 5}, {2, 0}, {0, 3}, {2, 4, 3}}),
                 .dtypes = kNumeric,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true});
    t.push_back({.name = "cumsum_reverse",
                 .op = "cumsum",
                 .build = [](Xs x) { return cumsum(x[0], 0, true); },
                 .cases = each({{7}, {3, 2}, {0}, {1}}),
                 .dtypes = kNumeric,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true,
                 .specials = true});

    // ---- sort (Note [Sort] in src/ops/Sort.cpp): gradients on distinct values, where a small
    // step moves no element past another; ties and specials check the order's stability and NaN
    auto sort_cases = [](std::initializer_list<Shape> distinct, std::initializer_list<Shape> tied) {
        std::vector<Case> cs = each(distinct, Gen::Distinct);
        for (const Shape& s : tied)
            cs.push_back(forward_only(Case{{in(s, Gen::Ties)}}));
        return cs;
    };
    t.push_back({.name = "sort_last",
                 .op = "sort",
                 .build = [](Xs x) { return sort(x[0]); },
                 .cases = sort_cases({{7}, {3, 5}, {2, 0}, {0, 3}}, {{2, 6}}),
                 .dtypes = kAll,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true,
                 .specials = true});
    t.push_back({.name = "sort_descending_axis0",
                 .op = "sort",
                 .build = [](Xs x) { return sort(x[0], 0, true); },
                 .cases = sort_cases({{5}, {4, 3}, {2, 5, 3}}, {{4, 3}, {6, 2, 2}}),
                 .dtypes = kNumeric,
                 .grad = GradCheck::FiniteDiff,
                 .specials = true});
    t.push_back({.name = "argsort_last",
                 .op = "sort",
                 .build = [](Xs x) { return argsort(x[0]); },
                 .cases = sort_cases({{3, 6}}, {{3, 6}, {2, 3, 5}, {0, 4}, {4, 0}}),
                 .dtypes = kAll,
                 .specials = true});
    t.push_back({.name = "argsort_descending_axis0",
                 .op = "sort",
                 .build = [](Xs x) { return argsort(x[0], 0, true); },
                 .cases = sort_cases({{5, 3}}, {{5, 3}, {4, 2, 2}, {1}}),
                 .dtypes = kNumeric,
                 .specials = true});
    // values first, so that the row runs in the values' dtypes; the keys are i64 with ties
    t.push_back({.name = "sort_by_key_axis0",
                 .op = "sort",
                 .build = [](Xs x) { return sort_by_key(x[1], x[0], 0); },
                 .cases = {{{in({5, 3}), in_range({5, 3}, 0, 2, DType::I64)}},
                           {{in({4, 2, 3}), in_range({4, 2, 3}, -1, 1, DType::I64)}},
                           {{in({0, 2}), in_range({0, 2}, 0, 2, DType::I64)}}},
                 .dtypes = kAll,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true});
    t.push_back({.name = "top_k3_values",
                 .op = "sort",
                 .build = [](Xs x) { return top_k(x[0], 3).first; },
                 .cases = sort_cases({{5}, {2, 6}, {3, 2, 4}}, {{3, 5}}),
                 .dtypes = kNumeric,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true,
                 .specials = true});
    // negative indices count from the end; indices of one row against every row of x
    t.push_back({.name = "take_along_axis_axis1",
                 .op = "take_along_axis",
                 .build = [](Xs x) { return take_along_axis(x[0], x[1], 1); },
                 .cases = {{{in({3, 5}), in_index({3, 4}, -5, 5)}},
                           {{in({2, 4, 3}), in_index({2, 2, 3}, -4, 4)}},
                           {{in({0, 3}), in_index({0, 2}, 0, 3)}},
                           static_only({{in({3, 5}), in_index({1, 2}, -5, 5)}})},
                 .dtypes = kAll,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true});
    t.push_back({.name = "top_k3_indices",
                 .op = "sort",
                 .build = [](Xs x) { return top_k(x[0], 3).second; },
                 .cases = sort_cases({{2, 6}}, {{3, 5}, {2, 2, 7}, {3}}),
                 .dtypes = kNumeric,
                 .specials = true});

    // ---- movement ---------------------------------------------------------------------------
    // dynamic_grad = false where the gradient rule needs static dims by design (it says so
    // with a ShapeError at build time)
    auto movement = [&](std::string name, std::string op, Builder b, std::vector<Case> cs,
                        bool dynamic_grad = true) {
        t.push_back({.name = std::move(name),
                     .op = std::move(op),
                     .build = std::move(b),
                     .cases = std::move(cs),
                     .dtypes = kAll,
                     .grad = GradCheck::FiniteDiff,
                     .second_order = true,
                     .dynamic_grad = dynamic_grad});
    };
    movement(
        "reshape", "reshape",
        [](Xs x) {
            return reshape(x[0], {5, -1});
        },
        each({{3, 5, 7}, {5}, {0, 5}, {10}, {5, 1, 1}}));
    movement(
        "permute", "permute",
        [](Xs x) {
            return transpose(x[0], {2, 0, 1});
        },
        each({{3, 5, 7}, {2, 0, 3}, {1, 4, 1}, {2, 3, 1}}));
    movement(
        "broadcast_to", "broadcast",
        [](Xs x) {
            return broadcast_to(x[0], {2, 3, 5});
        },
        each({{}, {1}, {5}, {3, 1}, {1, 5}, {2, 1, 1}, {1, 3, 5}}));
    movement(
        "broadcast_to_empty", "broadcast",
        [](Xs x) {
            return broadcast_to(x[0], {0, 3});
        },
        each({{3}, {1, 3}, {}, {1}}));
    movement(
        "slice_step", "slice",
        [](Xs x) {
            return slice(x[0], {1, 0, -5}, {Index::kEnd, 5, Index::kEnd}, {2, 2, 1});
        },
        each({{3, 5, 7}, {4, 6, 8}, {2, 0, 9}, {1, 1, 1}}), /*dynamic_grad=*/false);
    movement(
        "slice_negative", "slice", [](Xs x) { return slice_axis(x[0], -1, -4, -1); },
        each({{7}, {3, 5}, {2, 2}, {0}}), /*dynamic_grad=*/false); // negative starts
    movement(
        "pad_lohi", "pad",
        [](Xs x) {
            return pad(x[0], {1, 0}, {2, 1}, 3.5);
        },
        each({{3, 4}, {0, 2}, {1, 1}, {2, 0}}));
    movement(
        "pad_interior", "pad",
        [](Xs x) {
            return pad(x[0], {0, 1}, {1, 0}, {1, 2}, 2.5);
        },
        each({{3, 4}, {1, 3}, {2, 0}, {0, 0}}));
    movement(
        "flip", "flip",
        [](Xs x) {
            return flip(x[0], {0, 2});
        },
        each({{3, 5, 7}, {2, 0, 3}, {1, 2, 1}, {4, 1, 2}}));
    movement(
        "concat_axis1", "concat",
        [](Xs x) {
            return concat({x[0], x[1], x[2]}, 1);
        },
        {shapes({{2, 3, 4}, {2, 0, 4}, {2, 1, 4}}), shapes({{1, 1}, {1, 2}, {1, 0}}),
         shapes({{0, 2}, {0, 1}, {0, 3}})},
        /*dynamic_grad=*/false); // the sizes along the axis
    movement(
        "concat_axis0", "concat",
        [](Xs x) {
            return concat({x[0], x[1]}, 0);
        },
        {shapes({{3}, {4}}), shapes({{0}, {2}}), shapes({{2, 2}, {1, 2}})},
        /*dynamic_grad=*/false);

    // ---- indexing ---------------------------------------------------------------------------
    t.push_back({.name = "gather_axis0",
                 .op = "gather",
                 .build = [](Xs x) { return gather(x[0], x[1], 0); },
                 .cases = {{{in({5, 3}), in_index({4}, 0, 5)}},
                           {{in({5}), in_index({}, 0, 5)}},
                           {{in({5, 3}), in_index({2, 2}, 0, 5, DType::I32)}},
                           {{in({5, 3}), in_index({0}, 0, 5)}},
                           {{in({1, 2}), in_index({3}, 0, 1, DType::U8)}}},
                 .dtypes = kAll,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true});
    t.push_back({.name = "gather_axis1",
                 .op = "gather",
                 .build = [](Xs x) { return gather(x[0], x[1], 1); },
                 .cases = {{{in({2, 4, 3}), in_index({3}, 0, 4)}},
                           {{in({2, 4}), in_index({2, 2}, 0, 4, DType::U8)}},
                           {{in({0, 4}), in_index({2}, 0, 4, DType::I32)}}},
                 .dtypes = kAll,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true});
    // bool included: adding into a bool must stay a bool (NumPy: logical or)
    t.push_back({.name = "scatter_add_axis0",
                 .op = "scatter_add",
                 .build = [](Xs x) { return scatter_add(x[0], x[1], x[2], 0); },
                 .cases = {{{in({5, 3}), in_index({6}, 0, 5), in({6, 3})}},
                           {{in({4}), in_index({}, 0, 4), in({})}},
                           {{in({5, 3}), in_index({0}, 0, 5), in({0, 3})}},
                           {{in({3, 2}), in_index({2, 2}, 0, 3, DType::I32), in({2, 2, 2})}}},
                 .dtypes = kAll,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true});
    t.push_back({.name = "scatter_add_axis1",
                 .op = "scatter_add",
                 .build = [](Xs x) { return scatter_add(x[0], x[1], x[2], 1); },
                 .cases = {{{in({2, 4}), in_index({3}, 0, 4, DType::U8), in({2, 3})}},
                           {{in({0, 4}), in_index({2}, 0, 4), in({0, 2})}}},
                 .dtypes = kNumeric,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true});
    // start indices out of range are clamped so the window fits (XLA)
    t.push_back({.name = "dynamic_slice",
                 .op = "dynamic_slice",
                 .build =
                     [](Xs x) {
                         return dynamic_slice(x[0], x[1], {2, 3});
                     },
                 .cases = {{{in({4, 5}), in_range({2}, -2, 6, DType::I64)}},
                           {{in({2, 3}), in_range({2}, -1, 1, DType::I32)}},
                           {{in({3, 7}), in_values({2}, {1, 10}, DType::I64)}},
                           {{in({3, 3}), in_values({2}, {-7, 1}, DType::I32)}}},
                 .dtypes = kAll,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true});
    t.push_back({.name = "dynamic_slice_empty",
                 .op = "dynamic_slice",
                 .build =
                     [](Xs x) {
                         return dynamic_slice(x[0], x[1], {0, 2});
                     },
                 .cases = {{{in({3, 4}), in_range({2}, -1, 5, DType::I64)}},
                           {{in({0, 2}), in_values({2}, {0, 0}, DType::U8)}}},
                 .dtypes = kAll,
                 .grad = GradCheck::FiniteDiff});
    t.push_back({.name = "dynamic_update_slice",
                 .op = "dynamic_update_slice",
                 .build = [](Xs x) { return dynamic_update_slice(x[0], x[1], x[2]); },
                 .cases = {{{in({4, 5}), in({2, 3}), in_range({2}, -2, 6, DType::I64)}},
                           {{in({3, 3}), in({3, 3}), in_range({2}, -1, 1, DType::I32)}},
                           {{in({4, 5}), in({0, 2}), in_values({2}, {1, 1}, DType::I64)}},
                           {{in({4}), in({1}), in_values({1}, {3}, DType::U8)}},
                           {{in({}), in({}), in_values({0}, {}, DType::I64)}}},
                 .dtypes = kAll,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true,
                 .dynamic_grad = false}); // the update's shape must be static
    // out-of-range indices give a zero row
    t.push_back({.name = "one_hot_f32",
                 .op = "one_hot",
                 .build = [](Xs x) { return one_hot(x[0], 4, DType::F32); },
                 .cases = {{{in_range({6}, -1, 5)}},
                           {{in_range({}, 0, 3)}},
                           {{in_range({2, 3}, -1, 5)}},
                           {{in_range({0}, 0, 3)}}},
                 .dtypes = kInt});
    t.push_back({.name = "one_hot_bool",
                 .op = "one_hot",
                 .build = [](Xs x) { return one_hot(x[0], 3, DType::Bool); },
                 .cases = {{{in_range({5}, -1, 4)}}, {{in_range({2, 2}, 0, 2)}}},
                 .dtypes = kInt});

    // in range (or the ignore value): the indices unchanged; out of range throws (tests/errors)
    t.push_back({.name = "check_index",
                 .op = "check_index",
                 .build = [](Xs x) { return check_index(x[0], 5); },
                 .cases = {{{in_range({6}, 0, 4)}},
                           {{in_range({}, 0, 4)}},
                           {{in_range({2, 3}, 0, 4)}},
                           {{in_range({0}, 0, 4)}}},
                 .dtypes = kInt});
    t.push_back({.name = "check_index_ignore",
                 .op = "check_index",
                 .build = [](Xs x) { return check_index(x[0], 3, -1); },
                 .cases = {{{in_range({6}, -1, 2)}}, {{in_range({2, 2}, -1, 2)}}},
                 .dtypes = {DType::I32, DType::I64}});

    // ---- library ----------------------------------------------------------------------------
    auto dot = [&](std::string name, DotDims dims, std::vector<Case> cs) {
        t.push_back({.name = std::move(name),
                     .op = "dot_general",
                     .build = [dims](Xs x) { return dot_general(x[0], x[1], dims); },
                     .cases = std::move(cs),
                     .dtypes = kNumeric,
                     .grad = GradCheck::FiniteDiff,
                     .second_order = true});
    };
    dot("dot_matmul", {{}, {}, {1}, {0}},
        {shapes({{3, 4}, {4, 5}}), shapes({{1, 4}, {4, 1}}), shapes({{3, 0}, {0, 5}}),
         shapes({{0, 4}, {4, 2}})});
    dot("dot_batch", {{0}, {0}, {2}, {1}},
        {shapes({{2, 3, 4}, {2, 4, 5}}), shapes({{0, 3, 4}, {0, 4, 2}}),
         shapes({{1, 1, 3}, {1, 3, 2}})});
    // contracting dims in opposite orders on the two sides: the gradient must permute back
    dot("dot_multi_contract", {{}, {}, {1, 2}, {1, 0}},
        {shapes({{2, 3, 4}, {4, 3, 5}}), shapes({{1, 2, 1}, {1, 2, 3}})});
    dot("dot_outer", {{}, {}, {}, {}}, {shapes({{3}, {4}}), shapes({{}, {}}), shapes({{2}, {}})});
    dot("dot_batch_middle", {{1}, {1}, {2}, {0}},
        {shapes({{3, 2, 4}, {4, 2, 5}}), shapes({{1, 3, 2}, {2, 3, 1}})});

    // ---- linear algebra ---------------------------------------------------------------------
    std::vector<Case> spd = each({{3, 3}, {1, 1}, {2, 4, 4}, {0, 0}, {0, 3, 3}}, Gen::Spd);
    t.push_back({.name = "cholesky",
                 .op = "cholesky",
                 .build = [](Xs x) { return cholesky(x[0]); },
                 .cases = spd,
                 .dtypes = kFloat,
                 .dynamic = false}); // the matrix size must be known at build time
    // the gradient is the symmetric one (A is symmetric by definition): differentiate through a
    // symmetrised input so every element perturbation is a valid direction
    t.push_back({.name = "cholesky_sym",
                 .op = "cholesky",
                 .build = [](Xs x) { return cholesky(0.5 * (x[0] + swap_last(x[0]))); },
                 .cases = spd,
                 .dtypes = kFloat,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true,
                 .dynamic = false});
    for (bool left : {true, false})
        for (bool lower : {true, false})
            for (bool trans : {false, true})
                for (bool unit : {false, true}) {
                    std::string name = std::string("trsolve_") + (left ? "L" : "R") +
                                       (lower ? "lo" : "up") + (trans ? "T" : "N") +
                                       (unit ? "u" : "d");
                    auto bshape = [left](int64_t n, int64_t k) {
                        return left ? Shape{n, k} : Shape{k, n};
                    };
                    auto batched = [left](int64_t b, int64_t n, int64_t k) {
                        return left ? Shape{b, n, k} : Shape{b, k, n};
                    };
                    std::vector<Case> cs = {
                        {{in({3, 3}, Gen::Triangular), in(bshape(3, 2))}},
                        {{in({2, 3, 3}, Gen::Triangular), in(batched(2, 3, 2))}},
                        {{in({1, 1}, Gen::Triangular), in(bshape(1, 4))}},
                        {{in({3, 3}, Gen::Triangular), in(bshape(3, 0))}},
                        {{in({0, 0}, Gen::Triangular), in(bshape(0, 2))}}};
                    t.push_back({.name = name,
                                 .op = "triangular_solve",
                                 .build =
                                     [=](Xs x) {
                                         return triangular_solve(x[0], x[1], left, lower, trans,
                                                                 unit);
                                     },
                                 .cases = cs,
                                 .dtypes = kFloat,
                                 .grad = GradCheck::FiniteDiff,
                                 .second_order = true,
                                 .dynamic_grad = false}); // the matrix size must be static
                }

    // ---- convolution and pooling -------------------------------------------------------------
    // f32 tolerance for the library backends: oneDNN sums the up to ~100 products of |values|
    // <= 9 of an output in f32, blocked in another order than the reference's double sum; the
    // rounding error grows like sqrt(n) 2^-24 times the partial sums (|partial| <~ 30), ~1e-5
    // absolute, a few 1e-7 relative: atol 1e-4 and rtol 1e-5 leave a margin of ten.
    const Tol conv_tol{1e-4, 1e-5};
    auto window = [&](std::string name, std::string op, Builder b, std::vector<Case> cs) {
        t.push_back({.name = std::move(name),
                     .op = std::move(op),
                     .build = std::move(b),
                     .cases = std::move(cs),
                     .dtypes = kFloat,
                     .grad = GradCheck::FiniteDiff,
                     .second_order = true,
                     .tol_f32 = conv_tol});
    };
    // conv: (x, w) per case; SAME padding needs static spatial dims (static_only)
    window("conv1d", "conv", [](Xs x) { return conv1d(x[0], x[1]); },
           {shapes({{2, 3, 7}, {4, 3, 3}}), shapes({{1, 2, 5}, {3, 2, 1}}),
            shapes({{0, 2, 4}, {3, 2, 2}}), shapes({{2, 0, 4}, {3, 0, 2}})});
    window("conv1d_stride2_pad", "conv",
           [](Xs x) { return conv1d(x[0], x[1], {2}, {{1, 2}}); },
           {shapes({{2, 3, 8}, {4, 3, 3}}), shapes({{1, 2, 9}, {2, 2, 4}}),
            shapes({{1, 1, 4}, {1, 1, 2}})});
    window("conv1d_dilation2", "conv", [](Xs x) { return conv1d(x[0], x[1], {}, 2, {2}); },
           {shapes({{2, 2, 9}, {3, 2, 3}}), shapes({{1, 3, 6}, {2, 3, 2}})});
    window("conv2d", "conv", [](Xs x) { return conv2d(x[0], x[1]); },
           {shapes({{2, 3, 5, 6}, {4, 3, 3, 2}}), shapes({{1, 1, 3, 3}, {2, 1, 3, 3}}),
            shapes({{3, 2, 4, 4}, {1, 2, 1, 1}})});
    window("conv2d_same_stride2", "conv",
           [](Xs x) { return conv2d(x[0], x[1], {2, 2}, "SAME"); },
           {static_only(shapes({{2, 3, 7, 6}, {4, 3, 3, 3}})),
            static_only(shapes({{1, 2, 5, 5}, {3, 2, 2, 2}})),
            static_only(shapes({{1, 2, 4, 4}, {2, 2, 1, 1}}))});
    window("conv2d_groups2", "conv", [](Xs x) { return conv2d(x[0], x[1], {}, 1, {}, 2); },
           {shapes({{2, 4, 5, 5}, {6, 2, 3, 3}}), shapes({{1, 4, 3, 4}, {2, 2, 2, 3}})});
    // depthwise with channel multiplier 2, asymmetric pads and stride 2
    window("conv2d_depthwise", "conv",
           [](Xs x) { return conv2d(x[0], x[1], {2}, {{1, 0}, {0, 1}}, {}, 3); },
           {shapes({{2, 3, 6, 6}, {6, 1, 3, 3}}), shapes({{1, 3, 5, 4}, {6, 1, 2, 2}})});
    window("conv2d_dilation2", "conv",
           [](Xs x) { return conv2d(x[0], x[1], {2, 1}, {{2, 1}, {1, 2}}, {2, 2}); },
           {shapes({{1, 2, 7, 7}, {3, 2, 3, 3}}), shapes({{2, 1, 5, 6}, {2, 1, 2, 3}})});
    window(
        "conv3d", "conv", [](Xs x) { return conv(x[0], x[1]); },
        {shapes({{1, 2, 4, 4, 3}, {2, 2, 2, 2, 2}}), shapes({{2, 1, 3, 3, 3}, {1, 1, 3, 1, 2}})});
    // four spatial dims: no library takes it, the reference kernel runs on every backend
    window("conv4d", "conv", [](Xs x) { return conv(x[0], x[1], {1, 2, 1, 1}, 1); },
           {shapes({{1, 2, 3, 3, 2, 3}, {2, 2, 2, 2, 1, 2}})});
    // the backward ops on their own: (dy, w) and (x, dy)
    window("conv_backward_data1d", "conv_backward_data",
           [](Xs x) { return conv_backward_data(x[0], x[1], {8}, {2}, {{1, 2}}); },
           {shapes({{2, 4, 5}, {4, 3, 3}}), shapes({{1, 2, 5}, {2, 1, 3}})});
    window("conv_backward_data2d_groups2", "conv_backward_data",
           [](Xs x) {
               return conv_backward_data(x[0], x[1], {7, 6}, {2, 2}, {{1, 1}, {0, 1}}, {1, 2}, 2);
           },
           {shapes({{2, 4, 4, 3}, {4, 2, 3, 2}}), shapes({{1, 2, 4, 3}, {2, 1, 3, 2}})});
    window("conv_backward_filter1d", "conv_backward_filter",
           [](Xs x) { return conv_backward_filter(x[0], x[1], {3}, {2}, {{1, 2}}); },
           {shapes({{2, 3, 8}, {2, 4, 5}}), shapes({{1, 2, 8}, {1, 1, 5}})});
    window("conv_backward_filter2d_depthwise", "conv_backward_filter",
           [](Xs x) {
               return conv_backward_filter(x[0], x[1], {2, 3}, {1, 2}, {{0, 1}, {1, 1}}, {2, 1}, 3);
           },
           {shapes({{2, 3, 5, 6}, {2, 6, 4, 3}}), shapes({{1, 3, 4, 4}, {1, 3, 3, 2}})});
    // conv_transpose is conv_backward_data with the output size from the padding; its output size
    // needs static spatial dims
    window("conv_transpose2d", "conv_backward_data",
           [](Xs x) { return conv_transpose(x[0], x[1], {2, 2}, 1, {}, 1, {1, 0}); },
           {static_only(shapes({{2, 3, 3, 4}, {3, 2, 3, 3}})),
            static_only(shapes({{1, 2, 2, 2}, {2, 4, 3, 3}}))});
    window("conv_transpose2d_groups2_dilation2", "conv_backward_data",
           [](Xs x) { return conv_transpose(x[0], x[1], {1, 2}, {{1, 0}, {0, 1}}, {2, 1}, 2); },
           {static_only(shapes({{2, 4, 3, 3}, {4, 3, 2, 3}}))});
    window(
        "conv_transpose1d_same", "conv_backward_data",
        [](Xs x) { return conv_transpose(x[0], x[1], {2}, "SAME"); },
        {static_only(shapes({{2, 3, 4}, {3, 2, 3}})), static_only(shapes({{1, 1, 3}, {1, 2, 4}}))});
    // pooling; max pooling on distinct values (a tie is a kink: no finite differences there)
    auto distinct = [](std::initializer_list<Shape> ss) { return shapes(ss, Gen::Distinct); };
    window("max_pool1d_overlap", "pool", [](Xs x) { return max_pool1d(x[0], {3}, {2}); },
           {distinct({{2, 3, 7}}), distinct({{1, 1, 4}}), distinct({{0, 2, 5}})});
    window("max_pool2d", "pool", [](Xs x) { return max_pool2d(x[0], {2, 2}); },
           {distinct({{2, 3, 4, 6}}), distinct({{1, 2, 5, 5}})});
    window("max_pool2d_overlap_pad", "pool",
           [](Xs x) { return max_pool2d(x[0], {3, 3}, {1, 2}, {{1, 1}, {2, 0}}); },
           {distinct({{2, 2, 5, 6}}), distinct({{1, 1, 3, 3}})});
    window("max_pool2d_same", "pool", [](Xs x) { return max_pool2d(x[0], {3}, {2}, "SAME"); },
           {static_only(distinct({{1, 2, 5, 6}}))});
    window("max_pool3d", "pool", [](Xs x) { return max_pool(x[0], {2, 1, 2}, {1, 1, 2}); },
           {distinct({{1, 2, 3, 3, 4}})});
    window("max_pool4d", "pool", [](Xs x) { return max_pool(x[0], {2, 2, 1, 2}, {1}); },
           {distinct({{1, 1, 3, 2, 2, 3}})});
    window("avg_pool2d_include_pad", "pool",
           [](Xs x) { return avg_pool2d(x[0], {3, 2}, {2, 1}, 1, true); },
           {shapes({{2, 3, 5, 4}}), shapes({{1, 1, 3, 2}})});
    window("avg_pool2d_exclude_pad", "pool",
           [](Xs x) { return avg_pool2d(x[0], {3, 2}, {2, 1}, 1, false); },
           {shapes({{2, 3, 5, 4}}), shapes({{1, 1, 3, 2}})});
    window("avg_pool1d_same_exclude_pad", "pool",
           [](Xs x) { return avg_pool1d(x[0], {3}, {2}, "SAME", false); },
           {static_only(shapes({{2, 3, 7}})), static_only(shapes({{1, 2, 2}}))});
    window("avg_pool3d", "pool", [](Xs x) { return avg_pool(x[0], {2}); },
           {shapes({{1, 2, 4, 4, 4}}), shapes({{0, 1, 2, 2, 2}})});
    // the backward ops on their own: (x, dy) and (dy); the gradient of max_pool_backward in dy
    // (the argmax selection) needs static spatial dims
    t.push_back({.name = "max_pool_backward2d",
                 .op = "max_pool_backward",
                 .build =
                     [](Xs x) {
                         return max_pool_backward(x[0], x[1], {3, 3}, {1, 2}, {{1, 1}, {2, 0}});
                     },
                 .cases = {{{in({2, 2, 5, 6}, Gen::Distinct), in({2, 2, 5, 3})}},
                           {{in({1, 1, 3, 3}, Gen::Distinct), in({1, 1, 3, 2})}}},
                 .dtypes = kFloat,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true,
                 .dynamic_grad = false,
                 .tol_f32 = conv_tol});
    t.push_back({.name = "max_pool_backward1d",
                 .op = "max_pool_backward",
                 .build = [](Xs x) { return max_pool_backward(x[0], x[1], {3}, {2}); },
                 .cases = {{{in({2, 3, 7}, Gen::Distinct), in({2, 3, 3})}}},
                 .dtypes = kFloat,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true,
                 .dynamic_grad = false,
                 .tol_f32 = conv_tol});
    for (bool include : {true, false})
        window(include ? "avg_pool_backward2d_include_pad" : "avg_pool_backward2d_exclude_pad",
               "avg_pool_backward",
               [include](Xs x) {
                   return avg_pool_backward(x[0], {5, 4}, {3, 2}, {2, 1}, 1, include);
               },
               {shapes({{2, 3, 3, 5}}), shapes({{1, 1, 3, 5}})});
    // channel blocking (the cpu backend's layout pass inserts these; Note [Channel-blocked
    // layout]): 1 to 3 spatial dims, several blocks, an empty batch; the channel count must be
    // known when the graph is built (static_only)
    window("block_channels", "block_channels", [](Xs x) { return block_channels(x[0]); },
           {static_only(shapes({{1, 16, 2, 1}})), static_only(shapes({{2, 32, 3}})),
            static_only(shapes({{1, 16, 2, 1, 2}})), static_only(shapes({{0, 16, 2, 2}}))});
    window("unblock_channels", "unblock_channels", [](Xs x) { return unblock_channels(x[0]); },
           {static_only(shapes({{1, 1, 2, 1, 16}})), static_only(shapes({{2, 2, 3, 16}})),
            static_only(shapes({{1, 1, 2, 1, 2, 16}})), static_only(shapes({{0, 1, 2, 2, 16}}))});
    // AVX2's 8-channel blocks (the width is the block_channels node's layout mask)
    window("block_channels8", "block_channels", [](Xs x) { return block_channels(x[0], 8); },
           {static_only(shapes({{1, 16, 2, 1}})), static_only(shapes({{2, 24, 3}})),
            static_only(shapes({{1, 8, 2, 1, 2}})), static_only(shapes({{0, 16, 2, 2}}))});
    window("unblock_channels8", "unblock_channels", [](Xs x) { return unblock_channels(x[0]); },
           {static_only(shapes({{1, 2, 2, 1, 8}})), static_only(shapes({{2, 3, 3, 8}})),
            static_only(shapes({{1, 1, 2, 1, 2, 8}})), static_only(shapes({{0, 2, 2, 2, 8}}))});

    // ---- random: the input only gives the shape ----------------------------------------------
    t.push_back({.name = "philox_bits",
                 .op = "philox_bits",
                 .build = [](Xs x) { return random::bits_like(x[0], 7); },
                 .cases = each({{3, 5}, {0}, {}, {2, 3}, {7}}),
                 .dtypes = {DType::U32}});

    // ---- composites -------------------------------------------------------------------------
    auto composite = [&](std::string name, Builder b, std::vector<Case> cs, std::vector<DType> dts,
                         bool specials = false) {
        std::string op = name.substr(0, name.find("__"));
        t.push_back({.name = name,
                     .op = op,
                     .build = std::move(b),
                     .cases = std::move(cs),
                     .dtypes = std::move(dts),
                     .grad = GradCheck::FiniteDiff,
                     .second_order = true,
                     .specials = specials});
    };
    // large and infinite logits: the max shift keeps every result finite
    Case big = forward_only({{in_values({2, 3}, {1000, 1000, -1000, -INFINITY, 0, 1})}});
    {
        std::vector<Case> cs = each({{3, 5}, {7}, {2, 1, 4}, {0, 3}, {4, 1}});
        cs.push_back(big);
        composite(
            "softmax", [](Xs x) { return softmax(x[0], -1); }, cs, kFloat);
        std::vector<Case> ls1 = each({{3, 5}, {2, 4, 1}, {0, 3}, {4, 1}, {2, 1, 4}});
        ls1.push_back(forward_only({{in_values({3, 2}, {1000, 1000, -1000, -INFINITY, 0, 1})}}));
        composite(
            "log_softmax", [](Xs x) { return log_softmax(x[0], 1); }, ls1, kFloat);
        std::vector<Case> ls = each({{3, 5}, {4, 1}, {0, 3}, {2, 3, 4}});
        ls.push_back(forward_only(
            {{in_values({4, 2}, {-INFINITY, -INFINITY, 0, -INFINITY, 1000, 1000, INFINITY, 1})}}));
        composite(
            "logsumexp", [](Xs x) { return logsumexp(x[0], {1}); }, ls, kFloat);
        composite(
            "logsumexp__all", [](Xs x) { return logsumexp(x[0]); }, each({{}, {7}, {2, 3}}), kFloat,
            true);
    }
    {
        // wide ranges exercise both branches of the stable formulas
        std::vector<Case> cs = unary_cases(in_range({}, -8, 8));
        cs.push_back(forward_only({{in_values({7}, {-1000, -40, -20, 0, 20, 40, 1000})}}));
        composite(
            "softplus", [](Xs x) { return softplus(x[0]); }, cs, kFloat, true);
        composite(
            "sigmoid", [](Xs x) { return sigmoid(x[0]); }, cs, kFloat, true);
        composite(
            "log_sigmoid", [](Xs x) { return log_sigmoid(x[0]); }, cs, kFloat, true);
    }
    composite(
        "mean", [](Xs x) { return mean(x[0], {1}); }, each({{3, 5}, {2, 0}, {0, 3}, {4, 1}}), kAll);
    composite(
        "var", [](Xs x) { return var(x[0], {0}); }, each({{5, 3}, {1, 4}, {0, 2}, {3}}), kNumeric);
    composite(
        "var__ddof1", [](Xs x) { return var(x[0], {1}, true, 1); }, each({{3, 5}, {2, 1}, {4, 2}}),
        kNumeric);
    composite(
        "clip", [](Xs x) { return clip(x[0], -1, 2); }, unary_cases(in({})), kNumeric, true);
    composite(
        "matmul", [](Xs x) { return matmul(x[0], x[1]); },
        {shapes({{3, 4}, {4, 5}}), shapes({{4}, {4, 5}}), shapes({{3, 4}, {4}}), shapes({{4}, {4}}),
         shapes({{2, 3, 4}, {4, 5}}),
         // a static 1 against a -1 dim is a batch dim checked at call time (Note [matmul
         // without broadcast nodes]): broadcasting it needs static shapes
         static_only(shapes({{2, 1, 3, 4}, {5, 4, 2}})),
         static_only(shapes({{1, 3, 4}, {2, 4, 5}})), shapes({{0, 3, 4}, {4, 2}}),
         shapes({{3, 0}, {0, 2}})},
        kNumeric);
    composite(
        "expand_dims", [](Xs x) { return expand_dims(x[0], -1); }, each({{}, {3}, {3, 0}, {2, 3}}),
        kAll);
    composite(
        "squeeze", [](Xs x) { return squeeze(x[0]); },
        each({{1, 3, 1}, {1}, {3}, {1, 0, 1}, {2, 1, 3}}), kAll);
    composite(
        "stack",
        [](Xs x) {
            return stack({x[0], x[1], x[2]}, -1);
        },
        {shapes({{2, 3}, {2, 3}, {2, 3}}), shapes({{}, {}, {}}), shapes({{0, 2}, {0, 2}, {0, 2}})},
        kAll);
    composite(
        "flatten", [](Xs x) { return flatten(x[0], 1); },
        // flatten rejects a target with two unknown dims (a ShapeError, docs/ops.md); in the -1
        // runs: [2, 3, 4] becomes [-1, -1, -1], which it rejects with a ShapeError (two unknown
        // dims in the target; docs/ops.md), so the leading dim here is 1
        each({{1, 3, 4}, {3, 1}, {1, 0, 2}, {4, 1, 1}}), kAll);
    composite(
        "subscripts",
        [](Xs x) {
            return x[0][{1, sl(0, Index::kEnd, 2)}];
        },
        each({{3, 5, 7}, {2, 4}, {3, 0}}), kAll);
    // a negative index counts from the end, on a dim of unknown size too (checked when run)
    composite(
        "subscripts__negative",
        [](Xs x) {
            return x[0][{sl(), -1}];
        },
        each({{2, 3}, {4, 5, 1}, {0, 2}}), kAll);
    // negative steps (Note [Negative steps] in src/ops/Movement.cpp): a flip, then a slice whose
    // start counts from the end, so on a dim of unknown size the gradient's start is counted
    // when the function runs
    composite(
        "subscripts__reverse",
        [](Xs x) {
            return x[0][{sl(-1, Index::kBegin, -1), sl(3, 0, -2)}];
        },
        each({{3, 5}, {2, 4, 2}, {0, 4}}), kAll);
    composite(
        "subscripts__reverse_tail", [](Xs x) { return slice_axis(x[0], -1, -1, -5, -2); },
        each({{7}, {2, 3}, {3, 6}}), kAll);

    // ---- interpolation ----
    // Composites of gather, floor and where (include/symjax/Interpolation.h). They need static
    // input dims, so no case runs on -1 placeholders. Coordinates stay >= 0.15 away from integers
    // (the kinks of linear interpolation) and >= 0.05 from halves (order 0 rounds there), so
    // finite differences see one smooth piece.
    {
        namespace ip = interpolation;
        auto interp = [&](std::string name, Builder b, std::vector<Case> cs) {
            for (auto& c : cs)
                c.dynamic = false;
            t.push_back({.name = name,
                         .op = name.substr(0, name.find("__")),
                         .build = std::move(b),
                         .cases = std::move(cs),
                         .dtypes = kFloat,
                         .grad = GradCheck::FiniteDiff,
                         .second_order = true,
                         .dynamic = false});
        };
        const std::vector<double> cv = {-1.3, 0.2,  1.7, 2.45, 3.6,  -0.6, 4.3,  0.85,
                                        2.15, 1.35, 3.2, 5.7,  -2.4, 0.6,  1.15, 6.3};
        const std::vector<Case> map_cases = {{{in({4, 5}), in_values({2, 8}, cv)}},
                                             {{in({3, 2}), in_values({2, 2, 3}, cv)}},
                                             {{in({1, 6}), in_values({2, 5}, cv)}}};
        const std::pair<const char*, ip::Boundary> modes[] = {{"constant", ip::Boundary::Constant},
                                                              {"nearest", ip::Boundary::Nearest},
                                                              {"wrap", ip::Boundary::Wrap},
                                                              {"reflect", ip::Boundary::Reflect},
                                                              {"mirror", ip::Boundary::Mirror}};
        for (const auto& [mode_name, mode] : modes) {
            const double cval = mode == ip::Boundary::Constant ? 0.5 : 0.0;
            interp(
                std::string("map_coordinates__linear_") + mode_name,
                [mode, cval](Xs x) { return ip::map_coordinates(x[0], x[1], 1, mode, cval); },
                map_cases);
        }
        interp(
            "map_coordinates__order0_constant",
            [](Xs x) { return ip::map_coordinates(x[0], x[1], 0, ip::Boundary::Constant, -1.0); },
            map_cases);
        interp(
            "map_coordinates__order0_reflect",
            [](Xs x) { return ip::map_coordinates(x[0], x[1], 0, ip::Boundary::Reflect); },
            map_cases);
        interp("map_coordinates__linear_3d", [](Xs x) { return ip::map_coordinates(x[0], x[1]); },
               {{{in({2, 3, 4}), in_values({3, 2, 2}, cv)}},
                {{in({1, 2, 2}), in_values({3, 4}, cv)}}});

        auto resize_row = [&](std::string name, Shape size, ip::Method m, bool align,
                              std::vector<Case> cs) {
            interp(
                std::move(name),
                [size, m, align](Xs x) { return ip::resize(x[0], size, m, align); }, std::move(cs));
        };
        using M = ip::Method;
        resize_row("resize__nearest_1d", {8}, M::Nearest, false, each({{2, 2, 5}, {1, 1, 8}}));
        resize_row("resize__nearest_2d", {7, 3}, M::Nearest, false, each({{1, 2, 3, 4}}));
        resize_row("resize__nearest_2d_align", {4, 7}, M::Nearest, true, each({{1, 2, 2, 3}}));
        resize_row("resize__linear_1d", {9}, M::Linear, false, each({{2, 1, 4}, {1, 2, 1}}));
        resize_row("resize__linear_1d_align", {9}, M::Linear, true, each({{2, 1, 4}, {1, 1, 1}}));
        resize_row("resize__bilinear", {5, 7}, M::Linear, false,
                   each({{1, 2, 3, 4}, {2, 1, 5, 7}}));
        resize_row("resize__bilinear_down", {4, 3}, M::Linear, false, each({{1, 1, 6, 7}}));
        resize_row("resize__bilinear_align", {5, 7}, M::Linear, true, each({{1, 2, 3, 4}}));
        resize_row("resize__trilinear", {3, 5, 2}, M::Linear, false, each({{1, 1, 2, 3, 3}}));
        resize_row("resize__trilinear_align", {3, 5, 2}, M::Linear, true, each({{1, 1, 2, 3, 3}}));

        using U = ip::UpsampleMode;
        auto up_row = [&](std::string name, int64_t repeat, int64_t axis, U mode, double value,
                          ip::Boundary b, std::vector<Case> cs) {
            interp(
                std::move(name),
                [=](Xs x) { return ip::upsample_1d(x[0], repeat, axis, mode, value, b); },
                std::move(cs));
        };
        up_row("upsample_1d__constant", 2, -1, U::Constant, 0.0, ip::Boundary::Nearest,
               each({{2, 3}, {4}}));
        up_row("upsample_1d__constant_value", 1, 0, U::Constant, 1.5, ip::Boundary::Nearest,
               each({{3, 2}}));
        up_row("upsample_1d__nearest", 2, 1, U::Nearest, 0.0, ip::Boundary::Nearest,
               each({{2, 3}, {1, 1}}));
        up_row("upsample_1d__linear", 3, -1, U::Linear, 0.0, ip::Boundary::Nearest,
               each({{2, 4}, {3, 1}}));
        up_row("upsample_1d__linear_wrap", 1, 0, U::Linear, 0.0, ip::Boundary::Wrap,
               each({{4, 2}}));
        up_row("upsample_1d__linear_mirror", 2, 1, U::Linear, 0.0, ip::Boundary::Mirror,
               each({{2, 4}, {2, 1}}));
        up_row("upsample_1d__linear_constant", 2, 1, U::Linear, -2.0, ip::Boundary::Constant,
               each({{2, 3}}));
        interp(
            "upsample_2d__linear",
            [](Xs x) {
                return ip::upsample_2d(x[0], {1, 2}, {2, 3}, U::Linear);
            },
            each({{1, 2, 3, 2}}));
    }

    // ---- indexed updates, diagonals, nan reductions ------------------------------------------
    // scatter: repeated indices accumulate (set: the last update wins in the reference kernel)
    auto scatter_row = [&](std::string name, ScatterMode mode, int64_t axis, std::vector<Case> cs) {
        t.push_back({.name = name,
                     .op = "scatter",
                     .build = [mode, axis](Xs x) { return scatter(x[0], x[1], x[2], axis, mode); },
                     .cases = std::move(cs),
                     .dtypes = kAll,
                     .grad = GradCheck::FiniteDiff,
                     .second_order = true});
    };
    const std::vector<Case> scatter0 = {
        {{in({5, 3}), in_index({6}, 0, 5), in({6, 3})}},
        {{in({4}), in_index({}, 0, 4), in({})}},
        {{in({5, 3}), in_index({0}, 0, 5), in({0, 3})}},
        {{in({3, 2}), in_index({2, 2}, 0, 3, DType::I32), in({2, 2, 2})}}};
    const std::vector<Case> scatter1 = {{{in({2, 4}), in_index({3}, 0, 4, DType::U8), in({2, 3})}},
                                        {{in({0, 4}), in_index({2}, 0, 4), in({0, 2})}}};
    scatter_row("scatter_set", ScatterMode::Set, 0, scatter0);
    scatter_row("scatter_set_axis1", ScatterMode::Set, 1, scatter1);
    scatter_row("scatter_mul", ScatterMode::Mul, 0, scatter0);
    scatter_row("scatter_min", ScatterMode::Min, 0, scatter0);
    scatter_row("scatter_max_axis1", ScatterMode::Max, 1, scatter1);
    // zeros among the updates of one position (the product rule's cases: none, one, two)
    scatter_row(
        "scatter_mul_zeros", ScatterMode::Mul, 0,
        {{{in({3}), in_values({4}, {0, 0, 1, 2}, DType::I64), in_values({4}, {0, 2, 0, 0})}},
         {{in({3}), in_values({3}, {1, 1, 0}, DType::I64), in_values({3}, {0, 3, 2})}},
         {{in({2}), in_values({4}, {0, 0, 0, 1}, DType::I64), in_values({4}, {0, 0, 2, 0})}}});
    // ties: the gradient is shared among the operands equal to the result
    scatter_row("scatter_max_ties", ScatterMode::Max, 0,
                {{{in_values({3}, {1, 2, 0}), in_values({3}, {0, 0, 2}, DType::I64),
                   in_values({3}, {1, 1, 0})}}});
    t.back().grad = GradCheck::None; // not differentiable at ties (tests/unit/IndexedTest.cpp)
    t.back().second_order = false;

    // indexed updates: a row's builder fixes the subscript; static subscripts need the indexed
    // dims at build time, so those rows skip the -1 runs
    auto update_row = [&](std::string name, Builder b, std::vector<Case> cs, bool dynamic) {
        std::string op = name.substr(0, name.find("__"));
        t.push_back({.name = name,
                     .op = op,
                     .build = std::move(b),
                     .cases = std::move(cs),
                     .dtypes = kAll,
                     .grad = GradCheck::FiniteDiff,
                     .second_order = true,
                     .dynamic = dynamic});
    };
    // strided box: where(mask, pad(v), x)
    update_row(
        "index_update__box",
        [](Xs x) {
            return x[0].at({sl(1, -1), sl(0, Index::kEnd, 2)}).set(x[1]);
        },
        {shapes({{4, 5}, {2, 3}}), shapes({{4, 5}, {3}}), shapes({{4, 5}, {}}),
         shapes({{3, 3}, {1, 2}}), shapes({{2, 3}, {0, 2}})},
        false);
    // contiguous box with an integer: dynamic_update_slice
    update_row(
        "index_add__int",
        [](Xs x) {
            return x[0].at({-1, sl(1, 3)}).add(x[1]);
        },
        {shapes({{3, 4}, {2}}), shapes({{3, 4}, {}}), shapes({{2, 5, 2}, {2, 2}}),
         shapes({{1, 3, 1}, {2, 1}})},
        false);
    update_row(
        "index_mul__box", [](Xs x) { return x[0].at(sl(0, Index::kEnd, 2)).mul(x[1]); },
        {shapes({{5, 2}, {3, 2}}), shapes({{5, 2}, {2}}), shapes({{1}, {1}})}, false);
    update_row(
        "index_min__box",
        [](Xs x) {
            return x[0].at({sl(), 2}).min(x[1]);
        },
        {shapes({{3, 4}, {3}}), shapes({{2, 4, 2}, {2, 2}}), shapes({{0, 3}, {}})}, false);
    update_row(
        "index_max__box", [](Xs x) { return index_max(x[0], {sl(1, 3)}, x[1]); },
        {shapes({{4, 3}, {2, 3}}), shapes({{3}, {}}), shapes({{5, 2}, {1, 2}})}, false);
    // one tensor index (negative entries count from the end; repeats accumulate): scatter
    update_row(
        "index_update__tensor", [](Xs x) { return x[0].at(x[1]).set(x[2]); },
        {{{in({5, 3}), in_index({4}, -5, 5), in({4, 3})}},
         {{in({5, 3}), in_index({4}, -5, 5), in({3})}},
         {{in({4}), in_index({2, 2}, -4, 4, DType::I32), in({2, 2})}},
         {{in({4}), in_index({}, 0, 4, DType::U8), in({})}}},
        true);
    update_row(
        "index_add__tensor",
        [](Xs x) {
            return index_add(x[0], {sl(), x[1]}, x[2]);
        },
        {{{in({3, 5}), in_index({4}, -5, 5), in({3, 4})}},
         {{in({2, 3}), in_index({2, 2}, -3, 3, DType::I32), in({2})}}},
        true);
    update_row(
        "index_mul__tensor", [](Xs x) { return x[0].at(x[1]).mul(x[2]); },
        {{{in({4, 2}), in_index({5}, -4, 4), in({5, 2})}},
         {{in({3}), in_index({2, 2}, 0, 3), in({})}}},
        true);
    update_row(
        "index_min__tensor", [](Xs x) { return x[0].at(x[1]).min(x[2]); },
        {{{in({4, 2}), in_index({5}, -4, 4), in({5, 2})}},
         {{in({3}), in_index({2, 2}, 0, 3), in({2, 2})}}},
        true);
    update_row(
        "index_max__tensor", [](Xs x) { return index_max(x[0], {x[1]}, x[2]); },
        {{{in({4, 2}), in_index({5}, -4, 4), in({5, 2})}},
         {{in({3}), in_index({2, 2}, 0, 3), in({1})}}},
        true);
    // two tensor indices apart (the broadcast dims go first, as NumPy), and a range
    update_row(
        "index_add__tensors",
        [](Xs x) {
            return x[0].at({x[1], sl(0, 2), x[2]}).add(x[3]);
        },
        {{{in({3, 3, 4}), in_index({3}, 0, 3), in_index({3}, -4, 4), in({3, 2})}},
         {{in({3, 2, 4}), in_index({2, 1}, -3, 3), in_index({3}, 0, 4, DType::I32), in({2})}}},
        false);
    // an integer next to a tensor index is an advanced index too (adjacent: the dims stay put)
    update_row(
        "index_update__mixed",
        [](Xs x) {
            return x[0].at({sl(0, 2), x[1], 1}).set(x[2]);
        },
        {{{in({3, 4, 2}), in_index({2}, -4, 4), in({2, 2})}},
         {{in({2, 4, 3}), in_index({3}, 0, 4), in({3})}}},
        false);
    // reads: x[t] gathers
    update_row(
        "subscripts__tensor", [](Xs x) { return x[0][x[1]]; },
        {{{in({5, 3}), in_index({2, 2}, -5, 5)}},
         {{in({4}), in_index({3}, -4, 4, DType::I32)}},
         {{in({4, 2}), in_index({}, 0, 4, DType::U8)}}},
        true);
    update_row(
        "subscripts__tensors",
        [](Xs x) {
            return x[0][{1, sl(), x[1]}];
        },
        {{{in({3, 2, 4}), in_index({2, 2}, -4, 4)}}, {{in({2, 3, 5}), in_index({3}, 0, 5)}}},
        false);

    // diagonals: movement ops only
    update_row(
        "diagonal", [](Xs x) { return diagonal(x[0], 1); },
        each({{3, 4}, {4, 3}, {2, 2}, {2, 5, 1}, {1, 0}}), false);
    update_row(
        "diagonal__axes", [](Xs x) { return diagonal(x[0], -1, 2, 0); },
        each({{3, 2, 4}, {4, 1, 2}, {2, 3, 5, 2}}), false);
    update_row(
        "diag", [](Xs x) { return diag(x[0], 1); }, each({{3}, {1}, {0}}), false);
    update_row(
        "diag__matrix", [](Xs x) { return diag(x[0], -1); }, each({{3, 4}, {2, 2}, {1, 3}}), false);
    update_row(
        "diag__vector_below", [](Xs x) { return diag(x[0], -2); }, each({{3}, {2}}), false);
    {
        OpRow tr{.name = "trace",
                 .op = "trace",
                 .build = [](Xs x) { return trace(x[0]); },
                 .cases = each({{3, 3}, {2, 4}, {4, 2, 3}}),
                 .dtypes = kNumeric,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true,
                 .dynamic = false};
        t.push_back(tr);
        tr.name = "trace__axes";
        tr.build = [](Xs x) { return trace(x[0], 1, 1, 2); };
        tr.cases = each({{2, 3, 4}, {1, 3, 3}});
        t.push_back(tr);
    }

    // eye's offset k (a constant: added to an input so the harness has one)
    t.push_back({.name = "eye__offset",
                 .op = "eye",
                 .build = [](Xs x) { return x[0] + eye(3, 4, 1, x[0].dtype()); },
                 .cases = each({{3, 4}}),
                 .dtypes = kNumeric,
                 .grad = GradCheck::FiniteDiff,
                 .dynamic = false});
    t.push_back({.name = "eye__below",
                 .op = "eye",
                 .build = [](Xs x) { return x[0] + eye(4, -1, -2, x[0].dtype()); },
                 .cases = each({{4, 4}, {1, 4}}),
                 .dtypes = kNumeric,
                 .grad = GradCheck::FiniteDiff,
                 .dynamic = false});

    // nan reductions: NaN elements are skipped (and get no gradient); an all-NaN slice gives 0
    // (nansum) or NaN (nanmean, nanmax, nanmin)
    {
        const double nan = NAN;
        // finite differences cannot step from NaN: the NaN cases are forward only (their zero
        // gradient is checked in tests/unit/IndexedTest.cpp)
        std::vector<Case> cs = {forward_only({{in_values({3, 4}, {1.5, nan, -2, 0.5, nan, nan, 3, 1,
                                                                  2.5, -1, -0.75, 0.25})}}),
                                {{in({2, 3})}},
                                {{in({0, 3})}},
                                forward_only({{in_values({2, 2}, {nan, 1, nan, 2})}})};
        for (const char* name : {"nansum", "nanmean", "nanmax", "nanmin"}) {
            std::string n = name;
            Builder b = [n](Xs x) {
                if (n == "nansum")
                    return nansum(x[0], {0});
                if (n == "nanmean")
                    return nanmean(x[0], {0});
                if (n == "nanmax")
                    return nanmax(x[0], {0});
                return nanmin(x[0], {0});
            };
            std::vector<Case> c = cs;
            if (n == "nanmax" || n == "nanmin")
                c.erase(c.begin() + 2); // an empty max
            t.push_back({.name = n,
                         .op = n,
                         .build = b,
                         .cases = c,
                         .dtypes = kFloat,
                         .grad = GradCheck::FiniteDiff,
                         .second_order = true});
        }
        Case float_nans = forward_only({{in_values({2, 3}, {nan, 1, 2, nan, -1, 0.5})}});
        float_nans.only = kFloat;
        t.push_back({.name = "nansum__all_keepdims",
                     .op = "nansum",
                     .build = [](Xs x) { return nansum(x[0], {}, true); },
                     .cases = {float_nans, {{in({4})}}},
                     .dtypes = kNumeric,
                     .grad = GradCheck::FiniteDiff});
    }
    // ---- control flow: scan, while_loop, cond (include/symjax/ControlFlow.h) ----
    {
        using Ts = std::vector<Tensor>;
        // a tanh recurrence over 5 steps: the stacked outputs (gradients through every carry)
        t.push_back({.name = "scan__tanh_recurrence_stacked",
                     .op = "scan",
                     .build =
                         [](Xs x) {
                             return scan(
                                        [](const Ts& c, const Ts& a) {
                                            Tensor n = tanh(c[0] * 0.5 + a[0]);
                                            return std::pair{Ts{n}, Ts{n * a[0]}};
                                        },
                                        {x[1]}, {x[0]})
                                 .outputs[0];
                         },
                     .cases = {shapes({{5, 3}, {3}})},
                     .dtypes = kFloat,
                     .grad = GradCheck::FiniteDiff,
                     .second_order = true});
        // reverse, with a captured tensor: the final carry
        t.push_back({.name = "scan__reverse_captured_final_carry",
                     .op = "scan",
                     .build =
                         [](Xs x) {
                             Tensor w = x[2];
                             return scan(
                                        [&](const Ts& c, const Ts& a) {
                                            return std::pair{Ts{c[0] * w + sin(a[0])}, Ts{}};
                                        },
                                        {x[1]}, {x[0]}, {}, {.reverse = true})
                                 .carry[0];
                         },
                     .cases = {{{in_range({4, 2}, -1, 1), in_range({2}, -1, 1), in_range({2}, -1, 1)}}},
                     .dtypes = kFloat,
                     .grad = GradCheck::FiniteDiff,
                     .second_order = true});
        // Newton's iteration for sqrt, 5 iterations counted by an integer loop variable
        t.push_back({.name = "while_loop__newton_sqrt",
                     .op = "while_loop",
                     .build =
                         [](Xs x) {
                             return while_loop(
                                 [](const Ts& v, const Ts&) { return v[1] < 5.0; },
                                 [](const Ts& v, const Ts& a) {
                                     return Ts{0.5 * (v[0] + a[0] / v[0]), v[1] + 1.0};
                                 },
                                 {x[0], scalar(0.0, DType::I64)}, {x[0]}, {.max_iterations = 8})[0];
                         },
                     .cases = {shapes({{3}}, Gen::Positive)},
                     .dtypes = kFloat,
                     .grad = GradCheck::FiniteDiff});
        t.push_back({.name = "cond__sum_positive",
                     .op = "cond",
                     .build =
                         [](Xs x) {
                             return cond(
                                 sum(x[0]) > 0.0,
                                 [](const Ts& o) { return Ts{exp(o[0] * 0.5) * o[1]}; },
                                 [](const Ts& o) { return Ts{o[0] * o[0] - o[1]}; }, {x[0], x[1]})[0];
                         },
                     .cases = {shapes({{4}, {4}}), shapes({{2, 3}, {2, 3}})},
                     .dtypes = kFloat,
                     .grad = GradCheck::FiniteDiff,
                     .second_order = true});
    }

    // ---- collectives (docs/distributed.md): here a world of one, where each is the identity
    // (all_gather of a scalar: a vector of one); tests/dist runs them on 2 ranks ---------------
    for (dist::ReduceOp op :
         {dist::ReduceOp::Sum, dist::ReduceOp::Mean, dist::ReduceOp::Max, dist::ReduceOp::Min}) {
        std::string r = dist::reduce_op_name(op);
        bool mean = op == dist::ReduceOp::Mean;
        t.push_back({.name = "all_reduce__" + r,
                     .op = "all_reduce",
                     .build = [op](Xs x) { return dist::all_reduce(x[0], op); },
                     .cases = each({{}, {0}, {7}, {3, 5}}),
                     .dtypes = mean ? kFloat : kNumeric,
                     .grad = GradCheck::FiniteDiff,
                     .second_order = true});
        if (op == dist::ReduceOp::Min)
            continue;
        t.push_back({.name = "reduce_scatter__" + r,
                     .op = "reduce_scatter",
                     .build = [op](Xs x) { return dist::reduce_scatter(x[0], op); },
                     .cases = each({{0}, {7}, {3, 5}}),
                     .dtypes = mean ? kFloat : kNumeric,
                     .grad = GradCheck::FiniteDiff});
    }
    t.push_back({.name = "all_gather",
                 .op = "all_gather",
                 .build = [](Xs x) { return dist::all_gather(x[0]); },
                 .cases = each({{}, {0}, {7}, {3, 5}}),
                 .dtypes = kAll,
                 .grad = GradCheck::FiniteDiff,
                 .second_order = true});
    t.push_back({.name = "broadcast_from",
                 .op = "broadcast_from",
                 .build = [](Xs x) { return dist::broadcast(x[0], 0); },
                 .cases = each({{}, {0}, {7}, {3, 5}}),
                 .dtypes = kAll,
                 .grad = GradCheck::FiniteDiff});
    return t;
}

/// Composite ops (src/api) the table may name besides the primitives of Ops.def.
const std::set<std::string> kComposites = {
    "softmax", "log_softmax", "logsumexp", "softplus", "sigmoid", "log_sigmoid", "mean", "var",
    "clip", "matmul", "expand_dims", "squeeze", "stack", "flatten", "subscripts", "map_coordinates",
    "resize", "upsample_1d", "upsample_2d", "take_along_axis",
    // indexed updates, diagonals, nan reductions
    "index_update", "index_add", "index_mul", "index_min", "index_max", "diagonal", "diag", "trace",
    "nansum", "nanmean", "nanmax", "nanmin", "eye"};

} // namespace

const std::vector<OpRow>& op_table() {
    static const std::vector<OpRow> table = make_table();
    return table;
}

namespace {

std::vector<size_t> rows_where(bool (*pred)(const OpRow&)) {
    std::vector<size_t> out;
    for (size_t i = 0; i < op_table().size(); ++i)
        if (pred(op_table()[i]))
            out.push_back(i);
    return out;
}

std::string row_param_name(const ::testing::TestParamInfo<size_t>& info) {
    return op_table()[info.param].name;
}

class OpForward : public ::testing::TestWithParam<size_t> {};
class OpGradient : public ::testing::TestWithParam<size_t> {};
class OpSecondOrder : public ::testing::TestWithParam<size_t> {};
class OpGolden : public ::testing::TestWithParam<size_t> {};

TEST_P(OpForward, BackendsEvalAndDynamicShapesAgree) {
    check_forward(op_table()[GetParam()]);
}
TEST_P(OpGradient, MatchesFiniteDifferences) {
    check_gradients(op_table()[GetParam()]);
}
TEST_P(OpSecondOrder, HessianVectorProductMatchesFiniteDifferences) {
    check_second_order(op_table()[GetParam()]);
}
TEST_P(OpGolden, MatchesNumPy) {
    check_golden(op_table()[GetParam()]);
}

INSTANTIATE_TEST_SUITE_P(OpTable, OpForward,
                         ::testing::ValuesIn(rows_where([](const OpRow&) { return true; })),
                         row_param_name);
INSTANTIATE_TEST_SUITE_P(OpTable, OpGradient, ::testing::ValuesIn(rows_where([](const OpRow& r) {
                             return r.grad != GradCheck::None;
                         })),
                         row_param_name);
INSTANTIATE_TEST_SUITE_P(OpTable, OpSecondOrder, ::testing::ValuesIn(rows_where([](const OpRow& r) {
                             return r.second_order;
                         })),
                         row_param_name);
INSTANTIATE_TEST_SUITE_P(OpTable, OpGolden,
                         ::testing::ValuesIn(rows_where([](const OpRow&) { return true; })),
                         row_param_name);

// No op lands without its row: every non-leaf op of Ops.def is covered by at least one row.
TEST(OpTableCoverage, EveryPrimitiveHasARow) {
    std::set<std::string> covered, grad_checked;
    for (const auto& r : op_table()) {
        covered.insert(r.op);
        if (r.grad != GradCheck::None)
            grad_checked.insert(r.op);
    }
    for (int i = 0; i < kNumOps; ++i) {
        Op op = Op(i);
        if (has_trait(op, kLeaf))
            continue;
        EXPECT_TRUE(covered.count(op_name(op)))
            << "op '" << op_name(op) << "' of Ops.def has no row in tests/ops/OpTableTest.cpp";
        // an op with a gradient rule has a row that checks it
        if (detail::op_def(op).grad)
            EXPECT_TRUE(grad_checked.count(op_name(op)))
                << "op '" << op_name(op) << "' has a gradient rule but no gradient-checked row";
    }
    TableCounts c = table_counts();
    std::printf("[op-harness] rows: %zu, ops in the table: %zu, ops with gradient checks: %zu, "
                "ops with second-order checks: %zu, (op, dtype) pairs: %zu, golden entries: %zu, "
                "backends: %zu\n",
                c.rows, c.ops, c.grad_ops, c.second_order_ops, c.op_dtype_pairs, c.golden_entries,
                test_backends().size());
}

TEST(OpTableCoverage, RowsAreWellFormed) {
    std::set<std::string> primitives, names;
    for (int i = 0; i < kNumOps; ++i)
        primitives.insert(op_name(Op(i)));
    for (const auto& r : op_table()) {
        EXPECT_TRUE(names.insert(r.name).second) << "row name '" << r.name << "' is repeated";
        EXPECT_TRUE(primitives.count(r.op) || kComposites.count(r.op))
            << "row '" << r.name << "' names op '" << r.op << "', neither a primitive nor a "
            << "known composite";
        EXPECT_FALSE(r.cases.empty()) << "row '" << r.name << "' has no cases";
        EXPECT_FALSE(r.dtypes.empty()) << "row '" << r.name << "' has no dtypes";
        if (r.grad != GradCheck::None) {
            bool any_grad_case = false;
            for (const auto& c : r.cases)
                any_grad_case |= c.grad;
            EXPECT_TRUE(any_grad_case) << "row '" << r.name << "' checks gradients on no case";
        }
    }
    for (const auto& c : kComposites) {
        bool found = false;
        for (const auto& r : op_table())
            found |= r.op == c;
        EXPECT_TRUE(found) << "composite '" << c << "' has no row";
    }
}

TEST(OpTableCoverage, GoldenFileMatchesTheTable) {
    ASSERT_EQ(golden_load_error(), "");
    for (const auto& name : golden_orphans())
        ADD_FAILURE() << "golden.json has entries for row '" << name << "', not in the table";
}

} // namespace
} // namespace sj::test
