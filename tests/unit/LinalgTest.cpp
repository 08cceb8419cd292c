// Tests of dot_general, matmul, cholesky and triangular_solve: values against hand-written loops
// and closed forms, shape rules and errors, and gradients against central finite differences.
#include <gtest/gtest.h>

#include <symjax/Autodiff.h>
#include <symjax/Function.h>
#include <symjax/Ops.h>
#include <symjax/Variable.h>
#include <symjax/ir/Node.h>

#include "TestUtil.h"

#include <cmath>
#include <functional>
#include <random>

using namespace sj;
using sj::test::values;

namespace {

/// An f64 array of uniform values in [lo, hi) from a fixed-seed generator.
Array rand_array(const Shape& shape, unsigned seed, double lo = -1, double hi = 1) {
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> dist(lo, hi);
    Array a(DType::F64, shape);
    double* p = a.data<double>();
    for (int64_t i = 0; i < a.size(); ++i) p[i] = dist(gen);
    return a;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
}

/// Checks d sum(f(x) * w) / dx (symbolic, via gradients) against central differences, for every
/// element of every input. f is built on placeholders; inputs are f64 arrays.
void check_grad(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                const std::vector<Array>& inputs, const std::string& what, double eps = 1e-6,
                double tol = 1e-6) {
    std::vector<Tensor> ph;
    for (size_t i = 0; i < inputs.size(); ++i)
        ph.push_back(Placeholder(inputs[i].shape(), inputs[i].dtype(), "x" + std::to_string(i)));
    Tensor y = f(ph);
    Tensor w = constant(rand_array(y.shape(), 999, 0.5, 1.5));
    Tensor cost = sum(y * w);
    std::vector<Tensor> g = gradients(cost, ph);
    ASSERT_EQ(g.size(), inputs.size());
    auto givens_for = [&](const std::vector<Array>& xs) {
        Givens gv;
        for (size_t i = 0; i < xs.size(); ++i) gv.push_back({ph[i], constant(xs[i])});
        return gv;
    };
    Givens base = givens_for(inputs);
    for (size_t i = 0; i < inputs.size(); ++i) {
        ASSERT_EQ(g[i].shape(), inputs[i].shape()) << what << ": gradient shape of input " << i;
        std::vector<double> analytic = values(g[i].eval(base));
        for (int64_t j = 0; j < inputs[i].size(); ++j) {
            std::vector<Array> xp, xm;
            for (const auto& a : inputs) {
                xp.push_back(a.clone());
                xm.push_back(a.clone());
            }
            xp[i].data<double>()[j] += eps;
            xm[i].data<double>()[j] -= eps;
            double cp = cost.eval(givens_for(xp)).item<double>();
            double cm = cost.eval(givens_for(xm)).item<double>();
            double numeric = (cp - cm) / (2 * eps);
            EXPECT_NEAR(analytic[j], numeric, tol * (1 + std::abs(numeric)))
                << what << ": d/d input " << i << " element " << j;
        }
    }
}

/// Element (i, j) of the row-major matrix m at batch b of [.., r, c].
double at3(const std::vector<double>& m, int64_t b, int64_t i, int64_t j, int64_t r, int64_t c) {
    return m[(b * r + i) * c + j];
}

} // namespace

// ---- dot_general ---------------------------------------------------------------------------

TEST(LinalgTest, DotGeneralMatrixProduct) {
    Array a = rand_array({2, 3}, 1), b = rand_array({3, 4}, 2);
    Tensor y = dot_general(constant(a), constant(b), {{}, {}, {1}, {0}});
    EXPECT_EQ(y.shape(), (Shape{2, 4}));
    auto A = values(a), B = values(b);
    std::vector<double> want(8, 0.0);
    for (int i = 0; i < 2; ++i)
        for (int l = 0; l < 4; ++l)
            for (int k = 0; k < 3; ++k) want[i * 4 + l] += A[i * 3 + k] * B[k * 4 + l];
    expect_near_all(values(y.eval()), want, 1e-14, "a @ b");
}

