// Example: the multivariate normal density (SymJAX paper), evaluated lazily and compiled.
//
// The density of N(mu, S) at x is
//     p(x) = exp(-0.5 (x - mu)^T S^-1 (x - mu)) / sqrt((2 pi)^d det S).
// With the Cholesky factor S = L L^T this is computed stably as
//     log p(x) = -0.5 |L^-1 (x - mu)|^2 - sum(log diag L) - d/2 log(2 pi),
// which needs one triangular solve instead of an inverse and a determinant.
//
// The program evaluates the density on a 5 x 5 grid over [-5, 5]^2, first for N(0, I) and then
// for a correlated Gaussian, and checks every value against the closed form computed in plain
// C++. It prints "mvn_pdf: OK" when every check passes.
#include <symjax/symjax.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace sj;

namespace {

constexpr double kTwoPi = 6.283185307179586476925;
constexpr int64_t kGrid = 5; // points per axis

/// log N(points | mean, cov) for points [n, d], mean [d] and a positive-definite cov [d, d]:
/// one value per point, shape [n]. Built from the public op API, so it works on constants
/// (for lazy evaluation) and on placeholders (for a compiled function) alike.
Tensor mvn_log_pdf(const Tensor& points, const Tensor& mean, const Tensor& cov) {
    const int64_t d = cov.dim(0);
    Tensor L = cholesky(cov);                              // cov = L L^T, L lower triangular
    Tensor diff = points - mean;                           // [n, d], mean broadcast over rows
    Tensor z = triangular_solve(L, transpose(diff));       // L z = diff^T, so z is [d, n]
    Tensor mahalanobis = sum(z * z, {0});                  // |L^-1 (x - mu)|^2 per point
    Tensor diag_L = sum(L * eye(d, d, 0, cov.dtype()), {1});  // the diagonal of L, [d]
    Tensor half_log_det = sum(log(diag_L));                // 0.5 log det cov
    return -0.5 * mahalanobis - half_log_det - 0.5 * double(d) * std::log(kTwoPi);
}

Tensor mvn_pdf(const Tensor& points, const Tensor& mean, const Tensor& cov) {
    return exp(mvn_log_pdf(points, mean, cov));
}

/// The grid points (x_i, y_j) of linspace(-5, 5, 5) x linspace(-5, 5, 5), as a [25, 2] tensor
/// in row-major order: point i * 5 + j is (x_i, y_j).
Tensor grid_points() {
    Tensor axis = linspace(-5, 5, kGrid, f64);
    Tensor xs = broadcast_to(reshape(axis, {kGrid, 1}), {kGrid, kGrid}); // x varies down rows
    Tensor ys = broadcast_to(reshape(axis, {1, kGrid}), {kGrid, kGrid}); // y varies along rows
    return reshape(stack({xs, ys}, -1), {kGrid * kGrid, 2});
}

/// Prints a [25] density as a 5 x 5 table (rows: x, columns: y).
void print_grid(const char* title, const Array& density) {
    std::printf("%s\n", title);
    std::printf("  %8s", "x \\ y");
    for (int j = 0; j < kGrid; ++j) std::printf(" %10.2f", -5.0 + 2.5 * j);
    std::printf("\n");
    for (int i = 0; i < kGrid; ++i) {
        std::printf("  %8.2f", -5.0 + 2.5 * i);
        for (int j = 0; j < kGrid; ++j) std::printf(" %10.3e", density.at(i * kGrid + j));
        std::printf("\n");
    }
}

/// Counts failed comparisons and says what failed.
struct Checker {
    int failures = 0;
    void near(const std::string& what, double got, double want, double rtol = 1e-10) {
        if (std::abs(got - want) <= rtol * std::abs(want)) return;
        ++failures;
        std::printf("FAILED: %s = %.12g, expected %.12g\n", what.c_str(), got, want);
    }
};

/// The closed-form density of a 2-d Gaussian, with the 2 x 2 inverse and determinant by hand.
double closed_form_pdf(double x, double y, const double mean[2], const double cov[2][2]) {
    double det = cov[0][0] * cov[1][1] - cov[0][1] * cov[1][0];
    double inv[2][2] = {{cov[1][1] / det, -cov[0][1] / det}, {-cov[1][0] / det, cov[0][0] / det}};
    double u = x - mean[0], v = y - mean[1];
    double q = u * (inv[0][0] * u + inv[0][1] * v) + v * (inv[1][0] * u + inv[1][1] * v);
    return std::exp(-0.5 * q) / (kTwoPi * std::sqrt(det));
}

} // namespace

