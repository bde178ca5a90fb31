"""Reduction loops reversed trip by trip: each trip's reverse runs right after its forward.

Requires: an emitter with the tape, adjoint and control methods, and ``reductions``
(``coarsen.analysis.reductions.find_reduction_loops``: loops whose trips interact only
through one accumulation ``s += e``).
Guarantees: ``fused_loop`` returns ``(forward code, reverse code)`` for such a loop.  In the
forward sweep each trip runs forward, then backward with the accumulator's adjoint ``s_bar``
set to 1 (its adjoint is the same at every trip; the reverse sweep sets it anew), adding the trip's contributions to the inputs'
adjoints into per-loop accumulators ``_acc<k>``; the trip's pushes are popped in the same
trip, so the tape never holds more than one trip.  The reverse sweep adds ``s_bar * _acc<k>``
to each input's adjoint: the loop's contributions are linear in ``s_bar``.  Adjoints local to
a trip are zeroed at the trip's start; the scratch arrays' adjoints once before the loop (a
trip's reverse zeroes what its stores wrote, and every read of a scratch array follows a
full write of it in the same trip).

A ``prange`` loop (``For.parallel``), or every reduction loop with ``Options.parallel``, runs
its trips in blocks in parallel (``coarsen.ad.reverse.parallel``) on the same trip code.
"""
from __future__ import annotations

import gast

from ...ir.nodes import Array, Var
from ...codegen import build as B
from ...codegen.build import X
from ...codegen.gast_queries import names_read
from .parallel import ParallelMixin
from .scaled_adds import SCALED_MARK


