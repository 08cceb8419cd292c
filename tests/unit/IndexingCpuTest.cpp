// gather, scatter_add, scatter and cumsum on the cpu target (Note [Indexing kernels] in
// src/backend/cpu/Indexing.cpp) against the reference interpreter, bit for bit: every dtype,
// index dtypes, single elements and rows (inner > 1), outer rows, sizes that start the thread
// team, repeated indices (a Set scatter's last update wins), and the same error for an index
// out of range.
#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include "TestUtil.h"

#include <limits>
#include <random>

using namespace sj;
using sj::test::message_of;
using sj::test::on;
using sj::test::random_array;

namespace {

std::vector<unsigned char> idx_bytes_of(const Array& a) {
    const auto* p = static_cast<const unsigned char*>(a.raw());
    return {p, p + a.nbytes()};
}

/// Indices in [0, len) with repeats (len > 0), of dtype `it` and shape {m}.
Array idx_indices(DType it, int64_t m, int64_t len, uint64_t seed) {
    std::mt19937_64 g(seed);
    std::vector<int64_t> v(static_cast<size_t>(m));
    for (auto& x : v)
        x = int64_t(g() % uint64_t(len));
    return Array(v, {m}).astype(it);
}

/// Values in [lo, 5) (lo 0 for unsigned dtypes and bool).
Array idx_values(DType t, const Shape& s, uint64_t seed, double lo = -5) {
    return random_array(t, s, seed, is_signed(t) ? lo : 0.0, 5);
}

void idx_expect_same(const std::vector<Tensor>& outs, const std::vector<Tensor>& ins,
                     const std::vector<Array>& arrays, const std::string& what) {
    std::vector<Function::Arg> args(arrays.begin(), arrays.end());
    std::vector<Array> got = function(ins, outs, {}, on("cpu")).call(args);
    std::vector<Array> want = function(ins, outs, {}, on("reference")).call(args);
    for (size_t o = 0; o < outs.size(); ++o)
        EXPECT_EQ(idx_bytes_of(got[o]), idx_bytes_of(want[o])) << what << ", output " << o;
}

struct IdxCase {
    Shape shape;
    int64_t axis, m;
};

} // namespace

TEST(IndexingCpu, GatherAndScatterEqualTheReference) {
    // single elements (a team for 1M), rows of 7 and 40, outer rows, a long inner row
    const std::vector<IdxCase> cases = {{{1 << 20}, 0, 1 << 20}, {{3, 50, 7}, 1, 30},
                                        {{64, 40}, 0, 100},      {{5, 300}, 1, 1000},
                                        {{2, 9, 600}, 1, 2000},  {{1000}, 0, 3}};
    for (DType dt : {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8, DType::Bool})
        for (DType it : {DType::I64, DType::I32, DType::U8}) {
            for (const IdxCase& c : cases) {
                if (c.shape.size() == 1 && c.shape[0] == (1 << 20) && dt != DType::F32 &&
                    dt != DType::I64)
                    continue; // the team path once per width is enough
                const int64_t len = c.shape[size_t(c.axis)];
                if (it == DType::U8 && len > 255)
                    continue;
                Shape ushape = c.shape;
                ushape[size_t(c.axis)] = c.m;
                Placeholder x(c.shape, dt, "x"), i({c.m}, it, "i"), u(ushape, dt, "u");
                std::vector<Array> args = {idx_values(dt, c.shape, 3), idx_indices(it, c.m, len, 4),
                                           idx_values(dt, ushape, 5)};
                std::string what = std::string(dtype_name(dt)) + " indices " + dtype_name(it) +
                                   " " + shape_str(c.shape) + " axis " + std::to_string(c.axis);
                std::vector<Tensor> outs = {gather(x, i, c.axis), scatter_add(x, i, u, c.axis),
                                            scatter(x, i, u, c.axis, ScatterMode::Set)};
                if (dt != DType::Bool)
                    for (ScatterMode mode : {ScatterMode::Mul, ScatterMode::Min, ScatterMode::Max})
                        outs.push_back(scatter(x, i, u, c.axis, mode));
                idx_expect_same(outs, {x, i, u}, args, what);
            }
        }
}

