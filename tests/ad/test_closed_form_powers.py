"""Closed forms whose powers grow and shrink together.

The closed form of ``s = a*s + f(k)`` is ``a**n s + a**(n-1) sum(a**-k f(k))``: with
``a = 0.5`` it held ``0.5**(n-1) * 2.0**n``, and ``2.0**n`` overflowed while the loop's values
stay moderate (nan from n = 1015 on cpu, an OverflowError on the python target; found by a
probe). ``coarsen.ad.lift._merge_powers`` merges the powers of one product into one power of
the product of their bases. Checked against the recurrence in 50-digit arithmetic (value and
derivatives by central differences there), coarse, on both targets, with ``jvp``.
"""
from __future__ import annotations

import pytest

import coarsen
from tests.oracle import mp_partials


def halving(x, n):
    s = 1.0
    for k in range(n):
        s = 0.5 * s + x * k
    return s


def tenth(x, y, n):
    s = 0.0
    for k in range(n):
        s = 0.1 * s + x * k * k + y
    return s


def damped(x, n):
    s = 0.0
    for k in range(n):
        s = s * 0.9 + x * k
    return s


def geometric_forcing(x, r, n):
    s = 0.0
    p = 1.0
    for k in range(n):
        s = 0.5 * s + x * p
        p *= r
    return s


CASES = [
    (halving, (0.7, 1023), (0,)),
    (halving, (0.7, 1100), (0,)),
    (halving, (0.7, 3), (0,)),
    (tenth, (0.7, 0.3, 400), (0, 1)),
    (damped, (0.7, 7000), (0,)),
    (geometric_forcing, (0.7, 0.99, 1500), (0, 1)),
    (geometric_forcing, (0.7, 1.2, 60), (0, 1)),
]


def _exact(fn, args, wrt_idx):
    return mp_partials(fn, args, wrt_idx, dps=50, step="1e-25")


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_powers_of_the_trip_count_do_not_overflow(case, target):
    fn, args, wrt_idx = CASES[case]
    params = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    wrt = tuple(params[i] for i in wrt_idx)
    want_v, want = _exact(fn, args, wrt_idx)
    g = coarsen.differentiate(fn, wrt=wrt, target=target)
    v, grads = g.value_and_grad(*args)
    grads = grads if isinstance(grads, tuple) else (grads,)
    scale = max(abs(w) for w in want)
    assert abs(v - want_v) <= 1e-11 * abs(want_v)
    for got, w in zip(grads, want):
        assert abs(got - w) <= 1e-10 * scale, (grads, want)
    tangents = tuple(1.0 for _ in wrt)
    jv, jt = coarsen.jvp(fn, wrt=wrt, target=target)(*args, tangents=tangents)
    assert abs(jv - want_v) <= 1e-11 * abs(want_v)
    assert abs(jt - sum(want)) <= 1e-10 * len(want) * scale


def test_the_loop_is_still_in_closed_form():
    src = coarsen.differentiate(halving).source_for(0.7, 1100)
    assert "in closed form" in src and "2.0 **" not in src
