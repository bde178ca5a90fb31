"""Segment steps: the forward code of a lifted segment (with its tape pushes) and its
reverse step, by the strategy its plan names (``coarsen.analysis.strategy``): ``recompute``
(the step re-evaluates the segment from its entry values, then ``in_bar += d out/d in *
out_bar`` per path, or one vector-Jacobian product for several outputs), ``cut`` (the same, the
expensive values read where the segment left them or evaluated ahead and taped),
``preaccumulate`` (the partials evaluated in the forward sweep after the segment's statements,
taped, multiplied in the reverse step); loops in closed form (with the loop kept for the
closed form's singular points).

Requires: an emitter with the tape and adjoint methods; segments lifted by ``coarsen.ad.lift``
(their partials and local Jacobians in SymPy, under canonical names, ``coarsen.ad.canonical``)
and planned (``seg.plan.strategy``; None is recompute).
Guarantees: ``segment(seg)`` returns ``(forward code, reverse code)``, and records which primal
variables the step reads and when (on entry, after the passengers, at the end); code a
strategy adds to the forward sweep pushes to the float tape after the segment's own pushes,
and its reverse code pops before theirs.
"""
from __future__ import annotations

import gast
import sympy

from ... import symbolic as S
from ...analysis.activity import intact
from ...analysis.recording import shape_key
from ...analysis.plans import ClosedFormLoop, ForwardLoop
from ...analysis.strategy import cut_plan, cut_symbols, distinct_partials, needed, steps
from ...codegen import build as B
from ...codegen.build import X
from ...codegen.gast_queries import names_read, shape_only
from .control import loads
from ...ir.nodes import (Assign, Scalar, walk)
from ..canonical import real_name
from ..segment_code import closed_form_values, held_calls, held_replacements, sym_to_gast
from .tapes import FP, FT


