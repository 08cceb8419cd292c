"""symjax.tensor's control flow (scan, map, fori_loop, while_loop, trip_count, cond, switch) from
Python: values against NumPy loops, gradients against float64 central finite differences, pytree
carries, and errors raising the mapped exceptions."""
import numpy as np
import pytest

import symjax as sj
import symjax.tensor as T


def finite_difference(f, x, eps=1e-6):
    """d f / d x by central differences (f: NumPy array -> float)."""
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


# ---- scan --------------------------------------------------------------------------------------
def test_scan_running_sum_matches_numpy_cumsum():
    xs = T.Placeholder((5,), "float32", name="xs")
    carry, steps = T.scan(lambda c, x: (c + x, c + x), T.zeros(()), [xs])
    f = sj.function(xs, outputs=[carry, steps])
    v = np.random.randn(5).astype(np.float32)
    last, each = f(v)
    np.testing.assert_allclose(each, np.cumsum(v), rtol=1e-6)
    np.testing.assert_allclose(last, v.sum(), rtol=1e-6)


def test_scan_symjax_argument_order_slices_then_non_sequences():
    # fn(carry, *slices, *non_sequences), as SymJAX's scan (its docstring's example)
    indices = T.Placeholder((3,), "int32")
    w = T.arange(10)
    out = T.scan(lambda acc, i, w: (acc + w[i], i), T.zeros(1), sequences=[indices],
                 non_sequences=[w])
    f = sj.function(indices, outputs=out)
    acc, ids = f(np.array([0, 2, 3], np.int32))
    np.testing.assert_array_equal(acc, [5.0])
    np.testing.assert_array_equal(ids, [0, 2, 3])
    acc, _ = f(np.array([1, 1, 1], np.int32))
    np.testing.assert_array_equal(acc, [3.0])


def test_scan_pytree_carry_two_sequences_and_reverse():
    a = np.random.randn(4, 3)
    b = np.random.randn(4, 3)
    A, B = T.Placeholder((4, 3), "float64"), T.Placeholder((4, 3), "float64")

    def step(carry, x, y):
        return {"sum": carry["sum"] + x * y, "n": carry["n"] + 1}, (carry["sum"], x - y)

    init = {"sum": T.zeros((3,), "float64"), "n": T.zeros((), "int32")}
    final, (before, diff) = T.scan(step, init, [A, B], reverse=True)
    f = sj.function(A, B, outputs=[final["sum"], final["n"], before, diff])
    s, n, bef, d = f(a, b)
    # NumPy's loop, from the last slice to the first; outputs in the sequences' order
    acc, want_before = np.zeros(3), np.zeros((4, 3))
    for t in reversed(range(4)):
        want_before[t] = acc
        acc = acc + a[t] * b[t]
    np.testing.assert_allclose(s, acc, rtol=1e-12)
    assert n == 4
    np.testing.assert_allclose(bef, want_before, rtol=1e-12)
    np.testing.assert_allclose(d, a - b, rtol=1e-12)


def test_scan_namedtuple_carry():
    import collections
    State = collections.namedtuple("State", "h n")
    final, ys = T.scan(lambda s, x: (State(s.h * 0.5 + x, s.n + 1), s.h),
                       State(T.zeros(()), T.zeros((), "int32")), [T.ones(3)])
    assert isinstance(final, State)
    h, n, y = sj.function(outputs=[final.h, final.n, ys])()
    assert (h, n) == (1.75, 3)
    np.testing.assert_array_equal(y, [0.0, 1.0, 1.5])


def test_scan_without_sequences_needs_length_and_uses_it():
    carry, powers = T.scan(lambda c: (c * 2.0, c), T.ones(()), [], length=6)
    np.testing.assert_array_equal(sj.function(outputs=powers)(), 2.0 ** np.arange(6))
    assert sj.function(outputs=carry)() == 64.0
    with pytest.raises(sj.ShapeError, match="length"):
        T.scan(lambda c: (c, c), T.ones(()), [])