TEST(LinalgTest, DotGeneralTransposedOperands) {
    // out[i, l] = sum_k a[k, i] b[l, k]
    Array a = rand_array({3, 2}, 3), b = rand_array({4, 3}, 4);
    Tensor y = dot_general(constant(a), constant(b), {{}, {}, {0}, {1}});
    EXPECT_EQ(y.shape(), (Shape{2, 4}));
    auto A = values(a), B = values(b);
    std::vector<double> want(8, 0.0);
    for (int i = 0; i < 2; ++i)
        for (int l = 0; l < 4; ++l)
            for (int k = 0; k < 3; ++k) want[i * 4 + l] += A[k * 2 + i] * B[l * 3 + k];
    expect_near_all(values(y.eval()), want, 1e-14, "a^T @ b^T");
}

TEST(LinalgTest, DotGeneralBatched) {
    // out[b, i, l] = sum_k a[b, i, k] c[b, k, l]
    Array a = rand_array({2, 3, 4}, 5), c = rand_array({2, 4, 5}, 6);
    Tensor y = dot_general(constant(a), constant(c), {{0}, {0}, {2}, {1}});
    EXPECT_EQ(y.shape(), (Shape{2, 3, 5}));
    auto A = values(a), C = values(c);
    std::vector<double> want(30, 0.0);
    for (int b = 0; b < 2; ++b)
        for (int i = 0; i < 3; ++i)
            for (int l = 0; l < 5; ++l)
                for (int k = 0; k < 4; ++k)
                    want[(b * 3 + i) * 5 + l] += A[(b * 3 + i) * 4 + k] * C[(b * 4 + k) * 5 + l];
    expect_near_all(values(y.eval()), want, 1e-14, "batched");
}

TEST(LinalgTest, DotGeneralTwoContractingDims) {
    // out[i, l] = sum_{j,k} a[i, j, k] b[k, j, l]
    Array a = rand_array({2, 3, 4}, 7), b = rand_array({4, 3, 5}, 8);
    Tensor y = dot_general(constant(a), constant(b), {{}, {}, {1, 2}, {1, 0}});
    EXPECT_EQ(y.shape(), (Shape{2, 5}));
    auto A = values(a), B = values(b);
    std::vector<double> want(10, 0.0);
    for (int i = 0; i < 2; ++i)
        for (int l = 0; l < 5; ++l)
            for (int j = 0; j < 3; ++j)
                for (int k = 0; k < 4; ++k)
                    want[i * 5 + l] += A[(i * 3 + j) * 4 + k] * B[(k * 3 + j) * 5 + l];
    expect_near_all(values(y.eval()), want, 1e-14, "two contracting dims");
}

TEST(LinalgTest, DotGeneralBatchDimNotLeading) {
    // out[b, i, l] = sum_k a[i, b, k] c[k, l, b]
    Array a = rand_array({3, 2, 4}, 9), c = rand_array({4, 5, 2}, 10);
    Tensor y = dot_general(constant(a), constant(c), {{1}, {2}, {2}, {0}});
    EXPECT_EQ(y.shape(), (Shape{2, 3, 5}));
    auto A = values(a), C = values(c);
    std::vector<double> want(30, 0.0);
    for (int b = 0; b < 2; ++b)
        for (int i = 0; i < 3; ++i)
            for (int l = 0; l < 5; ++l)
                for (int k = 0; k < 4; ++k)
                    want[(b * 3 + i) * 5 + l] += A[(i * 2 + b) * 4 + k] * C[(k * 5 + l) * 2 + b];
    expect_near_all(values(y.eval()), want, 1e-14, "batch dim not leading");
}

