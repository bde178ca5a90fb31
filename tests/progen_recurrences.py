"""The fuzzer's third family: recurrences (filters, integrators, scans over an array).

Requires: ``tests.progen_generate`` (``Gen``'s expressions and conditions, ``Program``,
``random_streams``, ``finish_program``).
Guarantees: ``generate_recurrences(seed, size=None, adversarial=None)`` returns a
:class:`~tests.progen_generate.Program` with the first family's signature (``f(x, y, a, n)``),
deterministic per ``(seed, size)``, drawn from its own random streams (``"rec-<seed>"``): the
other families' seeds and programs are unchanged.

Why a third family: the first family's loops rarely carry state in few inputs through trips
that read an array, and the second's are reductions.  The loops coarsen preaccumulates by
forward mode (``coarsen.analysis.forward_loops``: a statement of the body, reading array
elements, storing nowhere, at most 3 lanes) are that shape: a Kalman filter, an Euler step,
an exponential smoother.  Every program here has one such loop over ``a`` (or ``range(n)``):

* one to three carried states, each starting from a constant (a zero tangent, no lane) or from
  an expression of ``x``, ``y``, ``a`` (a lane of its own), sometimes a derived input
  (``g = math.exp(0.3 * x)``) read by the loop;
* trip locals of the states, ``x``, ``y``, ``g`` and ``a[i]``; damped updates
  ``s = 0.9 * s + 0.1 * tanh(e)``, coupled states, updates in branches (one arm or both), an
  inner loop of a few damped steps, a plain sum of trip values (not a reduction: the states
  are carried);
* before the loop, sometimes a statement that reads a state (the reverse of the code before the
  loop then needs the value the loop overwrites); after it, the states, the sum and sometimes
  a trip local of the last trip;
* the data the loop reads, ``d``, is not differentiated (made from ints before it, as the
  observations a filter reads), so ``a`` (differentiated) enters through the states' entry
  values;
* negative cases (reversed as usual): a store ``b[i] = s``, a fourth lane, a state assigned
  before the loop in branches only, a read of ``a`` in the loop (an array input).

Values stay bounded (damped updates through ``tanh``); ``check_program`` still discards what
overflows.  ``features`` names what each program contains.
"""
from __future__ import annotations

from tests.progen_generate import Gen, Program, finish_program, random_streams

__all__ = ["generate_recurrences"]

_LOOPS = [("range(m)", True), ("range(m)", True), ("range(m - 1, -1, -1)", True),
          ("range(1, m)", True), ("range(n)", False)]
_INITS = ["0.0", "0.0", "1.0", "0.5"]