int main() {
    Checker check;

    // ---- 1. N(0, I), evaluated lazily ----------------------------------------------------------
    // Every input is a constant, so the expression can be evaluated on the spot with eval()
    // (SymJAX's .get()): handy for debugging, no function needed.
    Tensor points = grid_points();
    Tensor lazy = mvn_pdf(points, zeros({2}, f64), eye(2, 2, 0, f64));
    Array lazy_density = lazy.eval();
    print_grid("N(0, I) density on the grid (lazy eval):", lazy_density);

    const int64_t centre = 2 * kGrid + 2; // the point (0, 0)
    std::printf("centre density %.6f (1 / (2 pi) = %.6f)\n", lazy_density.at(centre),
                1.0 / kTwoPi);
    std::printf("neighbour density %.6f (exp(-3.125) / (2 pi) = %.6f)\n",
                lazy_density.at(centre + 1), std::exp(-3.125) / kTwoPi);
    check.near("lazy centre", lazy_density.at(centre), 1.0 / kTwoPi);
    // the four neighbours at distance 2.5: (0, +-2.5) and (+-2.5, 0)
    for (int64_t k : {centre - 1, centre + 1, centre - kGrid, centre + kGrid})
        check.near("lazy neighbour " + std::to_string(k), lazy_density.at(k),
                   std::exp(-3.125) / kTwoPi);

    // ---- 2. the same density as a compiled function ------------------------------------------
    // Placeholders stand for the values given at each call; -1 lets any number of points in.
    Placeholder x({-1, 2}, f64, "points");
    Placeholder mu({2}, f64, "mean");
    Placeholder cov({2, 2}, f64, "cov");
    Function density = function({x, mu, cov}, {mvn_pdf(x, mu, cov)});

    Array grid = points.eval(); // the [25, 2] grid as host values
    Array identity_density = density(grid, Array(std::vector<double>{0, 0}),
                                     Array(std::vector<double>{1, 0, 0, 1}, {2, 2}))[0];
    const double zero_mean[2] = {0, 0};
    const double identity[2][2] = {{1, 0}, {0, 1}};
    for (int k = 0; k < kGrid * kGrid; ++k) {
        double want = closed_form_pdf(grid.at(2 * k), grid.at(2 * k + 1), zero_mean, identity);
        check.near("compiled N(0, I) at point " + std::to_string(k), identity_density.at(k), want);
        check.near("lazy N(0, I) at point " + std::to_string(k), lazy_density.at(k), want);
    }

    // ---- 3. a correlated Gaussian, same compiled function ---------------------------------------
    const double mean2[2] = {0.5, -0.3};
    const double cov2[2][2] = {{2.0, 0.6}, {0.6, 1.0}};
    Array mean2_value(std::vector<double>{mean2[0], mean2[1]});
    Array cov2_value(std::vector<double>{cov2[0][0], cov2[0][1], cov2[1][0], cov2[1][1]}, {2, 2});
    Array full_density = density(grid, mean2_value, cov2_value)[0];
    print_grid("N([0.5, -0.3], [[2, 0.6], [0.6, 1]]) density on the grid (compiled):",
               full_density);
    for (int k = 0; k < kGrid * kGrid; ++k)
        check.near("correlated density at point " + std::to_string(k), full_density.at(k),
                   closed_form_pdf(grid.at(2 * k), grid.at(2 * k + 1), mean2, cov2));

    // the same function takes any number of points: here just one, the mean (the peak)
    Array at_mean = density(mean2_value.reshape({1, 2}), mean2_value, cov2_value)[0];
    const double peak = 1.0 / (kTwoPi * std::sqrt(2.0 * 1.0 - 0.6 * 0.6));
    std::printf("peak density %.6f (1 / (2 pi sqrt(det S)) = %.6f)\n", at_mean.at(0), peak);
    check.near("peak density", at_mean.at(0), peak);

    if (check.failures > 0) {
        std::printf("mvn_pdf: %d check(s) FAILED\n", check.failures);
        return 1;
    }
    std::printf("mvn_pdf: OK\n");
    return 0;
}
