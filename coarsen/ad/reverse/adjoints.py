"""Adjoint statements of assignments and stores: the primal expression (the primitive's
emitter), the adjoint updates (local partials with broadcasting undone in ``reduce_to``, or the
primitive's structural VJP), and the resets that keep each adjoint equal to the derivative of
the result with respect to the variable's current value.

Requires: an emitter with the tape methods (``coarsen.ad.reverse.tapes``) and operand helpers
(``coarsen.ad.reverse.emitter``); the primitive registry (``coarsen.ir.primitives``).
Guarantees: ``assign``/``store`` return ``(forward code, reverse code)`` for one statement.
"""
from __future__ import annotations

import gast

from ...ir.nodes import (I64, Array, Const, NEWAXIS, Scalar, Slice, Var)
from ...analysis.activity import intact
from ...codegen import build as B
from ...codegen import runtime as R
from ...codegen.build import X
from ...ir.primitives import err, primitive
from ..custom_backward import backward_code


class AdjointMixin:
    # ------------------------------------------------------------------ adjoint updates
    def accumulate(self, name, expr, pre_fwd, pre_rev, out):
        """name_bar += expr (or = expr for a set-once temporary); expr has name's shape."""
        bar = self.bar(name)
        node = B.ex(expr)
        if name in self.f.set_temps:
            if self.is_arr(Var(name)) and isinstance(node, (gast.Name, gast.Subscript)):
                node = B.call(gast.Attribute(value=node, attr="copy", ctx=gast.Load()))
            out.append(B.assign(bar, node))
        else:
            out.append(B.augassign(bar, "+", node))

    def accumulate_region(self, name, index, expr, pre_fwd, pre_rev, out):
        bar = self.bar(name)
        if name in self.f.set_temps:
            shape = self.shape_of(Var(name), pre_fwd, pre_rev)
            out.append(B.assign(bar, B.call("np.zeros", shape)))
        if any(it == NEWAXIS for it in index):
            base_idx = tuple(it for it in index if it != NEWAXIS)
            g_idx = []
            for it in index:
                if it == NEWAXIS:
                    g_idx.append(B.const(0))
                elif isinstance(it, Slice):
                    g_idx.append(B.slice_())
            gnode = B.subscript(expr, gast.Tuple(elts=g_idx, ctx=gast.Load()) if len(g_idx) > 1 else g_idx[0])
            index = base_idx
            expr = gnode
        if not index:
            out.append(B.augassign(bar, "+", expr))
            return
        out.append(B.augassign(B.subscript(bar, self.index_node(index)), "+", expr))

    def reduce_to(self, operand, contrib, out_nd, others_arrays, pre_fwd, pre_rev):
        """Sum an adjoint contribution over broadcast axes so it matches ``operand``."""
        nd = self.nd(operand)
        if nd == 0:
            if out_nd == 0:
                return contrib
            return X(B.call("np.sum", contrib))
        if nd == out_nd and not others_arrays:
            return contrib
        if operand.name in self.f.set_temps:
            shape = self.shape_of(operand, pre_fwd, pre_rev)
        else:
            shape = B.attr(f"{self.bar(operand.name)}.shape")
        return X(B.call(self.helper(R.sum_to(out_nd, nd)), contrib, shape), True)

    # ------------------------------------------------------------------ primal ops
    def primal(self, s):
        """The primal expression of the assignment ``s``: its primitive's emitter.  A view
        (``.T``, ``np.flip``, ``reshape``...) that activity analysis asks to materialize (a
        temporary viewing an array written later, which the reverse sweep may read) is a copy
        (``getitem`` and ``copy`` copy by themselves)."""
        prim = primitive(s.op)
        node = prim.emit(self, s, [self.val(a) for a in s.args])
        if prim.view and s.op not in ("getitem", "copy") and s.target in self.f.materialize \
                and isinstance(self.types.get(s.target), Array):
            node = B.call("np.copy", node)
        return node

    # ------------------------------------------------------------------ assignments
    def inverse_update(self, s):
        """For an integer update ``t = t + c`` or ``t = t - c`` (``c`` a constant or an integer
        that never changes), the expression that undoes it, ``t - c`` or ``t + c``: the reverse
        sweep restores ``t`` by it instead of saving ``t`` on the int tape (integer arithmetic
        is exact, so the value restored is the one overwritten).  None for anything else."""
        t = s.target
        ty = self.types.get(t)
        if s.op not in ("add", "sub") or s.index or not isinstance(ty, Scalar) or ty.kind != "i64" \
                or len(s.args) != 2 or s.args[0] != Var(t):
            return None
        c = s.args[1]
        if isinstance(c, Const):
            if type(c.value) is not int:
                return None
        elif not (isinstance(c, Var) and c.name != t and self.types.get(c.name) == I64
                  and intact(self.f, c.name)):
            return None
        return B.binop(B.name(t), "-" if s.op == "add" else "+", B.ex(self.val(c)))

    def assign(self, s):
        t = s.target
        fwd = self.index_checks(s)
        pre_fwd, pre_rev = [], []
        taped = self.taped_at(s)
        inverse = self.inverse_update(s) if taped else None
        if taped and inverse is None:
            fwd += self.push(t)
        fwd.append(B.assign(t, self.primal(s)))
        rev = []
        if inverse is not None:
            undo = B.assign(t, inverse)
            undo._coarsen_inverse = True      # reads t after s (ControlMixin.record_reads)
            rev.append(undo)
        elif taped:
            rev += self.pop(t)
        if t not in self.active:
            return fwd, rev
        active_args = [p for p in primitive(s.op).diff_positions(len(s.args))
                       if isinstance(s.args[p], Var) and s.args[p].name in self.active]
        contribs = []
        g = X(B.name(self.bar(t)), self.is_arr(Var(t)))
        is_set = t in self.f.set_temps
        self_ref = any(isinstance(a, Var) and a.name == t for a in s.args)
        needs_reset = not is_set and not intact(self.f, t)
        # accumulation t = t + e / t = t - e: the adjoint of t flows through unchanged
        if self_ref and primitive(s.op).accumulates and isinstance(s.args[0], Var) and s.args[0].name == t \
                and not (isinstance(s.args[1], Var) and s.args[1].name == t) \
                and self.nd(s.args[0]) == self.nd(Var(t)):
            body = []
            if 1 in active_args:
                body += self.vjp(s, 1, g, pre_fwd, pre_rev)
            return pre_fwd + fwd, rev + pre_rev + body
        capture = []
        if self_ref and needs_reset and active_args:
            gname = self.fresh("_g")
            self.extra_inits.append((gname, self.types[t]))
            capture.append(B.assign(gname, B.name(self.bar(t))))
            g = X(B.name(gname), self.is_arr(Var(t)))
        reset = []
        if needs_reset:
            if self.is_arr(Var(t)):
                reset.append(B.assign(self.bar(t), B.call("np.zeros", B.attr(f"{t}.shape"))))
            else:
                reset.append(B.assign(self.bar(t), 0.0))
        rule = primitive(s.op).result_partial
        from_result = rule is not None and active_args == [0] and not self_ref and not capture \
            and isinstance(self.types.get(t), Scalar) and self.types[t].kind == "f64"
        if from_result:
            # the partial from the result (registry.defvjp_result), read before t is restored
            self.result_reads.add(id(s))
            arg = s.args[0]
            self.in_reverse = True
            try:
                self.accumulate(arg.name, g * rule(X(B.name(t), False)), pre_fwd, pre_rev, contribs)
            finally:
                self.in_reverse = False
            return pre_fwd + fwd, pre_rev + contribs + reset + rev
        for p in active_args:
            contribs += self.vjp(s, p, g, pre_fwd, pre_rev)
        if capture:
            body = capture + reset + contribs
        else:
            body = contribs + reset
        return pre_fwd + fwd, rev + pre_rev + body

    def vjp(self, s, p, g, pre_fwd, pre_rev):
        self.in_reverse = True
        try:
            return self._vjp(s, p, g, pre_fwd, pre_rev)
        finally:
            self.in_reverse = False

    def _vjp(self, s, p, g, pre_fwd, pre_rev):
        """Adjoint updates of operand ``p`` of ``s`` given the output's adjoint ``g``: local
        partials (broadcasting undone in ``reduce_to``) or the primitive's structural VJP."""
        prim = primitive(s.op)
        args = s.args
        arg = args[p]
        out = []
        if prim.partials is not None:
            rule = prim.partials[p]
            vals = [self.val(a) for a in args]
            if prim.partials_see_constants:
                partial = rule(*vals, consts=tuple(a.value if isinstance(a, Const) else None
                                                   for a in args))
            else:
                partial = rule(*vals)
            pn = B.ex(partial)
            if isinstance(pn, gast.Constant) and pn.value == 1.0:
                contrib = g
            elif isinstance(pn, gast.UnaryOp) and isinstance(pn.operand, gast.Constant) and pn.operand.value == 1.0:
                contrib = -g
            else:
                contrib = g * partial
            others = [a for i, a in enumerate(args) if i != p and self.is_arr(a)]
            contrib = self.reduce_to(arg, contrib, self.nd(Var(s.target)),
                                     bool(others) and self.nd(arg) > 0, pre_fwd, pre_rev)
            self.accumulate(arg.name, contrib, pre_fwd, pre_rev, out)
            return out
        if prim.vjp is None:
            raise err(s, f"no derivative rule for {s.op!r}")
        prim.vjp(self, s, p, g, pre_fwd, pre_rev, out)
        return out

    def custom_backward(self, rule, residuals, g, out_type):
        """The statements running a ``custom_vjp`` backward rule in the reverse sweep
        (``coarsen.ad.custom_backward``), for the VJP of ``custom_vjp_out``."""
        return backward_code(self, rule, residuals, g, out_type)

    def broadcast_into(self, arg, gg, pre_fwd, pre_rev, out):
        """arg_bar += gg broadcast to arg's shape."""
        if arg.name in self.f.set_temps:
            shape = self.shape_of(arg, pre_fwd, pre_rev)
            out.append(B.assign(self.bar(arg.name), B.binop(B.call("np.zeros", shape), "+", gg)))
        else:
            out.append(B.augassign(self.bar(arg.name), "+", gg))

    # ------------------------------------------------------------------ stores
    def store(self, s):
        a = s.array
        fwd, rev = self.index_checks(s), []
        saves = self.store_saves(s)
        if saves:
            fwd += self.push_region(a, s.index)
        region = B.subscript(a, self.index_node(s.index))
        v = self.val(s.value)
        if s.aug is None:
            fwd.append(B.assign(region, v))
        elif self.bounds is not None and self.is_arr(s.value):
            # a[s] = a[s] + v: Numba's in-place a[s] += v does not check that v's shape
            # broadcasts to the region's (it reads past v's end); the sum checks, as NumPy does
            fwd.append(B.assign(region, B.binop(B.subscript(a, self.index_node(s.index)),
                                               "+" if s.aug == "add" else "-", v)))
        else:
            fwd.append(B.augassign(region, "+" if s.aug == "add" else "-", v))
        if saves:
            restore = self.pop_region(a, s.index)
            for node in restore:
                # writes the saved elements back: not a read of the array's values, so the
                # recording analysis does not count it as one (control.record_reads)
                node._coarsen_restore = True
            rev += restore
        if a not in self.active:
            return fwd, rev
        pre_fwd, pre_rev = [], []
        body = []
        rnd = self.region_ndim(a, s.index)
        if isinstance(s.value, Var) and s.value.name in self.active:
            g = X(B.subscript(self.bar(a), self.index_node(s.index)), rnd > 0)
            if s.aug == "sub":
                g = -g
            contrib = self.reduce_to(s.value, g, rnd, rnd > 0 and self.nd(s.value) > 0, pre_fwd, pre_rev)
            self.accumulate(s.value.name, contrib, pre_fwd, pre_rev, body)
        if s.aug is None:
            body.append(B.assign(B.subscript(self.bar(a), self.index_node(s.index)), 0.0))
        return pre_fwd + fwd, rev + pre_rev + body