class RecurrenceGen(Gen):
    """``Gen`` with recurrence loops: see the module docstring."""

    def __init__(self, rng, size, helper):
        super().__init__(rng, size, helper)
        self.nloc = 0

    def fresh(self, stem):
        self.nloc += 1
        return f"{stem}{self.nloc}"

    def update(self, ctx, indent, s):
        e = self.expr(ctx, self.choice([1, 2, 2]))
        kind = self.r.choices(["damped", "coupled", "plain"], [5, 2, 1])[0]
        self.features.add("rec_" + kind)
        if kind == "damped":
            self.emit(indent, f"{s} = 0.9 * {s} + 0.1 * math.tanh({e})")
        elif kind == "coupled":
            other = self.choice(ctx["states"])
            self.emit(indent, f"{s} = {s} + 0.1 * ({other} - {s}) * math.tanh({e})")
        else:
            self.emit(indent, f"{s} = 0.5 * {s} + 0.25 * math.sin({e})")

    def trip_stmt(self, ctx, indent, level):
        kinds = ["local", "update", "if", "inner", "sum", "store"]
        weights = [3, 4, 1.5, 1 if level == 1 else 0, 1, 0.25 if ctx["out"] else 0]
        kind = self.r.choices(kinds, weights)[0]
        if kind == "local":
            t = self.fresh("e")
            self.emit(indent, f"{t} = {self.expr(ctx, 2)}")
            ctx["floats"].append(t)
            if level == 1:
                ctx["trip_locals"].append(t)
        elif kind == "update":
            self.update(ctx, indent, self.choice(ctx["states"]))
        elif kind == "if":
            self.features.add("rec_branch")
            self.emit(indent, f"if {self.cond(ctx)}:")
            sub = dict(ctx, floats=list(ctx["floats"]), trip_locals=[])
            self.update(sub, indent + 1, self.choice(ctx["states"]))
            if self.p(0.5):
                self.emit(indent, "else:")
                s = self.choice(ctx["states"])
                self.emit(indent + 1, f"{s} = 0.8 * {s}")
        elif kind == "inner":
            self.features.add("rec_inner")
            j = self.fresh("j")
            self.emit(indent, f"for {j} in range({self.choice(['2', '3', 'n'])}):")
            sub = dict(ctx, floats=list(ctx["floats"]), ints=ctx["ints"] + [(j, False)],
                       trip_locals=[])
            self.update(sub, indent + 1, self.choice(ctx["states"]))
        elif kind == "sum":
            self.features.add("rec_sum")
            self.emit(indent, f"acc += {self.expr(ctx, 1)}")
        else:
            self.features.add("rec_store")
            i = ctx["ints"][0][0]
            self.emit(indent, f"{ctx['out']}[{i}] = {self.choice(ctx['states'])}")

    def main_fn(self):
        nstate = self.choice([1, 1, 2, 2, 3])
        states = [f"s{k}" for k in range(nstate)]
        self.emit(0, "def f(x, y, a, n):")
        self.emit(1, "m = a.shape[0]")
        ctx0 = dict(floats=["x", "y"], ints=[], arrays=["a"], depth=0, loop=False, in_f=True,
                    active=[])
        inputs = ["x", "y"]
        if self.p(0.3):
            self.features.add("rec_derived_input")
            self.emit(1, f"g = math.exp(0.3 * {self.choice(['x', 'y'])})")
            inputs.append("g")
        if self.p(0.15):
            # a state assigned before the loop in branches only
            self.features.add("rec_branch_init")
            s = states[0]
            self.emit(1, f"if {self.cond(ctx0)}:")
            self.emit(2, f"{s} = math.tanh({self.expr(ctx0, 1)})")
            self.emit(1, "else:")
            self.emit(2, f"{s} = 0.5")
            rest = states[1:]
        else:
            rest = states
        for s in rest:
            if self.p(0.7):
                self.features.add("rec_const_entry")
                self.emit(1, f"{s} = {self.choice(_INITS)}")
            else:
                self.features.add("rec_active_entry")
                self.emit(1, f"{s} = math.tanh({self.expr(ctx0, 1)})")
        self.emit(1, "acc = 0.0")
        if self.p(0.25):
            self.features.add("rec_read_before")
            self.emit(1, f"z = {self.choice(states)} * {self.choice(inputs)}")
        out = "b" if self.p(0.2) else None
        if out:
            self.emit(1, "b = np.zeros(m)")
        # the observations: data that is not differentiated (computed from ints), as the
        # series a filter reads; reading ``a`` (differentiated) too is a negative case
        self.emit(1, "d = np.zeros(m)")
        self.emit(1, "for k in range(m):")
        self.emit(2, f"d[k] = math.sin({self.choice(['1.3', '0.7', '2.1'])} * k + 0.1 * n)")
        arrays = ["d"]
        if self.p(0.2):
            self.features.add("rec_reads_a")
            arrays.append("a")
        text, direct = self.choice(_LOOPS)
        # the inputs the loop reads: one or two (with the states of a differentiated entry, at
        # most 3 lanes mostly; sometimes more, the negative case)
        inputs = self.r.sample(inputs, self.choice([1, 1, 2, 2, len(inputs)]))
        ctx = dict(floats=inputs + states, ints=[("i", direct)], arrays=arrays, depth=1,
                   loop=True, in_f=True, active=[], states=states, out=out, trip_locals=[])
        self.emit(1, f"for i in {text}:")
        # the trip reads the array (a loop reading none is the phi-calculus's)
        t = self.fresh("e")
        self.emit(2, f"{t} = d[{'i' if direct else 'i % m'}] * {self.leaf(ctx)}")
        ctx["floats"].append(t)
        ctx["trip_locals"].append(t)
        for _ in range(max(2, self.budget)):
            self.trip_stmt(ctx, 2, 1)
        self.update(ctx, 2, states[-1])          # the last state always moves
        terms = [f"{self.choice(['', '0.5 * ', '1.5 * '])}{s}" for s in states] + ["0.1 * acc"]
        if "rec_read_before" in self.features:
            terms.append("z")
        if out:
            terms.append("np.sum(b * b)")
        if ctx["trip_locals"] and direct and text != "range(1, m)" and self.p(0.4):
            self.features.add("rec_local_after")       # the last trip's (the loop runs)
            terms.append(self.choice(ctx["trip_locals"]))
        self.emit(1, f"return {' + '.join(terms)}")


def generate_recurrences(seed: int, size: int | None = None,
                         adversarial: bool | None = None) -> Program:
    """The recurrence-family program for ``(seed, size)``; ``size`` (statements per trip,
    default drawn in 2..6).  ``adversarial`` as for ``progen_generate.generate``."""
    r, rn, adversarial, size = random_streams(f"rec-{seed}", f"rec-names-{seed}-{size}",
                                              adversarial, size, 6)
    g = RecurrenceGen(r, size, helper=False)
    g.features.add("recurrence_family")
    g.lines += ["import math", "", "import numpy as np", "", ""]
    g.main_fn()
    return finish_program(g, r, rn, seed, size, adversarial, " (recurrences)", 6)
