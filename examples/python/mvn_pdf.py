"""Example: the multivariate normal density (SymJAX paper), evaluated lazily and compiled.

The density of N(mu, S) at x is
    p(x) = exp(-0.5 (x - mu)^T S^-1 (x - mu)) / sqrt((2 pi)^d det S).
With the Cholesky factor S = L L^T this is computed stably as
    log p(x) = -0.5 |L^-1 (x - mu)|^2 - sum(log diag L) - d/2 log(2 pi),
one triangular solve instead of an inverse and a determinant.

The script evaluates the density on a 5 x 5 grid over [-5, 5]^2, first for N(0, I) and then for a
correlated Gaussian, checks every value against the closed form, and prints the same tables as
examples/mvn_pdf.cpp and "mvn_pdf: OK" when every check passes.

    PYTHONPATH=build/python python3 examples/python/mvn_pdf.py
"""
import math
import sys

import numpy as np

import symjax
import symjax.tensor as T

TWO_PI = 2 * math.pi
GRID = 5  # points per axis


def mvn_log_pdf(points, mean, cov):
    """log N(points | mean, cov) for points [n, d], mean [d], cov [d, d]: shape [n]."""
    d = cov.shape[0]
    L = T.linalg.cholesky(cov)  # cov = L L^T
    diff = points - mean  # [n, d]
    z = T.linalg.triangular_solve(L, diff.T)  # L z = diff^T: z is [d, n]
    mahalanobis = (z * z).sum(0)
    diag_L = (L * T.eye(d, d, 0, cov.dtype)).sum(1)
    half_log_det = T.log(diag_L).sum()
    return -0.5 * mahalanobis - half_log_det - 0.5 * d * math.log(TWO_PI)


def mvn_pdf(points, mean, cov):
    return T.exp(mvn_log_pdf(points, mean, cov))


def grid_points():
    """linspace(-5, 5, 5) x linspace(-5, 5, 5) as [25, 2]: point i * 5 + j is (x_i, y_j)."""
    axis = T.linspace(-5, 5, GRID, "float64")
    xs = T.broadcast_to(axis.reshape(GRID, 1), (GRID, GRID))
    ys = T.broadcast_to(axis.reshape(1, GRID), (GRID, GRID))
    return T.stack([xs, ys], -1).reshape(GRID * GRID, 2)


def print_grid(title, density):
    print(title)
    print("  %8s" % "x \\ y" + "".join(" %10.2f" % (-5.0 + 2.5 * j) for j in range(GRID)))
    for i in range(GRID):
        print("  %8.2f" % (-5.0 + 2.5 * i)
              + "".join(" %10.3e" % density[i * GRID + j] for j in range(GRID)))


failures = 0


def near(what, got, want, rtol=1e-10):
    global failures
    if abs(got - want) <= rtol * abs(want):
        return
    failures += 1
    print("FAILED: %s = %.12g, expected %.12g" % (what, got, want))


def closed_form_pdf(x, y, mean, cov):
    det = cov[0][0] * cov[1][1] - cov[0][1] * cov[1][0]
    inv = [[cov[1][1] / det, -cov[0][1] / det], [-cov[1][0] / det, cov[0][0] / det]]
    u, v = x - mean[0], y - mean[1]
    q = u * (inv[0][0] * u + inv[0][1] * v) + v * (inv[1][0] * u + inv[1][1] * v)
    return math.exp(-0.5 * q) / (TWO_PI * math.sqrt(det))


# ---- 1. N(0, I), evaluated lazily (every input is a constant: .get() evaluates on the spot) ----
points = grid_points()
lazy = mvn_pdf(points, T.zeros((2,), "float64"), T.eye(2, 2, 0, "float64"))
lazy_density = lazy.get()
print_grid("N(0, I) density on the grid (lazy eval):", lazy_density)
centre = 2 * GRID + 2
print("centre density %.6f (1 / (2 pi) = %.6f)" % (lazy_density[centre], 1.0 / TWO_PI))
print("neighbour density %.6f (exp(-3.125) / (2 pi) = %.6f)"
      % (lazy_density[centre + 1], math.exp(-3.125) / TWO_PI))
near("lazy centre", lazy_density[centre], 1.0 / TWO_PI)
for k in (centre - 1, centre + 1, centre - GRID, centre + GRID):
    near("lazy neighbour %d" % k, lazy_density[k], math.exp(-3.125) / TWO_PI)

# ---- 2. the same density as a compiled function (None: any number of points) ------------------
x = T.Placeholder((None, 2), "float64", name="points")
mu = T.Placeholder((2,), "float64", name="mean")
cov = T.Placeholder((2, 2), "float64", name="cov")
density = symjax.function(x, mu, cov, outputs=mvn_pdf(x, mu, cov))

grid = points.get()
identity_density = density(grid, np.zeros(2), np.eye(2))
for k in range(GRID * GRID):
    want = closed_form_pdf(grid[k, 0], grid[k, 1], [0, 0], [[1, 0], [0, 1]])
    near("compiled N(0, I) at point %d" % k, identity_density[k], want)
    near("lazy N(0, I) at point %d" % k, lazy_density[k], want)

# ---- 3. a correlated Gaussian, same compiled function -------------------------------------------
mean2 = np.array([0.5, -0.3])
cov2 = np.array([[2.0, 0.6], [0.6, 1.0]])
full_density = density(grid, mean2, cov2)
print_grid("N([0.5, -0.3], [[2, 0.6], [0.6, 1]]) density on the grid (compiled):", full_density)
for k in range(GRID * GRID):
    near("correlated density at point %d" % k, full_density[k],
         closed_form_pdf(grid[k, 0], grid[k, 1], mean2, cov2))

at_mean = density(mean2.reshape(1, 2), mean2, cov2)
peak = 1.0 / (TWO_PI * math.sqrt(2.0 * 1.0 - 0.6 * 0.6))
print("peak density %.6f (1 / (2 pi sqrt(det S)) = %.6f)" % (at_mean[0], peak))
near("peak density", at_mean[0], peak)

if failures:
    print("mvn_pdf: %d check(s) FAILED" % failures)
    sys.exit(1)
print("mvn_pdf: OK")