TEST(LinalgTest, DotGeneralOuterProductAndNegativeAxes) {
    Array a = rand_array({2}, 11), b = rand_array({3}, 12);
    Tensor y = dot_general(constant(a), constant(b), {});
    EXPECT_EQ(y.shape(), (Shape{2, 3}));
    auto A = values(a), B = values(b);
    std::vector<double> want;
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j) want.push_back(A[i] * B[j]);
    expect_near_all(values(y.eval()), want, 1e-15, "outer");

    Array c = rand_array({2, 3}, 13), d = rand_array({3, 4}, 14);
    Tensor ct = constant(c), dt = constant(d); // one leaf each: constants have identities
    Tensor p = dot_general(ct, dt, {{}, {}, {1}, {0}});
    Tensor q = dot_general(ct, dt, {{}, {}, {-1}, {-2}});
    EXPECT_TRUE(p.same(q)) << "negative axes are normalised in the builder";
}

TEST(LinalgTest, DotGeneralIntegersAndPromotion) {
    Array a(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
    Array b(std::vector<int32_t>{7, 8, 9, 10, 11, 12}, {3, 2});
    Tensor y = dot_general(constant(a), constant(b), {{}, {}, {1}, {0}});
    EXPECT_EQ(y.dtype(), DType::I32);
    // [[1*7+2*9+3*11, 1*8+2*10+3*12], [4*7+5*9+6*11, 4*8+5*10+6*12]]
    EXPECT_EQ(y.eval().to_vector<int32_t>(), (std::vector<int32_t>{58, 64, 139, 154}));
    Tensor z = dot_general(constant(a), constant(b.astype(DType::F32)), {{}, {}, {1}, {0}});
    EXPECT_EQ(z.dtype(), DType::F32);
    EXPECT_EQ(z.eval().to_vector<float>(), (std::vector<float>{58, 64, 139, 154}));
}

TEST(LinalgTest, DotGeneralErrors) {
    Placeholder a({2, 3}, f32, "a");
    Placeholder b({4, 5}, f32, "b");
    try {
        dot_general(a, b, {{}, {}, {1}, {0}});
        FAIL() << "expected ShapeError";
    } catch (const ShapeError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("dot_general"), std::string::npos) << m;
        EXPECT_NE(m.find("a"), std::string::npos) << m;
        EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
        EXPECT_NE(m.find("[4, 5]"), std::string::npos) << m;
    }
    EXPECT_THROW(dot_general(a, b, {{}, {}, {1}, {}}), ShapeError);
    EXPECT_THROW(dot_general(a, b, {{}, {}, {1, 1}, {0, 0}}), ShapeError);
    EXPECT_THROW(dot_general(a, b, {{}, {}, {2}, {0}}), ShapeError);
    Placeholder t({2, 3}, boolean, "t");
    EXPECT_THROW(dot_general(t, t, {{}, {}, {1}, {1}}), TypeError);

    // a -1 dim matches at build time and is checked when the values arrive
    Placeholder x({2, -1}, f64, "x");
    Placeholder y({3, 4}, f64, "y");
    Tensor r = dot_general(x, y, {{}, {}, {1}, {0}});
    EXPECT_EQ(r.shape(), (Shape{2, 4}));
    EXPECT_EQ(r.eval({{x, constant(rand_array({2, 3}, 1))}, {y, constant(rand_array({3, 4}, 2))}})
                  .shape(),
              (Shape{2, 4}));
    Function f = function({x, y}, {r});
    try {
        f(rand_array({2, 5}, 1), rand_array({3, 4}, 2));
        FAIL() << "expected an error for contracting sizes 5 vs 3";
    } catch (const Error& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("dot_general"), std::string::npos) << m;
        EXPECT_NE(m.find("x"), std::string::npos) << m;
    }
}

