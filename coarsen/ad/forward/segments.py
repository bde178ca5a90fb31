"""Coarse forward mode: tangents pushed through the local Jacobians of lifted segments.

Requires: a ``ForwardEmitter`` (``coarsen.ad.forward.emitter``) over a function whose segments
were planned and lifted (``coarsen.ad.lift_planned``), with ``lifted_names`` set to their
canonical -> real names.
Guarantees: ``segment(seg)`` returns the gast statements of one segment with its tangents:

* a loop in closed form (``ClosedFormLoop``): the tangents of its carried values from the
  closed form's partials, evaluated from the values on entry (before the closed form
  overwrites them), then the closed form itself; at the closed form's singular points the
  loop runs instead, its body coarse in turn.  The tangent costs no trip of the loop: closed
  forms give closed-form tangents;
* a lifted block (``LiftedSegment``) where that is clearly cheaper than fine forward mode
  (``cheaper_block``; else fine-grained): the passengers (element reads, index arithmetic) as
  fine forward mode emits them, the lifted statements as primal code only, then per lane
  ``o_dot = sum_i d o / d i * i_dot`` for each active output: the path's partials (chosen by
  the conditions as they stand at the segment's end, as the reverse step chooses), read from
  the values the segment left in variables where one holds them (its ``finals`` and held
  temporaries) and evaluated from copies of the entry values it overwrites otherwise.  The
  partials are computed once and shared by every lane of a vector JVP;
* anything else (a ``Fallback``): the statements, fine-grained.

Every output's new tangent is computed before any is assigned, so an output that is also an
input is read at its entry tangent.  The IR is not modified.
"""
from __future__ import annotations

import gast
import sympy

from ...analysis.plans import ClosedFormLoop, LiftedSegment
from ...analysis.strategy import needed
from ...ir.nodes import Assign, If, Scalar, walk
from ...codegen import build as B
from ...codegen.build import X
from ..canonical import real_name
from ..segment_code import closed_form_values, held_replacements, sym_to_gast
from .rules import check_refused


#: a lifted block's tangents go through its partials when their estimated cost is at most
#: this fraction of fine forward mode's.  Forward mode's tangent of a block already follows
#: its narrowest cut (a difference of two element reads is one tangent, where the local
#: Jacobian has two partials), so partials pay off only where SymPy simplified the block;
#: measured at size m on the apps (lennard_jones 106 against 70 us, lotka_volterra 38
#: against 25 us, the rest within 3%, also with 4 directions), the partials were never faster
COARSE_BLOCK_RATIO = 0.5
#: the weights of ``op_cost``: a division, a power, a call (``math.exp``...); others cost 1
DIV_COST, POW_COST, CALL_COST = 4, 8, 15


def op_cost(stmts):
    """The estimated arithmetic cost of gast statements: each operator 1, a division
    ``DIV_COST``, a power ``POW_COST``, a call ``CALL_COST`` (conversions ``float``/``int``
    free)."""
    cost = 0
    for st in stmts:
        for n in gast.walk(st):
            if isinstance(n, gast.BinOp):
                cost += DIV_COST if isinstance(n.op, gast.Div) else \
                    POW_COST if isinstance(n.op, gast.Pow) else 1
            elif isinstance(n, (gast.UnaryOp, gast.Compare, gast.BoolOp)):
                cost += 1
            elif isinstance(n, gast.Call) and not (isinstance(n.func, gast.Name)
                                                   and n.func.id in ("float", "int")):
                cost += CALL_COST
    return cost


