"""Programs the fuzz soak (``tests/fuzz_soak.py``) found wrong, kept as regressions once fixed.

A wrong gradient found and not yet fixed goes here as ``xfail(strict=True)`` (it then fails
the suite the day it is fixed: drop the marker and keep the test).

* fuzz seed 18000026 (``python tests/fuzz_soak.py --one 18000026``): a segment with several
  outputs, one of which is also an input (``s0 = s1 if c else s0``), differentiated as one
  vector-Jacobian product per path. On the path that overwrites ``s0`` its entry value's
  adjoint must be reset (``s0_bar = 0.0``); the step left it as the output's, so ``d/dx``
  came out 1 instead of 0 (``coarsen/ad/reverse/steps.py``, ``vjp_step``). ``minimal`` is
  the soak's reduction of it.
* fuzz seed 32000000 (``--one 32000000``): a loop with a closed form whose body assigns a
  variable in a branch only (``if c: u_y = ...``) that nothing reads.  Carried through its
  merge, it entered the closed form, which read its entry value: ``UnboundLocalError`` on the
  python target, a Numba typing error on cpu.  A carried variable that nothing outside the
  loop reads, and no kept carried value reads, is dead and left out
  (``coarsen.ad.lift.closed_form_segment``).  ``branch_local`` is its reduction.
* fuzz seed 33000247 (``--one 33000247 --family reductions``; 33000095 too): a reduction loop
  with a nested one, whose accumulator the reverse sweep reads before the loop
  (``s = sqrt(...)`` first), got ``d/dy`` wrong in both modes: the nested loop's reverse read
  a stale ``k * 1.0`` (``max(k * 1.0, y)``'s partial), which nothing taped.  Two causes in
  ``coarsen/ad/reverse``: the attempt to fuse the outer loop fused the nested one and, when it
  gave up, left it marked fused (``fused.py``); and the tape analysis settled on the fused
  loops of an earlier emission (``driver.py``, ``settle``), where the outer loop was still
  fused.  ``stale_nested`` and ``stale_nested_bounds`` are its reductions (each fix alone
  leaves one of them wrong).
* a recurrence program (the forward-loop soak, 2026-12-03): ``s1 = 0.9 * s1 + 0.1 * s1`` has
  the ratio 0.9 + 0.1, which is 1 + 2.8e-17 in exact arithmetic; the closed form, exact at 30
  digits, evaluated ``(r**n - 1) / (r - 1)`` in doubles as 0: a wrong value (1.64 for 5.07)
  and gradient.  Closed forms are now also checked as the generated code evaluates them, in
  doubles (``coarsen.ad.lift._float_check``).  ``ratio_one`` is the program.
* fuzz seed 71000028 (``--one 71000028``): ``s0 = a[k]``, an early return, then ``a[k] += u``
  and ``s0 * s0``: wrong ``d/da[k]`` in both modes and on both targets (-0.127 for 1.323).
  The reverse sweep re-read ``a[k]`` for ``s0`` (``coarsen.analysis.recording``, a read that
  holds still while it lives), after the update.  The check of a write between the read and
  a use looked at a compound statement's uses before its writes, and everything after an
  early return is one ``if``.  ``reread_after_return`` is its reduction; the others move the
  write and the use into a branch and a loop of their own.
* fuzz seed 80000137 (``--one 80000137 --family reductions``): ``s0 += a[0]`` and
  ``s0 += a[-1]`` in a loop, ``a`` of one element: ``d/da`` 1 instead of 2.  The reduction
  loop's adjoint accumulator held ``_acc[0]`` and ``_acc[-1]`` in two locals for the loop
  (``coarsen/ad/reverse/invariant_sums.py``), as different constants name different
  elements, but ``-1`` and ``0`` are one element of a one-element axis (and ``X[i - 1]`` at
  ``i = 0`` is ``X[n - 1]``, which a loop over ``range(i + 1, n)`` reaches).  ``both_ends``
  is its reduction, ``wrapped_pair`` the loop-bounds case.
"""
import math

import numpy as np
import pytest

from tests.oracle import check_against_oracle


def h(u, f):
    np = u - f if (f if math.tanh(u) < u + f else u) > f else math.sin(f)
    np = np
    np = min(np, np)
    if 1.3 + u > (np if math.tanh(0.1) <= (np if math.cos(np) < 0.1 * f else u) else np):
        np = np
    else:
        np = f
    return (np + max(1.5, f)) * (np if min(f, np) < max(np, np) else u)