TEST(LinalgTest, DotGeneralGradients) {
    auto cfg = [](DotDims d) {
        return [d](const std::vector<Tensor>& x) { return dot_general(x[0], x[1], d); };
    };
    check_grad(cfg({{}, {}, {1}, {0}}), {rand_array({2, 3}, 1), rand_array({3, 4}, 2)}, "matmul");
    check_grad(cfg({{}, {}, {0}, {1}}), {rand_array({3, 2}, 3), rand_array({4, 3}, 4)},
               "transposed");
    check_grad(cfg({{0}, {0}, {2}, {1}}), {rand_array({2, 3, 4}, 5), rand_array({2, 4, 2}, 6)},
               "batched");
    check_grad(cfg({{}, {}, {1, 2}, {1, 0}}), {rand_array({2, 3, 2}, 7), rand_array({2, 3, 2}, 8)},
               "two contracting dims");
    check_grad(cfg({{1}, {2}, {2}, {0}}), {rand_array({3, 2, 2}, 9), rand_array({2, 2, 2}, 10)},
               "batch dim not leading");
    check_grad(cfg({{0, 2}, {1, 0}, {1}, {2}}),
               {rand_array({2, 3, 2}, 11), rand_array({2, 2, 3}, 12)}, "two batch dims");
    check_grad(cfg({}), {rand_array({2}, 13), rand_array({3}, 14)}, "outer");
    check_grad(cfg({{}, {}, {0}, {0}}), {rand_array({3}, 15), rand_array({3}, 16)}, "inner");
}

// ---- matmul --------------------------------------------------------------------------------

namespace {
/// NumPy matmul of f64 arrays on the host (rank 1 to 4), for comparison.
std::vector<double> host_matmul(const Array& a, const Array& b, Shape* out_shape) {
    Shape sa = a.shape(), sb = b.shape();
    bool va = sa.size() == 1, vb = sb.size() == 1;
    if (va) sa.insert(sa.begin(), 1);
    if (vb) sb.push_back(1);
    size_t r = std::max(sa.size(), sb.size());
    while (sa.size() < r) sa.insert(sa.begin(), 1);
    while (sb.size() < r) sb.insert(sb.begin(), 1);
    int64_t m = sa[r - 2], k = sa[r - 1], n = sb[r - 1];
    Shape batch;
    for (size_t i = 0; i + 2 < r; ++i) batch.push_back(std::max(sa[i], sb[i]));
    int64_t nb = numel(batch);
    auto A = values(a), B = values(b);
    std::vector<double> out(nb * m * n, 0.0);
    for (int64_t bi = 0; bi < nb; ++bi) {
        int64_t rem = bi, oa = 0, ob = 0, stride_a = 1, stride_b = 1;
        for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
            int64_t idx = rem % batch[d];
            rem /= batch[d];
            oa += (sa[d] == 1 ? 0 : idx) * stride_a;
            ob += (sb[d] == 1 ? 0 : idx) * stride_b;
            stride_a *= sa[d];
            stride_b *= sb[d];
        }
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
                for (int64_t l = 0; l < k; ++l)
                    out[(bi * m + i) * n + j] +=
                        A[(oa * m + i) * k + l] * B[(ob * k + l) * n + j];
    }
    *out_shape = batch;
    if (!va) out_shape->push_back(m);
    if (!vb) out_shape->push_back(n);
    return out;
}
} // namespace

TEST(LinalgTest, MatmulPlain2dIsOneDotGeneral) {
    Placeholder a({2, 3}, f32, "a");
    Placeholder b({3, 4}, f32, "b");
    Tensor y = matmul(a, b);
    ASSERT_TRUE(y.node()->is(Op::DotGeneral));
    EXPECT_EQ(y.node()->input(0), a.node());
    EXPECT_EQ(y.node()->input(1), b.node());
    EXPECT_EQ(y.shape(), (Shape{2, 4}));
}

