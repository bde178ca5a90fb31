"""The oracle checked against analytic gradients, so that the zoo tests can trust it.

Analytic references are evaluated in mpmath (30 digits) or in np.longdouble; the oracle must
match them to 1e-11 relative (the zoo compares coarsen against the oracle at 1e-8).
"""
import math

import mpmath
import numpy as np
import pytest

from tests.oracle import (LD, OracleError, assert_grad_close, extended, fd_grad,
                          float_positions, resolve_wrt, tolerances_for, to_extended)
from tests.zoo import realistic as R
from tests.zoo import arrays as A
from tests.zoo import loops as L
from tests.zoo import scalar as S

ORACLE_RTOL = 1e-11


def _close(got, exp, rtol=ORACLE_RTOL):
    got = np.asarray(got, dtype=LD)
    exp = np.asarray(exp, dtype=LD)
    assert got.shape == exp.shape
    scale = max(float(np.max(np.abs(exp))), 1e-300)
    err = np.abs(got - exp)
    assert np.all(err <= LD(rtol) * np.maximum(np.abs(exp), LD(1e-3 * scale))), (got, exp)


def _mp(x):
    return mpmath.mpf(np.format_float_scientific(LD(x), unique=True))


def _ld(v):
    return LD(mpmath.nstr(v, 25, strip_zeros=False))


# ---------------------------------------------------------------- analytic checks

def f_math(x, y):
    return (math.sin(x) * math.exp(y) + math.log1p(x * y) + math.atan2(y, x) + math.erf(x)
            + math.hypot(x, y) + x ** 2.5 * math.cosh(y) + math.expm1(-y) * math.sqrt(x))


def test_math_function_against_analytic():
    x, y = 0.7, 0.4
    gx, gy = fd_grad(f_math, (x, y), [0, 1])
    with mpmath.workdps(30):
        X, Y = _mp(x), _mp(y)
        dx = (mpmath.cos(X) * mpmath.exp(Y) + Y / (1 + X * Y) - Y / (X * X + Y * Y)
              + 2 / mpmath.sqrt(mpmath.pi) * mpmath.exp(-X * X) + X / mpmath.sqrt(X * X + Y * Y)
              + mpmath.mpf(2.5) * X ** 1.5 * mpmath.cosh(Y)
              + mpmath.expm1(-Y) / (2 * mpmath.sqrt(X)))
        dy = (mpmath.sin(X) * mpmath.exp(Y) + X / (1 + X * Y) + X / (X * X + Y * Y)
              + Y / mpmath.sqrt(X * X + Y * Y) + X ** 2.5 * mpmath.sinh(Y)
              - mpmath.exp(-Y) * mpmath.sqrt(X))
    _close(gx, _ld(dx))
    _close(gy, _ld(dy))


def f_np(a, b):
    return np.sum(np.exp(a) * np.sin(b)) + np.dot(a, b) ** 2 + np.sum(np.tanh(a) ** 2)


def test_numpy_array_function_against_analytic():
    r = np.random.default_rng(0)
    a, b = r.normal(size=5), r.normal(size=5)
    ga, gb = fd_grad(f_np, (a, b), [0, 1])
    A_, B_ = a.astype(LD), b.astype(LD)
    d = np.dot(A_, B_)
    th = np.tanh(A_)
    _close(ga, np.exp(A_) * np.sin(B_) + 2 * d * B_ + 2 * th * (1 - th * th))
    _close(gb, np.exp(A_) * np.cos(B_) + 2 * d * A_)
    assert ga.shape == a.shape and ga.dtype == LD


def test_exp_accuracy_large_derivative():
    def f(x):
        return math.exp(10.0 * x)
    (g,) = fd_grad(f, (0.3,), [0])
    _close(g, 10 * np.exp(LD(3)), rtol=1e-12)


# ---------------------------------------------------------------- extended precision really

def f_sin(x):
    return math.sin(x)


def test_clone_runs_in_longdouble():
    v = extended(f_sin)(LD(0.5))
    assert type(v) is LD
    assert v == np.sin(LD(0.5))


