"""Binomial (revolve) checkpointing (``coarsen/ad/reverse/revolve.py``), used under
``max_tape_bytes`` when two-level checkpointing does not fit.

What is pinned: the plan is Griewank's: its advances are the least possible (a brute-force
search over every split agrees), equal to the binomial formula ``r * t - C(s + r, r - 1)``, and
the schedule is valid (every step reversed once, last to first, right after it is taped on the
state it had; never more than ``s`` snapshots held).  The generated code: budgets that force
one, two and several snapshots give the unbudgeted gradient bit for bit, for scalar state (cpu
and python targets), a rebound array and an array written in place, with ``g.tape_bytes`` (the
call's peak, the reverse sweep's included) within the budget; a budget below one checkpoint
and one trip raises ``CoarsenError`` naming that minimum, which then works; the report says
revolve and its snapshots.
"""
import io
import math
from functools import lru_cache

import numpy as np
import pytest

import coarsen
from coarsen import CoarsenError
from coarsen.ad.reverse import revolve
from tests.ad.reverse.test_checkpoint import PEND, X0, W, array_state, element_state, pend_args, pendulum, same

# ---------------------------------------------------------------------------- the plan


@lru_cache(None)
def best(t, s):
    """The least advances over every schedule: advance j steps, snapshot, reverse the t - j
    steps after with s - 1 snapshots, then the j before with s (a single step needs none)."""
    if t == 1:
        return 0
    if s == 0:
        return math.inf
    return min(j + best(t - j, s - 1) + best(j, s) for j in range(1, t))


def formula(t, s):
    r = revolve.repetitions(t, s)
    return r * t - math.comb(s + r, r - 1) if r else 0


@pytest.mark.parametrize("s", range(1, 7))
def test_advances_are_the_optimum(s):
    for t in range(1, 61):
        assert revolve.advances(t, s) == best(t, s) == formula(t, s), (t, s)
        r = revolve.repetitions(t, s)
        assert math.comb(s + r - 1, s) < t <= math.comb(s + r, s) or t == 1
    assert revolve.advances(50, 1) == 50 * 49 // 2       # one snapshot: from the start each time
    assert revolve.advances(50, 49) == 49                # a snapshot per step: each advanced once


def check_schedule(t, s):
    plan = revolve.schedule(t, s)
    live, held, taped, reversed_ = 0, [], None, []
    for what, v in plan.actions:
        if what == "store":
            assert live == v and v not in held
            held.append(v)
        elif what in ("advance", "tape"):
            assert live == v
            live, taped = v + 1, (v if what == "tape" else None)
        elif what == "reverse":
            assert taped == v
            reversed_.append(v)
            taped = None
        elif what == "restore":
            assert held and held[-1] == v
            live = v
        else:
            assert what == "drop" and held and held[-1] == v
            held.pop()
        assert len(held) <= s
    assert reversed_ == list(range(t - 1, -1, -1)) and not held
    assert plan.advances == revolve.advances(t, s) and plan.most_held <= s
    runs = [sum(1 for what, v in plan.actions if what == "advance" and v == u) for u in range(t)]
    assert max(runs) <= revolve.repetitions(t, s)       # each step advanced at most r times
    return plan


@pytest.mark.parametrize("s", range(1, 7))
def test_schedule_valid_and_optimal(s):
    for t in range(1, 41):
        check_schedule(t, s)
    plan = check_schedule(40, s)
    assert plan.steps == 40 and plan.snapshots == s


def test_schedule_refused():
    for bad in ((0, 1), (3, 0)):
        with pytest.raises(ValueError):
            revolve.schedule(*bad)


