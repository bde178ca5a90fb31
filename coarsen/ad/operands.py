"""Questions both emitters (reverse, ``coarsen.ad.reverse.emitter``; forward,
``coarsen.ad.forward.emitter``) ask about the typed IR's operands.

Requires: the class mixing it in has ``types`` (variable -> IR type), ``f`` (the ``Facts`` of
activity analysis), ``bounds`` (a ``BoundsPlan`` or None) and ``val(operand)``.
Guarantees: ``ty``, ``is_arr``, ``nd`` and ``intact`` answer from those alone; ``index_node``
builds a subscript's index, ``index_checks``/``hoisted_checks`` the planned bounds checks.
"""
from __future__ import annotations

import gast

from ..analysis.activity import intact
from ..analysis.bounds import hoisted_check, inline_check
from ..ir.nodes import NEWAXIS, Array, Slice, Var
from ..codegen import build as B


class OperandQueries:
    #: primitives emit code in coarsen's input language where they can (matrix products as
    #: ``@``, ``np.linalg.solve``, ``np.einsum``) instead of the runtime helpers whose checks
    #: ``raise``: set by forward mode for a JVP that reverse mode reads back (``hessian``)
    input_language = False

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

    def index_node(self, index):
        """The gast index of a subscript with IR ``index`` items."""
        items = []
        for it in index:
            if it == NEWAXIS:
                items.append(B.const(None))
            elif isinstance(it, Slice):
                items.append(B.slice_(*(None if p is None else self.val(p)
                                        for p in (it.lower, it.upper, it.step))))
            else:
                items.append(B.ex(self.val(it)))
        if len(items) == 1:
            return items[0]
        return gast.Tuple(elts=items, ctx=gast.Load())

    def index_checks(self, s):
        """Code checking the indices of the element access ``s`` before it runs."""
        if self.bounds is None:
            return []
        return [inline_check(c, self.val) for c in self.bounds.inline.get(id(s), ())]

    def hoisted_checks(self, loop):
        """Index checks of the accesses in ``loop``'s body, run once before it."""
        if self.bounds is None:
            return []
        out = [hoisted_check(c, loop, self.val) for c in self.bounds.hoisted.get(id(loop), ())]
        return [c for c in out if c is not None]
