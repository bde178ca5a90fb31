"""Segments of interest planned and lifted: the step reverse and forward mode share.

Requires: a typed ``ir.Function`` that the caller owns (a copy: it is changed in place) and
its activity ``Facts`` (``coarsen.analysis.activity``).
Guarantees: ``lift_planned(fn, facts, budget_seconds)`` plans the segments of ``fn``
(``coarsen.analysis.segments``: ``Segment`` nodes put into its body) and lifts each one to
SymPy (``coarsen.ad.lift`` under canonical names, ``coarsen.ad.canonical``): a loop whose body
is one segment gets the closed form of its carried values where the phi-calculus finds one
(the loop is then replaced by that segment, which keeps the loop as its statement, and as the
path for the closed form's singular points with its body lifted on its own), any other segment
a ``LiftedSegment`` or a ``Fallback`` saying why not.  It returns ``(segments, budgets)``: the
planned segments in order, each with its plan's result set, and per segment its location and
its symbolic budget (``symbolic.Budget``; ``max_ops`` 4000, ``budget_seconds`` of wall clock).
Formulas in the plans show the compiler's temporaries as the source expressions they stand
for (``show_temps``).  The reverse driver (``coarsen.ad.reverse.driver``) then chooses each
lifted block's strategy; forward mode (``coarsen.ad.forward``) pushes tangents through the
local Jacobians.
"""
from __future__ import annotations

from dataclasses import replace

from .. import symbolic as S
from ..analysis.plans import ClosedFormLoop, Fallback
from ..analysis.segments import plan_segments
from ..ir.nodes import For, Segment, used_vars, walk
from .canonical import lift_canonically, show_temps
from .lift import closed_form_segment, differentiate_segment

__all__ = ["lift_planned", "lifted_names"]


def lift_planned(fn, facts, budget_seconds=10.0):
    """``(segments, budgets)``; see the module docstring."""
    types = fn.types
    segments = plan_segments(fn, facts)
    budgets = []
    loop_bodies = {}
    for st in walk(fn.body):
        if isinstance(st, For) and len(st.body) == 1 and isinstance(st.body[0], Segment):
            loop_bodies[id(st.body[0])] = st
    for seg in list(segments):
        budget = S.Budget(max_ops=4000, seconds=budget_seconds)
        budgets.append((seg.loc, budget))
        loop = loop_bodies.get(id(seg))
        if loop is not None:
            closed = lift_canonically(closed_form_segment, seg, types, facts.active, budget,
                                      loop=loop, temps=fn.temps,
                                      live_after=_read_outside(fn, loop))
            if isinstance(closed, ClosedFormLoop) and closed.singular:
                # the loop stays as the path for the singular points (exactness there)
                body = Segment(list(seg.stmts), seg.loc, seg.index, passengers=list(seg.passengers),
                               inputs=list(seg.inputs), outputs=list(seg.outputs), plan=seg.plan)
                lifted = lift_canonically(differentiate_segment, body, types, facts.active,
                                          budget, temps=fn.temps)
                body.plan = replace(body.plan, result=_shown(lifted, fn))
                if body.plan.lifted is None:
                    closed = Fallback("closed form needs the loop at singular points, and the "
                                      "loop body could not be lifted")
                else:
                    closed = replace(closed, singular_body=body)
            if isinstance(closed, ClosedFormLoop):
                seg.plan = replace(seg.plan, result=_shown(replace(closed, loop=loop), fn))
                seg.outputs = list(closed.carried)
                seg.inputs = sorted({i for (_, i) in closed.partials})
                _replace_loop(fn.body, loop, seg)
                continue
            seg.plan = replace(seg.plan, closed_form_fallback=closed.reason)
        lifted = lift_canonically(differentiate_segment, seg, types, facts.active, budget,
                                  temps=fn.temps)
        seg.plan = replace(seg.plan, result=_shown(lifted, fn))
    return segments, budgets


def lifted_names(segments):
    """{canonical name: real name} over the lifted segments (and the bodies kept for the
    singular points of closed forms): what printing their SymPy expressions maps back."""
    out = {}
    for seg in segments:
        lifted = seg.plan.lifted
        if lifted is not None:
            out.update(lifted.names)
            sub = getattr(lifted, "singular_body", None)
            if sub is not None:
                out.update(sub.plan.lifted.names)
    return out


def _replace_loop(block, loop, seg):
    """Put the loop segment ``seg`` where ``loop`` stands (its statements keep the loop)."""
    for k, st in enumerate(block):
        if st is loop:
            body = seg.plan.result.singular_body
            loop.body = [body] if body is not None else list(seg.stmts)
            seg.stmts = [loop]
            block[k] = seg
            return True
        for sub in (getattr(st, "body", None), getattr(st, "orelse", None), getattr(st, "stmts", None)):
            if isinstance(sub, list) and sub is not seg.stmts and _replace_loop(sub, loop, seg):
                return True
    return False


def _read_outside(fn, loop):
    """The variables a statement of ``fn`` outside ``loop`` reads, and its result."""
    inside = {id(x) for x in walk(loop.body)}
    out = {fn.result}
    for st in walk(fn.body):
        if st is not loop and id(st) not in inside:
            out.update(used_vars(st))
    return out


def _shown(result, fn):
    """The lifting result with its formula as people read it: the compiler's temporaries
    (``fn.temps``) it mentions shown as the source expressions they stand for (for the report
    and comments only; the code never reads the formula)."""
    if isinstance(result, Fallback) or not result.formula:
        return result
    return replace(result, formula=show_temps(result.formula, fn))
