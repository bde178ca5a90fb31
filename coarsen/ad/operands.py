"""Questions both emitters (reverse, ``coarsen.ad.reverse.emitter``; forward,
``coarsen.ad.forward.emitter``) ask about the typed IR's operands.

Requires: the class mixing it in has ``types`` (variable -> IR type) and ``f`` (the
``Facts`` of activity analysis).
Guarantees: ``ty``, ``is_arr``, ``nd`` and ``intact`` answer from those alone.
"""
from __future__ import annotations

from ..analysis.activity import intact
from ..ir.nodes import Array, Var


class OperandQueries:
    def ty(self, name):
        return self.types.get(name)

    def is_arr(self, operand):
        return isinstance(operand, Var) and isinstance(self.types.get(operand.name), Array)

    def nd(self, operand):
        if isinstance(operand, Var):
            t = self.types.get(operand.name)
            return t.ndim if isinstance(t, Array) else 0
        return 0

    def intact(self, name):
        """Is ``name`` never overwritten after it is first set (activity's ``intact``)?"""
        return intact(self.f, name)