class FusedMixin(ParallelMixin):
    reductions = {}     # id(loop) -> ReductionLoop (coarsen.analysis.reductions)
    fused_scratch = frozenset()   # scratch arrays of the reduction loops being emitted

    def store_saves(self, s):
        """Must the store ``s`` save the elements it overwrites?  Into a recorded array, where
        the reverse sweep reads the array at a point the store comes after (in program order,
        or in a loop around both: ``recording.tape_sites``, which also covers a reduction
        loop's scratch arrays, whose trips never see each other's).  Writing the elements back
        is not such a read: an array that is only written before its reverse reads (a new
        array filled in, a grid updated in place and read by nothing earlier) saves nothing."""
        if s.array not in self.tbr:
            return False
        return id(s) in self.tape_sites

    def fused_loop(self, s, red):
        """The loop's forward code, each trip followed by its reverse, and the reverse
        sweep's scaling; None when the trip's reverse would restore the accumulator (a
        reverse read before the loop keeps it on the tape): the loop is then reversed as
        usual."""
        if red.nested:
            return self.nested_fused_loop(s, red)
        # the body is emitted at the loop's depth: what a trip computes once and its own
        # reverse reads needs no tape (preaccumulated partials, cut values, while-loop trips)
        saved = self.enter_region()
        # the nested loops this attempt fuses: forgotten if the loop is reversed as usual
        # after all (the tape analyses read ``fused``: a loop left in it would not be taped)
        fused_before = set(self.fused)
        serial = not (s.parallel or self.parallel_all) and not self.workspace
        nest_ok, self.nest_ok = self.nest_ok, serial
        defined = set(self.defined)
        scratch = self.fused_scratch
        self.fused_scratch = scratch | set(red.scratch)
        self.in_fused += 1
        try:
            bf, br = self.block(s.body)
        finally:
            self.fused_scratch = scratch
            self.in_fused -= 1
            self.nest_ok = nest_ok
        reserve, _ = self.leave_region(saved, None)     # per trip: one trip is on the tape
        region = self.left_region
        if red.accumulator in names_read(br, gast.Store):
            if s.parallel:
                self.note_loop(s, "serially: the reverse sweep reads its accumulator before the loop")
            self.fused = fused_before
            return None
        hoisted = []
        if not (s.parallel or self.parallel_all) and not self.workspace:
            # serially, every trip starts at the same tape positions: the room one trip needs
            # is reserved once before the loop, and nothing is reserved inside it (a parallel
            # block has tapes of its own, reserved in its trips)
            plan = self.trip_plan(region, s, defined)
            if plan is not None:
                hoisted, _ = self.apply_nest(plan, reserve, True, None)
                reserve = []
        self.fused.add(id(s))
        args = self.range_args(s)
        # (nested reduction loops reverse their trips in the forward code: bf too)
        read = names_read(bf + br) | names_read(bf + br, gast.Store)
        if not br and not any(self.bar(x) in read for x in red.inputs):
            if s.parallel:
                self.note_loop(s, "serially: nothing in it is differentiated")
            return self.hoisted_checks(s) + hoisted + [B.for_range(s.var, args, reserve + bf)] \
                + self.rest_holders(), []
        seed = self.bar(red.accumulator)     # 1 in each trip; the reverse sweep sets it anew
        rename = {}
        before, after, accs = [], [], []
        for x in red.inputs:
            if self.bar(x) not in read:
                continue
            acc = self.fresh("_acc")
            self.types[acc] = self.types[x]
            rename[self.bar(x)] = acc
            accs.append((x, acc))
            before.append(B.assign(acc, self.zeros_like(x)))
            update = B.augassign(self.bar(x), "+", X(B.name(self.bar(red.accumulator)))
                                 * X(B.name(acc), self.is_arr(Var(x))))
            t = self.types.get(x)
            if isinstance(t, Array) and t.ndim >= 1:
                setattr(update, SCALED_MARK, t.ndim)    # scaled_adds: a loop on the cpu target
            after.append(update)
        scratch_bars = [a for a in red.scratch if self.bar(a) in read]
        for a in scratch_bars:
            before.append(B.assign(self.bar(a), self.zeros_like(a)))
        trip_inits = self.trip_inits(red, read)
        _Rename(rename).visit_all(bf + br)
        body = reserve + bf + trip_inits + br
        if (s.parallel or self.parallel_all) and not self.workspace:
            par = self.parallel_fused(s, red, body, accs, scratch_bars)
            if par is not None:
                return self.hoisted_checks(s) + par + self.rest_holders(), after
            self.note_loop(s, "serially: the emitted trips could not be shown independent")
        loop = before + [B.for_range(s.var, args, body)]
        loop[0].coarsen_comment = (f"a reduction loop into {red.accumulator}: each trip is "
                                   f"reversed right after it runs, with {seed} = 1")
        fwd = self.hoisted_checks(s) + hoisted + loop + self.rest_holders()
        return fwd, after

    nest_ok = False     # in a serial reduction loop's trip: nested ones are fused too

    def nested_fused_loop(self, s, red):
        """A nested reduction loop (``ReductionLoop.nested``) in the trip of a serial one:
        each trip runs forward, then backward with the accumulator's adjoint 1, adding into
        the adjoints the outer loop renames to its accumulators; no reverse code of its own.
        None (reversed as usual) in a parallel trip, or when the trip's reverse would restore
        the accumulator or leaves tape entries for later."""
        if not self.nest_ok:
            return None
        saved = self.enter_region()
        fused_before = set(self.fused)      # (as in fused_loop)
        self.in_fused += 1
        try:
            bf, br = self.block(s.body)
        finally:
            self.in_fused -= 1
        reserve, _ = self.leave_region(saved, None)
        if red.accumulator in names_read(br, gast.Store):
            self.fused = fused_before
            return None
        read = names_read(br) | names_read(br, gast.Store)
        trip_inits = self.trip_inits(red, read)
        self.fused.add(id(s))
        if s.parallel:
            self.note_loop(s, "serially: inside another loop")
        loop = [B.for_range(s.var, self.range_args(s), reserve + bf + trip_inits + br)]
        loop[0].coarsen_comment = (f"nested in a reduction loop into {red.accumulator}: each "
                                   "trip is reversed right after it runs")
        return self.hoisted_checks(s) + loop + self.rest_holders(), []

    def trip_inits(self, red, read):
        """The start of a trip's reverse: the accumulator's adjoint 1, the adjoints of the
        trip's locals that ``read`` names zeroed."""
        out = [B.assign(self.bar(red.accumulator), 1.0)]
        for v in red.locals:
            if self.bar(v) in read and v not in self.f.set_temps:
                out.append(B.assign(self.bar(v), self.zeros_like(v)))
        return out

    def zeros_like(self, name):
        if isinstance(self.types.get(name), Array):
            return B.call("np.zeros", B.attr(f"{name}.shape"))
        return B.const(0.0)


class _Rename(gast.NodeTransformer):
    def __init__(self, mapping):
        self.mapping = mapping

    def visit_Name(self, n):
        if n.id in self.mapping:
            n.id = self.mapping[n.id]
        return n

    def visit_all(self, nodes):
        for n in nodes:
            self.visit(n)