def fuzz_18000026(s0_bar, s0_bar_bar_v, _s0_bar, _s0_bar_bar):
    _g1 = _s0_bar.shape[0]
    s0 = (s0_bar_bar_v + _s0_bar[0]) * s0_bar_bar_v
    s1 = math.tanh(s0_bar)
    s0 = s0_bar
    for _ret_bar in range(_g1):
        _s1 = math.exp(math.tanh(s0_bar))
    _s0_bar[0] -= -s1
    s1 = max(_s0_bar[_g1 - 1] * 0.1, _s0_bar[0])
    s0 *= 0.75 + 0.1 * math.sin(_s0_bar[_g1 - 1])
    s1 -= s0_bar
    if (s0_bar + _s0_bar[_g1 - 1]) * _s0_bar[0] > h(_s0_bar[-1], s0):
        return -0.7 * s0
    s0 = s1 * 1.3 if 1.3 * s0 <= h(s0, s0_bar_bar_v) else s0
    _s0_bar[_g1 - 1] += 0.1 * math.log(1.0 + _s0_bar[0] * _s0_bar[0])
    return 1.5 * s0 + 0.5 * s1 + np.sum(_s0_bar)


def test_fuzz_18000026_coarse():
    args = (0.448, 1.211, np.array([-0.136, 0.866, 0.01, 0.889]), 2)
    check_against_oracle(fuzz_18000026, args, wrt=(0, 1, 2), target="python", coarse=True)


def test_fuzz_18000026_fine():
    args = (0.448, 1.211, np.array([-0.136, 0.866, 0.01, 0.889]), 2)
    check_against_oracle(fuzz_18000026, args, wrt=(0, 1, 2), target="python", coarse=False)


def _h(u, v):
    w = v
    return w


def minimal(x, y, a, n):
    m = a.shape[0]
    s0 = x
    s1 = a[m - 1]
    s0 = s1 if 1.3 * s0 <= _h(s0, y) else s0
    a[1] += 0.1 * (1.0 + a[0] * a[0])
    return s0


def minimal_renamed(s0_bar, _g1, a_bar, _t3):
    m = a_bar.shape[0]
    x_bar = s0_bar
    s1_bar = a_bar[m - 1]
    x_bar = s1_bar if 1.3 * x_bar <= _h(x_bar, _g1) else x_bar
    a_bar[1] += 0.1 * (1.0 + a_bar[0] * a_bar[0])
    return x_bar


def minimal_in_loop(x, y, a, n):
    s0 = x
    for k in range(n):
        s1 = a[k] * y
        s0 = s1 if 1.3 * s0 <= y else s0 * 0.5
        a[k + 1] += 0.1 * (1.0 + a[k] * a[k])
    return s0 + a[n]


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("fn", [minimal, minimal_renamed, minimal_in_loop])
@pytest.mark.parametrize("x", [0.448, 2.0])      # the branch taken, then not
def test_minimal_overwritten_input(fn, x, target):
    args = (x, 1.211, np.array([-0.136, 0.866, 0.01, 0.889]), 2)
    check_against_oracle(fn, args, wrt=(0, 1, 2), target=target, coarse=True)


def branch_local(x, c, n):
    s2 = x
    for k in range(2):
        if c >= 2.0:
            u_y = math.cos(c) + x  # noqa: F841 (the dead variable is the point)
        s2 += (-1.1 + 0.25 * s2) * x
    return s2


def branch_local_read(x, c, n):
    # the same variable read after the loop (defined there when the branch ran): kept
    u_y = 0.5
    s2 = x
    for k in range(2):
        if c >= 2.0:
            u_y = math.cos(c) + x * u_y
        s2 += (-1.1 + 0.25 * s2) * x
    return s2 + u_y


def carried_by_outer_loop(x, c, n):
    # p is read only inside the inner loop (by s, at the next inner trip and outer trip)
    s = 0.0
    p = c
    for t in range(3):
        for k in range(2):
            p = p * x
            s += p
    return s


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("fn", [branch_local, branch_local_read, carried_by_outer_loop])
@pytest.mark.parametrize("c", [2.5, 1.5])      # the branch taken, then not
def test_dead_branch_local_in_closed_form(fn, c, target):
    check_against_oracle(fn, (0.3, c, 3), wrt=0, target=target, coarse=True)


