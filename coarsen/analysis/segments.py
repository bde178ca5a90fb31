"""Segment planning: which statements are differentiated together, symbolically.

Requires: a typed ``ir.Function`` and its activity ``Facts``.
Guarantees: every maximal run of *liftable* statements in a block (scalar arithmetic,
``math`` functions, comparisons, and ``if`` statements made only of those) that holds at least
two active operations becomes one ``Segment`` (segment of interest).  Statements the run needs
but cannot lift (*passengers*: inactive scalar operations such as index arithmetic, and
element reads ``a[i]``) ride along when they read nothing the run computes; they are hoisted to
the front of the segment, in their order, which keeps Python's semantics because they depend
only on values from before the segment and on earlier passengers (``u[t, i + 1]`` reads the
passenger ``i + 1``: a stencil line is one segment), and a passenger assigns no name that the
run has assigned or read before it, nor one that an earlier passenger assigns.  The reverse
sweep then takes one preaccumulated step per segment instead of one adjoint step per
operation, and the tape holds only the segment's inputs.
Segments are cut at statements that are not liftable (array operations, stores, loops):
values used more than once inside a segment stay shared symbols when lifted, so there is no
expression swell to cut for; the symbolic stage's size guard and time budget bound the rest.
"""
from __future__ import annotations

from ..ir.nodes import Assign, For, If, Scalar, Segment, Store, Var, While, uses, walk
from ..ir.primitives import REGISTRY, ops_where
from .plans import SegmentPlan

LIFT_OPS = ops_where(lambda p: p.sympy is not None)     # with a SymPy counterpart
BOOL_OPS = ops_where(lambda p: p.boolean)
PASSENGER_OPS = ops_where(lambda p: p.passenger)       # bookkeeping a segment carries along


class Planner:
    def __init__(self, fn, facts):
        self.fn = fn
        self.types = fn.types
        self.f = facts
        self.segments = []

    def scalar(self, operand):
        if isinstance(operand, Var):
            return isinstance(self.types.get(operand.name), Scalar)
        return True

    def lifted(self, s):
        """A statement the segment differentiates symbolically."""
        if isinstance(s, Assign):
            if s.op not in LIFT_OPS or not isinstance(self.types.get(s.target), Scalar):
                return False
            if not all(self.scalar(a) for a in s.args):
                return False
            t = self.types[s.target].kind
            if s.op in BOOL_OPS:
                return t == "bool"
            # integers ride as passengers (index arithmetic), never lifted
            return t == "f64"
        if isinstance(s, If):
            if not self.scalar(s.cond):
                return False
            return all(self.lifted(x) for x in s.body + s.orelse) and (s.body or s.orelse)
        return False

    def passenger(self, s, run_defs, run_reads, passenger_defs=frozenset()):
        """A statement that may ride along: it reads nothing the run computes (it may read what
        an earlier passenger computes: passengers keep their order when hoisted), and assigns
        nothing the run or an earlier passenger assigns, nor anything the run reads."""
        if not isinstance(s, Assign) or s.op not in PASSENGER_OPS:
            return False
        if not isinstance(self.types.get(s.target), Scalar):
            return False
        if s.target in self.f.active and not REGISTRY[s.op].indexing:
            return False
        if REGISTRY[s.op].indexing and s.target in self.f.active and not isinstance(self.types.get(s.target), Scalar):
            return False
        for u in uses(s):
            if isinstance(u, Var) and u.name in run_defs:
                return False
        if s.target in run_defs or s.target in run_reads or s.target in passenger_defs:
            return False
        return True

    def active_ops(self, stmts):
        n = 0
        for s in walk(stmts):
            if isinstance(s, Assign) and s.target in self.f.active and not REGISTRY[s.op].plain_copy:
                n += 1
        return n

    def plan(self):
        self.fn.body = self.block(self.fn.body)
        return self.segments

    def block(self, stmts, whole_loop_body=False):
        out = []
        run, passengers = [], []
        seq = []            # run and passengers in program order
        defs, reads, pdefs = set(), set(), set()     # the run's defs and reads, the passengers' defs

        def flush():
            nonlocal run, passengers, seq, defs, reads, pdefs
            if run:
                whole = whole_loop_body and not out and len(run) + len(passengers) == len(stmts)
                out.extend(self.make(run, passengers, seq, min_ops=1 if whole else 2))
            else:
                out.extend(passengers)
            run, passengers, seq, defs, reads, pdefs = [], [], [], set(), set(), set()

        for s in stmts:
            if self.lifted(s) and not (isinstance(s, Assign) and self.types[s.target].kind == "bool"
                                       and s.target in defs):
                # (a condition assigned twice in one segment could not choose its path twice)
                run.append(s)
                seq.append(s)
                for st in walk([s]):
                    if isinstance(st, Assign):
                        defs.add(st.target)
                    for u in _reads(st):
                        reads.add(u)
                continue
            if (run or passengers) and self.passenger(s, defs, reads, pdefs):
                passengers.append(s)
                seq.append(s)
                pdefs.add(s.target)
                continue
            flush()
            if self.passenger(s, set(), set()):
                passengers.append(s)
                seq.append(s)
                pdefs.add(s.target)
                continue
            if isinstance(s, If):
                s.body = self.block(s.body)
                s.orelse = self.block(s.orelse)
            elif isinstance(s, For):
                # a loop body that is one liftable run is a segment even with one operation:
                # the loop may then have a closed form (p *= a)
                s.body = self.block(s.body, whole_loop_body=True)
            elif isinstance(s, While):
                s.body = self.block(s.body)
            out.append(s)
        flush()
        return out

    def make(self, run, passengers, seq, min_ops=2):
        if self.active_ops(run) < min_ops:
            # no segment: the statements stay in program order (hoisting passengers is for
            # segments only; it would split a loop's header from its loop for nothing)
            return list(seq)
        inside = {id(x) for x in walk(run)} | {id(x) for x in passengers}
        defined = []        # in order of first definition: no order may depend on the names
        for st in walk(run):
            if isinstance(st, Assign) and st.target not in defined:
                defined.append(st.target)
        used_outside = set()
        for st in walk(self.fn.body):
            if id(st) in inside:
                continue
            for u in _reads(st):
                used_outside.add(u)
        inputs = []
        seen = set()
        for st in walk(run):
            for u in _reads(st):
                if u not in inputs and u not in seen:
                    inputs.append(u)
            if isinstance(st, Assign):
                seen.add(st.target)
        # live out: read after the segment, or read by it before being assigned (in a loop, the
        # next trip reads the value this trip leaves: a loop-carried value)
        outputs = [v for v in defined if v in used_outside or v in inputs or v == self.fn.result]
        loc = run[0].loc
        lines = sorted({st.loc.lineno for st in walk(run)})
        seg = Segment(passengers + run, loc, len(self.segments) + 1, passengers=list(passengers),
                      inputs=inputs, outputs=outputs, plan=SegmentPlan((lines[0], lines[-1])))
        self.segments.append(seg)
        return [seg]


def _reads(st):
    if isinstance(st, (Assign, Store, If, For, While)):
        return [u.name for u in uses(st) if isinstance(u, Var)]
    return []


def plan_segments(fn, facts):
    return Planner(fn, facts).plan()
