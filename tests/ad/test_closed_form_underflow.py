"""Closed forms whose power of the trip count underflows (issue 41, part B).

``s = s*r + c`` with ``|r| < 1`` has the closed form ``s r**n + c (r**n - 1)/(r - 1)``.  The
range guard ran the loop wherever ``|n log|r|| > 700``, underflow included: at ``r = 0.999``,
``n = 1e7`` the gradient taped 8 bytes a trip (80 MB, 1.2 s on the cpu target, 8.8 s on the
python target) although ``r**n`` is 0 to float64 and the closed form exact.  Now
(``coarsen.ad.power_guard``) an underflowing power keeps the closed form where every value and
partial holding it is a polynomial in it and the run-time check ``UnderflowCosts`` finds its
lost digits (one subnormal unit times the slope) negligible; elsewhere the loop still runs:
``s0 = 1e300, c = 0`` (the loop's 1e300 * 0.5**1500 is 3e-152, the closed form's would be 0).

Checked near the boundary (``n log|r|`` just inside -700, just past it, where the power
turns subnormal at about -708, and where it flushes to 0 at about -745) against the exact
values and partials in 60 digits (mpmath), on both targets, reverse and forward mode.
"""
from __future__ import annotations

import math

import mpmath
import pytest

import coarsen

WRT = ("r", "c", "s0")


def geo(r, c, s0, n):
    s = s0
    for k in range(n):
        s = s * r + c
    return s


def geo_exact(r, c, s0, n):
    """Value and partials in r, c, s0 of ``geo`` in 60 digits (its closed form is exact
    mathematics; the value is checked against the recurrence where n is small enough)."""
    with mpmath.workdps(60):
        r, c, s0 = mpmath.mpf(r), mpmath.mpf(c), mpmath.mpf(s0)
        p = r ** n
        q = (p - 1) / (r - 1)
        dq = (n * r ** (n - 1) * (r - 1) - (p - 1)) / (r - 1) ** 2
        return float(s0 * p + c * q), [float(s0 * n * r ** (n - 1) + c * dq), float(q), float(p)]


def _close(got, want):
    """Within a few ulps of ``want``, or a few units of the smallest subnormal below it."""
    return abs(got - want) <= 4e-15 * abs(want) + 2.0 ** -1071


def _boundary(r):
    """Trip counts around ``n log|r| = -700`` (the guard), -708 (subnormal), -745 (zero)."""
    lg = -math.log(abs(r))
    out = set()
    for t in (699.0, 700.0, 701.0, 708.0, 720.0, 744.0, 746.0, 800.0):
        m = int(t / lg)
        out |= {m - 1, m, m + 1}
    return sorted(out)


CASES = [(r, c, s0, n) for r, c, s0 in ((0.5, 0.3, 1.0), (0.3, -1.7, 2.5), (-0.7, 2.0, 5.0),
                                         (0.999, 0.3, 1.0))
         for n in _boundary(r)]


@pytest.fixture(scope="module", params=["python", "cpu"])
def grads(request):
    return request.param, coarsen.differentiate(geo, wrt=WRT, target=request.param)


def test_underflowing_power_keeps_the_closed_form_at_1e7(grads):
    target, g = grads
    n = 10 ** 7
    v, gr = g.value_and_grad(0.999, 0.3, 1.0, n)
    assert g.tape_bytes <= 64, g.tape_bytes          # 80_000_000 when the loop ran
    want_v, want = geo_exact(0.999, 0.3, 1.0, n)
    assert _close(v, want_v), (v, want_v)
    for got, w in zip(gr, want):
        assert _close(got, w), (gr, want)


def test_near_the_boundary_against_mpmath(grads):
    target, g = grads
    for args in CASES:
        v, gr = g.value_and_grad(*args)
        want_v, want = geo_exact(*args)
        assert _close(v, want_v), (args, v, want_v)
        for got, w in zip(gr, want):
            assert _close(got, w), (args, gr, want)
        # |c / (1 - r)| is moderate against s0: the closed form is taken on both sides
        assert g.tape_bytes <= 64, (args, g.tape_bytes)


def test_the_recurrence_agrees_with_the_exact_closed_form():
    """The oracle checked against the loop itself in 60 digits (where that is quick)."""
    for args in CASES[:12]:
        r, c, s0, n = args
        with mpmath.workdps(60):
            s = mpmath.mpf(s0)
            for _ in range(n):
                s = s * mpmath.mpf(r) + mpmath.mpf(c)
            assert float(s) == geo_exact(*args)[0]


@pytest.mark.parametrize("args", [(0.5, 0.0, 1e300, 1500), (0.5, 1e-300, 1e10, 1050),
                                  (0.3, 0.0, 1.0, 600)])
def test_underflow_that_would_show_runs_the_loop(args, grads):
    """Where the power's lost digits would show in the value or a partial (a huge entry value
    against a tiny fixed point; a subnormal result whose partial in r has slope 2000 in the
    power), the loop runs: the same bits as fine mode, and the value the exact one."""
    target, g = grads
    fine = coarsen.differentiate(geo, wrt=WRT, target=target, coarsen=False)
    v, gr = g.value_and_grad(*args)
    want_v, want = geo_exact(*args)
    assert abs(v - want_v) <= 1e-13 * abs(want_v) + 2.0 ** -1071, (v, want_v)
    assert abs(gr[2] - want[2]) <= 1e-13 * abs(want[2]) + 2.0 ** -1071, (gr, want)
    assert g.tape_bytes >= 8 * args[3]
    fv, fgr = fine.value_and_grad(*args)
    assert v == fv and gr == fgr


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_forward_mode_near_the_boundary(target):
    jvp = coarsen.jvp(geo, wrt=WRT, target=target)
    for args in CASES[::3] + [(0.999, 0.3, 1.0, 10 ** 7)]:
        want_v, want = geo_exact(*args)
        v, dot = jvp(*args, tangents=(1.0, -0.5, 0.25))
        assert _close(v, want_v), (args, v, want_v)
        w = want[0] - 0.5 * want[1] + 0.25 * want[2]
        assert abs(dot - w) <= 4e-15 * (abs(want[0]) + abs(want[1])) + 2.0 ** -1071, (args, dot, w)


def decay(x, a, n):
    s = 0.0
    p = 1.0
    for k in range(n):
        s += x * p
        p *= math.exp(a)
    return s


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_exp_of_the_trip_count_underflowing(target):
    """``p *= exp(a)`` with ``a < 0``: ``exp(a*n)`` past ``-700`` keeps the closed form, with
    ``x * sum exp(a k)`` and its partials exact; ``p`` itself, read after the loop by nobody,
    is not carried."""
    g = coarsen.differentiate(decay, wrt=("x", "a"), target=target)
    for n in (139, 140, 141, 142, 148, 149, 150, 160, 10 ** 7):
        v, (d_x, d_a) = g.value_and_grad(0.7, -5.0, n)
        assert g.tape_bytes <= 64, (n, g.tape_bytes)
        with mpmath.workdps(60):
            a = mpmath.mpf(-5.0)
            q = mpmath.expm1(a * n) / mpmath.expm1(a)
            dq = (n * mpmath.exp(a * n) * mpmath.expm1(a) - mpmath.expm1(a * n) * mpmath.exp(a)) \
                / mpmath.expm1(a) ** 2
            want = [float(0.7 * q), float(q), float(0.7 * dq)]
        for got, w in zip((v, d_x, d_a), want):
            assert _close(got, w), (n, got, w)
