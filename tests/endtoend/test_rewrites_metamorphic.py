"""Metamorphic checks of this stop's rewrites (closed-form CSE, dead resets, zero accumulations,
first writes, shape roots, hoisted tables, the gradient-only entry): renamed variables (names
like the compiler's: ``_tab1``, ``_s1_c0``, ``x_bar``) give bit-identical gradients, code split
into helpers gives the same to rounding, and other shapes and float32 match the oracle."""
import math

import numpy as np
import pytest

import coarsen
from coarsen.transforms.tiers import GRAD_ONLY_AFTER
from apps.series import objective as series
from tests.oracle import assert_grad_close, fd_grad, tolerances_for
from tests.ir.test_hoist import mixture
from tests.ir.test_scalarize_shapes import stencil

RNG = np.random.default_rng(21)


# --- closed form (guarded_cse) -------------------------------------------------------------
def series_renamed(_s1_c0, _s1_f0, x_bar, _n1):
    _closed2 = 0.0
    _t1 = 1.0
    for _i1 in range(_n1):
        _closed2 += _s1_c0 * _i1 * _i1 + x_bar * _t1
        _t1 *= _s1_f0
    return _closed2


# --- matrix updates (dead resets, first writes, zero accumulations) --------------------------
def gemver(A, u, v, x, y, beta):
    A = A + np.outer(u, v)
    x = x + beta * A.T @ y
    w = A @ x
    return 0.5 * np.sum(w * w)


def gemver_renamed(A_2_bar, _acc1, u1_bar, _t14, y_bar, _pa2):
    A_2_bar = A_2_bar + np.outer(_acc1, u1_bar)
    _t14 = _t14 + _pa2 * A_2_bar.T @ y_bar
    _t17 = A_2_bar @ _t14
    return 0.5 * np.sum(_t17 * _t17)


def _update(A, u, v):
    return A + np.outer(u, v)


def gemver_helpers(A, u, v, x, y, beta):
    B = _update(A, u, v)
    return _loss(B, x + beta * B.T @ y)


def _loss(B, x):
    w = B @ x
    return 0.5 * np.sum(w * w)


# --- stencil over copies (shape roots) ---------------------------------------------------------
def stencil_renamed(_t24, _b3, _i1):
    _e5 = _t24.copy()
    A_bar = _t24.copy()
    for _t30 in range(_i1):
        A_bar[1:-1, 1:-1] = _b3 * (_e5[1:-1, :-2] + _e5[1:-1, 2:] + _e5[2:, 1:-1] + _e5[:-2, 1:-1])
        _e5[1:-1, 1:-1] = _b3 * (A_bar[1:-1, :-2] + A_bar[1:-1, 2:] + A_bar[2:, 1:-1] + A_bar[:-2, 1:-1])
    return np.sum(_e5 * _e5)


# --- invariant calls (hoisted tables) ----------------------------------------------------------
def mixture_renamed(_tab1, _h2, _t5_bar):
    _acc5 = 0.0
    for _h3 in range(_h2.shape[0]):
        for _tab2 in range(_tab1.shape[0]):
            _t88 = 0.0
            for _i1 in range(_tab1.shape[1]):
                _t88 += math.exp(_tab1[_tab2, _i1]) * (_h2[_h3, _i1] - _t5_bar[_tab2, _i1])
            _acc5 += math.sin(_t88)
    return _acc5


def _row_term(icf, xi, mu, k):
    q = 0.0
    for j in range(icf.shape[1]):
        q += math.exp(icf[k, j]) * (xi[j] - mu[k, j])
    return math.sin(q)


def mixture_helpers(icf, x, mu):
    s = 0.0
    for i in range(x.shape[0]):
        for k in range(icf.shape[0]):
            s += _row_term(icf, x[i], mu, k)
    return s


CASES = {
    "series": (series, series_renamed, None, lambda: (0.5, 0.97, 1.5, 40)),
    "gemver": (gemver, gemver_renamed, gemver_helpers,
               lambda: (RNG.standard_normal((4, 4)), RNG.standard_normal(4), RNG.standard_normal(4),
                        RNG.standard_normal(4), RNG.standard_normal(4), 1.3)),
    "stencil": (stencil, stencil_renamed, None, lambda: (RNG.standard_normal((6, 5)), 0.3, 3)),
    "mixture": (mixture, mixture_renamed, mixture_helpers,
                lambda: (0.3 * RNG.standard_normal((3, 4)), RNG.standard_normal((5, 4)),
                         RNG.standard_normal((3, 4)))),
}


def _grads(fn, args):
    """``value_and_grad``'s gradient, then ``g(*args)``'s past the switch to the gradient-only
    entry (both must agree bit for bit)."""
    g = coarsen.differentiate(fn)
    want = g.value_and_grad(*args)[1]
    for _ in range(GRAD_ONLY_AFTER + 1):
        got = g(*args)
    for a, b in zip(want, got):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    return want


@pytest.mark.parametrize("name", sorted(CASES))
def test_renamed_is_bit_identical(name):
    fn, renamed, _, make = CASES[name]
    args = make()
    for a, b in zip(_grads(fn, args), _grads(renamed, args)):
        assert np.array_equal(np.asarray(a), np.asarray(b)), name


@pytest.mark.parametrize("name", [n for n in sorted(CASES) if CASES[n][2] is not None])
def test_helpers_agree_to_rounding(name):
    fn, _, helpers, make = CASES[name]
    args = make()
    for a, b in zip(_grads(fn, args), _grads(helpers, args)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name, make", [
    ("gemver", lambda: (RNG.standard_normal((7, 7)), RNG.standard_normal(7), RNG.standard_normal(7),
                        RNG.standard_normal(7), RNG.standard_normal(7), 0.4)),
    ("stencil", lambda: (RNG.standard_normal((3, 9)).astype(np.float32), 0.25, 2)),
    ("mixture", lambda: (0.2 * RNG.standard_normal((2, 6)), RNG.standard_normal((1, 6)),
                         RNG.standard_normal((2, 6)))),
])
def test_other_shapes_and_dtypes_match_the_oracle(name, make):
    fn = CASES[name][0]
    args = make()
    got = coarsen.differentiate(fn)(*args)
    pos = [k for k, a in enumerate(args) if isinstance(a, (float, np.ndarray))]
    rtol, floor = tolerances_for(args)
    assert_grad_close(got, tuple(fd_grad(fn, args, pos)), rtol=rtol, floor=floor, err_msg=name)