def test_scan_number_carry_takes_the_init_dtype():
    # a Python number returned for a float64 carry becomes a float64 constant
    final, _ = T.scan(lambda c, x: (0.5, None), T.zeros((), "float64"), [T.ones(3)])
    assert final.dtype == np.float64
    assert sj.function(outputs=final)() == 0.5


def test_scan_gradient_against_finite_differences_f64():
    # h_t = tanh(w * h_{t-1} + x_t), loss = sum_t h_t ** 2: d/dw and d/dxs
    xs0 = np.random.randn(6)
    w0 = 0.7
    xs = T.Placeholder((6,), "float64", name="xs")
    w = T.Variable(np.float64(w0), name="w")
    _, hs = T.scan(lambda h, x: (T.tanh(w * h + x),) * 2, T.zeros((), "float64"), [xs])
    loss = (hs ** 2.0).sum()
    gw, gx = sj.gradients(loss, [w, xs])
    f = sj.function(xs, outputs=[gw, gx])

    def numpy_loss(xv, wv):
        h, total = 0.0, 0.0
        for x in xv:
            h = np.tanh(wv * h + x)
            total += h * h
        return total

    got_w, got_x = f(xs0)
    np.testing.assert_allclose(got_w, finite_difference(lambda v: numpy_loss(xs0, v), w0),
                               rtol=1e-6)
    np.testing.assert_allclose(got_x, finite_difference(lambda v: numpy_loss(v, w0), xs0),
                               rtol=1e-6, atol=1e-9)


def test_scan_clone_replaces_a_captured_sequence():
    a = T.ones(5)
    _, each = T.scan(lambda c, i: (c + i, c + i), 0.0, [a])
    each4 = each.clone({a: a * 4})
    x, y = sj.function(outputs=[each, each4])()
    np.testing.assert_array_equal(x, np.arange(1, 6))
    np.testing.assert_array_equal(y, 4 * np.arange(1, 6))


def test_body_is_traced_once():
    calls = []

    def body(c, x):
        calls.append(1)
        return c + x, c

    c, _ = T.scan(body, T.zeros(()), [T.ones(50)])
    f = sj.function(outputs=c)
    assert f() == 50 and f() == 50
    assert len(calls) == 1


# ---- map, fori_loop ------------------------------------------------------------------------------
def test_map_matches_numpy_and_returns_pytrees():
    x = np.random.randn(4, 3).astype(np.float32)
    X = T.Placeholder((4, 3), "float32")
    s = T.Placeholder((), "float32")
    out = T.map(lambda row, s: (T.sum(row) * s, {"max": T.max(row)}), [X], non_sequences=[s])
    total, d = out
    f = sj.function(X, s, outputs=[total, d["max"]])
    t, m = f(x, 2.0)
    np.testing.assert_allclose(t, x.sum(1) * 2, rtol=1e-5)
    np.testing.assert_array_equal(m, x.max(1))
    with pytest.raises(sj.ShapeError, match="no sequences"):
        T.map(lambda: 1.0, [])


def test_map_builds_a_diagonal_matrix_as_in_symjax_docs():
    x, y, w = T.ones(3), T.zeros(3), T.arange(3)
    out = T.map(lambda x, i, w: T.index_update(w, i, x), sequences=[x, w], non_sequences=[y])
    np.testing.assert_array_equal(sj.function(outputs=out)(), np.eye(3))


def test_fori_loop_factorial_and_gradient():
    x = T.Placeholder((), "float64")
    # prod_{i=1..5} (x + i), its derivative by finite differences
    r = T.fori_loop(1, 6, lambda i, v: v * (x + T.cast(i, "float64")), T.ones((), "float64"))
    g = sj.gradients(r, x)
    f = sj.function(x, outputs=[r, g])
    val, grad = f(0.5)
    poly = lambda v: np.prod([v + i for i in range(1, 6)])
    np.testing.assert_allclose(val, poly(0.5), rtol=1e-12)
    np.testing.assert_allclose(grad, finite_difference(lambda v: poly(float(v)), 0.5), rtol=1e-7)
    # the index is an int64 scalar; a pytree carry
    (s, n) = T.fori_loop(0, 4, lambda i, c: (c[0] + i, c[1] + 1), (T.zeros((), "int64"), 0))
    assert sj.function(outputs=[s, n])() == [6, 4]