def stale_nested(x, y, a, n):
    s = math.sqrt(1.0 + y * y)
    for i1 in range(4):
        s += y - y
        for k in range(4):
            s -= - y + max(k * 1.0, y)
    return s


def stale_nested_bounds(x, y, a, n):
    h = a.shape[0]
    s = math.sqrt(1.0 + y * y)
    for i1 in range(h):
        s += y - y
        for k in range(h - 1, -1, -1):
            s -= 0.25 * i1 - y + max(k * 1.0, y)
    return 1.5 * s


@pytest.mark.parametrize("coarse", [True, False])
@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("fn", [stale_nested, stale_nested_bounds])
def test_nested_reduction_loop_not_fused(fn, target, coarse):
    args = (0.795, 0.722, np.array([-0.409, 0.677, 1.111, 1.043]), 0)
    check_against_oracle(fn, args, wrt=(0, 1), target=target, coarse=coarse)


def ratio_one(p, q, r, ys):
    s0 = 1.0
    s1 = max(q, p)
    acc = 0.0
    for t in range(ys.shape[0]):
        e1 = s1
        s0 = 0.9 * s0 + 0.1 * (math.cos(0.5))
        s1 = 0.9 * s1 + 0.1 * (e1)
        acc += s1 * e1
    return s1 + s0 + acc


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_closed_form_that_cancels_in_doubles(target):
    args = (0.7, 0.3, -0.4, np.array([0.1, -0.3, 0.5, 0.2, -0.7, 0.4, 0.9]))
    check_against_oracle(ratio_one, args, wrt=(0, 1, 2), target=target, coarse=True)


def reread_after_return(x, u, a):
    n = a.shape[0]
    s0 = a[n - 1]
    if x > 5.0:
        return s0
    a[n - 1] += u
    s0 = s0 * s0
    return 0.5 * s0 + np.sum(a)


def reread_written_in_a_branch(x, u, a):
    n = a.shape[0]
    s0 = a[n - 1]
    if x < 5.0:
        a[n - 1] += u
        t = s0 * s0
    else:
        t = s0
    return 0.5 * t + np.sum(a)


def reread_written_in_a_loop(x, u, a):
    n = a.shape[0]
    s0 = a[n - 1]
    t = 0.0
    if x < 5.0:
        for i in range(n):
            a[i] += u * x
        t = s0 * s0
    return 0.5 * t + np.sum(a)


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False])
@pytest.mark.parametrize("fn", [reread_after_return, reread_written_in_a_branch,
                                reread_written_in_a_loop])
@pytest.mark.parametrize("x", [1.371, 7.0])     # past the return, then not
def test_no_reread_of_an_element_written_before_its_use(fn, x, coarse, target):
    a = np.array([-0.086, 0.534, -0.964, 0.323])
    check_against_oracle(fn, (x, -1.45, a), target=target, coarse=coarse)


def both_ends(a, n):
    s0 = 1.1
    for i in range(n):
        s0 += a[0]
        s0 = s0 + a[-1]
    return s0


def wrapped_pair(a):
    n = a.shape[0]
    s = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            s += a[i - 1] * a[j] * (1.0 + 0.1 * j)
    return s


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False])
@pytest.mark.parametrize("m", [1, 3])
def test_negative_and_positive_indices_of_one_element(m, coarse, target):
    a = np.array([-0.292, 0.4, 1.3])[:m]
    check_against_oracle(both_ends, (a, 2), target=target, coarse=coarse)


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False])
def test_a_wrapped_index_against_a_loop_variable(coarse, target):
    a = np.array([-0.292, 0.4, 1.3, 0.7])
    check_against_oracle(wrapped_pair, (a,), target=target, coarse=coarse)


def chain_ends(x0, c):
    # each trip reads x[-1] and writes x[0]: one element when x has one, whose trips are
    # then chained (the reverse's trips commute only where they are two elements)
    x = x0.copy()
    for i in range(c.shape[0]):
        x[0] = x[-1] * c[i] + 0.5
    return np.sum(x * x)


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False])
@pytest.mark.parametrize("m", [1, 3])
def test_a_store_and_a_read_at_both_ends(m, coarse, target):
    x0 = np.array([0.7, -0.3, 0.2])[:m]
    check_against_oracle(chain_ends, (x0, np.array([0.9, 1.1, -0.8, 0.5])), target=target,
                         coarse=coarse)
