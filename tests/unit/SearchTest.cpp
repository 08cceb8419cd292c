// Tests of include/symjax/Search.h on both backends: unique, nonzero, lexsort, searchsorted,
// digitize, bincount, histogram. Expected values come from plain host loops written from
// NumPy's definitions (std::stable_sort, std::lower_bound, counting), or are worked out by hand;
// python/tests/test_search.py checks the Python names against NumPy itself.
#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include "TestUtil.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

using namespace sj;
using sj::test::BackendTest;
using sj::test::message_of;

namespace {

const double srch_kNaN = std::numeric_limits<double>::quiet_NaN();
const double srch_kInf = std::numeric_limits<double>::infinity();

/// Sort's order: NaN last, -0.0 equal to 0.0.
bool srch_before(double a, double b) {
    return !std::isnan(a) && (std::isnan(b) || a < b);
}
bool srch_same(double a, double b, bool equal_nan = true) {
    return (std::isnan(a) && std::isnan(b) && equal_nan) || a == b;
}

std::vector<double> srch_vals(const Array& a) {
    return sj::test::values(a);
}

/// NaN-aware exact comparison of two vectors of doubles.
void srch_expect_same(const std::vector<double>& got, const std::vector<double>& want,
                      const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(want[i]))
            EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
        else
            EXPECT_EQ(got[i], want[i]) << what << " at " << i;
    }
}

struct srch_HostUnique {
    std::vector<double> values, indices, inverse, counts;
};

srch_HostUnique srch_host_unique(const std::vector<double>& x, int64_t size, double fill,
                                 bool equal_nan) {
    std::vector<size_t> order(x.size());
    for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return srch_before(x[a], x[b]); });
    srch_HostUnique u;
    std::vector<int64_t> slot(x.size());
    int64_t k = -1;
    for (size_t p = 0; p < order.size(); ++p) {
        double v = x[order[p]];
        if (p == 0 || !srch_same(v, x[order[p - 1]], equal_nan)) {
            ++k;
            if (k < size) {
                u.values.push_back(v);
                u.indices.push_back(double(order[p]));
                u.counts.push_back(0);
            }
        }
        if (k < size)
            u.counts[size_t(k)] += 1;
        slot[order[p]] = std::min<int64_t>(k, size - 1);
    }
    while (int64_t(u.values.size()) < size) {
        u.values.push_back(fill);
        u.indices.push_back(0);
        u.counts.push_back(0);
    }
    for (int64_t s : slot)
        u.inverse.push_back(double(s));
    return u;
}

/// How many elements of the sorted `a` come before v (left) or not after it (right).
double srch_host_search(const std::vector<double>& a, double v, Side side) {
    double n = 0;
    for (double e : a)
        n += side == Side::Left ? srch_before(e, v) : !srch_before(v, e);
    return n;
}

} // namespace

class Search : public BackendTest {};