# ---- while_loop ----------------------------------------------------------------------------------
def test_while_loop_newton_sqrt_and_trip_count():
    a = T.Placeholder((), "float64", name="a")
    root = T.while_loop(lambda v, a: T.abs(v * v - a) > 1e-12, lambda v, a: 0.5 * (v + a / v), a,
                        non_sequences=[a], max_iterations=100)
    f = sj.function(a, outputs=[root, T.trip_count(root)])
    for value in (2.0, 10.0, 0.25):
        r, n = f(value)
        np.testing.assert_allclose(r, np.sqrt(value), rtol=1e-12)
        # NumPy's loop for the same iterations
        v, k = value, 0
        while abs(v * v - value) > 1e-12 and k < 100:
            v, k = 0.5 * (v + value / v), k + 1
        assert n == k


def test_while_loop_max_iterations_stops_the_loop():
    out = T.while_loop(lambda v: v < 1e9, lambda v: v + 1.0, T.zeros(()), max_iterations=7)
    f = sj.function(outputs=[out, T.trip_count(out)])
    assert f() == [7.0, 7]


def test_while_loop_symjax_non_sequences_cond_and_body():
    v = T.Placeholder((), "float32")
    k = T.Placeholder((), "float32")
    out = T.while_loop(lambda i, u: i[0] + u < 5, lambda i, step: (i[0] + step, i[0] ** 2),
                       (T.ones(()), 1.0), non_sequences_cond=(v,), non_sequences_body=[k])
    f = sj.function(v, k, outputs=list(out))
    np.testing.assert_array_equal(f(0, 1), [5, 16])
    np.testing.assert_array_equal(f(0, 2), [5, 9])


def test_while_loop_gradient_against_finite_differences_f64():
    # x <- x * w + c while x < 10: the trip count depends on the values, the gradient on the
    # iterations run; FD steps small enough not to change the trip count
    w = T.Placeholder((), "float64", name="w")
    c = T.Placeholder((), "float64", name="c")
    x0 = T.Placeholder((), "float64", name="x0")
    out = T.while_loop(lambda x: x < 10.0, lambda x: x * w + c, x0, max_iterations=64)
    loss = out * out
    grads = sj.gradients(loss, [w, c, x0])
    f = sj.function(w, c, x0, outputs=grads + [T.trip_count(out)])

    def numpy_loss(p):
        wv, cv, x = p
        while x < 10.0:
            x = x * wv + cv
        return x * x

    p0 = np.array([1.3, 0.4, 0.9])
    *got, n = f(*p0)
    assert n >= 3
    np.testing.assert_allclose(got, finite_difference(numpy_loss, p0), rtol=1e-6)


def test_while_loop_gradient_without_max_iterations_says_so():
    x = T.Placeholder((), "float64")
    out = T.while_loop(lambda v: v < 10.0, lambda v: v * 2.0, x)
    with pytest.raises(sj.Error, match="max_iterations"):
        sj.gradients(out, x)


# ---- cond, switch --------------------------------------------------------------------------------
def test_cond_symjax_true_and_false_inputs():
    u = T.Placeholder((), "int32")
    v = T.ones((2, 2)) * 3
    out = T.cond(u > 0, lambda a, b: a * b, lambda a: a + 1, true_inputs=(2 * T.ones((2, 2)), v),
                 false_inputs=(v,))
    f = sj.function(u, outputs=out)
    np.testing.assert_array_equal(f(1), np.full((2, 2), 6.0))
    np.testing.assert_array_equal(f(0), np.full((2, 2), 4.0))


def test_cond_operands_pytree_and_only_the_taken_branch_runs():
    x = T.Placeholder((3,), "float32")
    # the false branch would divide by zero: it does not run when pred is true
    out = T.cond(T.sum(x) > 0, lambda a: {"y": a * 2, "s": T.sum(a)},
                 lambda a: {"y": a / 0.0, "s": T.sum(a) * 0}, operands=(x,))
    f = sj.function(x, outputs=[out["y"], out["s"]])
    y, s = f(np.array([1, 2, 3], np.float32))
    np.testing.assert_array_equal(y, [2, 4, 6])
    assert s == 6