TEST(LinalgTest, MatmulBroadcastShapesAndValues) {
    std::vector<std::pair<Shape, Shape>> cases = {
        {{2, 3}, {3, 4}},       {{5, 2, 3}, {3, 4}},       {{3}, {3, 4}},
        {{2, 3}, {3}},          {{3}, {3}},                {{2, 1, 2, 3}, {4, 3, 5}},
        {{1, 2, 3}, {4, 3, 5}}, {{4, 2, 3}, {1, 3, 5}},    {{3}, {2, 3, 4}},
        {{2, 2, 3}, {3}},       {{3, 1, 2, 3}, {1, 2, 3, 2}}, {{2, 3}, {2, 2, 3, 1}},
    };
    unsigned seed = 100;
    for (const auto& [sa, sb] : cases) {
        Array a = rand_array(sa, seed++), b = rand_array(sb, seed++);
        Shape want_shape;
        std::vector<double> want = host_matmul(a, b, &want_shape);
        std::string what = shape_str(sa) + " @ " + shape_str(sb);
        Tensor y = matmul(constant(a), constant(b));
        EXPECT_EQ(y.shape(), want_shape) << what;
        Array got = y.eval();
        EXPECT_EQ(got.shape(), want_shape) << what;
        expect_near_all(values(got), want, 1e-13, what);
    }
}

TEST(LinalgTest, MatmulUnknownBatchDims) {
    Placeholder a({-1, 2, 3}, f64, "a");
    Placeholder b({-1, 3, 4}, f64, "b");
    Tensor y = matmul(a, b);
    EXPECT_EQ(y.shape(), (Shape{-1, 2, 4}));
    Array av = rand_array({3, 2, 3}, 1), bv = rand_array({3, 3, 4}, 2);
    Shape ws;
    auto want = host_matmul(av, bv, &ws);
    Array got = y.eval({{a, constant(av)}, {b, constant(bv)}});
    EXPECT_EQ(got.shape(), ws);
    expect_near_all(values(got), want, 1e-13, "[-1,2,3] @ [-1,3,4]");
    EXPECT_THROW(y.eval({{a, constant(av)}, {b, constant(rand_array({2, 3, 4}, 3))}}), Error);
    // [-1, m, k] @ [k, n] folds the batch into the free dims
    Placeholder c({3, 4}, f64, "c");
    EXPECT_EQ(matmul(a, c).shape(), (Shape{-1, 2, 4}));
    // a static 1 broadcasts against a -1 whatever size that takes at call time
    Placeholder one({1, 2, 3}, f64, "one");
    Tensor z = matmul(one, b);
    EXPECT_EQ(z.shape(), (Shape{-1, 2, 4}));
    for (int64_t batch : {1, 4}) {
        Array ov = rand_array({1, 2, 3}, 5), bv2 = rand_array({batch, 3, 4}, 6);
        Shape zs;
        auto zw = host_matmul(ov, bv2, &zs);
        Array zg = z.eval({{one, constant(ov)}, {b, constant(bv2)}});
        EXPECT_EQ(zg.shape(), zs);
        expect_near_all(values(zg), zw, 1e-13, "[1,2,3] @ [-1,3,4]");
    }
}

TEST(LinalgTest, MatmulErrors) {
    Placeholder a({2, 3}, f32, "a");
    Placeholder b({4, 5}, f32, "b");
    EXPECT_THROW(matmul(a, b), ShapeError);
    EXPECT_THROW(matmul(Placeholder({2, 2, 3}, f32, "p"), Placeholder({3, 3, 4}, f32, "q")),
                 ShapeError);
    EXPECT_THROW(matmul(scalar(1.0), a), ShapeError);
}

TEST(LinalgTest, MatmulGradients) {
    auto mm = [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); };
    check_grad(mm, {rand_array({2, 3}, 1), rand_array({3, 2}, 2)}, "2d");
    check_grad(mm, {rand_array({2, 2, 3}, 3), rand_array({3, 2}, 4)}, "batched @ 2d");
    check_grad(mm, {rand_array({3}, 5), rand_array({2, 3, 2}, 6)}, "vector @ batched");
    check_grad(mm, {rand_array({2, 1, 2, 3}, 7), rand_array({2, 3, 2}, 8)}, "broadcast batch");
    check_grad(mm, {rand_array({3}, 9), rand_array({3}, 10)}, "dot");
}