TEST_P(Search, UniqueMatchesTheDefinition) {
    // ints with repeats, and floats with NaNs, signed zeros and infinities
    std::vector<double> xf = {3,   srch_kNaN,  -0.0,      1.5,  srch_kInf, 0.0,
                              3,   -srch_kInf, srch_kNaN, -2,   1.5,       3,
                              0.0, srch_kNaN,  -2.0,      7.25, 1.5,       0.5};
    std::mt19937 gen(7);
    std::vector<int32_t> xi(60);
    for (auto& v : xi)
        v = int32_t(gen() % 9) - 4;
    std::vector<double> xid(xi.begin(), xi.end());

    for (bool equal_nan : {true, false}) {
        for (int64_t size : {1, 5, 9, 20}) {
            for (bool given_fill : {false, true}) {
                Placeholder pf({6, 3}, f32, "xf");
                Placeholder pi({-1}, i32, "xi");
                std::optional<double> fill;
                if (given_fill)
                    fill = -9.0;
                Unique uf = unique_all(pf, size, fill, equal_nan);
                Unique ui = unique_all(pi, size, fill, equal_nan);
                std::vector<Array> r =
                    function({pf, pi},
                             {uf.values, uf.indices, uf.inverse, uf.counts, ui.values, ui.indices,
                              ui.inverse, ui.counts},
                             {}, opts())(Array(std::vector<float>(xf.begin(), xf.end()), {6, 3}),
                                         Array(xi, {int64_t(xi.size())}));
                std::vector<double> sorted = xf;
                std::stable_sort(sorted.begin(), sorted.end(), srch_before);
                srch_HostUnique hf =
                    srch_host_unique(xf, size, given_fill ? -9.0 : sorted[0], equal_nan);
                double imin = *std::min_element(xid.begin(), xid.end());
                srch_HostUnique hi =
                    srch_host_unique(xid, size, given_fill ? -9.0 : imin, equal_nan);
                std::string what = "size " + std::to_string(size) +
                                   (equal_nan ? " equal_nan" : "") + (given_fill ? " fill" : "");
                srch_expect_same(srch_vals(r[0]), hf.values, "float values " + what);
                srch_expect_same(srch_vals(r[1]), hf.indices, "float indices " + what);
                EXPECT_EQ(r[2].shape(), (Shape{6, 3}));
                srch_expect_same(srch_vals(r[2]), hf.inverse, "float inverse " + what);
                srch_expect_same(srch_vals(r[3]), hf.counts, "float counts " + what);
                EXPECT_EQ(r[4].dtype(), DType::I32);
                srch_expect_same(srch_vals(r[4]), hi.values, "int values " + what);
                srch_expect_same(srch_vals(r[5]), hi.indices, "int indices " + what);
                srch_expect_same(srch_vals(r[6]), hi.inverse, "int inverse " + what);
                srch_expect_same(srch_vals(r[7]), hi.counts, "int counts " + what);
            }
        }
    }
}

TEST_P(Search, UniqueOfAnEmptyInputTakesTheFillValue) {
    Placeholder x({0}, f32, "empty");
    Array r = function({x}, {unique(x, 3, 2.5)}, {}, opts())(Array(DType::F32, {0}))[0];
    EXPECT_EQ(srch_vals(r), (std::vector<double>{2.5, 2.5, 2.5}));
    std::string m = message_of<InputError>([&] { unique(x, 3); });
    EXPECT_NE(m.find("empty"), std::string::npos) << m;
    EXPECT_NE(m.find("fill_value"), std::string::npos) << m;
    EXPECT_THROW(unique(x, -1, 0.0), InputError);
    // size 0 reads no smallest value: fine on an empty x of unknown length too
    Placeholder d({-1}, f32, "maybe_empty");
    Unique u = unique_all(d, 0);
    std::vector<Array> r0 =
        function({d}, {u.values, u.counts, u.inverse}, {}, opts())(Array(DType::F32, {0}));
    EXPECT_EQ(r0[0].shape(), (Shape{0}));
    EXPECT_EQ(r0[1].shape(), (Shape{0}));
    EXPECT_EQ(r0[2].shape(), (Shape{0}));
    // the inverse has x's shape also when two of its dims are known only at the call
    Placeholder two({-1, -1}, i32, "two_unknown");
    Array tv(std::vector<int32_t>{4, 1, 4, 9, 1, 1}, {2, 3});
    Array inv = function({two}, {unique_all(two, 3).inverse}, {}, opts())(tv)[0];
    EXPECT_EQ(inv.shape(), (Shape{2, 3}));
    EXPECT_EQ(srch_vals(inv), (std::vector<double>{1, 0, 1, 2, 0, 0}));
}

