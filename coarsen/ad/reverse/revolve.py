"""Binomial (revolve) checkpointing of a ``range`` loop whose trip count is known at its entry:
the schedule, as a typed plan, and the loop's code under it.

Used by ``coarsen.ad.reverse.checkpoint`` when two-level checkpointing (stretches of ``k``
trips, one checkpoint before each) does not fit the tape budget.

Requires: for the plan, nothing (pure functions of integers).  For the code
(``revolve_forward``, ``revolve_reverse``), the pieces ``checkpoint.checkpoint_loop`` builds
for one loop (``RevolvePieces``): statements that push the loop's state onto the tapes and pop
it back, that run one *unit* (the trips ``a .. z - 1``, taped) and reverse it, and that sample
the peak; the names it made (``_ck*``, i64 scalars).

Guarantees:

* the plan: ``schedule(t, s)`` is Griewank's binomial schedule (Griewank and Walther,
  "Algorithm 799: revolve", ACM TOMS 26(1), 2000) for reversing ``t`` steps with ``s``
  snapshots, the one of the initial state included: a ``RevolveSchedule`` whose actions advance
  (run a step untaped), store and drop snapshots, tape and reverse steps.  It reverses every
  step exactly once, from the last to the first, each right after taping it on the state the
  step had in the forward run; it never holds more than ``s`` snapshots; its number of
  advances is the least possible, ``advances(t, s) = r * t - C(s + r, r - 1)`` with ``r`` the
  least integer such that ``C(s + r, s) >= t``.  The split of each sub-range (``mid``) is the
  runtime helper ``_revolve_mid`` (``coarsen.codegen.runtime``), executed here as Python, so the plan
  and the generated code make the same choices;
* ``choose(n, room, c, t)``: the unit length ``L`` (trips per step; powers of two) and the
  snapshots ``s`` that fit ``s * c + L * t <= room`` entries with the fewest trip runs, as a
  ``RevolveChoice`` (the runtime helper ``_revolve_units``);
* the code: ``revolve_forward`` runs the schedule's first descent (snapshot of the state at
  unit 0, advances, snapshots at the split points, the last unit taped: what the forward
  sweep leaves on the tapes); ``revolve_reverse`` runs the rest (reverse the taped unit;
  restore the top snapshot, dropping it once its unit is reversed; descend again).  A
  snapshot is the state (``save_state``) plus its unit index on the int tape, so no other
  memory is used; an advance runs the unit's taped code and drops its tape.  The trips' code
  is the loop's own, run on the same values, so the gradient is the same, bit for bit.  The
  peak is sampled after each unit runs, in both sweeps; ``revolve_reverse`` ends by raising the
  call's peak counts (``_tape_floats``/``_tape_ints``) to it and checking the budget again.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable

import gast

from ...codegen import runtime as R
from .tapes import FP, IP, IT


def _helpers():
    """The runtime helpers ``_revolve_*`` as Python functions (one source for plan and code)."""
    names = {}
    exec(R.helper_source(["_revolve_mid", "_revolve_units"]), names)     # noqa: S102 - our text
    return names


_H = _helpers()


def advances(t, s):
    """The least number of advances that reverse ``t >= 1`` steps with ``s >= 1`` snapshots."""
    return _H["_revolve_advances"](t, s)


def repetitions(t, s):
    """The least ``r`` with ``C(s + r, s) >= t``: reversing ``t`` steps with ``s`` snapshots
    advances each step at most ``r`` times (``schedule``)."""
    return _H["_revolve_reps"](t, s)[0]


def mid(t, s):
    """Where ``schedule`` puts the next snapshot: steps to advance from a snapshot, reversing
    ``t >= 2`` steps with ``s >= 1`` snapshots (1 <= mid <= t - 1; with one, ``t - 1``)."""
    return _H["_revolve_mid"](t, s)


@dataclass(frozen=True)
class RevolveSchedule:
    """Reversing ``steps`` steps with ``snapshots`` snapshots: ``actions`` in order, each
    ``(what, step)`` with ``what`` one of "store" (a snapshot of the state at step), "advance"
    (run the step untaped), "tape" (run it taped), "reverse", "restore" (the state from the
    snapshot at step, kept) and "drop" (that snapshot, no longer needed)."""
    steps: int
    snapshots: int
    actions: tuple = field(repr=False)
    advances: int           # the "advance" actions
    most_held: int          # the most snapshots held at once


def schedule(steps, snapshots):
    """The binomial schedule (module docstring) as the generated code runs it."""
    if steps < 1 or snapshots < 1:
        raise ValueError("revolve: steps and snapshots must be at least 1")
    acts, held = [], []
    most = 0

    def store(v):
        nonlocal most
        held.append(v)
        most = max(most, len(held))
        acts.append(("store", v))

    def descend(v, b):
        start, split = v, v
        while True:
            if v == split and b - v > 1:
                if v > start:
                    store(v)
                split = v + mid(b - v, snapshots - (len(held) - 1))
            if v == b - 1:
                acts.append(("tape", v))
                return v
            acts.append(("advance", v))
            v += 1

    store(0)
    v = descend(0, steps)           # the forward sweep ends here
    while True:
        acts.append(("reverse", v))
        b = v
        if b == 0:
            break
        if held[-1] == b:
            acts.append(("drop", held.pop()))
        acts.append(("restore", held[-1]))
        v = descend(held[-1], b)
    acts.append(("drop", held.pop()))
    return RevolveSchedule(steps, snapshots, tuple(acts),
                           sum(1 for a, _ in acts if a == "advance"), most)


@dataclass(frozen=True)
class RevolveChoice:
    """Units of ``unit`` trips, ``snapshots`` snapshots, ``units`` units in all."""
    unit: int
    snapshots: int
    units: int


def choose(n, room, c, t):
    """``RevolveChoice`` for ``n`` trips in ``room`` tape entries, ``c`` entries per snapshot and
    ``t`` per trip, or None when one snapshot and one trip do not fit."""
    unit, snaps = _H["_revolve_units"](n, room, c, t)
    if unit == 0:
        return None
    return RevolveChoice(unit, snaps, (n + unit - 1) // unit)


# ---------------------------------------------------------------------------- the code
@dataclass
class RevolvePieces:
    """What the loop's code is made of (``checkpoint.checkpoint_loop`` builds them).  Each
    callable returns fresh statements."""
    save: Callable          # push the state (the loop's checkpoint)
    restore: Callable       # pop it back into the state
    unit: Callable          # run the trips a .. z - 1 taped (a, z: the names in ``names``)
    unit_reverse: Callable  # reverse those trips (from the tape)
    sample: Callable        # the peak, sampled
    names: dict             # n, k (unit length), rv (snapshots), a, z and the revolve's own
    budget_check: Callable  # the check of the call's peak after the loop's reverse


def _p(text):
    return gast.parse(text.strip("\n")).body


def _descend(pc):
    """From the state at unit ``v`` (its snapshot on top), to unit ``b - 1`` taped."""
    n = pc.names
    v, v0, j, b, d, rv = n["v"], n["v0"], n["j"], n["b"], n["d"], n["rv"]
    store = pc.save() + _p(f"{IT} = _reserve({IT}, {IP} + 1)\n{IT}[{IP}] = {v}\n{IP} += 1\n{d} += 1")
    split = gast.If(test=_p(f"{v} > {v0}")[0].value, body=store, orelse=[])
    at_split = _p(f"if {v} == {j} and {b} - {v} > 1:\n    pass")[0]
    at_split.body = [split] + _p(f"{j} = {v} + _revolve_mid({b} - {v}, {rv} - {d})")
    run = _p(f"{n['qf']} = {FP}\n{n['qi']} = {IP}\n{n['a']} = {v} * {n['k']}\n"
             f"{n['z']} = min({n['n']}, {n['a']} + {n['k']})")
    run += pc.unit() + pc.sample()
    run += _p(f"if {v} == {b} - 1:\n    break\n{FP} = {n['qf']}\n{IP} = {n['qi']}\n{v} += 1")
    loop = gast.While(test=gast.Constant(value=True, kind=None), body=[at_split] + run, orelse=[])
    return _p(f"{v0} = {v}\n{j} = {v}") + [loop]


def revolve_forward(pc):
    """The forward sweep's part (module docstring): snapshot 0, then the first descent."""
    n = pc.names
    out = _p(f"{n['u']} = ({n['n']} + {n['k']} - 1) // {n['k']}\n{n['d']} = 0")
    out += pc.save() + _p(f"{IT} = _reserve({IT}, {IP} + 1)\n{IT}[{IP}] = 0\n{IP} += 1")
    out += _p(f"{n['v']} = 0\n{n['b']} = {n['u']}") + _descend(pc)
    out[0].coarsen_comment = ("binomial (revolve) checkpointing: units of k trips, snapshots "
                              "at the binomial split points, the last unit taped")
    return out