TEST(IndexingCpu, CountsOnTheTeamEqualTheReference) {
    // integer scatter_add of single elements into a short row: each thread sums into a row of
    // its own (wrapping adds commute), including a sum that wraps
    for (DType dt : {DType::I64, DType::I32, DType::U8}) {
        const int64_t m = 1 << 20, len = 1000;
        Placeholder x({len}, dt, "x"), i({m}, DType::I64, "i"), u({m}, dt, "u");
        idx_expect_same({scatter_add(x, i, u, 0)}, {x, i, u},
                        {idx_values(dt, {len}, 6, 0), idx_indices(DType::I64, m, len, 7),
                         random_array(dt, {m}, 8, 0, 250)},
                        std::string("counts ") + dtype_name(dt));
    }
}

TEST(IndexingCpu, AnIndexOutOfRangeGivesTheReferencesError) {
    for (int64_t bad : {-1, 50, 1 << 20}) {
        for (int64_t m : {int64_t(10), int64_t(1) << 20}) {
            std::vector<int64_t> iv(static_cast<size_t>(m), 3);
            iv[size_t(m / 2)] = bad;
            iv[size_t(m - 1)] = bad + 1; // only the first bad one is named
            Placeholder x({50}, f32, "table"), i({m}, i64, "ids"), u({m}, f32, "u");
            for (const Tensor& out : {gather(x, i, 0), scatter_add(x, i, u, 0),
                                      scatter(x, i, u, 0, ScatterMode::Max)}) {
                Array xa = random_array(DType::F32, {50}, 1), ia(iv, {m}),
                      ua = random_array(DType::F32, {m}, 2);
                Function fc = function({x, i, u}, {out}, {}, on("cpu"));
                Function fr = function({x, i, u}, {out}, {}, on("reference"));
                std::string mc = message_of<InputError>([&] { fc(xa, ia, ua); });
                std::string mr = message_of<InputError>([&] { fr(xa, ia, ua); });
                EXPECT_EQ(mc, mr);
                EXPECT_NE(mc.find("index " + std::to_string(bad) + " (at position " +
                                  std::to_string(m / 2)),
                          std::string::npos)
                    << mc;
            }
        }
    }
    // an empty table: every index is out of range, and nothing is read from it
    Placeholder e({0}, f32, "empty"), i({2}, i64, "ids");
    Function f = function({e, i}, {gather(e, i, 0)}, {}, on("cpu"));
    EXPECT_THROW(f(Array(DType::F32, {0}), Array(std::vector<int64_t>{0, 0}, {2})), InputError);
}

TEST(IndexingCpu, CumsumEqualsTheReference) {
    // floats accumulate in double on both; integers wrap; columns of a wide inner dim in blocks
    for (DType dt : {DType::F32, DType::F64, DType::I32, DType::U8})
        for (const IdxCase& c : std::vector<IdxCase>{
                 {{1 << 20}, 0, 0}, {{3, 1000, 300}, 1, 0}, {{7, 5}, 0, 0}, {{4, 6, 2}, 2, 0}})
            for (bool reverse : {false, true}) {
                Placeholder x(c.shape, dt, "x");
                idx_expect_same({cumsum(x, c.axis, reverse)}, {x},
                                {random_array(dt, c.shape, 9, is_signed(dt) ? -3 : 0, 250)},
                                std::string("cumsum ") + dtype_name(dt) + " " + shape_str(c.shape) +
                                    (reverse ? " reverse" : ""));
            }
}

