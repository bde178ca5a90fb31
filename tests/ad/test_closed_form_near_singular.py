"""Closed forms near their singular points: a loop whose ratio is close to 1.

``s = s * r + c`` over ``n`` trips has the closed form ``s r**n + c (r**n - 1)/(r - 1)``; at
``r = 1 + 1e-9`` and ``n = 10``, ``r**n - 1`` keeps 8 of its 16 digits and the derivative's
numerator none, so a closed form guarded at ``r == 1`` only gave d/dr = 65.0 for 42.5 (found by
a probe of user-style programs).  The guard is now the neighbourhood ``|r - 1| max(1, n) <= 1``
(``coarsen.ad.lift._near``), where the loop runs.  Checked: value, gradient (coarse and fine),
``jvp`` and the Hessian against the recurrence run in 40-digit arithmetic, over ratios from
``1 - 1e-3`` to ``1 + 0.3`` and trip counts 1 to 1000, on both targets; a closed form is still
used away from 1 (the generated source says so).
"""
from __future__ import annotations

import mpmath
import pytest

import coarsen

EPS = (0.0, 1e-15, -1e-12, 1e-10, 1e-9, -1e-9, 1e-8, 1e-7, -1e-6, 1e-5, 1e-4, -1e-3, 1e-2, 0.3)
TRIPS = (1, 10, 365, 1000)


def geo(r, c, s0, n):
    s = s0
    for k in range(n):
        s = s * r + c
    return s


def powsum(a, n):
    s = 0.0
    p = 1.0
    for k in range(n):
        s += p
        p *= a
    return s


def _exact_geo(r, c, s0, n):
    """(value, d/dr, d2/dr2) of ``geo`` in 40-digit arithmetic, by the recurrence."""
    with mpmath.workdps(40):
        r, s, ds, dds = mpmath.mpf(r), mpmath.mpf(s0), mpmath.mpf(0), mpmath.mpf(0)
        for _ in range(n):
            dds, ds, s = dds * r + 2 * ds, ds * r + s, s * r + mpmath.mpf(c)
        return float(s), float(ds), float(dds)


def _exact_powsum(a, n):
    with mpmath.workdps(40):
        a = mpmath.mpf(a)
        return float(sum(a ** k for k in range(n))), float(sum(k * a ** (k - 1)
                                                              for k in range(1, n)))


def _rel(got, want):
    return abs(got - want) / max(abs(want), 1e-300)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_geometric_recurrence_near_ratio_one(target):
    g = coarsen.differentiate(geo, wrt=("r", "c"), target=target)
    fine = coarsen.differentiate(geo, wrt=("r", "c"), target=target, coarsen=False)
    jv = coarsen.jvp(geo, wrt="r", target=target)
    bad = []
    for n in TRIPS:
        for eps in EPS:
            r = 1.0 + eps
            val, dr, _ = _exact_geo(r, 0.5, 2.0, n)
            v, (gr, _) = g.value_and_grad(r, 0.5, 2.0, n)
            tv, tr = jv(r, 0.5, 2.0, n, tangents=1.0)
            fr = fine(r, 0.5, 2.0, n)[0]
            err = max(_rel(v, val), _rel(gr, dr), _rel(tv, val), _rel(tr, dr), _rel(fr, dr))
            if err > 1e-12:
                bad.append((n, eps, err, gr, dr))
    assert not bad, bad
    # away from 1 the loop is still in closed form
    assert "in closed form: s = s*r**trips" in g.source_for(1.5, 0.5, 2.0, 10)


def test_power_sum_jvp_near_ratio_one():
    jv = coarsen.jvp(powsum, wrt="a")
    g = coarsen.differentiate(powsum, wrt="a")
    for a in (1.0 + 1e-9, 1.0 - 1e-10, 1.0 + 1e-6, 0.9):
        val, d = _exact_powsum(a, 12)
        v, t = jv(a, 12, tangents=1.0)
        assert _rel(v, val) < 1e-13 and _rel(t, d) < 1e-12, (a, v, val, t, d)
        assert _rel(g(a, 12), d) < 1e-12, (a, g(a, 12), d)


def test_hessian_near_ratio_one():
    h = coarsen.hessian(geo, wrt="r")
    for n in (10, 365):
        for eps in (1e-9, -1e-7, 1e-4):
            want = _exact_geo(1.0 + eps, 0.5, 2.0, n)[2]
            got = h(1.0 + eps, 0.5, 2.0, n)
            assert _rel(got, want) < 1e-11, (n, eps, got, want, h.method_used)


def doubling(x, n):
    s = 0.0
    p = x
    for i in range(n):
        s += p
        p *= 2
    return s


def int_ratio(x, k, n):
    s = 0.0
    p = x
    for i in range(n):
        s += p
        p *= k
    return s


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_integer_ratios_are_float_powers(target):
    """``p *= 2`` (or an int ``k``) runs in floats; its closed form's ``2 ** n`` was an int64
    power in Numba, which wraps: 70 trips gave -0.7 for 8.3e20 (found by a probe)."""
    g = coarsen.differentiate(doubling, wrt="x", target=target)
    v, d = g.value_and_grad(0.7, 70)
    assert _rel(v, doubling(0.7, 70)) < 1e-14 and _rel(d, 2.0 ** 70 - 1) < 1e-14
    assert "2.0 ** " in g.source
    g = coarsen.differentiate(int_ratio, wrt="x", target=target)
    for k, n in ((3, 40), (2, 64), (1, 40), (-3, 41)):
        v, d = g.value_and_grad(0.7, k, n)
        want = float(sum(mpmath.mpf(k) ** i for i in range(n)))
        assert _rel(v, int_ratio(0.7, k, n)) < 1e-13 and _rel(d, want) < 1e-13, (k, n, v, d)


def _step(s_bar, _t1, c):
    return s_bar * _t1 + c


def geo_renamed_split(_t1, c, x_bar, n):
    """``geo`` with compiler-like names and its step in a helper."""
    s_bar = x_bar
    for _acc0 in range(n):
        s_bar = _step(s_bar, _t1, c)
    return s_bar


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_near_ratio_one_renamed_and_split(target):
    g = coarsen.differentiate(geo, wrt=("r", "c"), target=target)
    h = coarsen.differentiate(geo_renamed_split, wrt=("_t1", "c"), target=target)
    for n in (10, 365):
        for eps in (1e-9, -1e-7, 1e-3):
            args = (1.0 + eps, 0.5, 2.0, n)
            assert g.value_and_grad(*args) == h.value_and_grad(*args), (n, eps)
