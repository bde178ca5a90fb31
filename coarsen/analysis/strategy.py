"""Reuse-aware planning of one segment of interest: recompute, preaccumulate or fine-grained.

Requires: a lifted block segment (``coarsen.analysis.plans.LiftedSegment``, with its paths'
SymPy DAGs in ``dags``), whether the segment runs inside a loop, and the cost weights
(``coarsen.analysis.costmodel.Weights``: one operation of each kind and one taped float,
relative to an add; calibrated once per machine).
Guarantees: ``estimate`` is a pure function of (the lifted segment, its ``SegmentContext``:
whether it runs in a loop and which inputs a reverse read takes from the tape, the weights):
the estimated cost of one execution of the segment's derivative work (what is added to the
primal; the primal's own statements are the same under every strategy) for each of

* ``recompute``: the inputs are taped and the reverse step re-evaluates the segment's values,
  then one vector-Jacobian product (``LiftedSegment.vjp_paths``) or, for one output, the
  partials times its adjoint (a multiply per distinct partial, an add per input); in a loop,
  what the step evaluates from inputs the loop does not assign is free (``loop_invariant``:
  LLVM evaluates it once, before the loop);
* ``cut``: as recompute, but the values the step needs that cost more to recompute than a
  taped float (``cut_symbols``) are not recomputed: those a variable holds at the segment's
  end (assigned once in it) are read there, and, in a segment without branches, the others
  (CSE temporaries that do not depend on the adjoints) are evaluated in the forward sweep
  right after the segment and taped; the segment is cut there (the paper's segment size
  limit made concrete);
* ``preaccumulate`` (one-path segments only): the forward sweep evaluates every partial next
  to the primal (the values the primal just computed are shared: only the work beyond the
  primal counts), tapes the distinct ones when inside a loop (not a number, nor an input the
  reverse sweep reads anyway); the reverse step is one multiply-add per partial;
* ``fine``: statement-by-statement reverse mode: per active operand of a sum an add (the
  adjoint passes through), of every other operation a multiply and an add, plus its local
  partial (of a call, its primitive's ``partial_cost`` in the registry: a trig call for
  ``sin``, a division for ``log``...), and, inside a loop, a taped float for every value a
  nonlinear operation reads that the segment assigns (its intermediates, and the inputs it
  overwrites: the values every trip overwrites), and the cost of re-evaluating every compound
  operand it reads that depends on none of those (``coarsen.ad.reverse.rematerialize``
  re-reads the array elements it is made of), unless it is loop-invariant.

The trip count multiplies every alternative alike, so the per-segment choice does not depend
on it (a closed-form loop, which removes the trip count, is planned before this and always
kept).  ``choose`` returns the cheapest; a coarse strategy must beat fine by ``MARGIN``
(fine-grained AD is the safe default where the model cannot tell them apart), and a forced
strategy (``plan=``) wins where it applies.  Nothing here mutates its inputs.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy

from .costmodel import Weights, expr_cost, partial_weight
from .plans import PLANS, LiftedSegment  # noqa: F401 (PLANS: the accepted plan= values)

#: a coarse strategy is chosen only when its estimate is below MARGIN x the fine estimate.  The
#: model counts operations and taped floats, not dependency chains (a recomputed segment
#: lengthens the reverse sweep's critical path) nor what a strategy changes in the taping
#: around the segment.  Measured on the apps (size m): 0.6 and 0.75 planned gmm's inner
#: segments fine (3.7x slower than 0.9 there) and mc_option's too (1.5x); 0.9 loses on
#: heat (0.86x, recompute tapes two floats where fine tapes one) and Horner's rule (0.73x).
MARGIN = 0.9
#: preaccumulate is chosen over recompute or cut only below PREACCUMULATE_MARGIN x their
#: estimate: it tapes every distinct partial where cut tapes only the expensive values, and a
#: taped float in a loop costs more than the weights say (lennard_jones: preaccumulate
#: estimated 25 against cut 35, measured 1.31x against 1.62x over fine); where preaccumulating
#: wins (the chains of paper_repro's claim (e), mc_option, logreg) it is estimated 2x to 4x
#: cheaper
PREACCUMULATE_MARGIN = 0.67

STRATEGIES = ("recompute", "cut", "preaccumulate", "fine")


@dataclass(frozen=True)
class SegmentContext:
    """Where a segment runs: ``in_loop``; ``taped``: the names of its input symbols (the
    canonical names of ``LiftedSegment.dags``) whose values a reverse read takes from the tape
    (assigned inside the enclosing loop, and not re-read from an array); ``invariant``: those
    its innermost enclosing loop does not assign (the same on every trip)."""
    in_loop: bool = False
    taped: frozenset = frozenset()
    invariant: frozenset = frozenset()


@dataclass(frozen=True)
class StrategyCosts:
    """Estimated cost of one execution of a segment's derivative work, per strategy (in adds
    of the weights); ``preaccumulate`` is None where it does not apply (several paths).
    ``chosen``: the strategy planned; ``why``: one line for the report."""
    recompute: float
    cut: float
    preaccumulate: float | None
    fine: float
    chosen: str
    why: str

    def estimates_text(self) -> str:
        pre = "n/a" if self.preaccumulate is None else f"{self.preaccumulate:.0f}"
        return (f"estimated cost: recompute {self.recompute:.0f}, cut {self.cut:.0f}, "
                f"preaccumulate {pre}, fine {self.fine:.0f}; {self.why}")

    def as_text(self) -> str:
        return f"{self.chosen} ({self.estimates_text()})"


def needed(jac, exprs, stop=frozenset()):
    """What evaluating ``exprs`` needs of ``jac``'s replacements: ``(the (symbol, expression)
    pairs to evaluate, in order; the names in ``stop`` reached (not evaluated, nor what only
    they need); every symbol the evaluated expressions read)``.  The emitter prints exactly
    these (``steps.needed_replacements``), and the estimates price them."""
    reads = set()
    for e in exprs:
        reads |= e.free_symbols
    keep, stopped = [], []
    for sym, e in reversed(jac.replacements):
        if sym not in reads:
            continue
        if sym.name in stop:
            stopped.append(sym.name)
            continue
        keep.append((sym, e))
        reads |= e.free_symbols
    return keep[::-1], stopped[::-1], reads


def _needed(jac, exprs):
    """The expressions of the replacements ``exprs`` need."""
    return [e for _, e in needed(jac, exprs)[0]]


def steps(lifted: LiftedSegment):
    """Per path, what its reverse step evaluates: (the local Jacobian whose replacements it
    needs, the expressions it accumulates, the cost of accumulating each, the path's finals,
    the names of the adjoints' seed symbols)."""
    finals = [d[3] for d in lifted.dags] or [{} for _ in lifted.paths]
    if lifted.vjp_paths:
        return [(vp.jac, list(vp.cotangents.values()), "add", f, frozenset(vp.seeds.values()))
                for vp, f in zip(lifted.vjp_paths, finals)]
    return [(jac, list(p.values()), "muladd", f, frozenset())
            for (_, p, jac), f in zip(lifted.paths, finals)]


def cut_plan(lifted: LiftedSegment, in_loop: bool, w: Weights):
    """Per path, the cut symbols of ``cut_symbols`` (temporaries only for a one-path segment)."""
    one = len(lifted.paths) == 1
    return [cut_symbols(jac, exprs, finals, in_loop, w, temps=one, seeds=seeds)
            for jac, exprs, _, finals, seeds in steps(lifted)]


def cut_symbols(jac, exprs, finals, in_loop: bool, w: Weights, *, temps=False,
                seeds=frozenset()) -> frozenset:
    """The symbols a cut step does not recompute: from the last replacement back, each needed
    one whose own expression costs more than a taped float (nothing, outside a loop) and that
    a variable holds at the segment's end (``finals``: read there) or, with ``temps`` (a
    segment without branches), any other that does not depend on the outputs' adjoints
    (``seeds``, a vector-Jacobian product's): computed in the forward sweep right after the
    segment and taped; what only a cut symbol needed is then not recomputed either."""
    needed = set()
    for e in exprs:
        needed |= e.free_symbols
    seeded = set()
    for sym, e in jac.replacements:
        if any(x.name in seeds or x in seeded for x in e.free_symbols):
            seeded.add(sym)
    cut = set()
    limit = w.tape if in_loop else 0.0
    for sym, e in reversed(jac.replacements):
        if sym not in needed:
            continue
        if (sym.name in finals or (temps and sym not in seeded)) and expr_cost(e, w) > limit:
            cut.add(sym.name)
            continue
        needed |= e.free_symbols
    return frozenset(cut)


#: the SymPy node types of loop-invariant code that Numba's LLVM moves out of the loop (plain
#: arithmetic: no call, which may not be hoistable)
_HOISTABLE = (sympy.Add, sympy.Mul, sympy.Symbol, sympy.Number)


def _invariant(e, ctx, known=frozenset()):
    """Is ``e`` plain arithmetic (``_HOISTABLE``, integer powers) on the loop's invariant
    inputs (``ctx.invariant``) and on the symbols ``known`` to be invariant?"""
    return all(x.name in ctx.invariant or x in known for x in e.free_symbols) and \
        all(isinstance(n, _HOISTABLE) or (isinstance(n, sympy.Pow) and n.exp.is_Integer)
            for n in sympy.preorder_traversal(e))


def loop_invariant(keep, exprs, ctx):
    """The replacements (symbols) of ``keep`` and the expressions of ``exprs`` whose value is
    the same on every trip of the segment's innermost loop: plain arithmetic on its invariant
    inputs (``ctx.invariant``) and on invariant replacements.  LLVM's loop-invariant code
    motion evaluates them once before the loop, so a reverse step in a loop does not pay for
    them per trip (heat's ``u_bar[t, i] += g * (1 - 2*kappa)``)."""
    if not ctx.in_loop or not ctx.invariant:
        return set(), set()
    inv = set()
    for sym, e in keep:
        if _invariant(e, ctx, inv):
            inv.add(sym)
    return inv, {k for k, e in enumerate(exprs) if not e.is_Number and _invariant(e, ctx, inv)}


def _accumulate_cost(exprs, accumulate, w):
    """Accumulating each expression into its adjoint: an add each, and for a multiply-add a
    multiply per distinct partial up to sign (one product of the adjoint serves every input
    with that partial: heat's ``kappa`` for ``u[t, i - 1]`` and ``u[t, i + 1]``).  A number
    counts a multiply each, +-1 too, though the step adds the adjoint itself there: pricing
    those as free planned gemver's rank-one update ``A0 + outer(u, v)`` recomputed, where
    fine-grained AD lets ``coarsen.ad.reverse.rematerialize`` drop the matrix adjoint's
    writer (measured 1.48 to 1.59 of the hand-written gradient)."""
    if accumulate == "add":
        return len(exprs) * w.add
    muls = {e for e, _ in distinct_partials(exprs) if e is not None}
    numbers = sum(1 for e in exprs if e.is_Number)
    return len(exprs) * w.add + (len(muls) + numbers) * w.mul


def _step_cost(jac, exprs, accumulate, w, ctx, cut=frozenset()):
    """What one path's reverse step evaluates per execution (its loop-invariant part is
    evaluated once before the loop: ``loop_invariant``), plus a taped float per loop-varying
    input it reads."""
    keep, _, reads = needed(jac, exprs, cut)
    inv, inv_exprs = loop_invariant(keep, exprs, ctx)
    evaluated = [e for s, e in keep if s not in inv] + \
        [e for k, e in enumerate(exprs) if k not in inv_exprs]
    taped = sum(1 for x in reads if x.name in ctx.taped) if ctx.in_loop else 0
    return expr_cost(evaluated, w) + _accumulate_cost(exprs, accumulate, w) + taped * w.tape


def recompute_cost(lifted: LiftedSegment, ctx: SegmentContext, w: Weights) -> float:
    """The reverse step re-evaluating the segment from its entry values (the most expensive
    path)."""
    return max(_step_cost(jac, exprs, acc, w, ctx) for jac, exprs, acc, _, _ in steps(lifted))


def cut_cost(lifted: LiftedSegment, ctx: SegmentContext, w: Weights) -> float:
    """The reverse step reading the cut values (taped inside a loop) and recomputing the rest."""
    worst = 0.0
    for (jac, exprs, acc, finals, _), cut in zip(steps(lifted), cut_plan(lifted, ctx.in_loop, w)):
        # a cut temporary is also evaluated in the forward sweep (its own expression; what it
        # reads the segment's statements computed)
        rdef = dict(jac.replacements)
        ahead = sum(expr_cost(rdef[s], w) for s in rdef if s.name in cut and s.name not in finals)
        c = _step_cost(jac, exprs, acc, w, ctx, cut) + ahead + \
            (len(cut) * w.tape if ctx.in_loop else 0.0)
        worst = max(worst, c)
    return worst


def distinct_partials(exprs):
    """The partials a preaccumulated step keeps, each once up to sign: [(expression, sign)]
    per partial, the expression None for a number (used as it is); a partial whose negation
    is also a partial is kept as the one of the two without a leading minus."""
    present = set(exprs)
    out = []
    for e in exprs:
        if e.is_Number:
            out.append((None, 1))
        elif -e in present and e.could_extract_minus_sign():
            out.append((-e, -1))
        else:
            out.append((e, 1))
    return out


def preaccumulate_cost(lifted: LiftedSegment, ctx: SegmentContext, w: Weights) -> float | None:
    """Partials evaluated in the forward sweep beyond the primal, the distinct ones taped in a
    loop; the reverse step's multiply-adds.  None for a segment with several paths."""
    if len(lifted.paths) != 1 or not lifted.dags:
        return None
    (_, partials, jac), = lifted.paths
    assignments = lifted.dags[0][0]
    exprs = list(partials.values())
    extra = expr_cost(_needed(jac, exprs) + exprs, w) - expr_cost([e for _, e in assignments], w)
    # (a partial that is one symbol counts as untaped unless it names a loop-varying input;
    # the emitter does tape it when it is a CSE temporary: counting those too (the consistent
    # estimate) planned mc_option's price update fine and measured 1.00x against fine, where
    # this estimate preaccumulates it and measured 1.55x: the model is that imprecise)
    kept = {e for e, _ in distinct_partials(exprs)
            if e is not None and not (e.is_Symbol and e.name not in ctx.taped)}
    taped = len(kept) * w.tape if ctx.in_loop else 0.0
    return max(extra, 0.0) + len(exprs) * (w.mul + w.add) + taped


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
        # the primitive's ``partial_cost`` (coarsen.ir.primitives): ``sin``'s a trig call and a
        # multiply, ``log``'s a division, ``exp``'s a multiply and an add from the taped value
        return partial_weight(e, w)
    return 0.0


def fine_cost(lifted: LiftedSegment, ctx: SegmentContext, w: Weights) -> float:
    """Statement-by-statement reverse mode over the segment's DAG (the most expensive path)."""
    worst = 0.0
    for assignments, wrt, carried, _, _ in lifted.dags:
        active = set(wrt)
        total, read, remat = 0.0, set(), set()
        varying = {s for s, _ in assignments} | set(carried) | \
            {x for _, e in assignments for x in e.free_symbols if x.name in ctx.taped}
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
                    # the operands a nonlinear operation's partials read: a loop-varying
                    # symbol, or a loop-varying compound operand (a temporary in the IR)
                    read |= {a for a in args if (a.is_Symbol and a in varying) or
                             (not a.is_Atom and a.free_symbols & varying)}
                    # a compound operand of the loop's inputs alone (array elements re-read,
                    # values the loop does not assign) is not taped but re-evaluated in the
                    # reverse sweep (``coarsen.ad.reverse.rematerialize``): heat's
                    # ``kappa * (u[i-1] - 2 u[i] + u[i+1])`` re-reads three elements
                    remat |= {a for a in args if not a.is_Atom and not a.free_symbols & varying}
                if act and node.is_Add:
                    total += len(act) * w.add       # the adjoint passes through, accumulated
                elif act:
                    total += len(act) * (w.mul + w.add)
                    total += len(act) * _local_partial_cost(node, len(args), w)
                stack.extend(args)
        if ctx.in_loop:
            total += len(read) * w.tape
            total += sum(expr_cost(a, w) for a in remat if not _invariant(a, ctx))
        worst = max(worst, total)
    return worst


def estimate(lifted: LiftedSegment, ctx: SegmentContext, w: Weights,
             forced: str = "auto") -> StrategyCosts:
    """The costs of each strategy and the one planned (``forced``: ``plan=``)."""
    r = recompute_cost(lifted, ctx, w)
    c = cut_cost(lifted, ctx, w)
    p = preaccumulate_cost(lifted, ctx, w)
    f = fine_cost(lifted, ctx, w)
    if forced != "auto":
        if forced == "preaccumulate" and p is None:
            return StrategyCosts(r, c, p, f, "recompute", "forced preaccumulate, but the segment "
                                 "has several paths: recompute")
        return StrategyCosts(r, c, p, f, forced, "forced by plan=")
    best, cost = "recompute", r
    if c < cost:
        best, cost = "cut", c
    if p is not None and p < PREACCUMULATE_MARGIN * cost:
        best, cost = "preaccumulate", p
    if cost < MARGIN * f:
        why = f"cheapest, below {MARGIN} x fine"
        if p is not None and best != "preaccumulate" and p < cost:
            why = f"below {MARGIN} x fine; preaccumulate is not below {PREACCUMULATE_MARGIN} x {best}"
        return StrategyCosts(r, c, p, f, best, why)
    return StrategyCosts(r, c, p, f, "fine", f"no coarse strategy below {MARGIN} x fine")
