"""Subscripts with integer arrays in them (NumPy's advanced indexing), read after type
inference: each becomes its basic part and one ``gather``.

Requires: a typed ``Function`` (``fn.types``) whose subscripts have no ``...`` left
(``typeinfer.expand_ellipses``); ``typeinfer.index_type`` has typed each ``getitem`` with an
integer array among its items as NumPy does: the arrays 1-D, the integers beside them
advanced too, the indexed axis first where the advanced items are not adjacent in the
subscript, else where the first stood.
Guarantees: ``split_fancy(fn)`` (in place) replaces each such ``t = a[items]`` by
``_tK = a[basic]`` (every advanced item a full slice: a view of ``a``, typed) and
``t = gather(_tK, x0, x1, ...)`` (``coarsen.ir.primitives.fancy``), so no later pass meets an
array in a subscript; ``_tK`` is a temporary from the module's name supply (owner
``fancy_index``).
"""
from __future__ import annotations

from .nodes import NEWAXIS, Array, Assign, Slice, Var, blocks

FULL = Slice(None, None, None)


def is_fancy(types, index):
    return any(isinstance(it, Var) and isinstance(types.get(it.name), Array) for it in index)


def _split(fn, s):
    types = fn.types
    a = types[s.args[0].name]
    basic, axes, kinds, operands, where = [], [], [], [], []
    bax = 0
    for pos, it in enumerate(s.index):
        if it == NEWAXIS:
            basic.append(it)
            bax += 1
        elif isinstance(it, Slice):
            basic.append(it)
            bax += 1
        else:
            basic.append(FULL)
            axes.append(bax)
            kinds.append("a" if isinstance(it, Var) and isinstance(types.get(it.name), Array)
                         else "i")
            operands.append(it)
            where.append(pos)
            bax += 1
    adjacent = where == list(range(where[0], where[0] + len(where)))
    taken = sum(1 for it in s.index if it != NEWAXIS)
    rank = bax + (a.ndim - taken)
    tmp = fn.names.numbered("_t", "fancy_index")
    fn.temps = getattr(fn, "temps", frozenset()) | {tmp}
    types[tmp] = Array(a.dtype, rank)
    view = Assign(tmp, "getitem", s.args, s.loc, index=tuple(basic), attrs=s.attrs)
    attrs = (("axes", tuple(axes)), ("kinds", tuple(kinds)), ("front", not adjacent))
    gather = Assign(s.target, "gather", (Var(tmp),) + tuple(operands), s.loc, attrs=attrs)
    return [view, gather]


def split_fancy(fn):
    """See the module docstring."""
    for block in blocks(fn.body):
        n = 0
        while n < len(block):
            s = block[n]
            if isinstance(s, Assign) and s.op == "getitem" and is_fancy(fn.types, s.index):
                block[n:n + 1] = _split(fn, s)
                n += 2
            else:
                n += 1
