"""Reuse-aware planning of one segment of interest: recompute, preaccumulate or fine-grained.

Requires: a lifted block segment (``coarsen.analysis.plans.LiftedSegment``, with its paths'
SymPy DAGs in ``dags``), whether the segment runs inside a loop, and the cost weights
(``coarsen.analysis.costmodel.Weights``: one operation of each kind and one taped float,
relative to an add; calibrated once per machine).
Guarantees: ``estimate`` is a pure function of (the lifted segment, ``in_loop``, the weights):
the estimated cost of one execution of the segment's derivative work (what is added to the
primal; the primal's own statements are the same under every strategy) for each of

* ``recompute``: the inputs are taped and the reverse step re-evaluates the segment's values,
  then one vector-Jacobian product (``LiftedSegment.vjp_paths``) or, for one output, the
  partials times its adjoint;
* ``preaccumulate`` (one-path segments only): the forward sweep evaluates every partial next
  to the primal (the values the primal just computed are shared: only the work beyond the
  primal counts), tapes the non-constant ones when inside a loop; the reverse step is one
  multiply-add per partial;
* ``fine``: statement-by-statement reverse mode: per active operand of every operation a
  multiply and an add, plus its local partial (the derivative of a call: a trig call for
  ``sin``, a division for ``log``...), and, inside a loop, a taped float for every value a
  nonlinear operation reads that the segment assigns (its intermediates, and the inputs it
  overwrites: the values every trip overwrites).

The trip count multiplies every alternative alike, so the per-segment choice does not depend
on it (a closed-form loop, which removes the trip count, is planned before this and always
kept).  ``choose`` returns the cheapest; a coarse strategy must beat fine by ``MARGIN``
(fine-grained AD is the safe default where the model cannot tell them apart), and a forced
strategy (``plan=``) wins where it applies.  Nothing here mutates its inputs.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy

from .costmodel import Weights, call_weight, expr_cost
from .plans import PLANS, LiftedSegment  # noqa: F401 (PLANS: the accepted plan= values)

#: a coarse strategy is chosen only when its estimate is below MARGIN x the fine estimate
MARGIN = 0.9

STRATEGIES = ("recompute", "preaccumulate", "fine")


@dataclass(frozen=True)
class StrategyCosts:
    """Estimated cost of one execution of a segment's derivative work, per strategy (in adds
    of the weights); ``preaccumulate`` is None where it does not apply (several paths).
    ``chosen``: the strategy planned; ``why``: one line for the report."""
    recompute: float
    preaccumulate: float | None
    fine: float
    chosen: str
    why: str

    def as_text(self) -> str:
        pre = "n/a" if self.preaccumulate is None else f"{self.preaccumulate:.0f}"
        return (f"{self.chosen} (estimated cost: recompute {self.recompute:.0f}, "
                f"preaccumulate {pre}, fine {self.fine:.0f}; {self.why})")


def _needed(jac, exprs):
    """The replacements of ``jac`` that ``exprs`` need (as the emitter prints them)."""
    needed = set()
    for e in exprs:
        needed |= e.free_symbols
    keep = []
    for sym, e in reversed(jac.replacements):
        if sym in needed:
            keep.append(e)
            needed |= e.free_symbols
    return keep


def recompute_cost(lifted: LiftedSegment, in_loop: bool, w: Weights) -> float:
    """The reverse step re-evaluating the segment from its entry values (the most expensive
    path)."""
    worst = 0.0
    if lifted.vjp_paths:
        for vp in lifted.vjp_paths:
            exprs = list(vp.cotangents.values())
            c = expr_cost(_needed(vp.jac, exprs) + exprs, w) + len(exprs) * w.add
            worst = max(worst, c)
    else:
        for _, partials, jac in lifted.paths:
            exprs = list(partials.values())
            c = expr_cost(_needed(jac, exprs) + exprs, w) + len(exprs) * (w.mul + w.add)
            worst = max(worst, c)
    return worst + _overwritten_inputs(lifted) * w.tape


def _overwritten_inputs(lifted):
    """Inputs the segment also assigns (``x = f(x)``): taped so that the step sees entry values."""
    outs = {o for (o, _) in lifted.partials}
    return len({i for (_, i) in lifted.partials if i in outs})


def preaccumulate_cost(lifted: LiftedSegment, in_loop: bool, w: Weights) -> float | None:
    """Partials evaluated in the forward sweep beyond the primal, taped in a loop; the reverse
    step's multiply-adds.  None for a segment with several paths."""
    if len(lifted.paths) != 1 or not lifted.dags:
        return None
    (_, partials, jac), = lifted.paths
    assignments = lifted.dags[0][0]
    exprs = list(partials.values())
    extra = expr_cost(_needed(jac, exprs) + exprs, w) - expr_cost([e for _, e in assignments], w)
    varying = sum(1 for e in exprs if not e.is_Number)
    return max(extra, 0.0) + len(exprs) * (w.mul + w.add) + (varying * w.tape if in_loop else 0.0)