def _ref_cross_module_helpers(x, y):
    with mpmath.workdps(40):
        X, Y = _mp(x), _mp(y)

        def softplus(t):
            return mpmath.log1p(mpmath.exp(t))

        def smooth_abs(t):
            return mpmath.sqrt(t * t + mpmath.mpf(1e-2))  # the float64 literal, exactly
        return softplus(X * Y) + smooth_abs(X - Y) + softplus(smooth_abs(Y)) * Y


def _max_rel_err(fn, points):
    worst = 0.0
    for x, y in points:
        v = fn(x, y)
        with mpmath.workdps(40):
            ref = _ref_cross_module_helpers(x, y)
            worst = max(worst, float(abs(_mp(v) - ref) / abs(ref)))
    return worst


def test_helpers_across_modules_run_in_longdouble():
    r = np.random.default_rng(5)
    points = [(LD(a) / 3, LD(b) / 7) for a, b in r.uniform(-3, 3, size=(12, 2))]
    fx = extended(S.cross_module_helpers)
    assert all(type(fx(x, y)) is LD for x, y in points)
    # in extended precision the error is a few 1e-19; had any helper (hm.softplus, the
    # imported smooth_abs, hm.helper_calls_helper and what it calls) run in float64 it
    # would be ~1e-17 on some of these points (the plain function shows it)
    assert _max_rel_err(fx, points) < 3e-18
    assert _max_rel_err(S.cross_module_helpers, [(float(x), float(y)) for x, y in points]) \
        > 3e-18


def f_ctor():
    return np.zeros(3) + np.ones(3) * np.float64(2.0) + np.full(3, 0.5) + np.eye(3)[0]


def test_numpy_constructors_are_extended():
    out = extended(f_ctor)()
    assert out.dtype == LD


def test_njit_dispatcher_and_njit_helper():
    (gx, gy) = fd_grad(S.njit_scalar, (0.4, 1.1), [0, 1])
    x, y = LD(0.4), LD(1.1)
    _close(gx, 0.5 * np.exp(0.5 * x) * np.cos(y) + y)
    _close(gy, -np.exp(0.5 * x) * np.sin(y) + x)
    v = extended(L.calls_njit_helper)(LD(0.9), np.array([0.5, -0.2], dtype=LD))
    assert type(v) is LD


def _make_closure(c):
    def inner(t):
        return S._sq(t) * c + math.sin(t)
    return inner


_closure_fn = _make_closure(3.0)


def test_closure():
    (g,) = fd_grad(_closure_fn, (0.6,), [0])
    _close(g, 6 * LD(0.6) + np.cos(LD(0.6)))


def test_mutating_function_gradient_is_wrt_entry_values_and_caller_untouched():
    r = np.random.default_rng(1)
    a, w = r.normal(size=5), r.normal(size=5)
    a0, w0 = a.copy(), w.copy()
    ga, gw = fd_grad(L.mutate_input, (a, w), [0, 1])
    assert np.array_equal(a, a0) and np.array_equal(w, w0)
    A_, W = a.astype(LD), w.astype(LD)
    wnext = np.append(W[1:], LD(0))
    a2 = 0.5 * (A_ * A_ + W)
    a3 = a2.copy()
    a3[1:] += a2[:-1]
    _close(ga, A_ * (W + wnext))
    _close(gw, 0.5 * (W + wnext) + a3)


def test_float32_inputs_gradient_at_float32_values():
    a = np.array([0.3, -1.2, 0.7], dtype=np.float32)
    ga, gx = fd_grad(A.float32_fn, (a, 1.3), [0, 1])
    A_ = a.astype(LD)
    x = LD(1.3)
    _close(ga, x * (np.cos(A_) * A_ + np.sin(A_)) + 2 * A_)
    _close(gx, np.sum(np.sin(A_) * A_))
    assert tolerances_for((a, 1.3)) == (2e-5, 5e-2)
    assert tolerances_for((a.astype(np.float64), 1.3)) == (1e-8, 1e-4)


# ---------------------------------------------------------------- zoo functions vs hand math