def test_choose():
    assert revolve.choose(100, 6, 3, 4) is None             # one snapshot and one trip: 7
    c = revolve.choose(100, 7, 3, 4)
    assert (c.unit, c.snapshots, c.units) == (1, 1, 100)
    for room in (10, 30, 100, 300):
        c = revolve.choose(1000, room, 3, 4)
        assert c.snapshots >= 1 and c.snapshots * 3 + c.unit * 4 <= room
        assert c.units == -(-1000 // c.unit)


# ---------------------------------------------------------------------------- the code


def minimum(fn, wrt, args, target="python"):
    """The budget the error of a too-small one names (and checks it is refused)."""
    g = coarsen.differentiate(fn, wrt=wrt, target=target, max_tape_bytes=8)
    with pytest.raises(CoarsenError) as info:
        g.value_and_grad(*args)
    err = info.value
    assert "max_tape_bytes=8 cannot be met" in err.problem and "one checkpoint" in err.problem
    need = int(err.problem.split("needs at least ")[1].split()[0])
    assert f"max_tape_bytes={need}" in err.hint
    return need


def run_levels(fn, wrt, args, sizes, per_snapshot, target="python", plain=None):
    """Budgets of the minimum plus 0, 1 and 4 checkpoints: one, two and several snapshots."""
    plain = plain or coarsen.differentiate(fn, wrt=wrt, target=target)
    need = minimum(fn, wrt, args(sizes[0]), target)
    seen = []
    for extra in (0, 1, 4):
        budget = need + extra * per_snapshot
        g = coarsen.differentiate(fn, wrt=wrt, target=target, max_tape_bytes=budget)
        for n in sizes:
            want = plain.value_and_grad(*args(n))
            got = g.value_and_grad(*args(n))
            assert same(got, want), (budget, n, got, want)
            assert g.tape_bytes <= budget, (budget, n, g.tape_bytes)
            rep = g.report(file=io.StringIO())
            if n == sizes[0]:
                (s,) = rep.snapshots
                (k,) = rep.strides
                seen.append(s)
                assert s >= 1 and plain.tape_bytes > budget
                assert f"binomial (revolve), {s} snapshots, units of k = {k} trips" in rep.format()
    assert seen[0] == 1 and seen[1] == 2 and seen[2] >= 3, seen
    return need


def test_levels_scalar_state_python():
    # two floats of state and the snapshot's unit index: 24 bytes a snapshot
    run_levels(pendulum, PEND, pend_args, (200, 57, 3, 2, 1, 0), 24)


def test_levels_rebound_array_python():
    # x (5 floats), its shape and the unit index: 56 bytes a snapshot
    run_levels(array_state, ("x0", "w"), lambda n: (X0, W, 0.01, n), (120, 31, 1), 56)


def test_levels_inplace_array_python():
    run_levels(element_state, ("x0", "w"), lambda n: (X0, W, 0.01, n), (120, 31, 1), 48)


def test_several_levels_cpu():
    plain = coarsen.differentiate(pendulum, wrt=PEND)
    g = coarsen.differentiate(pendulum, wrt=PEND, max_tape_bytes=200)   # two-level needs ~1.5 kB
    for n in (1000, 333, 1, 0):
        want = plain.value_and_grad(*pend_args(n))
        assert same(g.value_and_grad(*pend_args(n)), want)
        assert g.tape_bytes <= 200
    g.value_and_grad(*pend_args(1000))
    rep = g.report(file=io.StringIO())
    (s,), (k,) = rep.snapshots, rep.strides
    assert s >= 3 and revolve.repetitions(-(-1000 // k), s) >= 3     # each trip run 3+ times


def test_minimum_is_enough_and_exact():
    need = minimum(pendulum, PEND, pend_args(40))
    below = coarsen.differentiate(pendulum, wrt=PEND, target="python", max_tape_bytes=need - 1)
    with pytest.raises(CoarsenError, match=f"needs at least {need} bytes"):
        below.value_and_grad(*pend_args(40))
    ok = coarsen.differentiate(pendulum, wrt=PEND, target="python", max_tape_bytes=need)
    ok.value_and_grad(*pend_args(40))
    assert ok.tape_bytes <= need
    assert ok.report(file=io.StringIO()).snapshots == (1,)


def test_two_level_when_it_fits():
    # a budget two-level checkpointing meets is not run by revolve
    g = coarsen.differentiate(pendulum, wrt=PEND, target="python", max_tape_bytes=1600)
    g.value_and_grad(*pend_args(300))
    rep = g.report(file=io.StringIO())
    assert rep.snapshots == (0,) and "binomial (revolve), " not in rep.format()
    assert np.all(np.asarray(rep.strides) > 1)


def test_batch_of_a_revolve_gradient():
    # the CPU batch's driver calls the same entry per set (python target: no compile)
    g = coarsen.differentiate(pendulum, wrt=PEND, target="python", max_tape_bytes=200)
    th, om = np.linspace(0.1, 0.9, 4), np.linspace(-0.5, 0.5, 4)
    v, grads = g.batch((0, 0, None, None, None, None))(th, om, 9.8, 0.1, 0.01, 300)
    for i in range(4):
        vi, gi = g.value_and_grad(th[i], om[i], 9.8, 0.1, 0.01, 300)
        assert v[i] == vi and grads[0][i] == gi[0] and grads[1][i] == gi[1]
    assert g.report(file=io.StringIO()).snapshots[0] >= 1
    assert grads[2] == pytest.approx(sum(g.value_and_grad(th[i], om[i], 9.8, 0.1, 0.01, 300)[1][2]
                                         for i in range(4)), rel=1e-12)