class SegmentMixin:
    cut_copies = {}             # variable -> the local a cut step reads its end value from
    cut_strategy = None         # the cost weights while emitting a cut step, else None
    weights = None              # the cost model's weights (the driver sets them)
    step_rereads = {}           # element reads segment steps re-read (recording.rereads_for_steps)
    precomputed = {}            # a cut step's temporaries evaluated ahead: symbol name -> local
    path_cuts = None            # per path, the cut step's cut symbols (strategy.cut_plan)
    current_cut = None          # those of the path being emitted

    # ------------------------------------------------------------------ segments
    def fwd_pops(self, s):
        """Forward code of a lifted statement (with its tape pushes) and the pops that undo it:
        float pops (run before the segment's step, which needs entry values) and condition pops
        (run after it: the step chooses its path by the conditions' values in the segment)."""
        if isinstance(s, Assign):
            fwd, fpops, cpops = self.index_checks(s), [], []
            if self.taped_at(s):
                fwd += self.push(s.target)
                (fpops if self.types[s.target].kind == "f64" else cpops).extend(self.pop(s.target))
            fwd.append(B.assign(s.target, self.primal(s)))
            return fwd, fpops, cpops
        fb, fpb, cpb = self.fwd_pops_block(s.body)
        fo, fpo, cpo = self.fwd_pops_block(s.orelse)
        fwd = [B.if_(self.val(s.cond), fb, fo)]

        def branch(pb, po):
            if not (pb or po):
                return []
            if pb:
                return [B.if_(self.val(s.cond), pb, po)]
            return [B.if_(B.ex(X(gast.UnaryOp(op=gast.Not(), operand=B.ex(self.val(s.cond))))), po)]
        return fwd, branch(fpb, fpo), branch(cpb, cpo)

    def fwd_pops_block(self, stmts):
        fwd, fpops, cpops = [], [], []
        for st in stmts:
            f, fp, cp = self.fwd_pops(st)
            if f:
                f[0]._coarsen_loc = st.loc
            fwd += f
            fpops[:0] = fp
            cpops[:0] = cp
        return fwd, fpops, cpops

    def segment(self, seg):
        lifted = seg.plan.lifted
        if lifted is None:
            return self.block(seg.stmts)
        if isinstance(lifted, ClosedFormLoop):
            return self.loop_segment(seg)
        if isinstance(lifted, ForwardLoop):
            if lifted.in_trip and not (self.in_fused and self.nest_ok):
                # its reduction loop is reversed as usual (or in parallel): later trips
                # would overwrite the tangents before the reverse sweep read them
                return self.block(seg.stmts)
            return self.forward_loop(seg)
        fwd, pass_rev = [], []
        for st in seg.passengers:
            f, r = self.stmt(st)
            self.record_reads(st, r)
            if f:
                f[0]._coarsen_loc = st.loc
            fwd += f
            pass_rev[:0] = r
        lifted = [st for st in seg.stmts if not any(st is p for p in seg.passengers)]
        lf, fpops, cpops = self.fwd_pops_block(lifted)
        self.cut_copies = {}
        self.precomputed = {}
        self.cut_strategy = self.weights if seg.plan.strategy == "cut" else None
        self.path_cuts = cut_plan(seg.plan.lifted, self.depth > 0, self.weights) \
            if self.cut_strategy is not None else None
        if self.path_cuts is not None and len(self.path_cuts) == 1 and \
                any(n not in self.finals_of(seg.plan.lifted, 0) for n in self.path_cuts[0]):
            # the cut temporaries, evaluated right after the segment's statements and taped
            before, after, partial_pops = self.precompute(seg, self.path_cuts[0])
            fwd += before + lf + after
            step = self.segment_step(seg)
        elif seg.plan.strategy == "preaccumulate":
            # the partials in the forward sweep, after the segment's statements (from the
            # values they computed), taped in a loop; the reverse step multiplies
            before, after, partial_pops, local = self.preaccumulate(seg)
            fwd += before + lf + after
            step = self.segment_step(seg, local)
        else:
            fwd += lf
            partial_pops = []
            step = self.segment_step(seg)
        self.recompute_ints(step + fpops + cpops)
        # (a recomputable integer assigned before an enclosing loop's reverse is read there,
        # not here: ``loads`` leaves it out, as for every other statement)
        names = {n for n in loads(step + fpops + cpops) if n in self.types}
        shapes = shape_only(step + fpops + cpops, names)
        passenger_defs = {p.target for p in seg.passengers}
        cond_defs = {st.target for st in walk(lifted)
                     if isinstance(st, Assign) and self.types[st.target].kind == "bool"}
        for n in names:
            # when the step reads each value: conditions as they stand at the segment's end,
            # passengers' results after the passengers (before the lifted statements, which
            # may reassign them), everything else on entry; an array's shape alone is keyed
            # apart (no store needs to save elements for it)
            key = shape_key(n) if n in shapes else n
            if n in cond_defs:
                self.reads_at.setdefault(key, []).append(("end", seg))
            elif n in passenger_defs:
                self.reads_at.setdefault(key, []).append(("mid", seg))
            else:
                self.reads_at.setdefault(key, []).append(seg)
        # a cut step reads values as they stand at the segment's end: copied before the pops
        # restore anything (at the reverse point of the segment's end, every variable the
        # reverse sweep reads there holds its forward value)
        copies = [B.assign(c, B.name(v)) for v, c in self.cut_copies.items()]
        for v in self.cut_copies:
            self.reads_at.setdefault(v, []).append(("end", seg))
            # a value assigned in one branch of the segment is copied on every path (the
            # copies come before the step chooses its path): defined from the prologue on
            self.extra_inits.append((v, self.types[v]))
        self.cut_strategy = self.path_cuts = self.current_cut = None
        self.precomputed = {}
        # (the partials were pushed after the segment's statements: popped before theirs)
        return fwd, copies + partial_pops + fpops + step + cpops + pass_rev

    def loop_segment(self, seg):
        """A loop replaced by the exact closed form of its carried values."""
        info = seg.plan.lifted
        self.cut_strategy = self.path_cuts = self.current_cut = None
        self.precomputed = {}
        fwd, tmps = closed_form_values(self, seg)
        pops = []
        inner = {}
        for st in walk(seg.stmts):
            if isinstance(st, Assign):
                inner[st.target] = inner.get(st.target, False) or self.taped_at(st)
        for v, t in tmps:
            if inner.get(v):
                fwd += self.push(v)
                pops[:0] = self.pop(v)
            fwd.append(B.assign(v, B.name(t)))
        fwd[0].coarsen_comment = f"loop (line {seg.loc.lineno}) in closed form: " + \
            "; ".join(info.formula.splitlines())
        step = self.recompute_ints(self.segment_step(seg))
        names = {nm for nm in names_read(step + pops) if nm in self.types}
        rev = pops + step
        if info.singular:
            # at the closed form's singular points the loop runs, one coarse step per trip
            guard = self.sym_expr(sympy.Or(*info.singular))
            loop_fwd, loop_rev = self.stmt(info.loop)
            if set(inner) & set(names_read([guard])):       # inner: the loop's assignments
                # the guard reads an entry value the loop overwrites: the reverse sweep, which
                # reaches this point with the exit values, takes the forward sweep's decision
                # from a flag (saved like a while loop's trip count when the flag is
                # overwritten before the reverse sweep reads it)
                fwd, rev, guard_pre, guard_post = self.guard_flag(guard, loop_fwd, fwd, loop_rev, rev)
            else:
                names |= {nm for nm in names_read([guard]) if nm in self.types}
                fwd = [B.if_(guard, loop_fwd, fwd)]
                rev = [B.if_(self.sym_expr(sympy.Or(*info.singular)), loop_rev or [gast.Pass()], rev)]
                guard_pre = guard_post = []
            fwd[0].coarsen_comment = "exact closed form, except at its singular points (the loop)"
            fwd = guard_pre + fwd
            rev = rev + guard_post
        for nm in names:
            self.reads_at.setdefault(nm, []).append(seg)
        return fwd, rev

    def guard_flag(self, guard, loop_fwd, closed_fwd, loop_rev, closed_rev):
        """A closed form's singular-point guard evaluated once, into a fresh flag that both
        sweeps branch on: ``(fwd, rev, before fwd, after rev)``. Inside a loop the flag's
        previous value is pushed before it is set and popped after its reverse branch."""
        flag, pre, post = self.saved_scalar("_near", "bool")
        self.made.add(flag)
        if not pre:
            self.extra_inits.append((flag, Scalar("bool")))     # defined on every path
        pre.append(B.assign(flag, guard))
        fwd = [B.if_(B.name(flag), loop_fwd, closed_fwd)]
        rev = [B.if_(B.name(flag), loop_rev or [gast.Pass()], closed_rev)]
        return fwd, rev, pre, post

    def sym_expr(self, expr, subst=None):
        """A SymPy expression as a gast expression (recomputable element reads re-read;
        ``subst``: {symbol name: gast expression} printed in place of those symbols)."""
        node = sym_to_gast(expr, self.lifted_names, subst)
        if self.step_rereads:
            rec = self.step_rereads
            emitter = self

            class Sub(gast.NodeTransformer):
                def visit_Name(self, n):
                    if isinstance(n.ctx, gast.Load) and n.id in rec:
                        st = rec[n.id]
                        return B.subscript(st.args[0].name, emitter.index_node(st.index))
                    return n
            node = Sub().visit(node)
        return node

    def entry_copies(self, carried, subst):
        """Copies of the entry values of the inputs a segment overwrites (for code after its
        statements): the assignments, ``subst`` filled with their names."""
        before = []
        for sym in carried:
            entry = self.fresh("_entry")
            self.made.add(entry)
            self.extra_inits.append((entry, Scalar("f64")))
            before.append(B.assign(entry, B.name(real_name(sym.name, self.lifted_names))))
            subst[sym.name] = B.name(entry)
        return before

    def precompute(self, seg, cut):
        """Forward code evaluating a one-path cut step's temporaries (the cut symbols no
        variable holds) right after the segment's statements, from the values they computed,
        into locals (``self.precomputed``) taped inside a loop; and the pops restoring them."""
        lifted = seg.plan.lifted
        jac, _, _, finals, _ = steps(lifted)[0]
        _, _, carried, _, _ = lifted.dags[0]
        order = [(sym, e) for sym, e in jac.replacements if sym.name in cut and sym.name not in finals]
        subst = {}
        before = self.entry_copies(carried, subst)
        exprs = [e for _, e in order]
        deps = cut_symbols(jac, exprs, finals, False, self.weights)
        code = self.needed_replacements(jac, exprs, subst, {n: finals[n] for n in deps}, copy=False)
        pops = []
        for sym, e in order:
            name = self.fresh("_pa")
            self.made.add(name)
            self.extra_inits.append((name, Scalar("f64")))
            code.append(B.assign(name, self.sym_expr(e, subst)))
            subst[sym.name] = B.name(name)
            self.precomputed[sym.name] = name
            if self.depth > 0:
                code += self.push_float(B.name(name))
                pops[:0] = [B.augassign(FP, "-", 1), B.assign(name, B.subscript(FT, B.name(FP)))]
        used = names_read(code)
        before = [b for b in before if b.targets[0].id in used]
        if code:
            code[0].coarsen_comment = f"segment {seg.index}: its expensive temporaries, for the cut step"
        return before, code, pops

    def preaccumulate(self, seg):
        """Forward code evaluating a one-path segment's partials into locals (pushed to the
        tape inside a loop), the pops that restore them, and {(output, input): symbol of the
        local, or the constant partial itself}."""
        lifted = seg.plan.lifted
        ((_, partials, jac),) = lifted.paths
        _, _, carried, finals, held = lifted.dags[0]
        keys = [k for k in partials if k[0] in self.active and k[1] in self.active]
        # the calls the primal's statements already made (exp, sin...) read from their results
        jac, partials, called = held_calls(jac, partials, held, seg.index)
        exprs = [partials[k] for k in keys]
        # evaluated after the segment's statements, reading the values they computed (every
        # variable assigned once: cut_symbols with nothing taped) and the entry values of the
        # inputs they overwrite (copied before them)
        subst = {}
        before = self.entry_copies(carried, subst)
        cut = cut_symbols(jac, exprs, finals, False, self.weights)
        reads = {n: finals[n] for n in cut}
        reads.update(held_replacements(jac, held, reads))
        reads.update(called)
        code = self.needed_replacements(jac, exprs, subst, reads, copy=False)
        pops, local, kept = [], {}, {}
        for k, (e, sign) in zip(keys, distinct_partials([partials[k] for k in keys])):
            if e is None or (e.is_Symbol and self.stays_readable(real_name(e.name, self.lifted_names))):
                # a number, or an input the reverse sweep reads anyway (an element it re-reads,
                # a value never reassigned): used as it is, not taped
                local[k] = partials[k]
                continue
            if e not in kept:       # each partial once, up to sign
                name = self.fresh("_pa")
                self.made.add(name)
                self.extra_inits.append((name, Scalar("f64")))
                code.append(B.assign(name, self.sym_expr(e, subst)))
                kept[e] = sympy.Symbol(name, real=True)
                if self.depth > 0:
                    code += self.push_float(B.name(name))
                    pops[:0] = [B.augassign(FP, "-", 1), B.assign(name, B.subscript(FT, B.name(FP)))]
            local[k] = kept[e] if sign == 1 else -kept[e]
        used = names_read(code)
        before = [b for b in before if b.targets[0].id in used]
        if code:
            code[0].coarsen_comment = f"segment {seg.index}: partials preaccumulated in the forward sweep"
        return before, code, pops, local

    def stays_readable(self, name):
        """A variable the reverse sweep can read without a tape: an element read it re-reads
        from its array, or a variable assigned once outside every loop."""
        return name in self.step_rereads or (name in self.types and intact(self.f, name))

    @staticmethod
    def finals_of(info, k):
        dags = getattr(info, "dags", None)
        return dags[k][3] if dags else None

    def segment_step(self, seg, local=None):
        """The reverse step of a lifted segment; ``local``: {(output, input): partial} kept
        by the forward sweep (``preaccumulate``), else the step recomputes from entry values."""
        info = seg.plan.lifted
        partials = info.partials if local is None else local
        outs = [o for o in seg.outputs if o in self.active and any(k[0] == o for k in partials)]
        ins = []
        for o, i in sorted(partials, key=lambda k: (k[1], k[0])):
            if i in self.active and i not in ins:
                ins.append(i)
        code = []
        g = {}
        # an output that is also an input (x = f(x, ...)): when it is the only one, its
        # adjoint is updated in place (x_bar = x_bar * dx/dx + ...) after every other input's
        # update has read it; with several, each is saved first (_g = x_bar) and reset
        both = [o for o in outs if o in ins]
        inplace = both[0] if len(both) == 1 and both[0] not in self.f.set_temps else None
        for o in outs:
            if o in ins and o != inplace:
                gname = self.fresh("_g")
                self.extra_inits.append((gname, self.types[o]))
                code.append(B.assign(gname, B.name(self.bar(o))))
                g[o] = X(B.name(gname))
            else:
                g[o] = X(B.name(self.bar(o)))
        late_reset = []
        for o in seg.outputs:
            if o not in self.active or o in self.f.set_temps:
                continue
            if intact(self.f, o) and o not in ins:
                continue
            if o == inplace:
                continue
            (code if o in ins else late_reset).append(B.assign(self.bar(o), 0.0))
        branches = []
        if local is not None:
            body = self.path_step(local, S.LocalJacobian(), outs, ins, g, inplace)
            body += self.zero_unset_inputs(seg, {i for (o, i) in local if o in outs})
            branches.append(((), body))
        elif getattr(info, "vjp_paths", None):
            # several outputs: one vector-Jacobian product per path (one sweep, not one per output)
            for k, vp in enumerate(info.vjp_paths):
                self.current_cut = self.path_cuts[k] if self.path_cuts else None
                body = self.vjp_step(vp, outs, ins, g, inplace, finals=self.finals_of(info, k))
                body += self.zero_unset_inputs(seg, set(vp.cotangents))
                branches.append((vp.decisions, body))
        else:
            paths = getattr(info, "paths", None) or [((), partials, info.jac)]
            for k, (decisions, path_partials, jac) in enumerate(paths):
                self.current_cut = self.path_cuts[k] if self.path_cuts else None
                body = self.path_step(path_partials, jac, outs, ins, g, inplace,
                                      finals=self.finals_of(info, k))
                got = {i for (o, i) in path_partials if o in outs}
                body += self.zero_unset_inputs(seg, got)
                branches.append((decisions, body))
        code += B.path_chain(branches, self.val)
        code += late_reset
        if code:
            a, b = seg.plan.lines
            where = f"line {a}" if a == b else f"lines {a}-{b}"
            code[0].coarsen_comment = f"segment {seg.index} ({where}), one preaccumulated step: {info.formula or ''}"
        return code

    def path_step(self, partials, jac, outs, ins, g, inplace=None, finals=None):
        """The preaccumulated step of one straight-line path: ``in_bar += sum(d out/d in * out_bar)``;
        ``inplace``: an input whose adjoint is also an output's (read as it stands by the
        other updates): it is updated last, ``x_bar = sum(d out/d x * out_bar)``."""
        # only the replacements the partials need (values are recomputed by the forward code,
        # or read where the segment was cut)
        exprs = [e for (o, i), e in partials.items() if o in outs and i in ins]
        subst = {}
        code = self.needed_replacements(jac, exprs, subst, self.cuts(finals))
        pre_fwd, pre_rev = [], []
        for i in [i for i in ins if i != inplace] + ([inplace] if inplace is not None else []):
            total = None
            for o in outs:
                if (o, i) not in partials:
                    continue
                p = X(self.sym_expr(partials[(o, i)], subst))
                term = g[o] if (isinstance(p.node, gast.Constant) and p.node.value == 1) else g[o] * p
                total = term if total is None else total + term
            if i == inplace:
                node = B.ex(total) if total is not None else None
                if not (isinstance(node, gast.Name) and node.id == self.bar(i)):    # x_bar = x_bar
                    code.append(B.assign(self.bar(i), node if node is not None else 0.0))
            elif total is not None:
                self.accumulate(i, total, pre_fwd, pre_rev, code)
        return code

    def needed_replacements(self, jac, exprs, subst=None, cut=None, copy=True):
        """Assignments of the replacements of ``jac`` that ``exprs`` need, in order; ``cut``:
        {symbol name: variable}: those symbols are read from their variables (``subst`` gets
        the names), not recomputed: through a copy made at the segment's end in the reverse
        sweep (``cut_copies``), or directly (``copy=False``, forward code after the segment)."""
        cut = cut or {}
        stop = set(cut) | (set(self.precomputed) if copy else set())
        keep, stopped, _ = needed(jac, exprs, stop)
        for name in reversed(stopped):      # (in the order the walk from the end met them)
            if copy and name in self.precomputed:
                subst[name] = B.name(self.precomputed[name])
            elif not copy:
                subst[name] = B.name(cut[name])
            else:
                var = cut[name]
                if var not in self.cut_copies:
                    self.cut_copies[var] = self.fresh("_cut")
                    self.extra_inits.append((self.cut_copies[var], Scalar("f64")))
                    self.made.add(self.cut_copies[var])
                subst[name] = B.name(self.cut_copies[var])
        code = []
        for sym, e in keep:
            name = real_name(sym.name, self.lifted_names)
            self.made.add(name)
            code.append(B.assign(name, self.sym_expr(e, subst)))
        return code

    def cuts(self, finals):
        """{symbol name: variable} the step reads at the segment's end (strategy ``cut``: the
        current path's cut symbols that a variable holds)."""
        if self.cut_strategy is None or not finals or self.current_cut is None:
            return None
        return {n: finals[n] for n in self.current_cut if n in finals}

    def vjp_step(self, vp, outs, ins, g, inplace=None, finals=None):
        """One path's step as a vector-Jacobian product: ``in_bar += cotangent(out_bars)``,
        the outputs' adjoints (``g``) in place of the product's seed symbols; ``inplace`` as
        in ``path_step``."""
        subst = {s: B.ex(g[o]) if o in outs else B.const(0.0) for o, s in vp.seeds.items()}
        exprs = [vp.cotangents[i] for i in ins if i in vp.cotangents]
        code = self.needed_replacements(vp.jac, exprs, subst, self.cuts(finals))
        pre_fwd, pre_rev = [], []
        for i in [i for i in ins if i != inplace] + ([inplace] if inplace is not None else []):
            if i not in vp.cotangents:
                if i == inplace:    # this path overwrites it: its entry value gets nothing
                    code.append(B.assign(self.bar(i), 0.0))
                continue
            total = X(self.sym_expr(vp.cotangents[i], subst))
            if i == inplace:
                node = B.ex(total)
                if not (isinstance(node, gast.Name) and node.id == self.bar(i)):    # x_bar = x_bar
                    code.append(B.assign(self.bar(i), node))
            else:
                self.accumulate(i, total, pre_fwd, pre_rev, code)
        return code

    def zero_unset_inputs(self, seg, ins_with_contrib):
        """A set-once temporary fed into the segment whose partials are all zero (its value
        was overwritten) still needs its adjoint defined: zero."""
        out = []
        for i in seg.inputs:
            if i in self.f.set_temps and i in self.active and i not in ins_with_contrib:
                out.append(B.assign(self.bar(i), 0.0))
        return out
