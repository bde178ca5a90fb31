"""Control-flow reversal: blocks run in reverse order, ``if`` re-tests its condition,
``range`` loops run backwards by index arithmetic, ``while`` loops by a trip counter.

Requires: an emitter with the tape, adjoint and segment methods.
Guarantees: ``block``/``stmt`` return ``(forward code, reverse code)``; ``record_reads`` notes
which primal variables each statement's reverse code reads (for the tape analysis,
``coarsen.analysis.recording``).
"""
from __future__ import annotations

import gast

from ...ir.nodes import (Assign, Const, For, If, Segment, Store,
                         Var, While, walk)
from ...codegen import build as B
from ...codegen.build import X
from ...ir.primitives import err
from ...analysis.recording import shape_key
from ...codegen.gast_queries import names_read, shape_only
from .loop_order import REVERSE_MARK


class ControlMixin:
    # ------------------------------------------------------------------ blocks
    def block(self, stmts):
        fwd, rev = [], []
        entry, loc = self.defined, self.cur_loc
        self.defined = set(entry)
        for s in stmts:
            self.cur_loc = s.loc
            f, r = self.stmt(s)
            self.cur_loc = loc
            self.defined |= set_on_every_path(s)
            self.record_reads(s, r)
            if f:
                f[0]._coarsen_loc = s.loc
            if r:
                r[0]._coarsen_loc = s.loc
            fwd.extend(f)
            rev[:0] = r
        self.defined = entry
        return fwd, rev

    defined = frozenset()    # the variables set on every path to the statement being emitted

    def stmt(self, s):
        if isinstance(s, Segment):
            return self.segment(s)
        if isinstance(s, Assign):
            return self.assign(s)
        if isinstance(s, Store):
            return self.store(s)
        if isinstance(s, If):
            bf, br = self.block(s.body)
            of, orr = self.block(s.orelse)
            fwd = [B.if_(self.val(s.cond), bf, of)]
            rev = []
            if br or orr:
                if br:
                    rev = [B.if_(self.val(s.cond), br, orr)]
                else:
                    rev = [B.if_(B.ex(X(gast.UnaryOp(op=gast.Not(), operand=B.ex(self.val(s.cond))))), orr)]
            return fwd, rev
        if isinstance(s, For) and id(s) in self.reductions:
            done = self.fused_loop(s, self.reductions[id(s)])
            if done is not None:
                if self.max_tape_bytes is not None and not self.depth:
                    self.note_checkpoint(s, "not checkpointed: a reduction loop, reversed trip by "
                                            "trip (its tape holds one trip at a time)")
                return done
        if isinstance(s, For):
            if s.parallel and id(s) not in self.fused:
                self.note_loop(s, "serially: inside another loop" if self.depth or self.in_fused else
                               "serially: its trips interact other than through one accumulation s += ...")
            self.depth += 1
            defined = set(self.defined)
            saved = self.enter_region()
            # recomputable integers assigned outside the loop are evaluated once before its
            # reverse (Emitter.hoisted); not where a budget or local tapes may rebuild it
            hoist = {} if self.max_tape_bytes is None and self.local_tape is None else None
            frames = self.hoist_frames
            if hoist is not None:
                self.hoist_frames = frames + ((frozenset(id(x) for x in walk(s.body)), hoist),)
            try:
                bf, br = self.block(s.body)
            finally:
                self.hoist_frames = frames
            reserve, per_trip = self.leave_region(saved, self.trip_count(s), s, defined)
            nest = self.left_nest
            self.depth -= 1
            if self.max_tape_bytes is not None and not self.depth and not self.in_fused \
                    and not self.workspace:
                # a budget: the loop in checkpointed stretches (coarsen.ad.reverse.checkpoint)
                done = self.checkpoint_loop(s, bf, br, reserve, per_trip, self.left_counts)
                if done is not None:
                    cf, cr = done
                    return self.hoisted_checks(s) + cf + self.rest_holders(), cr
            if self.local_tape is not None and not self.depth and not self.in_fused:
                # CUDA: stretches taped in thread-local memory (coarsen.ad.reverse.local_stretch)
                done = self.local_stretch_loop(s, bf, br, per_trip, self.left_counts)
                if done is not None:
                    cf, cr = done
                    return self.hoisted_checks(s) + cf + self.rest_holders(), cr
            if nest is not None:
                # one reservation for the whole nest (coarsen.ad.reverse.tapes.nest_plan)
                reserve, per_trip = self.apply_nest(nest, reserve, per_trip, self.trip_count(s))
            args = self.range_args(s)
            if per_trip:
                fwd = [B.for_range(s.var, args, reserve + bf)]
            else:
                fwd = reserve + [B.for_range(s.var, args, bf)]
            fwd = self.hoisted_checks(s) + fwd
            fwd += self.rest_holders(nest)
            if not br:
                return fwd, []
            rev = self.reverse_range(s, br)
            if hoist:
                pre = []
                for name in sorted(hoist, key=self.int_order.__getitem__):
                    node = B.assign(name, self.int_read(name))
                    node._coarsen_hoist = True
                    pre.append(node)
                rev = pre + rev
            return fwd, rev
        if isinstance(s, While):
            if self.max_tape_bytes is not None and not self.depth and not self.in_fused:
                text = (s.loc.text or "").lstrip()
                self.note_checkpoint(s, "not checkpointed: a for loop whose index is read after "
                                        "it, run as a while loop; taped in full (read the last "
                                        "index from the range instead)"
                                     if text.startswith("for ") else
                                     "not checkpointed: a while loop (its trips are not "
                                     "known before it runs); taped in full")
            self.depth += 1
            tf, tr = self.block(s.test_body)
            saved = self.enter_region()
            bf, br = self.block(s.body)
            reserve, _ = self.leave_region(saved, None)
            bf = reserve + bf
            self.depth -= 1
            if tr:
                raise err(s, "internal: a loop condition needs reverse code")
            if not br:
                body = tf + [B.if_(B.ex(X(gast.UnaryOp(op=gast.Not(), operand=B.ex(self.val(s.test))))), [B.break_()])] + bf
                return [B.while_(B.const(True), body)] + self.rest_holders(), []
            trips, fwd, restore = self.saved_scalar("_trips", "i64")
            fwd.append(B.assign(trips, 0))
            body = tf + [B.if_(B.ex(X(gast.UnaryOp(op=gast.Not(), operand=B.ex(self.val(s.test))))), [B.break_()])] \
                + bf + [B.augassign(trips, "+", 1)]
            fwd.append(B.while_(B.const(True), body))
            fwd += self.rest_holders()
            r = self.fresh("_trip")
            rev = [B.for_range(r, [B.name(trips)], br)] + restore
            return fwd, rev
        raise TypeError(s)

    def trip_count(self, s):
        start, stop, step = s.start, s.stop, s.step
        if isinstance(step, Const) and step.value == 1:
            if isinstance(start, Const) and start.value == 0:
                return self.val(stop)
            return self.val(stop) - self.val(start)
        return X(B.call(self.helper("_range_len"), self.val(start), self.val(stop), self.val(step)))

    def record_reads(self, s, rev):
        """Which primal variables the reverse code of ``s`` (its own part) reads (after the
        recomputable integer scalars in it are expanded, ``Emitter.recompute_ints``)."""
        self.recompute_ints(rev)
        if isinstance(s, Segment):
            return   # recorded by segment() itself
        if isinstance(s, (Assign, Store)):
            kept = [x for x in rev if not getattr(x, "_coarsen_restore", False)]
            undo = [x for x in kept if getattr(x, "_coarsen_inverse", False)]
            names = loads([x for x in kept if not getattr(x, "_coarsen_inverse", False)])
            if isinstance(s, Store):
                # a restore writes the saved elements back: not a read of the array's values,
                # but it reads the index (a[i1 % m] in a while loop: the reverse trip must see
                # this trip's i1 % m, not the last one's; fuzz 12000096)
                restores = [x for x in rev if getattr(x, "_coarsen_restore", False)]
                names |= loads(restores) - {s.array}
            if id(s) in self.result_reads:
                names.discard(s.target)       # a partial from the result: read after s
                undo = undo + [B.name(s.target)]
            # an update undone in place (AdjointMixin.inverse_update) reads the value s left
            for n in names_read(undo):
                if n in self.types:
                    self.reads_at.setdefault(n, []).append(("end", s))
        elif isinstance(s, If):
            names = self.names_of([s.cond]) if rev else set()
        elif isinstance(s, For):
            # a reduction loop's reverse code reads adjoints only
            names = self.names_of([s.start, s.stop, s.step]) if rev and id(s) not in self.fused else set()
            names |= loads([x for x in rev if getattr(x, "_coarsen_hoist", False)])
        else:
            names = set()
        shapes = shape_only(rev, names)
        for n in names:
            if n in self.types:
                self.reads_at.setdefault(shape_key(n) if n in shapes else n, []).append(s)

    def names_of(self, operands):
        """The variables the reverse sweep reads for these operands (a recomputable integer
        scalar: those of its expression)."""
        out = set()
        for b in operands:
            if isinstance(b, Var):
                if b.name in self.int_recompute:
                    out |= loads([self.int_read(b.name)])
                else:
                    out.add(b.name)
        return out

    def range_args(self, s):
        start, stop, step = s.start, s.stop, s.step
        if isinstance(step, Const) and step.value == 1:
            if isinstance(start, Const) and start.value == 0:
                return [self.val(stop)]
            return [self.val(start), self.val(stop)]
        return [self.val(start), self.val(stop), self.val(step)]

    def reverse_range(self, s, body_rev):
        start, stop, step = s.start, s.stop, s.step
        if isinstance(step, Const) and step.value == 1:
            loop = B.for_range(s.var, [self.val(stop) - 1, self.val(start) - 1, -1], body_rev)
            setattr(loop, REVERSE_MARK, True)   # loop_order.forward_order may count it up
            return [loop]
        if isinstance(step, Const) and step.value == -1:
            return [B.for_range(s.var, [self.val(stop) + 1, self.val(start) + 1], body_rev)]
        k = self.fresh("_k")
        n = B.call(self.helper("_range_len"), self.val(start), self.val(stop), self.val(step))
        body = [B.assign(s.var, self.val(start) + X(B.name(k)) * self.val(step))] + body_rev
        loop = B.for_range(k, [X(n) - 1, -1, -1], body)
        setattr(loop, REVERSE_MARK, True)
        return [loop]


def loads(nodes):
    """The names ``nodes`` read, less the recomputable integers read as names because they are
    assigned before an enclosing loop's reverse (``Emitter.hoisted``): that assignment reads
    what they are computed from, and is recorded at its loop."""
    out = set()
    for n in nodes:
        for sub in gast.walk(n):
            if isinstance(sub, gast.Name) and isinstance(sub.ctx, gast.Load) \
                    and not getattr(sub, "_coarsen_hoisted", False):
                out.add(sub.id)
    return out


def set_on_every_path(s):
    """The variables the statement ``s`` assigns on every path through it (a loop: none, it
    may run no trip)."""
    if isinstance(s, Assign):
        return {s.target}
    if isinstance(s, Segment):
        return set().union(*(set_on_every_path(x) for x in s.stmts))
    if isinstance(s, If):
        return set().union(*(set_on_every_path(x) for x in s.body)) & \
            set().union(*(set_on_every_path(x) for x in s.orelse))
    return set()
