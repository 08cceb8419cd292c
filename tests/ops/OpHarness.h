// The op-consistency harness: op rows, input generators, and the checks run for every row.
//
// Each row (OpRow) names one op (a primitive of Ops.def or a composite), a builder from input
// tensors to an output tensor, the cases (input shapes and value generators), the dtypes to run
// and what to check. For every row, case and dtype the harness:
//   1. compiles the graph with sj::function on every registered backend and compares each with
//      the reference backend (exact for integers and bools, tolerances for floats, NaN positions
//      must match), and checks the result type against the graph's static type;
//   2. checks that Tensor::eval with givens agrees with the compiled function, and that the
//      graph built from placeholders with -1 dims gives the same values;
//   3. for differentiable rows, in f64, compares sj::gradients of sum(out * r) (r random) with
//      central finite differences over every float input;
//   4. for rows marked second_order, compares Hessian-vector products with finite differences
//      of the gradient;
//   5. compares the reference backend with golden values computed by NumPy
//      (tests/ops/golden/gen_golden.py).
// Every failure prints a one-line reproducer (row, case, dtype, shapes, seed, command line).
#pragma once

#include <symjax/symjax.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sj::test {

/// How the values of one input are drawn (floats uniformly, integers uniformly and inclusive).
enum class Gen {
    Any,        // floats in [-3, 3]; signed ints in [-5, 5]; unsigned in [0, 9]; bools 50/50
    Positive,   // floats in [0.5, 3]; ints in [1, 6]; bools true
    NonZero,    // floats +-[0.5, 3]; signed ints +-[1, 5]; unsigned in [1, 5]
    Range,      // floats in [lo, hi]; ints in [lo, hi] (clamped to the dtype)
    Ties,       // drawn from {-1, 0, 0.5, 1, 2} (ints: {0, 1, 2}) so comparisons see equal values
    Distinct,   // distinct values spaced >= 0.25 apart (no ties: max/argmax are differentiable)
    WithZeros,  // like Range, but about a third of the elements exactly zero
    Spd,        // [..., n, n] symmetric positive definite: M M^T + n I with M in [-1, 1]
    Triangular, // [..., n, n] with |diagonal| in [2, 3] and off-diagonals in [-0.5, 0.5] (both
                // triangles filled: the unused one is garbage the kernel must ignore)
    Values,     // the given values, repeated cyclically
};

/// One input of a case.
struct In {
    Shape shape;
    Gen gen = Gen::Any;
    double lo = 0, hi = 0;      // Range, WithZeros
    std::optional<DType> dtype; // fixed dtype; by default the dtype being run
    std::vector<double> values; // Values
};
In in(Shape shape, Gen gen = Gen::Any);
In in_range(Shape shape, double lo, double hi, std::optional<DType> dtype = {});
In in_values(Shape shape, std::vector<double> values, std::optional<DType> dtype = {});
/// Integer indices in [lo, hi) of a fixed dtype.
In in_index(Shape shape, int64_t lo, int64_t hi, DType dtype = DType::I64);
/// A bool input (e.g. a where condition), 50/50.
In in_bool(Shape shape);

struct Case {
    std::vector<In> inputs;
    /// false: forward checks only (e.g. ties, where the op is not differentiable).
    bool grad = true;
    /// false: skip the forward run on -1 placeholders (the builder needs static dims).
    bool dynamic = true;
    /// When not empty, the case runs only in these of the row's dtypes.
    std::vector<DType> only;
};

/// Absolute and relative tolerance: |got - want| <= atol + rtol * |want|.
struct Tol {
    double atol = 0, rtol = 0;
};

/// What the gradient check compares with.
enum class GradCheck {
    None,       // not differentiable (integer or bool output, or checked elsewhere)
    FiniteDiff, // central finite differences
    Zero,       // the gradient must be exactly zero (stop_gradient)
};

using Builder = std::function<Tensor(const std::vector<Tensor>&)>;

