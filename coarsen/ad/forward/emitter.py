"""The tangent emitter of forward mode: for each IR statement, the primal statement and its
tangent statement(s), in one pass, in the structure of the IR (no tape, no reverse sweep).

Requires: a typed ``ir.Function`` (with ``Segment`` nodes where segments were planned and
lifted for coarse forward mode, ``coarsen.ad.forward.segments``), the differentiated parameters, activity ``Facts``
(``coarsen.analysis.activity.analyze``: ``active`` is varied and useful, which is all forward
mode needs: a variable outside it never has a tangent that reaches the result) and, with
bounds checks, a ``BoundsPlan`` (``coarsen.analysis.bounds.plan_bounds``).
Guarantees: ``ForwardEmitter.block(stmts)`` returns the gast statements of the primal and the
tangents of a statement list: ``If``/``For``/``While`` are emitted as they stand, each
assignment to an active variable ``t`` is followed by ``t_dot = <tangent>``
(``coarsen.ad.forward.rules``; before it where ``t`` is also an operand and the tangent does not
need the new value, else the new value goes to a temporary first), each store into an active
array by the same store into its tangent (``x_dot[idx] = v_dot``, ``+= v_dot``; ``= 0.0`` for
a value without a tangent).  Tangents of inactive variables are a symbolic zero: never
emitted, and their terms are dropped.  An active variable assigned from operands without
tangents gets ``0.0`` (``np.zeros`` of its shape for arrays), since other assignments to it
carry one.  Tangent names are ``<name>_dot`` (``coarsen.ir.tangent_names``: a name already
used gets a number).  The emitter never changes the IR it reads; the variables it makes are
typed in ``self.types``, a copy of ``fn.types``.

It is a small emitter of its own, not the reverse ``Emitter``: the reverse one carries tapes,
recording, segments and the reverse sweep, and its ``assign``/``store`` return both sweeps.
The primitives' emitters (``Primitive.emit(emitter, stmt, values)``) ask an emitter for
``types``, ``f`` (facts: ``materialize``), ``helper``, ``is_arr``, ``nd``, ``val`` and
``index_node``; this class gives exactly those, for primal and tangent statements alike.
"""
from __future__ import annotations

from dataclasses import replace

import gast

from ...codegen import build as B
from ...codegen.build import X
from ...codegen.gast_queries import names_read
from ...ir.nodes import (Array, Assign, Const, For, If, Segment, Store, Var,
                         While)
from ...ir.primitives import err, primitive
from ...ir.tangent_names import tangent_names
from ..operands import OperandQueries
from .rules import tangent
from .segments import ForwardSegmentMixin