def test_cond_gradient_against_finite_differences_f64():
    x = T.Placeholder((2,), "float64")
    w = T.Variable(np.array([0.5, -1.5]), name="w")
    out = T.cond(T.sum(x * w) > 0, lambda a: T.sum(T.sin(a * w)), lambda a: T.sum(a * a * w),
                 operands=[x])
    gx, gw = sj.gradients(out, [x, w])
    f = sj.function(x, outputs=[gx, gw])

    def numpy_out(xv, wv):
        return np.sum(np.sin(xv * wv)) if np.sum(xv * wv) > 0 else np.sum(xv * xv * wv)

    for x0 in (np.array([2.0, 0.3]), np.array([-1.0, 0.8])):
        got_x, got_w = f(x0)
        np.testing.assert_allclose(got_x, finite_difference(lambda v: numpy_out(v, w.value), x0),
                                   rtol=1e-6)
        np.testing.assert_allclose(got_w, finite_difference(lambda v: numpy_out(x0, v), w.value),
                                   rtol=1e-6)


def test_switch_picks_the_clamped_branch():
    i = T.Placeholder((), "int32")
    x = T.Placeholder((), "float32")
    out = T.switch(i, [lambda a: a + 1, lambda a: a * 10, lambda a: -a], x)
    f = sj.function(i, x, outputs=out)
    assert [f(k, 2.0) for k in (-3, 0, 1, 2, 9)] == [3.0, 3.0, 20.0, -2.0, -2.0]


# ---- errors --------------------------------------------------------------------------------------
def test_carry_type_change_is_a_type_error_naming_the_loop():
    with pytest.raises(sj.TypeError, match="accumulate.*f32\\[3\\].*carry 0"):
        T.scan(lambda c, x: (c + T.ones(3), c), T.zeros(()), [T.ones(4)], name="accumulate")
    with pytest.raises(sj.TypeError, match="f64"):
        T.scan(lambda c, x: (T.cast(c, "float64"), None), T.zeros(()), [T.ones(4)])
    with pytest.raises(sj.TypeError):
        T.while_loop(lambda v: v < 3, lambda v: T.cast(v, "int32"), T.zeros(()))
    with pytest.raises(sj.TypeError):
        T.fori_loop(0, 3, lambda i, v: T.ones(2), T.zeros(()))


def test_carry_structure_change_is_a_type_error():
    with pytest.raises(sj.TypeError, match="new carry returns \\(a tensor, a tensor\\)"):
        T.scan(lambda c, x: ((c, c), c), T.zeros(()), [T.ones(4)])
    with pytest.raises(sj.TypeError, match="pair"):
        T.scan(lambda c, x: c, T.zeros(()), [T.ones(4)])


def test_non_bool_predicate_is_a_type_error():
    x = T.Placeholder((), "float32")
    with pytest.raises(sj.TypeError, match="bool scalar"):
        T.cond(x, lambda: x, lambda: -x)
    with pytest.raises(sj.TypeError, match="bool scalar"):
        T.cond(T.ones(3) > 0, lambda: x, lambda: -x)
    with pytest.raises(sj.TypeError, match="bool scalar"):
        T.while_loop(lambda v: v + 1.0, lambda v: v, x)
    with pytest.raises(sj.TypeError, match="integer scalar"):
        T.switch(x, [lambda: x, lambda: -x])


def test_branches_of_different_types_or_structures():
    x = T.Placeholder((), "float32")
    with pytest.raises(sj.TypeError):
        T.cond(x > 0, lambda: x, lambda: T.cast(x, "float64"))
    with pytest.raises(sj.TypeError, match="false branch returns \\(a tensor, \\(a tensor,\\)\\)"):
        T.cond(x > 0, lambda: (x, x), lambda: (x, (x,)))
    # lists and tuples are alike (SymJAX made tuples of list arguments): the first's structure
    out = T.cond(x > 0, lambda: (x, x), lambda: [x, -x])
    assert isinstance(out, tuple) and sj.function(x, outputs=list(out))(-2.0) == [-2.0, 2.0]
    a, b = T.while_loop(lambda v: v[0] < 3, lambda v: (v[0] + 1, v[1] * 2), [T.zeros(()), 1.0])
    assert sj.function(outputs=[a, b])() == [3.0, 8.0]