class ForwardSegmentMixin:
    lifted_names = {}           # canonical -> real names of the lifted segments
    coarse_blocks = 0           # lifted blocks whose tangents went through their partials

    def segment(self, seg):
        lifted = seg.plan.lifted
        for st in walk(seg.stmts):
            if isinstance(st, Assign):
                check_refused(self, st)
        if isinstance(lifted, ClosedFormLoop):
            return self.closed_form_loop(seg)
        if isinstance(lifted, LiftedSegment) and lifted.paths:
            return self.cheaper_block(seg)
        return self.block(seg.stmts)

    def cheaper_block(self, seg):
        """A lifted block's code through its partials where that is clearly cheaper than
        fine forward mode's (``COARSE_BLOCK_RATIO``, by ``op_cost`` of the emitted code);
        else fine-grained.  Both are emitted; the one not chosen leaves unused names in
        ``made`` and ``types`` and numbers skipped in temporaries' names, nothing else."""
        counts = (self.tangent_statements, self.zero_tangents)
        coarse, shared = self.lifted_block(seg)
        coarse_counts = (self.tangent_statements, self.zero_tangents)
        self.tangent_statements, self.zero_tangents = counts
        fine = self.block(seg.stmts)
        primal = op_cost(self._primal([st for st in seg.stmts
                                       if not any(st is p for p in seg.passengers)]))
        # per lane: the partials are shared by the lanes, the rest is once per lane; the
        # choice does not depend on the number of lanes (lane k of a vector JVP is the
        # single-direction JVP, bit for bit)
        lanes = len(self.lanes)
        per_lane = (op_cost(coarse) - primal - shared) / lanes
        if shared + per_lane <= COARSE_BLOCK_RATIO * (op_cost(fine) - primal) / lanes:
            self.tangent_statements, self.zero_tangents = coarse_counts
            self.coarse_blocks += 1
            return coarse
        return fine

    # ------------------------------------------------------------------ printing
    def sym_expr(self, expr, subst=None):
        """A SymPy expression of a lifted segment as a gast expression (``sym_to_gast``)."""
        return sym_to_gast(expr, self.lifted_names, subst)

    def _replacements(self, jac, exprs, subst, reads):
        """The assignments of the replacements of ``jac`` that ``exprs`` need, in order, those
        in ``reads`` ({symbol name: variable}) read from their variables (into ``subst``)."""
        keep, stopped, _ = needed(jac, exprs, set(reads))
        for name in stopped:
            subst[name] = B.name(reads[name])
        code = []
        for sym, e in keep:
            name = real_name(sym.name, self.lifted_names)
            self.made.add(name)
            self.types.setdefault(name, Scalar("f64"))
            code.append(B.assign(name, self.sym_expr(e, subst)))
        return code

    def _push_forward(self, partials, outputs, subst):
        """Per lane, the new tangents of ``outputs`` (``sum d o/d i * i_dot``) into
        temporaries, then assigned: [statements]."""
        compute, assign = [], []
        exprs = {k: X(self.sym_expr(e, subst)) for k, e in partials.items()}

        def lane():
            for o in outputs:
                if o not in self.active:
                    continue
                total = None
                for (o2, i), p in exprs.items():
                    if o2 != o or i not in self.active:
                        continue
                    if isinstance(p.node, gast.Constant) and p.node.value == 0:
                        continue
                    term = X(B.name(self.dot(i)))
                    if not (isinstance(p.node, gast.Constant) and p.node.value == 1):
                        term = p * term
                    total = term if total is None else total + term
                tmp = self.fresh("_tan")
                self.types[tmp] = self.types[o]
                compute.append(B.assign(tmp, B.ex(total) if total is not None else B.const(0.0)))
                assign.append(B.assign(self.dot(o), B.name(tmp)))
                self.tangent_statements += 1
        self.per_lane(lane)
        return compute + assign

    # ------------------------------------------------------------------ closed forms
    def closed_form_loop(self, seg):
        """A loop in closed form: the tangents from the entry values, then the closed form."""
        info = seg.plan.lifted
        partials = {k: e for k, e in info.partials.items() if k[0] in self.active}
        code = self._replacements(info.jac, list(partials.values()), {}, {})
        code += self._push_forward(partials, info.carried, {})
        # (the tangents, from the entry values, come before the closed form overwrites them)
        values, tmps = closed_form_values(self, seg)
        body = code + values + [B.assign(v, B.name(t)) for v, t in tmps]
        body[0].coarsen_comment = f"loop (line {seg.loc.lineno}) in closed form, with its " + \
            "tangents: " + "; ".join((info.formula or "").splitlines())
        if not info.singular:
            return body
        guard = self.sym_expr(sympy.Or(*info.singular))
        loop = self.block(seg.stmts)
        out = [B.if_(guard, loop, body)]
        out[0].coarsen_comment = "exact closed form, except at its singular points (the loop)"
        return out

    # ------------------------------------------------------------------ lifted blocks
    def lifted_block(self, seg):
        """Passengers, the lifted statements, then the tangents through the path's partials:
        ``(statements, op_cost of the partials, which every lane shares)``."""
        info = seg.plan.lifted
        passengers = [st for st in seg.stmts if any(st is p for p in seg.passengers)]
        lifted = [st for st in seg.stmts if not any(st is p for p in seg.passengers)]
        code = self.block(passengers)
        # the entry values the partials read of the variables the segment reassigns
        subst, before = {}, []
        for dag in info.dags:
            for sym in dag[2]:
                if sym.name in subst:
                    continue
                entry = self.fresh("_entry")
                self.types[entry] = Scalar("f64")
                before.append(B.assign(entry, B.name(real_name(sym.name, self.lifted_names))))
                subst[sym.name] = B.name(entry)
        primal = self._primal(lifted)
        branches, shared = [], 0
        for k, (decisions, partials, jac) in enumerate(info.paths):
            partials = {key: e for key, e in partials.items()
                        if key[0] in self.active and key[1] in self.active}
            path_subst = dict(subst)
            finals, held = (info.dags[k][3], info.dags[k][4]) if k < len(info.dags) else ({}, {})
            reads = dict(finals)
            if held:
                reads.update(held_replacements(jac, held, reads))
            body = self._replacements(jac, list(partials.values()), path_subst, reads)
            shared += op_cost(body)
            body += self._push_forward(partials, seg.outputs, path_subst)
            branches.append((decisions, body))
        tangents = B.path_chain(branches, self.val)
        used = {n.id for st in tangents for n in gast.walk(st) if isinstance(n, gast.Name)}
        before = [b for b in before if b.targets[0].id in used]
        if tangents:
            a, b = seg.plan.lines
            where = f"line {a}" if a == b else f"lines {a}-{b}"
            tangents[0].coarsen_comment = (f"segment {seg.index} ({where}), tangents through its "
                                           f"partials: {info.formula or ''}")
        return code + before + primal + tangents, shared

    def _primal(self, stmts):
        out = []
        for s in stmts:
            if isinstance(s, Assign):
                code = self.index_checks(s) + [B.assign(s.target, self.primal(s))]
            elif isinstance(s, If):
                code = [B.if_(self.val(s.cond), self._primal(s.body), self._primal(s.orelse))]
            else:
                raise TypeError(s)
            code[0]._coarsen_loc = s.loc
            out += code
        return out
