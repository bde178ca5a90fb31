"""Loops preaccumulated by forward mode: the forward sweep runs the loop with tangent lanes,
the reverse sweep takes one step.

Requires: an emitter with the segment steps (``coarsen.ad.reverse.steps``: ``segment_step``
with kept partials) and ``bounds``; a ``Segment`` whose plan's result is a ``ForwardLoop``
(``coarsen.analysis.forward_loops``).
Guarantees: ``forward_loop(seg)`` returns ``(forward code, reverse code)``.  The forward code
seeds lane ``j``: the tangent of the ``j``-th input is 1 and every other variable's that the
loop reads on entry is 0, in the lanes that carry it (``ForwardLoop.reach``; elsewhere a
symbolic zero, never assigned), then runs the
loop as forward mode emits it (``coarsen.ad.forward.emitter``: each assignment followed by its
tangent in every lane; index checks as the gradient's).  At the loop's end the tangent of
output ``o`` in lane ``j`` is ``d o / d input_j``: the reverse step reads those variables
(``ForwardLoop.partials``), which nothing after the loop assigns, so nothing is taped.  The
values the loop overwrites (``ForwardLoop.restore``) are copied before it and put back after
the step, for the reverse of the code before the loop.
"""
from __future__ import annotations

import sympy

from ...codegen import build as B
from ..forward.emitter import ForwardEmitter


class ForwardLoopMixin:
    def forward_loop(self, seg):
        info = seg.plan.lifted
        # the lanes' names are the plan's (fixed before emission: the same at every emission
        # of the driver's fixpoint); the emitter's own temporaries continue this one's count
        fe = ForwardEmitter(self.fn, self.wrt, self.f, self.bounds, directions=len(info.lanes),
                            lanes=info.tangents, lane_active=info.reach, supply=self.supply)
        fe.counter = self.counter
        fwd, back = [], []
        for v in info.restore:
            keep = self.fresh("_entry")
            self.types[keep] = self.types[v]
            fwd.append(B.assign(keep, B.name(v)))
            back.append(B.assign(v, B.name(keep)))
        for j, (lane, reach) in enumerate(zip(fe.lanes, info.reach)):
            fwd.append(B.assign(lane[info.lanes[j]], B.const(1.0)))
            for v in sorted((set(info.lanes) | set(info.zero)) & reach - {info.lanes[j]}):
                fwd.append(B.assign(lane[v], B.const(0.0)))
        fwd += fe.block([info.loop])
        self.counter = fe.counter
        for name in fe.made:
            if name not in self.types and name in fe.types:
                self.types[name] = fe.types[name]
        self.made |= fe.made
        self.helpers |= fe.helpers
        fwd[0].coarsen_comment = f"loop (line {seg.loc.lineno}) by {info.formula}"
        local = {k: sympy.Symbol(name) for k, name in info.partials.items()}
        rev = self.segment_step(seg, local) + back
        return fwd, rev