TEST(IndexingCpu, PadConcatArgmaxOneHotEqualTheReference) {
    // (Note [Row kernels] in src/backend/cpu/Movement.cpp)
    for (DType dt : {DType::F32, DType::F64, DType::I32, DType::U8, DType::Bool}) {
        const std::string what = dtype_name(dt);
        Placeholder x({6, 7, 9}, dt, "x"), big({512, 1024}, dt, "big");
        Placeholder y({6, 3, 9}, dt, "y"), z({6, 0, 9}, dt, "z");
        // pads before and after, interior pads on the last dim and on others, the team
        std::vector<Tensor> outs = {
            pad(x, {1, 0, 2}, {0, 3, 1}, 7.0),
            pad(x, {2, 1, 3}, {1, 0, 2}, 1.0),
            pad(x, {0, 1, 1}, {2, 0, 0}, {1, 0, 2}, 3.0),
            pad(big, {2, 3}, {1, 4}, 2.0),
            concat({x, y, z, x}, 1),
            concat({x, x}, 0),
            concat({x, x}, 2),
            concat({big, big}, 1),
        };
        if (dt != DType::Bool)
            for (int64_t axis : {0, 1, 2}) {
                outs.push_back(argmax(x, axis));
                outs.push_back(argmin(x, axis, true));
            }
        std::vector<Array> args = {idx_values(dt, {6, 7, 9}, 21, -3),
                                   idx_values(dt, {512, 1024}, 22), idx_values(dt, {6, 3, 9}, 23),
                                   Array(dt, {6, 0, 9})};
        idx_expect_same(outs, {x, big, y, z}, args, what);
    }
    // argmax and argmin with ties, NaN (the first NaN wins) and infinities, on lines and columns
    const float nan = std::numeric_limits<float>::quiet_NaN(),
                inf = std::numeric_limits<float>::infinity();
    std::vector<float> v = {1, 3, 3, -inf, nan, 2, nan, inf, 0, -0.0f, 0, 5, inf, 5, -inf, -inf};
    Placeholder t({4, 4}, f32, "t");
    idx_expect_same({argmax(t, 0), argmax(t, 1), argmin(t, 0), argmin(t, 1)}, {t},
                    {Array(v, {4, 4})}, "ties and NaN");
    Placeholder l({2, 200}, f32, "long");
    idx_expect_same({argmax(l, 1), argmin(l, 0)}, {l}, {idx_values(DType::F32, {2, 200}, 24)},
                    "long lines");
    // one_hot: every output dtype, out-of-range indices give a zero row, the team for 1 MB+
    for (DType dt : {DType::F32, DType::I64, DType::Bool})
        for (DType it : {DType::I32, DType::I64}) {
            Placeholder i({9}, it, "labels"), many({4096}, it, "many");
            std::vector<int64_t> iv = {0, 3, -1, 4, 5, 2, 3, 100, 1};
            idx_expect_same({one_hot(i, 5, dt), one_hot(many, 300, dt)}, {i, many},
                            {Array(iv, {9}).astype(it), idx_indices(it, 4096, 320, 25)},
                            std::string("one_hot ") + dtype_name(dt) + " " + dtype_name(it));
        }
}