// ---- cholesky ------------------------------------------------------------------------------

namespace {
/// Random symmetric positive-definite matrices [batch, n, n]: M M^T + n I.
Array random_spd(int64_t batch, int64_t n, unsigned seed) {
    Array m = rand_array({batch, n, n}, seed);
    auto M = values(m);
    Array a(DType::F64, {batch, n, n});
    double* p = a.data<double>();
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) {
                double s = i == j ? double(n) : 0.0;
                for (int64_t k = 0; k < n; ++k) s += at3(M, b, i, k, n, n) * at3(M, b, j, k, n, n);
                p[(b * n + i) * n + j] = s;
            }
    return a;
}
} // namespace

TEST(LinalgTest, CholeskyKnown2x2And3x3) {
    // [[4, 2], [2, 3]] = L L^T with L = [[2, 0], [1, sqrt(2)]]
    Array a2(std::vector<double>{4, 2, 2, 3}, {2, 2});
    expect_near_all(values(cholesky(constant(a2)).eval()), {2, 0, 1, std::sqrt(2.0)}, 1e-15,
                    "2x2");
    // the classic example: [[4, 12, -16], [12, 37, -43], [-16, -43, 98]], L = [[2,0,0],[6,1,0],
    // [-8,5,3]]
    Array a3(std::vector<double>{4, 12, -16, 12, 37, -43, -16, -43, 98}, {3, 3});
    expect_near_all(values(cholesky(constant(a3)).eval()), {2, 0, 0, 6, 1, 0, -8, 5, 3}, 1e-14,
                    "3x3");
    Array l3 = cholesky(constant(a3.astype(DType::F32))).eval();
    EXPECT_EQ(l3.dtype(), DType::F32);
    expect_near_all(values(l3), {2, 0, 0, 6, 1, 0, -8, 5, 3}, 1e-6, "3x3 f32");
}

TEST(LinalgTest, CholeskyReconstructsBatchedSpd) {
    const int64_t nb = 3, n = 5;
    Array a = random_spd(nb, n, 42);
    Array l = cholesky(constant(a)).eval();
    ASSERT_EQ(l.shape(), (Shape{nb, n, n}));
    auto A = values(a), L = values(l);
    for (int64_t b = 0; b < nb; ++b)
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) {
                if (j > i) EXPECT_EQ(at3(L, b, i, j, n, n), 0.0) << "upper part is zero";
                if (i == j) EXPECT_GT(at3(L, b, i, i, n, n), 0.0) << "positive diagonal";
                double s = 0;
                for (int64_t k = 0; k < n; ++k) s += at3(L, b, i, k, n, n) * at3(L, b, j, k, n, n);
                EXPECT_NEAR(s, at3(A, b, i, j, n, n), 1e-12) << "L L^T at " << b << "," << i << ","
                                                              << j;
            }
}

TEST(LinalgTest, CholeskyErrors) {
    Tensor bad = constant(Array(std::vector<double>{1, 2, 2, 1}, {2, 2})).named("bad_matrix");
    try {
        cholesky(bad).eval();
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("cholesky"), std::string::npos) << m;
        EXPECT_NE(m.find("bad_matrix"), std::string::npos) << m;
        EXPECT_NE(m.find("order 2"), std::string::npos) << m;
    }
    EXPECT_THROW(cholesky(Placeholder({3, 3}, i32, "k")), TypeError);
    EXPECT_THROW(cholesky(Placeholder({3, 4}, f32, "r")), ShapeError);
    EXPECT_THROW(cholesky(Placeholder({3}, f32, "v")), ShapeError);
    EXPECT_THROW(cholesky(Placeholder({-1, -1}, f32, "u")), ShapeError);
    EXPECT_EQ(cholesky(Placeholder({-1, 3, 3}, f32, "batch")).shape(), (Shape{-1, 3, 3}));
}