def test_python_exception_in_a_body_propagates_unchanged():
    class Boom(Exception):
        pass

    def body(c, x):
        raise Boom("from the body")

    with pytest.raises(Boom, match="from the body"):
        T.scan(body, T.zeros(()), [T.ones(3)])
    # the library is still usable afterwards
    c, _ = T.scan(lambda c, x: (c + x, None), T.zeros(()), [T.ones(3)])
    assert sj.function(outputs=c)() == 3


def test_sequences_of_different_lengths_and_random_in_a_body():
    with pytest.raises(sj.ShapeError):
        T.scan(lambda c, a, b: (c, None), T.zeros(()), [T.ones(3), T.ones(4)])
    with pytest.raises(sj.Error, match="random"):
        T.scan(lambda c, x: (c + T.random.randn(()), None), T.zeros(()), [T.ones(3)])


def test_cpu_and_reference_backends_agree():
    # the same loops on the JIT backend and the reference interpreter (the oracle)
    xs = T.Placeholder((5,), "float64")
    w = T.Variable(np.float64(0.7))
    _, hs = T.scan(lambda h, x: (T.tanh(w * h + x),) * 2, T.zeros((), "float64"), [xs])
    root = T.while_loop(lambda v: v < 10.0, lambda v: v * w * 2 + 0.1, T.ones((), "float64"),
                        max_iterations=30)
    c = T.cond(xs.sum() > 0, lambda a: a * 2, lambda a: a, operands=[xs])
    g = sj.gradients(hs.sum() + root + c.sum(), w)
    outs = [hs, root, T.trip_count(root), c, g]
    v = np.random.randn(5)
    cpu = sj.function(xs, outputs=outs, backend="cpu")(v)
    ref = sj.function(xs, outputs=outs, backend="reference")(v)
    for a, b in zip(cpu, ref):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_scan_checkpoint_every_gives_the_same_gradient():
    xs = T.Placeholder((9, 2), "float64", name="xs_ck")
    w = T.Variable(np.array([[0.5, -0.3], [0.2, 0.8]]), name="w_ck")

    def loss(k):
        h, ys = T.scan(lambda c, x: (T.tanh(T.matmul(c, w) + x), T.sum(c)), T.zeros((2,), "float64"),
                       [xs], checkpoint_every=k)
        return T.sum(ys) + T.sum(h)

    f = sj.function(xs, outputs=[sj.gradients(loss(0), [w])[0], sj.gradients(loss(4), [w])[0]])
    plain, ck = f(np.random.default_rng(3).standard_normal((9, 2)))
    np.testing.assert_allclose(ck, plain, rtol=1e-12, atol=1e-14)


def test_scan_unroll_gives_the_same_results():
    xs = T.Placeholder((9, 2), "float64", name="xs_un")
    w = T.Variable(np.array([[0.5, -0.3], [0.2, 0.8]]), name="w_un")

    def run(k, reverse):
        h, ys = T.scan(lambda c, x: (T.tanh(T.matmul(c, w) + x), {"s": T.sum(c), "x": x}),
                       T.zeros((2,), "float64"), [xs], unroll=k, reverse=reverse)
        loss = T.sum(ys["s"]) + T.sum(h) + T.sum(ys["x"])
        return [h, ys["s"], ys["x"], sj.gradients(loss, [w])[0]]

    xv = np.random.default_rng(4).standard_normal((9, 2))
    for reverse in (False, True):
        f = sj.function(xs, outputs=run(1, reverse) + run(4, reverse))
        r = f(xv)
        for a, b in zip(r[:4], r[4:]):
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)
    with pytest.raises(sj.ShapeError, match="unroll"):
        T.scan(lambda c, x: (c + x, None), T.zeros((2,), "float64"), [xs], unroll=0)