@pytest.mark.parametrize("r,c,n", [(0.9, 0.3, 7), (1.0, 0.3, 5), (1.1, -0.2, 0)])
def test_zoo_geometric(r, c, n):
    gr, gc = fd_grad(S.geometric, (r, c, n), [0, 1])
    R_, C = LD(r), LD(c)
    if r == 1.0:
        er, ec = n + C * n * (n - 1) / 2, LD(n)
    else:
        rn = R_ ** n
        er = n * R_ ** (n - 1) + C * (n * R_ ** (n - 1) * (R_ - 1) - (rn - 1)) / (R_ - 1) ** 2
        ec = (rn - 1) / (R_ - 1)
    if n == 0:
        assert gr == 0 and gc == 0
    else:
        _close(gr, er)
        _close(gc, ec)


@pytest.mark.parametrize("x", [0.37, 5.3])
def test_zoo_while_halving(x):
    (g,) = fd_grad(S.while_halving, (x,), [0])
    X = LD(x)
    k = 0
    t = x
    while t > 1e-3:
        t *= 0.5
        k += 1
    exp = sum(j * np.cos(X / 2 ** (j + 1)) / 2 ** (j + 1) for j in range(k)) + LD(1) / 2 ** k
    _close(g, exp)


def test_zoo_sum_closed_form():
    (g,) = fd_grad(S.sum_closed_form, (1.3, 6), [0])
    _close(g, LD(1.3) * 6 * 5 + 6)


@pytest.mark.parametrize("a", [7.3, 0.41])
def test_realistic_newton_sqrt(a):
    (g,) = fd_grad(R.newton_sqrt, (a,), [0])
    # the iteration stops within 1e-12 of convergence, so the program's derivative is
    # 1/(2 sqrt a) up to ~1e-12
    _close(g, 0.5 / np.sqrt(LD(a)), rtol=1e-9)


def test_realistic_softmax_xent():
    logits, labels = R.CASES[17][1]()
    (g,) = fd_grad(R.softmax_xent, (logits, labels), [0])
    Z = logits.astype(LD)
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    _close(g, (P - labels) / logits.shape[0])


def test_realistic_logreg():
    w, b, X, y, lam = R._logreg_args()
    gw, gb, glam = fd_grad(R.logreg_loss, (w, b, X, y, lam), [0, 1, 4])
    XL = X.astype(LD)
    z = XL @ w.astype(LD) + LD(b)
    s = 1 / (1 + np.exp(-z))
    n = X.shape[0]
    _close(gw, (s - y) @ XL / n + LD(lam) * w.astype(LD))
    _close(gb, np.sum(s - y) / n)
    _close(glam, 0.5 * np.sum(w.astype(LD) ** 2))


def test_realistic_heat_slices_is_linear_in_u0():
    u0, kappa, dt, dx, nsteps, target = R._heat_args()
    (g,) = fd_grad(R.heat_slices, (u0, kappa, dt, dx, nsteps, target), [0])
    n = u0.shape[0]
    r = LD(kappa) * LD(dt) / (LD(dx) * LD(dx))
    M = np.eye(n, dtype=LD)
    for i in range(1, n - 1):
        M[i, i - 1] += r
        M[i, i] -= 2 * r
        M[i, i + 1] += r
    P = np.eye(n, dtype=LD)
    for _ in range(nsteps):
        P = M @ P
    uT = P @ u0.astype(LD)
    _close(g, 2 * P.T @ (uT - target.astype(LD)))


def test_realistic_lennard_jones_eps():
    pos, eps, sigma = R._lj_args()
    (g,) = fd_grad(R.lennard_jones, (pos, eps, sigma), [1])
    _close(g, LD(R.lennard_jones(pos, eps, sigma)) / LD(eps), rtol=1e-12)


# ---------------------------------------------------------------- refusals and plumbing

def f_branch(x):
    if x > 0.5:
        return 2.0 * x
    return x


def f_kink(x):
    return abs(x - 0.5) + x * x


def test_refuses_points_near_a_discontinuity():
    with pytest.raises(OracleError):
        fd_grad(f_branch, (0.5 + 1e-4,), [0])
    with pytest.raises(OracleError):
        fd_grad(f_kink, (0.5 + 1e-4,), [0])
    # away from it, it is fine
    (g,) = fd_grad(f_branch, (0.7,), [0])
    _close(g, LD(2))


def f_even_kink(x, a):
    # fuzz seed 70000080's shape: |x| at 0, where central differences are 0 at every step
    s = abs(x)
    return 0.5 * s - 0.1 * a * s + a


