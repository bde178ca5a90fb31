"""coarsen.ir.slice_chains: each precondition pinned (issue 48's mutation run).

The composed slice must select what the chain selects on axes longer than the small ones of
``test_slice_chains`` (an omitted bound is written as a bound past any axis, not one past a
few dozen elements), and where the first slice is the empty index ``a[()]`` (a view of the
whole array: every axis is ``s2``'s)."""

import numpy as np
import pytest

from tests.ir.test_slice_chains import _composed, _run_index


def whole_then_reversed(a):
    t = a[()]
    u = t[::-1]
    return u[0]


def test_a_slice_of_the_whole_array_view_composes_to_the_slice():
    out = _composed(whole_then_reversed, [np.zeros(4)])
    for n in (1, 4, 7):
        a = np.arange(n, dtype=float)
        assert np.array_equal(a[_run_index(out, a)], a[()][::-1])


def omitted_bounds(a):
    t = a[::-1]
    u = t[1::2]
    return u[0]


def omitted_bounds_up(a):
    t = a[::2]
    u = t[::-1]
    return u[0]


def omitted_bounds_both(a):
    t = a[1::-1]
    u = t[::-3]
    return u[0]


@pytest.mark.parametrize("fn, want", [
    (omitted_bounds, lambda a: a[::-1][1::2]),
    (omitted_bounds_up, lambda a: a[::2][::-1]),
    (omitted_bounds_both, lambda a: a[1::-1][::-3]),
])
def test_omitted_bounds_reach_past_long_axes(fn, want):
    out = _composed(fn, [np.zeros(4)])
    for n in (63, 64, 100, 1000):
        a = np.arange(n, dtype=float)
        assert np.array_equal(a[_run_index(out, a)], want(a)), n