def revolve_reverse(pc):
    """The reverse sweep's part (module docstring)."""
    n = pc.names
    v, b, d = n["v"], n["b"], n["d"]
    body = _p(f"{n['a']} = {v} * {n['k']}\n{n['z']} = min({n['n']}, {n['a']} + {n['k']})")
    body += pc.unit_reverse()
    body += _p(f"{b} = {v}\nif {b} == 0:\n    break")
    drop = _p(f"if {IT}[{IP} - 1] == {b}:\n    {IP} -= 1")[0]
    drop.body += pc.restore() + _p(f"{d} -= 1")
    body.append(drop)
    body += _p(f"{n['qf']} = {FP}\n{n['qi']} = {IP}\n{IP} -= 1\n{v} = {IT}[{IP}]")
    body += pc.restore() + _p(f"{FP} = {n['qf']}\n{IP} = {n['qi']}") + _descend(pc)
    loop = gast.While(test=gast.Constant(value=True, kind=None), body=body, orelse=[])
    loop.coarsen_comment = ("binomial (revolve) checkpointing: each unit reversed after it is "
                            "run again from the nearest snapshot")
    return [loop] + _p(f"{IP} -= 1") + pc.restore() + pc.budget_check()


def copies(stmts):
    """Fresh copies of statements (a piece is placed more than once)."""
    return lambda: copy.deepcopy(stmts)