TEST_P(Search, NonzeroArgwhereFlatnonzero) {
    // [2, 3, 4] with non-zeros at known places (row-major flat indices 1, 6, 7, 13, 22, 23)
    std::vector<float> v(24, 0.f);
    for (int k : {1, 6, 7, 13, 22, 23})
        v[size_t(k)] = float(k) - 10.5f;
    Placeholder x({-1, 3, 4}, f32, "x");
    for (int64_t size : {3, 6, 8}) {
        std::vector<Tensor> nz = nonzero(x, size, -1);
        ASSERT_EQ(nz.size(), 3u);
        std::vector<Array> r =
            function({x}, {nz[0], nz[1], nz[2], argwhere(x, size, 5), flatnonzero(x, size)}, {},
                     opts())(Array(v, {2, 3, 4}));
        std::vector<double> c0, c1, c2, rows, flat;
        int found = 0;
        for (int k : {1, 6, 7, 13, 22, 23}) {
            if (found++ >= size)
                break;
            c0.push_back(k / 12);
            c1.push_back((k / 4) % 3);
            c2.push_back(k % 4);
            rows.insert(rows.end(), {double(k / 12), double((k / 4) % 3), double(k % 4)});
            flat.push_back(k);
        }
        while (int64_t(c0.size()) < size) {
            c0.push_back(-1);
            c1.push_back(-1);
            c2.push_back(-1);
            rows.insert(rows.end(), {5, 5, 5});
            flat.push_back(0);
        }
        std::string what = "size " + std::to_string(size);
        srch_expect_same(srch_vals(r[0]), c0, "dim 0 " + what);
        srch_expect_same(srch_vals(r[1]), c1, "dim 1 " + what);
        srch_expect_same(srch_vals(r[2]), c2, "dim 2 " + what);
        EXPECT_EQ(r[3].shape(), (Shape{size, 3}));
        srch_expect_same(srch_vals(r[3]), rows, "argwhere " + what);
        srch_expect_same(srch_vals(r[4]), flat, "flatnonzero " + what);
    }
    Placeholder b({5}, boolean, "mask");
    Array r = function({b}, {flatnonzero(b, 3)}, {},
                       opts())(Array(std::vector<bool>{false, true, true, false, true}, {5}))[0];
    EXPECT_EQ(srch_vals(r), (std::vector<double>{1, 2, 4}));
    EXPECT_THROW(nonzero(scalar(1.0), 2), ShapeError);
    Placeholder d({3, -1}, f32, "late");
    std::string m = message_of<ShapeError>([&] { nonzero(d, 2); });
    EXPECT_NE(m.find("late"), std::string::npos) << m;
}