class ForwardEmitter(ForwardSegmentMixin, OperandQueries):
    def __init__(self, fn, wrt, facts, bounds=None, input_language=False, directions=0,
                 lanes=None, lane_active=None, supply=None):
        self.fn = fn
        # names from a fork of the module's supply, or from the supply of the emission this
        # one is part of (a loop run with tangent lanes, a custom rule in the reverse sweep)
        self.supply = fn.names.fork() if supply is None else supply
        self.input_language = input_language
        self.types = dict(fn.types)
        self.f = facts
        self.active = set(facts.active)
        self.wrt = list(wrt)
        self.bounds = bounds
        self.helpers = set()
        self.counter = 0
        self.made = set()
        # one lane of tangents per direction: ``<name>_dot`` for the single direction of
        # ``directions=0``, ``<name>_dot<k>_`` for lane k of a vector JVP (``directions=K``)
        self.directions = directions
        # ``lanes``, when given: the lanes' names, chosen by the caller (one dict per lane)
        taken = self.supply
        diff = self.active | set(self.wrt)
        if lanes is not None:
            self.lanes = [dict(lane) for lane in lanes]
        elif not directions:
            self.lanes = [tangent_names(fn, diff, used=taken)]
        else:
            self.lanes = [tangent_names(fn, diff, f"_dot{k}_", taken) for k in range(directions)]
        self.names = self.lanes[0]
        for lane in self.lanes:
            for v, d in lane.items():
                self.types[d] = self.types[v]
                self.made.add(d)
        # per lane, the variables whose tangent in that lane may be nonzero (None: every
        # active variable in every lane); a tangent outside its lane's set is a symbolic zero,
        # never assigned nor read (``coarsen.ad.reverse.forward_loops``: unit seeds)
        self.lane_active = None if lane_active is None else [set(a) for a in lane_active]
        self.tangent_statements = 0     # tangent assignments and stores emitted
        self.zero_tangents = 0          # assignments to active variables from zero tangents
        self.loop_notes = []            # (line, how) of each prange loop

    # ------------------------------------------------------------------ names and operands
    def dot(self, name):
        """The tangent of ``name`` in the current lane."""
        return self.names[name]

    def per_lane(self, make):
        """``make()`` once per lane, with ``dot`` naming that lane's tangents: the tangent
        code of one statement for every direction (a list, lane 0 first)."""
        out = []
        union = self.active
        try:
            for j, lane in enumerate(self.lanes):
                self.names = lane
                if self.lane_active is not None:
                    self.active = self.lane_active[j]
                out.append(make())
        finally:
            self.names = self.lanes[0]
            self.active = union
        return out

    def fresh(self, base):
        self.counter += 1
        while f"{base}{self.counter}" in self.supply:
            self.counter += 1
        name = self.supply.take(f"{base}{self.counter}", "forward")
        self.made.add(name)
        return name

    def helper(self, name):
        self.helpers.add(name)
        return name

    def val(self, operand):
        if isinstance(operand, Var):
            return X(B.name(operand.name), self.is_arr(operand))
        return X(B.const(operand.value))

    # ------------------------------------------------------------------ expressions
    def primal(self, s):
        """The primal expression of ``s``: its primitive's emitter."""
        return primitive(s.op).emit(self, s, [self.val(a) for a in s.args])

    def substituted(self, s, subs):
        """The primitive's emitter on ``s`` with operands replaced (``{position: Var}``): a
        linear primitive applied to tangents."""
        s2 = replace(s, args=tuple(subs.get(p, a) for p, a in enumerate(s.args)))
        return primitive(s.op).emit(self, s2, [self.val(a) for a in s2.args])

    def zero_of(self, name, out):
        if isinstance(self.types.get(name), Array):
            return B.call("np.zeros_like", B.ex(out))
        return B.const(0.0)

    # ------------------------------------------------------------------ statements
    def block(self, stmts):
        out = []
        for s in stmts:
            code = self.stmt(s)
            if code:
                code[0]._coarsen_loc = s.loc
            out.extend(code)
        return out

    def stmt(self, s):
        if isinstance(s, Assign):
            return self.assign(s)
        if isinstance(s, Store):
            return self.store(s)
        if isinstance(s, If):
            return [B.if_(self.val(s.cond), self.block(s.body), self.block(s.orelse))]
        if isinstance(s, For):
            if s.parallel:
                self.loop_notes.append((s.loc.lineno, "serially, as range (forward mode)"))
            body = self.block(s.body)
            return self.hoisted_checks(s) + [B.for_range(s.var, self.range_args(s), body)]
        if isinstance(s, While):
            test = self.block(s.test_body)
            stop = B.if_(B.ex(X(gast.UnaryOp(op=gast.Not(), operand=B.ex(self.val(s.test))))),
                         [B.break_()])
            return [B.while_(B.const(True), test + [stop] + self.block(s.body))]
        if isinstance(s, Segment):
            return self.segment(s)
        raise TypeError(s)

    def range_args(self, s):
        start, stop, step = s.start, s.stop, s.step
        if isinstance(step, Const) and step.value == 1:
            if isinstance(start, Const) and start.value == 0:
                return [self.val(stop)]
            return [self.val(start), self.val(stop)]
        return [self.val(start), self.val(stop), self.val(step)]

    def assign(self, s):
        t = s.target
        code = self.index_checks(s)
        if t not in self.active:
            return code + [B.assign(t, self.primal(s))]
        arr = isinstance(self.types.get(t), Array)
        self.tangent_statements += 1
        if not any(isinstance(a, Var) and a.name == t for a in s.args):
            code.append(B.assign(t, self.primal(s)))
            return code + self._tangent_assigns(s, t, X(B.name(t), arr))
        # t is also an operand: the tangent reads the operands' old values
        tmp = self.fresh("_new")
        tangents = self._tangent_assigns(s, t, X(B.name(tmp), arr))
        if tmp not in names_read(tangents):
            self.made.discard(tmp)
            return code + tangents + [B.assign(t, self.primal(s))]
        self.types[tmp] = self.types[t]
        return code + [B.assign(tmp, self.primal(s))] + tangents + [B.assign(t, B.name(tmp))]

    def _tangent_assigns(self, s, t, out):
        """``t_dot = <tangent of s>`` in every lane (``out``: the primal result)."""
        exprs = self.per_lane(lambda: tangent(self, s, out))
        if self.lane_active is not None:
            # a lane where t's tangent is a symbolic zero assigns nothing
            return [B.assign(lane[t], self.zero_of(t, out) if e is None else e)
                    for lane, e, act in zip(self.lanes, exprs, self.lane_active) if t in act]
        if exprs[0] is None:
            self.zero_tangents += 1
            exprs = [self.zero_of(t, out) for _ in self.lanes]
        return [B.assign(lane[t], expr) for lane, expr in zip(self.lanes, exprs)]

    def _store_code(self, array, s, value):
        region = B.subscript(array, self.index_node(s.index))
        if s.aug is None:
            return B.assign(region, value)
        op = "+" if s.aug == "add" else "-"
        if self.bounds is not None and isinstance(value, X) and value.array:
            # as the reverse sweep does: Numba's a[s] += v does not check v's shape
            return B.assign(region, B.binop(B.subscript(array, self.index_node(s.index)), op, value))
        return B.augassign(region, op, value)

    def store(self, s):
        if self.lane_active is not None:
            raise err(s, "internal: forward mode with per-lane activity got a store")
        a = s.array
        code = self.index_checks(s) + [self._store_code(a, s, self.val(s.value))]
        if a not in self.active:
            return code
        v = s.value
        if isinstance(v, Var) and v.name in self.active:
            self.tangent_statements += 1
            code += self.per_lane(lambda: self._store_code(self.dot(a), s,
                                                           self.val(Var(self.dot(v.name)))))
        elif s.aug is None:
            self.tangent_statements += 1
            code += self.per_lane(lambda: self._store_code(self.dot(a), s, X(B.const(0.0))))
        return code