TEST(LinalgTest, CholeskyGradient) {
    // The input is parameterised as A = (X + X^T) / 2, so finite differences move A along
    // symmetric directions only (the space on which the symmetric gradient is defined).
    auto f = [](const std::vector<Tensor>& x) {
        Tensor a = (x[0] + transpose(x[0], {0, 2, 1})) * 0.5;
        return cholesky(a);
    };
    check_grad(f, {random_spd(2, 3, 7)}, "cholesky", 1e-6, 1e-6);
    auto f2 = [](const std::vector<Tensor>& x) {
        return cholesky((x[0] + transpose(x[0])) * 0.5);
    };
    check_grad(f2, {random_spd(1, 4, 8).reshape({4, 4})}, "cholesky 4x4", 1e-6, 1e-6);
}

TEST(LinalgTest, CholeskyGradientIsSymmetric) {
    // the gradient with respect to A itself is the symmetric one (Murray 2016)
    Placeholder a({4, 4}, f64, "A");
    Tensor w = constant(rand_array({4, 4}, 3));
    Tensor g = gradients(sum(cholesky(a) * w), a);
    auto G = values(g.eval({{a, constant(random_spd(1, 4, 9).reshape({4, 4}))}}));
    ASSERT_EQ(G.size(), 16u);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < i; ++j) EXPECT_NEAR(G[i * 4 + j], G[j * 4 + i], 1e-12);
}

// ---- triangular_solve ------------------------------------------------------------------------

namespace {
struct Flags {
    bool left, lower, trans, unit;
};
std::vector<Flags> all_flags() {
    std::vector<Flags> out;
    for (int m = 0; m < 16; ++m)
        out.push_back({bool(m & 1), bool(m & 2), bool(m & 4), bool(m & 8)});
    return out;
}
std::string flags_str(const Flags& f) {
    return std::string(f.left ? "left" : "right") + (f.lower ? " lower" : " upper") +
           (f.trans ? " transposed" : "") + (f.unit ? " unit" : "");
}
/// A well-conditioned [batch, n, n] matrix: diagonal in [2, 3], off-diagonal in [-0.5, 0.5].
Array well_conditioned(int64_t batch, int64_t n, unsigned seed) {
    Array a = rand_array({batch, n, n}, seed, -0.5, 0.5);
    double* p = a.data<double>();
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < n; ++i) p[(b * n + i) * n + i] = 2.0 + 0.25 * double(i + b);
    return a;
}
} // namespace

TEST(LinalgTest, TriangularSolveResidualsAllFlags) {
    const int64_t nb = 2, n = 4, k = 3;
    for (const Flags& f : all_flags()) {
        Array a = well_conditioned(nb, n, 5);
        // garbage outside the triangle that is read (and on the diagonal for unit) must not matter
        double* pa = a.data<double>();
        for (int64_t b = 0; b < nb; ++b)
            for (int64_t i = 0; i < n; ++i)
                for (int64_t j = 0; j < n; ++j) {
                    bool unused = f.lower ? j > i : j < i;
                    if (unused || (f.unit && i == j)) pa[(b * n + i) * n + j] = 1e3 * (i + 1);
                }
        Shape bs = f.left ? Shape{nb, n, k} : Shape{nb, k, n};
        Array rhs = rand_array(bs, 6);
        Array x = triangular_solve(constant(a), constant(rhs), f.left, f.lower, f.trans, f.unit)
                      .eval();
        ASSERT_EQ(x.shape(), bs) << flags_str(f);
        auto A = values(a), X = values(x), B = values(rhs);
        // the matrix actually used: op(T), T the selected triangle of A
        auto t = [&](int64_t b, int64_t i, int64_t j) {
            if (i == j) return f.unit ? 1.0 : at3(A, b, i, i, n, n);
            bool used = f.lower ? i > j : i < j;
            return used ? at3(A, b, i, j, n, n) : 0.0;
        };
        auto op = [&](int64_t b, int64_t i, int64_t j) {
            return f.trans ? t(b, j, i) : t(b, i, j);
        };
        int64_t rows = bs[1], cols = bs[2];
        for (int64_t b = 0; b < nb; ++b)
            for (int64_t i = 0; i < rows; ++i)
                for (int64_t j = 0; j < cols; ++j) {
                    double s = 0;
                    for (int64_t l = 0; l < n; ++l)
                        s += f.left ? op(b, i, l) * at3(X, b, l, j, rows, cols)
                                    : at3(X, b, i, l, rows, cols) * op(b, l, j);
                    EXPECT_NEAR(s, at3(B, b, i, j, rows, cols), 1e-12) << flags_str(f);
                }
    }
}