def _local_partial_cost(e, k, w):
    """The cost of evaluating one local partial of node ``e`` with respect to one of its
    operands (``k``: the number of operands)."""
    if e.is_Mul:
        return max(k - 2, 0) * w.mul
    if e.is_Pow:
        ex = e.exp
        if ex.is_Integer and abs(int(ex)) <= 4:
            return w.mul * max(abs(int(ex)) - 1, 1) + (w.div if ex < 0 else 0.0)
        if ex == sympy.Rational(1, 2) or ex == -sympy.Rational(1, 2):
            return w.div + w.mul
        return w.pow + w.mul
    if isinstance(e, sympy.Function):
        name = type(e).__name__
        if name in ("sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "atan", "atan2", "erf"):
            return call_weight(name, w) + w.mul
        if name in ("log", "log1p", "sqrt"):
            return w.div
        if name in ("exp", "expm1", "tanh"):
            return w.mul + w.add            # from the taped value
        return w.add
    return 0.0


def fine_cost(lifted: LiftedSegment, in_loop: bool, w: Weights) -> float:
    """Statement-by-statement reverse mode over the segment's DAG (the most expensive path)."""
    worst = 0.0
    for assignments, wrt, carried in lifted.dags:
        active = set(wrt)
        total, read = 0.0, set()
        varying = {s for s, _ in assignments} | set(carried)
        for s, e in assignments:
            if e.free_symbols & active:
                active.add(s)
            stack = [e]
            while stack:
                node = stack.pop()
                if node.is_Atom or not node.args:
                    continue
                args = [a for a in node.args if isinstance(a, sympy.Basic)]
                act = [a for a in args if a.free_symbols & active]
                if act and not isinstance(node, sympy.core.relational.Relational) and not node.is_Add:
                    read |= {a for a in args if a.is_Symbol and a in varying}
                if act:
                    total += len(act) * (w.mul + w.add)
                    total += len(act) * _local_partial_cost(node, len(args), w)
                stack.extend(args)
        if in_loop:
            total += len(read) * w.tape
        worst = max(worst, total)
    return worst


def estimate(lifted: LiftedSegment, in_loop: bool, w: Weights, forced: str = "auto") -> StrategyCosts:
    """The costs of each strategy and the one planned (``forced``: ``plan=``)."""
    r = recompute_cost(lifted, in_loop, w)
    p = preaccumulate_cost(lifted, in_loop, w)
    f = fine_cost(lifted, in_loop, w)
    if forced != "auto":
        if forced == "preaccumulate" and p is None:
            return StrategyCosts(r, p, f, "recompute", "forced preaccumulate, but the segment has "
                                 "several paths: recompute")
        return StrategyCosts(r, p, f, forced, "forced by plan=")
    best, cost = "recompute", r
    if p is not None and p < cost:
        best, cost = "preaccumulate", p
    if cost < MARGIN * f:
        return StrategyCosts(r, p, f, best, f"cheapest, below {MARGIN} x fine")
    return StrategyCosts(r, p, f, "fine", f"no coarse strategy below {MARGIN} x fine")
