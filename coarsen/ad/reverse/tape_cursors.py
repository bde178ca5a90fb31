"""Tape cursors: a loop that pushes onto a tape one element at a time counts in an unsigned
cursor.

A push is ``_ftape[_fpos] = x; _fpos += 1``.  Numba reads a signed index as Python does, a
negative one from the end, so every store computes ``_fpos + len if _fpos < 0 else _fpos``.
Where ``_fpos`` enters the loop from outside it (a time loop's copy loop pushing the old state,
heat's and wave's), LLVM cannot show the position stays at 0 or above: it vectorizes the loop
with one scattered store per element, each through that select (heat's forward sweep: 165 us
against 75 with the positions known; its primal takes 52).  An unsigned index has no negative
case, and the stores become one contiguous vector store.

Requires: the generated function's statements (gast); the cpu target (the python target's
NumPy scalars would only be slower; CUDA's workspace code keeps its positions).
Guarantees: ``tape_cursors(body)`` returns the statements (a new list, the input not modified;
a statement that changes is a copy) in which each outermost ``for`` loop (no ``else``) that
mentions a tape position ``P`` (``_fpos`` of ``_ftape``, ``_ipos`` of ``_itape``), and mentions
it only as

* the index of its own tape, ``T[P]`` (a store or a read), and
* ``P += c`` or ``P -= c`` with ``c`` a positive ``int`` constant,

and assigns ``T`` nowhere, becomes::

    <cursor> = np.uint64(P)
    for ...:                  # P read as <cursor>, ``P += c`` as ``<cursor> += np.uint64(c)``
        ...
    P = np.int64(<cursor>)

A tape position is never below 0 (a push moves it up from 0, a pop back down to where a push
left it; ``loop_order`` reads it so too), so the cursor holds the same number as ``P`` at every
point of the loop, every element read or stored is the same, and ``P`` leaves the loop with the
value it had: the values are the same, bit for bit.  Loops that mention ``P`` otherwise (a
reservation ``_reserve(T, P + n)``, a checkpoint's ``P = ...``, a slice ``T[P:P + n]``) keep
their signed position; the pass looks into them for inner loops that qualify.  The cursor
``_tc<k>`` names no other name of the function (``coarsen.ir.fresh_check``).
"""
from __future__ import annotations

import copy

import gast

from ...codegen import build as B
from ...codegen.gast_queries import mentions
from .cleanup import FreshNames, int_value, rewrite_inner
from .tapes import FP, FT, IP, IT

__all__ = ["tape_cursors", "STEM"]

STEM = "_tc"

#: each tape position and its tape
_TAPES = ((FP, FT), (IP, IT))


def tape_cursors(body):
    fresh = FreshNames(body, STEM)
    out = list(body)
    for pos, tape in _TAPES:
        out = _block(out, pos, tape, fresh)
    return out


def _block(stmts, pos, tape, fresh):
    """``stmts`` with each outermost loop that qualifies for ``pos`` counting in a cursor."""
    out = []
    for st in stmts:
        if isinstance(st, gast.For) and not st.orelse and mentions(st, pos) \
                and _only_cursor_uses(st, pos, tape):
            out.extend(_counted(st, pos, fresh()))
            continue
        if isinstance(st, (gast.For, gast.While, gast.If)):
            st = rewrite_inner(st, lambda block: _block(block, pos, tape, fresh))
        out.append(st)
    return out


def _only_cursor_uses(loop, pos, tape):
    """Does ``loop`` mention ``pos`` only as ``tape[pos]`` and in ``pos += c`` / ``pos -= c``
    (``c`` a positive int constant), and assign ``tape`` nowhere?"""
    allowed = set()
    for n in gast.walk(loop):
        if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name) \
                and n.value.id == tape and isinstance(n.slice, gast.Name) and n.slice.id == pos:
            allowed.add(id(n.slice))
        elif isinstance(n, gast.AugAssign) and isinstance(n.target, gast.Name) \
                and n.target.id == pos:
            c = int_value(n.value)
            if not isinstance(n.op, (gast.Add, gast.Sub)) or c is None or c <= 0:
                return False
            allowed.add(id(n.target))
        elif isinstance(n, gast.Name) and n.id == tape and not isinstance(n.ctx, gast.Load):
            return False
    return all(id(n) in allowed for n in gast.walk(loop)
               if isinstance(n, gast.Name) and n.id == pos)


def _counted(loop, pos, cursor):
    """The statements replacing ``loop``: the cursor set from ``pos``, the loop counting in it,
    ``pos`` set back from it."""
    new = copy.deepcopy(loop)
    for n in gast.walk(new):
        if isinstance(n, gast.AugAssign) and isinstance(n.target, gast.Name) and n.target.id == pos:
            n.target = B.name(cursor, store=True)
            n.value = B.call("np.uint64", copy.deepcopy(n.value))
        elif isinstance(n, gast.Subscript) and isinstance(n.slice, gast.Name) and n.slice.id == pos:
            n.slice = B.name(cursor)
    start = B.assign(cursor, B.call("np.uint64", B.name(pos)),
                     comment=f"{pos} counted unsigned in the loop below: its stores need no "
                             f"check of negative indices (tape_cursors)")
    return [start, new, B.assign(pos, B.call("np.int64", B.name(cursor)))]
