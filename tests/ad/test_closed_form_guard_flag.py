"""A closed form's guard that reads a value the loop overwrites.

``s += x / p; p *= r`` has a closed form guarded at its singular points ``p == 0``, ``r == 0``
and ``1/r`` near 1.  The reverse sweep used to evaluate that guard again, with the exit value of
``p`` (``c r**n``): where the two sweeps took different branches the reverse sweep read the
wrong tape entries (d/dx 0.0111 for 111.11 at ``(1.5, 10.0, 0.01, 5)``, found by a probe) or
read past the start of the tape (inf, or an IndexError on the python target).  The forward
sweep now keeps its decision in a flag (``_near*``), saved on the tape when the loop sits in
another loop.  A zero base (``p == 0``) is no longer widened into a neighbourhood
``|p| * n <= 1``, which depended on the units of ``p``.  Checked against the recurrence's
derivatives in 40 digits, at depth 0 and inside an outer loop, on both targets, coarse and fine.
"""
from __future__ import annotations

import pytest

import coarsen
from tests.oracle import mp_partials


def inv_geo(x, r, c, n):
    s = 0.0
    p = c
    for k in range(n):
        s += x / p
        p *= r
    return s


def inv_geo_outer(x, r, c, n, m):
    t = 0.0
    for j in range(m):
        s = 0.0
        p = c * (j + 1)
        for k in range(n):
            s += x / p
            p *= r
        t += s * (j + 1)
    return t


def two_ratios(x, a, b, n):
    s = 0.0
    p = x
    q = 1.0
    for k in range(n):
        s += p / q
        p *= a
        q *= b
    return s


def _exact(fn, args, wrt_idx):
    return mp_partials(fn, args, wrt_idx, dps=40, step="1e-15")


CASES = [
    (inv_geo, (1.5, 10.0, 0.01, 5), (0, 1, 2)),       # forward takes the loop (|p| n <= 1 before)
    (inv_geo, (1.5, 0.5, 1.0, 60), (0, 1, 2)),        # forward closed form, exit p tiny
    (inv_geo, (0.3, 1.7, 0.2, 7), (0, 1, 2)),
    (inv_geo_outer, (1.5, 10.0, 0.01, 5, 3), (0, 1, 2)),
    (inv_geo_outer, (1.5, 0.5, 1.0, 40, 4), (0, 1, 2)),
    (two_ratios, (0.5, 0.25, 1.0, 100), (0, 1)),      # IndexError on the python target before
    (two_ratios, (0.5, 0.25, 0.75, 30), (0, 1, 2)),
]


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_guard_reading_carried_values(case, coarse, target):
    fn, args, wrt_idx = CASES[case]
    params = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    wrt = tuple(params[i] for i in wrt_idx)
    g = coarsen.differentiate(fn, wrt=wrt, coarsen=coarse, target=target)
    value, grads = g.value_and_grad(*args)
    want_v, want = _exact(fn, args, wrt_idx)
    assert abs(value - want_v) <= 1e-12 * abs(want_v)
    for got, w in zip(grads, want):
        assert abs(got - w) <= 1e-9 * max(abs(w), max(abs(v) for v in want)), (wrt, grads, want)


def test_the_flag_is_in_the_source_and_taped_inside_a_loop():
    g = coarsen.differentiate(inv_geo_outer, wrt=("x", "r", "c"))
    src = g.source_for(1.5, 0.5, 1.0, 40, 4)
    assert "_near" in src and "abs(p) * max" not in src
    g1 = coarsen.differentiate(inv_geo, wrt=("x", "r", "c"))
    src1 = g1.source_for(1.5, 0.5, 1.0, 60)
    assert "if _near" in src1 and "abs(p) * max" not in src1