struct OpRow {
    std::string name; // unique; the GoogleTest parameter name (letters, digits, '_')
    std::string op;   // the op covered: an Ops.def name ("reduce_sum") or a composite ("softmax")
    Builder build;
    std::vector<Case> cases;
    std::vector<DType> dtypes;
    GradCheck grad = GradCheck::None;
    /// Dtypes of the float inputs in the gradient check: f64, except where the output is f64
    /// while the inputs are not (a cast), which finite differences still resolve exactly.
    std::vector<DType> grad_dtypes = {DType::F64};
    bool second_order = false;
    /// Adds a forward-only case where every float input is a vector of NaN, +-inf, +-0 and
    /// extreme values (for elementwise rows whose inputs all broadcast from shape [kSpecials]).
    bool specials = false;
    /// Also runs the forward graph built from placeholders whose dims (other than 1) are -1.
    bool dynamic = true;
    /// With `dynamic`, also builds and runs the gradients on those placeholders.
    bool dynamic_grad = true;
    // Forward tolerances, for other backends vs the reference and for the reference vs NumPy
    // (Tensor::eval and -1 placeholders are compared exactly: the same interpreter runs them).
    // f32: a compiled backend may use vectorised transcendental approximations (a few ulp) and
    // another summation order (n * 2^-24 for n terms); composites round every intermediate to
    // f32 where NumPy's golden values are computed in f64 and rounded once (a dozen roundings,
    // and cancellations such as x - logsumexp(x) bounded by 2^-24 |x| in absolute terms):
    // 1e-5 relative with 1e-6 absolute covers these for our sizes and |x| <= 8.
    // f64: the same effects at 2^-53, and libm vs NumPy transcendentals (<= 2 ulp): 1e-12.
    Tol tol_f32{1e-6, 1e-5};
    Tol tol_f64{1e-12, 1e-12};
};

/// Number of elements of the specials vector (see OpRow::specials).
inline constexpr int64_t kSpecials = 12;

/// The table of rows (defined in OpTableTest.cpp).
const std::vector<OpRow>& op_table();
const OpRow* find_row(const std::string& name);

/// Backends compared with the reference: those among "cpu", "cuda" and the comma-separated list
/// in $SJ_TEST_BACKENDS that are built and can run here (a function compiles on them: "cuda"
/// needs a GPU or SJ_CUDA_DEVICE=emulator). "reference" is always first. A backend named in
/// $SJ_TEST_REQUIRE_BACKENDS that cannot run is an error, not a silent omission.
const std::vector<std::string>& test_backends();

/// The cases actually run for a row (its cases plus the specials case).
std::vector<Case> row_cases(const OpRow& row);

// ---- the checks (each reports failures with ADD_FAILURE and a reproducer line) ------------
/// Checks 1 and 2 for every case and dtype (honours $SJ_OP_CASE and $SJ_OP_DTYPE).
void check_forward(const OpRow& row);
/// Check 3 for every case and gradient dtype.
void check_gradients(const OpRow& row);
/// Check 4 for every case in f64.
void check_second_order(const OpRow& row);
/// Check 5: every golden entry of the row (there must be at least one).
void check_golden(const OpRow& row);

/// Golden entries per row name, loaded once from SJ_TEST_DATA_DIR/ops/golden/golden.json.
size_t golden_count(const std::string& row);
/// An error message when golden.json cannot be read or parsed, else empty.
std::string golden_load_error();
/// Names of golden entries whose row is not in the table.
std::vector<std::string> golden_orphans();

// ---- helpers shared with the table ---------------------------------------------------------
/// Draws the value of one input for a run in `dtype` from `seed`.
Array generate(const In& spec, DType dtype, uint64_t seed);
/// Swaps the last two dims (for builders).
Tensor swap_last(const Tensor& x);
std::string shapes_str(const Case& c);
/// Counts printed by the coverage test.
struct TableCounts {
    size_t rows = 0, ops = 0, grad_ops = 0, second_order_ops = 0, op_dtype_pairs = 0;
    size_t golden_entries = 0;
};
TableCounts table_counts();

} // namespace sj::test