TEST_P(Search, LexsortSortsByTheLastKeyFirst) {
    std::mt19937 gen(3);
    const int64_t rows = 3, n = 40;
    std::vector<int32_t> k0(rows * n), k1(rows * n);
    std::vector<float> k2(rows * n);
    for (int64_t i = 0; i < rows * n; ++i) {
        k0[size_t(i)] = int32_t(gen() % 5);
        k1[size_t(i)] = int32_t(gen() % 3);
        k2[size_t(i)] = float(gen() % 2) + (gen() % 7 == 0 ? float(srch_kNaN) : 0.f);
    }
    Placeholder a({rows, -1}, i32, "a"), b({rows, -1}, i32, "b"), c({rows, -1}, f32, "c");
    Array r = function({a, b, c}, {lexsort({a, b, c})}, {},
                       opts())(Array(k0, {rows, n}), Array(k1, {rows, n}), Array(k2, {rows, n}))[0];
    std::vector<double> got = srch_vals(r), want;
    for (int64_t row = 0; row < rows; ++row) {
        std::vector<int64_t> idx(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
            idx[size_t(i)] = i;
        auto at = [&](const auto& k, int64_t i) { return double(k[size_t(row * n + i)]); };
        std::stable_sort(idx.begin(), idx.end(), [&](int64_t p, int64_t q) {
            if (!srch_same(at(k2, p), at(k2, q)))
                return srch_before(at(k2, p), at(k2, q));
            if (at(k1, p) != at(k1, q))
                return at(k1, p) < at(k1, q);
            return at(k0, p) < at(k0, q);
        });
        for (int64_t i : idx)
            want.push_back(double(i));
    }
    srch_expect_same(got, want, "lexsort");
    // along axis 0 too: the transpose's answer
    Placeholder t({n, rows}, i32, "t");
    EXPECT_THROW(lexsort({a, t}), ShapeError);
    EXPECT_THROW(lexsort({}), InputError);
}

TEST_P(Search, SearchsortedCountsWhatComesBefore) {
    std::vector<double> probe = {-srch_kInf, -3,  -1, -0.0, 0,         0.5,      1,
                                 2,          2.5, 4,  9,    srch_kInf, srch_kNaN};
    for (int n : {0, 1, 2, 5, 8, 16, 17}) {
        std::vector<double> a;
        for (int i = 0; i < n; ++i)
            a.push_back(double(i / 2) - 1.0); // repeats: -1 -1 0 0 1 1 ...
        if (n >= 5)
            a.back() = srch_kNaN; // NaN sorts last
        if (n == 8)
            a[6] = srch_kInf;
        for (bool dynamic : {false, true}) {
            Placeholder pa({dynamic ? -1 : n}, f32, "a");
            Placeholder pv({int64_t(probe.size())}, f32, "v");
            std::vector<Array> r = function(
                {pa, pv}, {searchsorted(pa, pv, Side::Left), searchsorted(pa, pv, Side::Right)}, {},
                opts())(
                Array(std::vector<float>(a.begin(), a.end()), {n}),
                Array(std::vector<float>(probe.begin(), probe.end()), {int64_t(probe.size())}));
            std::vector<double> left, right;
            for (double v : probe) {
                left.push_back(srch_host_search(a, v, Side::Left));
                right.push_back(srch_host_search(a, v, Side::Right));
            }
            std::string what = "n " + std::to_string(n) + (dynamic ? " dynamic" : "");
            EXPECT_EQ(r[0].dtype(), DType::I64);
            srch_expect_same(srch_vals(r[0]), left, "left " + what);
            srch_expect_same(srch_vals(r[1]), right, "right " + what);
        }
    }
    // integers against float probes: the comparison promotes
    Placeholder ai({6}, i64, "ai");
    Placeholder vf({2, 2}, f32, "vf");
    Array r = function({ai, vf}, {searchsorted(ai, vf)}, {}, opts())(
        Array(std::vector<int64_t>{1, 3, 3, 5, 8, 13}, {6}),
        Array(std::vector<float>{3.f, 3.5f, 0.f, float(srch_kNaN)}, {2, 2}))[0];
    EXPECT_EQ(r.shape(), (Shape{2, 2}));
    EXPECT_EQ(srch_vals(r), (std::vector<double>{1, 3, 0, 6}));
    EXPECT_THROW(searchsorted(vf, ai), ShapeError);
    // integers on both sides
    Placeholder vi({5}, i32, "vi");
    std::vector<Array> ri =
        function({ai, vi}, {searchsorted(ai, vi), searchsorted(ai, vi, Side::Right)}, {},
                 opts())(Array(std::vector<int64_t>{1, 3, 3, 5, 8, 13}, {6}),
                         Array(std::vector<int32_t>{3, 0, 13, 14, 4}, {5}));
    EXPECT_EQ(srch_vals(ri[0]), (std::vector<double>{1, 0, 5, 6, 3}));
    EXPECT_EQ(srch_vals(ri[1]), (std::vector<double>{3, 0, 6, 6, 3}));
}

TEST_P(Search, DigitizeFollowsNumpysRule) {
    std::vector<double> x = {-1, 0, 0.5, 1, 1.5, 2.5, 4, 7, 10, srch_kNaN};
    std::vector<double> up = {0, 1, 2.5, 4, 10}, down = {10, 4, 2.5, 1, 0};
    for (bool right : {false, true}) {
        for (bool rising : {true, false}) {
            const std::vector<double>& bins = rising ? up : down;
            Placeholder px({int64_t(x.size())}, f64, "x"), pb({5}, f64, "bins");
            Array r = function({px, pb}, {digitize(px, pb, right)}, {},
                               opts())(Array(x, {int64_t(x.size())}), Array(bins, {5}))[0];
            std::vector<double> want;
            for (double v : x) {
                // NumPy: rising, right=False: bins[i-1] <= v < bins[i]; right=True: bins[i-1] <
                // v <= bins[i]; falling: bins[i-1] > v >= bins[i] and bins[i-1] >= v > bins[i].
                int i = 0;
                if (std::isnan(v))
                    i = rising ? 5 : 0;
                else if (rising)
                    while (i < 5 && (right ? bins[size_t(i)] < v : bins[size_t(i)] <= v))
                        ++i;
                else
                    while (i < 5 && (right ? bins[size_t(i)] >= v : bins[size_t(i)] > v))
                        ++i;
                want.push_back(i);
            }
            srch_expect_same(srch_vals(r), want,
                             std::string(rising ? "rising" : "falling") + (right ? " right" : ""));
        }
    }
    Placeholder px({3}, f64, "x"), pb({4}, f64, "bins");
    Function f = function({px, pb}, {digitize(px, pb)}, {}, opts());
    std::string m = message_of<InputError>([&] {
        f(Array(std::vector<double>{1, 2, 3}), Array(std::vector<double>{0, 2, 1, 3}));
    });
    EXPECT_NE(m.find("monotonic"), std::string::npos) << m;
    // equal bins are rising
    Array r = f(Array(std::vector<double>{0, 1, 2}), Array(std::vector<double>{1, 1, 1, 1}))[0];
    EXPECT_EQ(srch_vals(r), (std::vector<double>{0, 4, 4}));
}

TEST_P(Search, BincountCountsAndDropsPastTheLength) {
    Placeholder x({-1}, i32, "labels");
    Placeholder w({-1}, f32, "w");
    std::vector<int32_t> xv = {0, 3, 1, 3, 3, 7, 2, 9, 1};
    std::vector<float> wv = {0.5f, 1, 2, 4, 8, 16, 32, 64, 128};
    Function f =
        function({x, w}, {bincount(x, 5), bincount(x, 8, Tensor(w)), bincount(x, 0)}, {}, opts());
    std::vector<Array> r = f(Array(xv, {9}), Array(wv, {9}));
    EXPECT_EQ(r[0].dtype(), DType::I64);
    EXPECT_EQ(srch_vals(r[0]), (std::vector<double>{1, 2, 1, 3, 0}));
    EXPECT_EQ(srch_vals(r[1]), (std::vector<double>{0.5, 130, 32, 13, 0, 0, 0, 16}));
    EXPECT_EQ(r[2].shape(), (Shape{0}));
    std::vector<int32_t> bad = {1, -2, 0};
    std::string m = message_of<InputError>([&] {
        f(Array(bad, {3}), Array(std::vector<float>{1, 1, 1}, {3}));
    });
    EXPECT_NE(m.find("bincount"), std::string::npos) << m;
    EXPECT_NE(m.find("-2"), std::string::npos) << m;
    EXPECT_THROW(bincount(w, 3), TypeError);
}

TEST_P(Search, HistogramBinsLikeNumpy) {
    // integer-valued data on [0, 8] into 4 bins: edges 0 2 4 6 8, exact; 8 goes in the last bin
    std::vector<double> x = {0, 1, 2, 2, 3, 5, 6, 7.5, 8, srch_kNaN, -1, 9};
    std::vector<double> w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    Placeholder px({int64_t(x.size())}, f64, "x"), pw({int64_t(x.size())}, f64, "w");
    auto [h, e] = histogram(px, 4, std::pair<double, double>{0, 8});
    auto [hw, ew] = histogram(px, 4, std::pair<double, double>{0, 8}, Tensor(pw));
    auto [hd, ed] = histogram(px, 4, std::pair<double, double>{0, 8}, {}, true);
    Placeholder edges({3}, f64, "edges");
    auto [he, ee] = histogram(px, edges);
    std::vector<Array> r = function({px, pw, edges}, {h, e, hw, hd, he, ee}, {}, opts())(
        Array(x, {int64_t(x.size())}), Array(w, {int64_t(x.size())}),
        Array(std::vector<double>{-1, 2.5, 9}, {3}));
    EXPECT_EQ(r[0].dtype(), DType::I64);
    EXPECT_EQ(srch_vals(r[0]), (std::vector<double>{2, 3, 1, 3}));
    EXPECT_EQ(srch_vals(r[1]), (std::vector<double>{0, 2, 4, 6, 8}));
    EXPECT_EQ(srch_vals(r[2]), (std::vector<double>{3, 12, 6, 24}));
    // density: 2 / (9 * 2), ...
    std::vector<double> dens = srch_vals(r[3]);
    std::vector<double> want = {2.0 / 18, 3.0 / 18, 1.0 / 18, 3.0 / 18};
    for (size_t i = 0; i < 4; ++i)
        EXPECT_NEAR(dens[i], want[i], 1e-15);
    // edges -1, 2.5, 9: [-1, 2.5) holds 0 1 2 2 -1, [2.5, 9] holds 3 5 6 7.5 8 9
    EXPECT_EQ(srch_vals(r[4]), (std::vector<double>{5, 6}));
    EXPECT_EQ(srch_vals(r[5]), (std::vector<double>{-1, 2.5, 9}));

    // the range from the data, and a constant input widened by a half each way
    Placeholder c({4}, f32, "c");
    auto [hc, ec] = histogram(c, 2);
    std::vector<Array> rc =
        function({c}, {hc, ec}, {}, opts())(Array(std::vector<float>{3, 3, 3, 3}, {4}));
    EXPECT_EQ(srch_vals(rc[0]), (std::vector<double>{0, 4}));
    EXPECT_EQ(srch_vals(rc[1]), (std::vector<double>{2.5, 3, 3.5}));
    EXPECT_THROW(histogram(c, 0), InputError);
    EXPECT_THROW(histogram(c, 2, std::pair<double, double>{1, 0}), InputError);
    EXPECT_THROW(histogram(c, 2, {}, Tensor(px)), ShapeError);
}

TEST_P(Search, HistogramMatchesAHostLoopOnRandomData) {
    // Random data: each element's bin from the edges the function returns (lo <= x < hi, the
    // last bin closed), counted on the host.
    std::mt19937 gen(11);
    std::normal_distribution<float> d(0.f, 3.f);
    std::vector<float> x(1000);
    for (auto& v : x)
        v = d(gen);
    Placeholder px({-1}, f32, "x");
    for (int64_t bins : {1, 7, 64}) {
        auto [h, e] = histogram(px, bins);
        std::vector<Array> r = function({px}, {h, e}, {}, opts())(Array(x, {int64_t(x.size())}));
        std::vector<double> edges = srch_vals(r[1]);
        ASSERT_EQ(edges.size(), size_t(bins + 1));
        // again with each inner edge, and the floats either side of it, added: the scaled
        // position can land one bin off there, and the comparisons with the edges must fix it
        std::vector<float> more = x;
        for (size_t k = 1; k + 1 < edges.size(); ++k) {
            float e0 = float(edges[k]);
            more.insert(more.end(), {std::nextafter(e0, -1e30f), e0, std::nextafter(e0, 1e30f)});
        }
        r = function({px}, {h, e}, {}, opts())(Array(more, {int64_t(more.size())}));
        ASSERT_EQ(srch_vals(r[1]), edges);
        std::vector<double> want(size_t(bins), 0.0);
        EXPECT_EQ(float(edges.front()), *std::min_element(x.begin(), x.end()));
        EXPECT_EQ(float(edges.back()), *std::max_element(x.begin(), x.end()));
        for (float v : more) {
            int64_t b = 0;
            while (b + 1 < bins && double(v) >= edges[size_t(b + 1)])
                ++b;
            want[size_t(b)] += 1;
        }
        srch_expect_same(srch_vals(r[0]), want, "bins " + std::to_string(bins));
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, Search, ::testing::Values("reference", "cpu"));

TEST_P(Search, UnderVmapEachRowIsItsOwnCall) {
    // vmap of unique, searchsorted and bincount over rows equals calling them row by row
    std::mt19937 gen(5);
    const int64_t rows = 4, n = 12;
    std::vector<int32_t> xv(rows * n);
    for (auto& v : xv)
        v = int32_t(gen() % 6);
    Placeholder x({rows, n}, i32, "rows");
    Placeholder sorted({8}, i32, "sorted");
    VmapFn per_row = [&](const Tensors& a) -> Tensors {
        return {unique(a[0], 5, -1.0), searchsorted(sorted, a[0], Side::Right), bincount(a[0], 4)};
    };
    Tensors batched = vmap(per_row)({x});
    std::vector<int32_t> sv = {0, 1, 1, 2, 3, 3, 3, 5};
    std::vector<Array> r =
        function({x, sorted}, batched, {}, opts())(Array(xv, {rows, n}), Array(sv, {8}));
    ASSERT_EQ(r[0].shape(), (Shape{rows, 5}));
    for (int64_t row = 0; row < rows; ++row) {
        Placeholder one({n}, i32, "row");
        std::vector<int32_t> rv(xv.begin() + row * n, xv.begin() + (row + 1) * n);
        std::vector<Array> w =
            function({one, sorted}, per_row({one}), {}, opts())(Array(rv, {n}), Array(sv, {8}));
        for (size_t k = 0; k < 3; ++k) {
            std::vector<double> got = srch_vals(r[k]), want = srch_vals(w[k]);
            size_t m = want.size();
            std::vector<double> slice(got.begin() + int64_t(row * int64_t(m)),
                                      got.begin() + int64_t((row + 1) * int64_t(m)));
            srch_expect_same(slice, want,
                             "result " + std::to_string(k) + " row " + std::to_string(row));
        }
    }
}

TEST_P(Search, QuantileFollowsNumpysMethods) {
    // rows of 9 with ties, one row with a NaN; NumPy's rule on the sorted row: position
    // q * (n - 1), then linear / lower / higher / midpoint / nearest (halves to even)
    std::vector<double> xv = {3, 1, 4, 1, 5, 9, 2, 6, 5, -1, 0.5, 8,         8, 8, 2, -3, 7, 0,
                              2, 7, 1, 8, 2, 8, 1, 8, 2, 6,  5,   srch_kNaN, 3, 5, 8, 9,  7, 9};
    const int64_t rows = 4, n = 9;
    Placeholder x({rows, n}, f64, "x");
    const std::vector<double> qs = {0.0, 0.3, 0.5, 0.625, 1.0};
    const std::vector<QuantileMethod> methods = {QuantileMethod::Linear, QuantileMethod::Lower,
                                                 QuantileMethod::Higher, QuantileMethod::Midpoint,
                                                 QuantileMethod::Nearest};
    auto host = [&](std::vector<double> line, double q, QuantileMethod m) {
        std::sort(line.begin(), line.end());
        double pos = q * double(line.size() - 1);
        size_t lo = size_t(std::floor(pos)), hi = size_t(std::ceil(pos));
        double g = pos - double(lo);
        switch (m) {
        case QuantileMethod::Lower:
            return line[lo];
        case QuantileMethod::Higher:
            return line[hi];
        case QuantileMethod::Midpoint:
            return (line[lo] + line[hi]) / 2;
        case QuantileMethod::Nearest:
            return line[size_t(std::nearbyint(pos))];
        case QuantileMethod::Linear:
            break;
        }
        return line[lo] + (line[hi] - line[lo]) * g;
    };
    for (QuantileMethod m : methods) {
        std::vector<Array> r = function(
            {x}, {quantile(x, qs, 1, m), nanquantile(x, qs, 1, m), quantile(x, 0.5, {}, m, true)},
            {}, opts())(Array(xv, {rows, n}));
        ASSERT_EQ(r[0].shape(), (Shape{int64_t(qs.size()), rows}));
        ASSERT_EQ(r[2].shape(), (Shape{1, 1}));
        std::vector<double> got = srch_vals(r[0]), got_nan = srch_vals(r[1]);
        for (size_t k = 0; k < qs.size(); ++k)
            for (int64_t row = 0; row < rows; ++row) {
                std::vector<double> line(xv.begin() + row * n, xv.begin() + (row + 1) * n);
                std::vector<double> kept;
                for (double v : line)
                    if (!std::isnan(v))
                        kept.push_back(v);
                bool has_nan = kept.size() < line.size();
                double want = has_nan ? srch_kNaN : host(line, qs[k], m);
                size_t at = k * size_t(rows) + size_t(row);
                if (has_nan)
                    EXPECT_TRUE(std::isnan(got[at])) << k << " " << row;
                else
                    EXPECT_NEAR(got[at], want, 1e-12) << int(m) << " q " << qs[k] << " row " << row;
                EXPECT_NEAR(got_nan[at], host(kept, qs[k], m), 1e-12)
                    << "nan " << int(m) << " q " << qs[k] << " row " << row;
            }
        EXPECT_TRUE(std::isnan(srch_vals(r[2])[0])); // the flattened x holds a NaN
    }
    Array med = function({x}, {median(x, 1), nanmedian(x)}, {}, opts())(Array(xv, {rows, n}))[1];
    std::vector<double> all;
    for (double v : xv)
        if (!std::isnan(v))
            all.push_back(v);
    EXPECT_EQ(srch_vals(med)[0], host(all, 0.5, QuantileMethod::Linear));
    EXPECT_THROW(quantile(x, 1.5), InputError);
    Placeholder d({2, -1}, f32, "late");
    std::string m = message_of<ShapeError>([&] { median(d, 1); });
    EXPECT_NE(m.find("late"), std::string::npos) << m;
}