@pytest.mark.parametrize("x, refused", [(0.0, True), (1e-30, True), (0.3, False), (-0.3, False)])
def test_refuses_points_on_a_kink_central_differences_cannot_see(x, refused):
    if refused:
        with pytest.raises(OracleError, match="sits on a kink"):
            fd_grad(f_even_kink, (x, -1.295), [0])
    else:
        (g,) = fd_grad(f_even_kink, (x, -1.295), [0])
        _close(g, LD(np.sign(x) * (0.5 + 0.1295)))


@pytest.mark.parametrize("fn, x", [(lambda x: x * x * x, 0.0), (lambda x: math.cosh(x), 0.0),
                                   (lambda x: 1e6 * x * x + x, 0.0), (lambda x: 3.0 * x + 1e8, 0.7)])
def test_smooth_minima_and_flat_points_are_not_kinks(fn, x):
    fd_grad(fn, (x,), [0])


def test_refuses_int_parameter_and_array_return():
    with pytest.raises(OracleError):
        fd_grad(S.sum_closed_form, (1.3, 6), [1])

    def f_arr(a):
        return a * 2.0
    with pytest.raises(OracleError):
        fd_grad(f_arr, (np.ones(3),), [0])


def test_resolve_wrt_and_float_positions():
    args = (np.ones(3), 2, 1.5, np.arange(3), True, np.ones(2, dtype=np.float32))
    assert float_positions(args) == [0, 2, 5]

    def f(a, n, x, idx, flag, b):
        return 0.0
    assert resolve_wrt(f, args, None) == ([0, 2, 5], False)
    assert resolve_wrt(f, args, "x") == ([2], True)
    assert resolve_wrt(f, args, 0) == ([0], True)
    assert resolve_wrt(f, args, ("b", 0)) == ([5, 0], False)
    assert resolve_wrt(f, args, ["x"]) == ([2], False)


def test_to_extended_copies():
    a = np.ones(3)
    b = to_extended(a)
    b[0] = 5
    assert a[0] == 1 and b.dtype == LD
    i = np.arange(3)
    assert to_extended(i).dtype == i.dtype and to_extended(i) is not i
    assert to_extended(3) == 3 and type(to_extended(3)) is int
    assert type(to_extended(1.5)) is LD and to_extended(True) is True


def test_assert_grad_close_criterion():
    e = (np.array([1.0, -2.0, 1e-9]), 3.0)
    assert_grad_close((e[0].copy(), 3.0), e)
    # 1e-8 relative on a significant entry passes, 3e-8 fails
    assert_grad_close((np.array([1.0 + 0.9e-8, -2.0, 1e-9]), 3.0), e)
    with pytest.raises(AssertionError):
        assert_grad_close((np.array([1.0 + 3e-8, -2.0, 1e-9]), 3.0), e)
    # tiny entries are held to rtol * floor * max|e| = 1e-8 * 1e-4 * 3 = 3e-12 absolute
    assert_grad_close((np.array([1.0, -2.0, 1e-9 + 2e-12]), 3.0), e)
    with pytest.raises(AssertionError):
        assert_grad_close((np.array([1.0, -2.0, 1e-9 + 5e-12]), 3.0), e)
    # the scalar gradient is checked too, and the shapes must agree
    with pytest.raises(AssertionError):
        assert_grad_close((e[0], 3.0 + 1e-6), e)
    with pytest.raises(AssertionError):
        assert_grad_close((e[0][:2], 3.0), e)
    with pytest.raises(AssertionError):
        assert_grad_close((e[0], np.array([3.0])), e)
    with pytest.raises(AssertionError):
        assert_grad_close((e[0],), e)
    with pytest.raises(AssertionError):
        assert_grad_close((np.array([np.nan, -2.0, 1e-9]), 3.0), e)
    # single values
    assert_grad_close(2.0, LD(2.0))
    with pytest.raises(AssertionError):
        assert_grad_close(2.0 + 1e-7, LD(2.0))


def test_nan_is_never_an_answer():
    def f_nan(x):
        v = np.empty(2)
        v[0] = x
        return v[0] * v[1]  # reads an element never written: NaN in the oracle
    with pytest.raises(OracleError):
        fd_grad(f_nan, (0.5,), [0])
    with pytest.raises(AssertionError):
        assert_grad_close(1.0, LD(np.nan))