TEST(LinalgTest, TriangularSolveErrors) {
    Placeholder a({2, 3, 3}, f64, "A");
    EXPECT_EQ(triangular_solve(a, Placeholder({2, 3, 5}, f64, "B")).shape(), (Shape{2, 3, 5}));
    EXPECT_EQ(triangular_solve(a, Placeholder({2, 5, 3}, f64, "B"), false).shape(),
              (Shape{2, 5, 3}));
    try {
        triangular_solve(a, Placeholder({2, 4, 5}, f64, "rhs"));
        FAIL() << "expected ShapeError";
    } catch (const ShapeError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("triangular_solve"), std::string::npos) << m;
        EXPECT_NE(m.find("rhs"), std::string::npos) << m;
        EXPECT_NE(m.find("[2, 4, 5]"), std::string::npos) << m;
    }
    EXPECT_THROW(triangular_solve(a, Placeholder({3, 3, 5}, f64, "B")), ShapeError);
    EXPECT_THROW(triangular_solve(a, Placeholder({3, 5}, f64, "B")), ShapeError);
    EXPECT_THROW(triangular_solve(Placeholder({3, 4}, f64, "A"), Placeholder({3, 5}, f64, "B")),
                 ShapeError);
    EXPECT_THROW(triangular_solve(Placeholder({3, 3}, i32, "A"), Placeholder({3, 5}, i32, "B")),
                 TypeError);
    // unknown batch dims bind at call time; a mismatch there is an error too
    Placeholder ab({-1, 2, 2}, f64, "Ab");
    Placeholder bb({-1, 2, 1}, f64, "Bb");
    Tensor x = triangular_solve(ab, bb);
    EXPECT_EQ(x.shape(), (Shape{-1, 2, 1}));
    EXPECT_THROW(x.eval({{ab, constant(well_conditioned(2, 2, 1))},
                         {bb, constant(rand_array({3, 2, 1}, 2))}}),
                 Error);
}

TEST(LinalgTest, TriangularSolveGradientsAllFlags) {
    for (const Flags& f : all_flags()) {
        auto fn = [f](const std::vector<Tensor>& x) {
            return triangular_solve(x[0], x[1], f.left, f.lower, f.trans, f.unit);
        };
        Shape bs = f.left ? Shape{2, 3, 2} : Shape{2, 2, 3};
        check_grad(fn, {well_conditioned(2, 3, 11), rand_array(bs, 12)}, flags_str(f));
    }
}

TEST(LinalgTest, SecondOrderThroughSolve) {
    // d/dA of a gradient that itself contains a solve: the rules compose (double backward).
    auto fn = [](const std::vector<Tensor>& x) {
        Tensor y = triangular_solve(x[0], x[1]);
        return gradients(sum(y * y), x[1]);
    };
    check_grad(fn, {well_conditioned(1, 3, 13).reshape({3, 3}), rand_array({3, 2}, 14)},
               "second order");
}
