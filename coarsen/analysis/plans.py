"""Typed plans of segments of interest: what planning decided and what lifting found.

Requires: nothing (plain dataclasses; SymPy objects and IR nodes are held, not inspected).
Guarantees: every ``Segment`` carries one ``SegmentPlan`` (``seg.plan``), set by
``coarsen.analysis.segments.plan_segments`` (its source lines) and replaced, never mutated,
by the reverse pass's driver once the segment is lifted: ``result`` is then a
``LiftedSegment`` (a local Jacobian per path through the segment's branches), a
``ClosedFormLoop`` (a loop replaced by the exact closed form of its carried values) or a
``Fallback`` (why the segment is differentiated statement by statement).  The lifting
functions (``coarsen.ad.lift``) return these classes; the readers (segment steps, bounds,
the report, the IR printer) read their attributes.  Names in keys and lists are the real
ones; SymPy expressions keep the canonical symbols of ``coarsen.ad.canonical`` (``names``
maps them back).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: what ``differentiate(fn, plan=...)`` accepts: the cost model's choice per segment, or one
#: strategy forced on every lifted block segment (``coarsen.analysis.strategy``)
PLANS = ("auto", "recompute", "cut", "preaccumulate", "fine")


@dataclass(frozen=True)
class Fallback:
    """The segment is not lifted: ``reason`` says why (shown in the report)."""
    reason: str


@dataclass(frozen=True)
class VJPPath:
    """One path's reverse step as a single vector-Jacobian product (a segment with several
    differentiated outputs): ``cotangents``: {input: SymPy expression} of the outputs'
    adjoints, which appear in it as the symbols ``seeds`` names ({output: seed symbol name});
    ``jac``: the ``symbolic.LocalJacobian`` of the product (its replacements, operation
    counts); ``decisions`` as in ``LiftedSegment.paths``.  One reverse sweep over the segment's
    DAG, where the full Jacobian costs one sweep per output."""
    decisions: tuple
    cotangents: dict
    seeds: dict
    jac: Any


@dataclass(frozen=True)
class LiftedSegment:
    """A straight-line or branching segment differentiated symbolically.

    ``partials``: {(output, input): SymPy expression} (all paths merged, for the report and
    for which adjoints the step updates); ``jac``: the ``symbolic.LocalJacobian`` (operation
    counts; its replacements for a one-path segment); ``paths``: [(decisions, partials, jac)],
    the reverse step chooses a path by the recorded conditions (``decisions``: ((cond operand,
    flag), ...)); ``formula``: the outputs as formulas of the inputs, for people; ``names``:
    canonical -> real names; ``vjp_paths``: [VJPPath], one per path, for a segment with
    several differentiated outputs (empty otherwise); ``dags``: per path, (the SymPy
    assignments of the lifted DAG, the differentiated input symbols, the input symbols of the
    variables the segment reassigns, ``finals``: {symbol name: variable} for the variables
    assigned once on the path, whose value at the segment's end is that symbol's, ``held``:
    {variable: SymPy expression} for the single-use temporaries inlined into the DAG, which
    hold those values at the segment's end), for the cost model and the cut strategy
    (``coarsen.analysis.strategy``), and for preaccumulation to read instead of recompute."""
    partials: dict
    jac: Any
    paths: list
    formula: str | None = None
    names: dict = field(default_factory=dict)
    vjp_paths: list = field(default_factory=list)
    dags: list = field(default_factory=list)

    kind = "block"


@dataclass(frozen=True)
class ClosedFormLoop:
    """A ``for`` loop whose carried values have an exact closed form.

    ``carried``: the loop's carried variables (the segment's outputs); ``finals_n``: their
    final values in terms of the trip count ``n_symbol``; ``trip_count``: the trip count of
    the loop's bounds; ``partials`` and ``jac`` as for ``LiftedSegment`` (of the finals);
    ``singular``: SymPy conditions under which the closed form is not exact to differentiate,
    or loses digits near such a point (``coarsen.ad.lift._near``; the loop then runs, ``loop`` with its body ``singular_body``, a ``Segment`` lifted on its
    own); ``formula``: the closed form, for people."""
    partials: dict
    jac: Any
    carried: list
    finals: dict
    finals_n: dict
    n_symbol: Any
    trip_count: Any
    singular: list
    formula: str | None = None
    names: dict = field(default_factory=dict)
    loop: Any = None
    singular_body: Any = None

    kind = "loop"


@dataclass(frozen=True)
class ForwardLoop:
    """A loop whose Jacobian is preaccumulated by forward mode
    (``coarsen.analysis.forward_loops``): ``loop`` (the ``For``), ``lanes`` (its active scalar
    inputs, one tangent direction each), ``outputs`` (the active variables it assigns that
    later code reads), ``zero`` (variables it carries from a constant entry value: a zero
    tangent, no lane), ``tangents`` (per lane, {variable: its tangent's name}), ``partials``
    ({(output, input): tangent name}: d output / d input, the output's tangent in the
    input's lane, at the loop's end; absent where it is zero), ``formula`` (for people),
    ``reach`` (per lane, the variables whose tangent in it may be nonzero), ``restore`` (the
    variables it assigns whose values before it the reverse step puts back), ``in_trip`` (a
    statement of a serial reduction loop's trip: forward mode only where that loop is
    reversed trip by trip, the loop reversed as usual otherwise)."""
    loop: Any
    lanes: tuple
    outputs: tuple
    zero: tuple
    tangents: tuple
    partials: dict
    formula: str
    reach: tuple = ()
    restore: tuple = ()
    jac: Any = None
    names: dict = field(default_factory=dict)
    in_trip: bool = False

    kind = "forward loop"


Lifted = LiftedSegment | ClosedFormLoop | ForwardLoop


@dataclass(frozen=True)
class SegmentPlan:
    """One segment's plan: its source ``lines`` (first, last), the lifting ``result`` (None
    before lifting) and, for a loop body, why the loop got no closed form
    (``closed_form_fallback``); ``strategy``: how a lifted block is differentiated
    (``"recompute"``, ``"preaccumulate"``; ``"fine"`` with a ``Fallback`` result saying so;
    ``"closed form"`` for a loop) and ``costs``, the cost model's estimates
    (``coarsen.analysis.strategy.StrategyCosts``), None before planning."""
    lines: tuple[int, int]
    result: LiftedSegment | ClosedFormLoop | Fallback | None = None
    closed_form_fallback: str | None = None
    strategy: str | None = None
    costs: Any = None

    @property
    def lifted(self) -> Lifted | None:
        """The lifting result when the segment was lifted (symbolic step), else None."""
        r = self.result
        return r if isinstance(r, (LiftedSegment, ClosedFormLoop, ForwardLoop)) else None

    @property
    def kind(self) -> str:
        """``"loop"`` for a closed-form loop, ``"forward loop"`` for a loop preaccumulated by
        forward mode, else ``"block"``."""
        if isinstance(self.result, ForwardLoop):
            return ForwardLoop.kind
        return "loop" if isinstance(self.result, ClosedFormLoop) else "block"

    @property
    def fallback(self) -> str | None:
        return self.result.reason if isinstance(self.result, Fallback) else None
