"""Closed forms where the loop stays finite or exact and the formula does not.

* A power of the trip count out of float64's range: ``s += x / p; p *= r`` holds
  ``(1/r)**n``; at ``r = 1e-200``, ``n = 2`` it is inf while the loop's value is 1.5e200, and
  at ``r = 10``, ``n = 400`` the partial in ``c`` was nan where fine mode gives -1.667 (found by
  a probe). The guard now runs the loop where ``|n log|b|| > 700`` for a power ``b**n``
  (``symbolic.PowerOutOfRange``).
* The value near a ratio of 1 when the ratio is not differentiated: ``(r**n - 1)/(r - 1)``
  cancels there too, and only differentiated ratios were guarded (``s = s*r + c``, 10 trips,
  ``r = 1 + 1e-9``, ``wrt="c"``: off by 3.4e-9 relative). Every single-point guard of the
  closed form's value now gets its neighbourhood.
Coarse against fine mode (which runs the loop) and against the recurrence in 40 digits.
"""
from __future__ import annotations

import math

import mpmath
import pytest

import coarsen
from tests.ad.test_closed_form_guard_flag import inv_geo


def geo(r, c, s0, n):
    s = s0
    for k in range(n):
        s = s * r + c
    return s


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("args", [(1.5, 1e-200, 1.0, 2), (1.5, 10.0, 1.0, 400), (0.5, 2.0, 1.0, 1100)])
def test_powers_out_of_range_run_the_loop(args, target):
    fine = coarsen.differentiate(inv_geo, wrt=("x", "c"), target=target, coarsen=False)
    coarse = coarsen.differentiate(inv_geo, wrt=("x", "c"), target=target)
    with mpmath.workdps(40):
        want = float(inv_geo(*[mpmath.mpf(a) if isinstance(a, float) else a for a in args]))
    fv, fg = fine.value_and_grad(*args)
    cv, cg = coarse.value_and_grad(*args)
    assert math.isfinite(cv) and abs(cv - want) <= 1e-13 * abs(want)
    assert cv == fv and cg == fg


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("wrt", [("c",), ("s0",), ("r", "c")])
def test_value_near_ratio_one_whatever_wrt(wrt, target):
    g = coarsen.differentiate(geo, wrt=wrt, target=target)
    jvp = coarsen.jvp(geo, wrt=wrt, target=target)
    for r in (1 + 1e-9, 1 + 1e-12, 1 - 1e-7, 1 - 1e-3):
        with mpmath.workdps(40):
            s = mpmath.mpf(1.0)
            for _ in range(10):
                s = s * mpmath.mpf(r) + mpmath.mpf(0.3)
            want = float(s)
        v, _ = g.value_and_grad(r, 0.3, 1.0, 10)
        assert abs(v - want) <= 4e-16 * abs(want), r
        jv, _ = jvp(r, 0.3, 1.0, 10, tangents=(1.0,) * len(wrt))
        assert abs(jv - want) <= 4e-16 * abs(want), r


def growth(x, a, n):
    s = 0.0
    p = 1.0
    for k in range(n):
        s += x * p
        p *= math.exp(a)
    return s


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_exp_of_the_trip_count_out_of_range_runs_the_loop(target):
    """``p *= exp(a)`` has the closed form ``exp(a*n)``, which had no range guard: at ``a*n``
    = 710 the python target raised OverflowError (the loop's value is 1.06e306), at 705 the d/da
    was nan for 1.0006e306 (found by a probe).  ``exp(e)`` now joins the guard as ``|e| > 700``."""
    g = coarsen.differentiate(growth, wrt=("x", "a"), target=target)
    fine = coarsen.differentiate(growth, wrt=("x", "a"), target=target, coarsen=False)
    for n in (141, 142):
        with mpmath.workdps(40):
            want = 0.7 * mpmath.fsum(mpmath.e ** (5 * k) for k in range(n))
            want_a = float(0.7 * mpmath.fsum(k * mpmath.e ** (5 * k) for k in range(n)))
        v, (d_x, d_a) = g.value_and_grad(0.7, 5.0, n)
        assert abs(v - float(want)) <= 1e-13 * float(want)
        fv, (fd_x, _) = fine.value_and_grad(0.7, 5.0, n)
        assert v == fv and d_x == fd_x          # the loop ran
        if n == 141:
            assert abs(d_a - want_a) <= 1e-13 * want_a, (d_a, want_a)
    g.value_and_grad(0.7, 0.01, 50)
    # the guard's overflowing half, ``a * n > 700`` (its underflowing half: test_closed_form_underflow)
    assert "in closed form" in g.source and "a * float(" in g.source and "> 700.0" in g.source
