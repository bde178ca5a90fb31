"""Closed forms multiply the trip count and the integer bounds in floats, and take ``r**n`` with C's ``pow``.

The closed form of ``s += c*i*i*p; p *= r`` holds ``n*n*r**n`` and, in its d/dr, ``n**3``.
Printed with an int ``n``, those products were int64 ones on the cpu target and wrapped
around at 2**63 (the d/dr of the ``i*i*i`` form -6.98e24 for +2.66e24 at n = 60000, found by
a probe; here d/dr -1.6e26 for 3.2e26 at n = 2.2e6, and with a loop from ``m = 3.1e9`` the
value had the wrong sign), where the loop computes ``c*i*i`` in floats.  And Numba's ``r ** n``
of an int ``n`` is repeated multiplication (its error grows with ``n``: the closed form's value
1.2e-12 off at n = 1e4, d/dr 5.5e-12).  ``coarsen.symbolic.in_floats`` now takes
every integer symbol of a float closed form as ``float(...)``: the products are float ones and
``r ** float(n)`` is ``pow``.  Checked on the cpu target (the python target's ints never
wrapped) against the loop's sums, term by term, summed exactly (``math.fsum``).
"""
from __future__ import annotations

import math

import pytest
import sympy

import coarsen


def square_from(c, r, m, n):
    s = 0.0
    p = 1.0
    for i in range(m, m + n):
        s += c * i * i * p
        p *= r
    return s


def _exact(c, r, m, n):
    """The value and d/dr of ``sum c i**2 r**(i - m)`` over ``range(m, m + n)``: each term to
    about an ulp (``pow``), summed exactly."""
    value = math.fsum(c * i * i * r ** (i - m) for i in range(m, m + n))
    d_r = math.fsum(c * i * i * (i - m) * r ** (i - m - 1) for i in range(m + 1, m + n))
    return value, d_r


@pytest.fixture(scope="module")
def grad():
    return coarsen.differentiate(square_from, wrt=("c", "r"), target="cpu")


# (args, tolerance on the value, on d/dr): the d/dr has n**3, > 2**63 from n = 2.1e6 (it was
# 3.8 off); the value m**2, > 2**63 from m = 3.04e9 (1.9 off); powi at n = 1e4 was 1.2e-12 off
# (d/dr 5.5e-12)
CASES = [
    ((1.3, 1 + 3.0 / 2200000, 0, 2200000), 1e-13, 1e-13),
    ((1.3, 1 + 3.0 / 2000, 3100000000, 2000), 1e-13, 1e-13),
    ((1.3, 1 - 1.001 / 10000, 0, 10000), 1e-13, 1e-13),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_products_of_the_trip_count_do_not_wrap(grad, case):
    args, tol_v, tol_d = CASES[case]
    v, (_, d_r) = grad.value_and_grad(*args)
    assert "in closed form" in grad.source
    want_v, want_d = _exact(*args)
    assert abs(v - want_v) <= tol_v * abs(want_v), (v, want_v)
    assert abs(d_r - want_d) <= tol_d * abs(want_d), (d_r, want_d)


def test_jvp_products_of_the_trip_count_do_not_wrap():
    args = (1.3, 1 + 3.0 / 2000, 3100000000, 2000)
    v, t = coarsen.jvp(square_from, wrt=("c", "r"), target="cpu")(*args, tangents=(0.0, 1.0))
    want_v, want_d = _exact(*args)
    assert abs(v - want_v) <= 1e-13 * abs(want_v)
    assert abs(t - want_d) <= 1e-13 * abs(want_d), (t, want_d)


def test_in_floats_prints_the_integers_as_floats():
    from coarsen.symbolic import float_of, in_floats, to_python
    n = sympy.Symbol("n", integer=True, nonnegative=True)
    m, k = sympy.symbols("m k", integer=True)
    r, c = sympy.symbols("r c", real=True)
    trips = sympy.Max(0, k - m)
    e = in_floats(c * r ** trips * trips ** 4 + c * m ** 3 + k, trips, lambda s: s.is_integer)
    text = to_python(e)
    assert "float(max(0, k - m))" in text and "float(m)" in text and "float(k)" in text
    assert " m*" not in text and "(m*" not in text
    # a rational coefficient without an exact float: the integer factors first (parenthesized:
    # a misprint "2*float(n) - 1*..." failed the closed form's own check), exact
    sixth = in_floats(c * n * (n - 1) * (2 * n - 1) / 6, n, lambda s: s.is_integer)
    text = to_python(sixth)
    for nv in range(12):
        assert eval(text, {}, {"n": nv, "c": 1.0}) == nv * (nv - 1) * (2 * nv - 1) // 6
    assert float_of(sympy.Integer(7)) == 7 and float_of(n).diff(n) == 0


def geo(x, r, n):
    s = 0.0
    p = 1.0
    for i in range(n):
        s += x * p
        p *= r
    return s + x


def geo_div(x, r, n):
    s = 0.0
    p = 1.0
    for i in range(n):
        s += x * p
        p /= r
    return s + x


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_no_trips_take_the_loop(target):
    """At zero trips a guarded closed form evaluated its ratio all the same: ``(r**0 - 1)/(r - 1)``
    is nan at ``r = nan`` and ``0 *`` that was nan (geo(0.5, nan, 0) gave nan for 0.5; found by a
    probe); ``1/r**2`` at ``r = 1e-200`` gave d/dr nan for 0.  The loop runs there now."""
    for fn, args in [(geo, (0.5, float("nan"), 0)), (geo_div, (0.7, 1e-200, 0)), (geo, (0.5, 2.0, -3))]:
        g = coarsen.differentiate(fn, wrt=("x", "r"), target=target)
        v, (d_x, d_r) = g.value_and_grad(*args)
        assert (v, d_x, d_r) == (args[0], 1.0, 0.0), (fn.__name__, args, v, d_x, d_r)
        v, (d_x, d_r) = g.value_and_grad(args[0], 1.5, 5)     # a closed form elsewhere
        assert "in closed form" in g.source and v == pytest.approx(fn(args[0], 1.5, 5), rel=1e-14)