TEST(IndexingCpu, DynamicSlicesEqualTheReference) {
    // (Note [Row kernels] in src/backend/cpu/Movement.cpp) windows inside, at the edges, past
    // them (the starts are clamped), negative starts, whole trailing dims (one run), rank 0, an
    // empty window, and a large window on the team
    for (DType dt : {DType::F32, DType::F64, DType::I32, DType::U8, DType::Bool}) {
        Placeholder x({6, 7, 9}, dt, "x"), u({2, 3, 4}, dt, "u"), w({2, 7, 9}, dt, "w");
        Placeholder s({3}, DType::I64, "starts"), big({1024, 600}, dt, "big");
        Placeholder bu({1000, 500}, dt, "bu"), bs({2}, DType::I32, "bs");
        Placeholder r0({}, dt, "r0"), e({0}, DType::I64, "e");
        std::vector<Tensor> outs = {
            dynamic_slice(x, s, {2, 3, 4}),     dynamic_slice(x, s, {2, 7, 9}),
            dynamic_slice(x, s, {0, 3, 4}),     dynamic_update_slice(x, u, s),
            dynamic_update_slice(x, w, s),      dynamic_slice(big, bs, {1000, 500}),
            dynamic_update_slice(big, bu, bs),  dynamic_slice(r0, e, {}),
            dynamic_update_slice(r0, r0 * 2, e)};
        Array xv = idx_values(dt, {6, 7, 9}, 31), uv = idx_values(dt, {2, 3, 4}, 32),
              wv = idx_values(dt, {2, 7, 9}, 33), bigv = idx_values(dt, {1024, 600}, 34),
              buv = idx_values(dt, {1000, 500}, 35), r0v = idx_values(dt, {}, 36);
        for (const std::vector<int64_t>& st :
             {std::vector<int64_t>{1, 2, 3}, {4, 4, 5}, {9, 9, 9}, {-3, 1, -1}, {0, 0, 0}}) {
            std::vector<int32_t> b = {int32_t(st[1] * 7), int32_t(st[2] * 11)};
            idx_expect_same(
                outs, {x, u, w, s, big, bu, bs, r0, e},
                {xv, uv, wv, Array(st, {3}), bigv, buv, Array(b, {2}), r0v, Array(DType::I64, {0})},
                std::string(dtype_name(dt)) + " starts " + std::to_string(st[0]) + " " +
                    std::to_string(st[1]) + " " + std::to_string(st[2]));
        }
    }
    // a start vector of the wrong length is the reference's error
    Placeholder x({4, 5}, f32, "x"), s({-1}, DType::I64, "starts");
    for (const Tensor& out : {dynamic_slice(x, s, {2, 2}), dynamic_update_slice(x, x * 2, s)}) {
        Function fc = function({x, s}, {out}, {}, on("cpu"));
        Function fr = function({x, s}, {out}, {}, on("reference"));
        Array xv = random_array(f32, {4, 5}, 37), sv(std::vector<int64_t>{1, 2, 3}, {3});
        std::string mc = message_of<InputError>([&] { fc(xv, sv); });
        EXPECT_EQ(mc, message_of<InputError>([&] { fr(xv, sv); }));
        EXPECT_NE(mc.find("must be a vector of 2 indices, got shape [3]"), std::string::npos) << mc;
    }
}

TEST(IndexingCpu, CheckIndexOnTheTeamGivesTheReferencesError) {
    // check_index passes its input on; the first bad value is named, as the reference names it,
    // for a few values and for 1M (checked on the team), with an ignore_index and negative ones
    for (int64_t m : {int64_t(12), int64_t(1) << 20})
        for (DType it : {DType::I32, DType::I64}) {
            Placeholder i({m}, it, "labels");
            const Tensor plain = check_index(i, 10), ignoring = check_index(i, 10, -100, "label");
            std::vector<int64_t> good(size_t(m), 3);
            good[1] = -100;
            good[2] = 9;
            Array gv = Array(good, {m}).astype(it);
            idx_expect_same({ignoring * 1}, {i}, {gv}, "no bad value");
            EXPECT_NE(message_of<InputError>([&] {
                          function({i}, {plain}, {}, on("cpu"))(gv);
                      }).find("-100 at position [1]"),
                      std::string::npos);
            for (int64_t bad : {int64_t(-1), int64_t(10)}) {
                std::vector<int64_t> v = good;
                v[size_t(m / 2)] = bad;
                v[size_t(m - 1)] = bad + 5; // only the first bad one is named
                Array bv = Array(v, {m}).astype(it);
                // (plain stops at the -100 above)
                std::string mc = message_of<InputError>(
                    [&] { function({i}, {ignoring * 1}, {}, on("cpu"))(bv); });
                EXPECT_EQ(mc, message_of<InputError>(
                                  [&] { function({i}, {ignoring * 1}, {}, on("reference"))(bv); }));
                EXPECT_NE(
                    mc.find(std::to_string(bad) + " at position [" + std::to_string(m / 2) + "]"),
                    std::string::npos)
                    << mc;
            }
        }
}
