"""Dead adjoint resets: ``x_bar[i, j] = 0.0`` after the last read of that element.

The reverse of an element write ``x[i, j] = e`` reads ``x_bar[i, j]`` and resets it, since the
value before the write had no part in ``e``.  When nothing reads ``x_bar`` after the loop nest
that does this, and each trip of the nest touches its own element, the reset writes memory that
no one reads again: a whole pass over the array (gemver's ``n x n`` matrix adjoint).

Requires: the generated function's top-level statements (gast) and the names the compiler made.
Guarantees: ``drop_dead_resets(body, made)`` returns the statements with such resets removed
(either rule below),
the others unchanged (the input is not modified: changed loops are rebuilt).  A reset
``X[idx] = 0.0`` (``X`` a compiler-made array, never aliased: before and in its top-level
statement, ``X`` only appears allocated fresh, indexed element by element, or updated as a
whole with ``X += ...``: ``cleanup.only_elementwise``) is removed only when

* no later top-level statement reads ``X``;
* within its top-level statement, every occurrence of ``X`` is ``X[idx]`` with the same index,
  in statements of the reset's own block (none nested deeper), none after the reset;
* ``idx`` is the distinct loop variables of all the ``for ... in range(...)`` loops around the
  reset in that statement, none of them assigned in its loop and each known never negative
  (``cleanup.nonnegative_names``: Python reads a negative index from the end, so the trips
  of ``range(-1, 1)`` meet on a one-element axis): different trips, different elements (so
  no later trip reads an element the reset cleared).

A second rule takes the adjoint of a history array, ``X[t + c, i] = 0.0`` in a loop over
``t`` that runs down (``range(a, b, -1)``, the reverse of a time loop that writes row
``t + c`` from rows ``t + c'``, ``c' < c``): the reset is removed when the top-level statement
is that loop, ``t`` and the inner loop variables are not assigned in it, the index's other
axes are the distinct variables of the ``range`` loops inside it, the reset's own row
``t + c`` appears only as the reset's index, in its block and before it, every other
occurrence of ``X`` in the loop is ``X[t + c', ...]`` with ``c' < c`` (a later trip, ``t' < t``,
reaches rows ``t' + c' < t + c`` only), and every later top-level statement that mentions ``X``
indexes it with a constant row below ``b + 1 + c``, the lowest row the loop resets (the
history's first row, read for the initial condition's adjoint).

The values the function computes are unchanged.
"""
from __future__ import annotations

import copy

import gast

from .cleanup import affine, index_elts, int_value, nonnegative_names, only_elementwise, plain_range

__all__ = ["drop_dead_resets"]


def _mentions(node, name):
    return any(isinstance(n, gast.Name) and n.id == name for n in gast.walk(node))


def _reset_target(st, made):
    """``(array name, index node)`` of ``X[idx] = 0.0`` with ``X`` compiler-made, else None."""
    if not (isinstance(st, gast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], gast.Subscript)
            and isinstance(st.targets[0].value, gast.Name)
            and isinstance(st.value, gast.Constant) and st.value.value == 0.0
            and not isinstance(st.value.value, bool)):
        return None
    name = st.targets[0].value.id
    return (name, st.targets[0].slice) if name in made else None


def _index_names(idx):
    elts = idx.elts if isinstance(idx, gast.Tuple) else [idx]
    if not all(isinstance(e, gast.Name) for e in elts):
        return None
    names = [e.id for e in elts]
    return names if len(set(names)) == len(names) else None


def _removable(top, path, st, name, idx, nonneg=None):
    """The reset ``st`` (reached from ``top`` through ``path``: [(statement, block)]) is dead
    within ``top`` (module docstring).  ``nonneg``: the names known never negative
    (``cleanup.nonnegative_names``; None: not checked)."""
    names = _index_names(idx)
    if names is None:
        return False
    if nonneg is not None and not set(names) <= nonneg:
        return False        # a negative index names an element from the end: trips may meet
    loops = [s for s, _ in path if isinstance(s, gast.For)]
    if any(isinstance(s, gast.While) for s, _ in path):
        return False
    loop_vars = []
    for lp in loops:
        if not (isinstance(lp.target, gast.Name) and isinstance(lp.iter, gast.Call)
                and isinstance(lp.iter.func, gast.Name) and lp.iter.func.id == "range"):
            return False
        var = lp.target.id
        if any(isinstance(n, gast.Name) and n.id == var and isinstance(n.ctx, gast.Store)
               for b in lp.body for n in gast.walk(b)):
            return False
        loop_vars.append(var)
    if sorted(loop_vars) != sorted(names):
        return False
    block = path[-1][1] if path else None
    key = gast.dump(idx)
    seen_reset = False
    for other in block:
        if other is st:
            seen_reset = True
            continue
        if not _mentions(other, name):
            continue
        if seen_reset or isinstance(other, (gast.For, gast.While, gast.If)):
            return False
        for n in gast.walk(other):
            if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name) and \
                    n.value.id == name and gast.dump(n.slice) != key:
                return False
        # X only as X[idx] here (no whole-array use)
        subs = sum(1 for n in gast.walk(other) if isinstance(n, gast.Subscript)
                   and isinstance(n.value, gast.Name) and n.value.id == name)
        bare = sum(1 for n in gast.walk(other) if isinstance(n, gast.Name) and n.id == name)
        if subs != bare:
            return False
    # no occurrence of X in top outside the reset's block
    inside = sum(1 for s in block for n in gast.walk(s) if isinstance(n, gast.Name) and n.id == name)
    total = sum(1 for n in gast.walk(top) if isinstance(n, gast.Name) and n.id == name)
    return inside == total


def _row(sub, t):
    """The row offset ``c`` of ``X[t + c, ...]`` (``None`` otherwise)."""
    elts = index_elts(sub.slice)
    a = affine(elts[0]) if elts else None
    return a[1] if a is not None and a[0] == t else None


def _removable_shifted(top, path, st, name, idx, later):
    """The second rule of the module docstring: ``st`` resets ``X[t + c, ...]`` in the
    descending loop ``top``."""
    if not (isinstance(top, gast.For) and path and path[0][0] is top and plain_range(top)):
        return False
    args = top.iter.args
    if len(args) != 3 or int_value(args[2]) != -1 or int_value(args[1]) is None:
        return False
    t = top.target.id
    loops = [s for s, _ in path]
    if not all(isinstance(s, gast.For) and plain_range(s) for s in loops):
        return False
    inner = [s.target.id for s in loops[1:]]
    for lp in loops:        # no loop variable is assigned in its loop
        var = lp.target.id
        if any(isinstance(n, gast.Name) and n.id == var and isinstance(n.ctx, gast.Store)
               for b in lp.body for n in gast.walk(b)):
            return False
    # distinct already: the loops of ``path`` are nested, so a repeated variable is the target
    # of a loop inside a loop of that name, a store the check above refused
    assert len(set([t] + inner)) == 1 + len(inner), "a loop variable repeated in the nest"
    elts = index_elts(idx)
    if len(elts) != 1 + len(inner) or \
            [e.id if isinstance(e, gast.Name) else None for e in elts[1:]] != inner:
        return False
    c = affine(elts[0])
    if c is None or c[0] != t:
        return False
    c = c[1]
    key = gast.dump(idx)
    block = path[-1][1]
    before = set()
    for other in block:
        if other is st:
            break
        before.add(id(other))
    subs = bare = 0
    for other_top in top.body:
        for n in gast.walk(other_top):
            if isinstance(n, gast.Name) and n.id == name:
                bare += 1
            if not (isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name)
                    and n.value.id == name):
                continue
            subs += 1
            row = _row(n, t)
            if row is None or row > c:
                return False
    if subs != bare:
        return False
    # the reset's own row: only the reset's index, in its block, before it
    for other in block:
        for n in gast.walk(other):
            if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name) and \
                    n.value.id == name and _row(n, t) == c:
                if other is not st and (id(other) not in before or gast.dump(n.slice) != key
                                        or isinstance(other, (gast.For, gast.While, gast.If))):
                    return False
    same_row = sum(1 for s in top.body for n in gast.walk(s)
                   if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name)
                   and n.value.id == name and _row(n, t) == c)
    in_block = sum(1 for s in block for n in gast.walk(s)
                   if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name)
                   and n.value.id == name and _row(n, t) == c)
    if same_row != in_block:
        return False
    lowest = int_value(args[1]) + 1 + c
    for s in later:
        uses = [n for n in gast.walk(s) if isinstance(n, gast.Name) and n.id == name]
        rows = [int_value(index_elts(n.slice)[0]) for n in gast.walk(s)
                if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name)
                and n.value.id == name]
        if len(rows) != len(uses) or any(r is None or r >= lowest for r in rows):
            return False
    return True


def _resets(top, made):
    """Every ``(path, statement, name, index)`` of a reset in ``top``."""
    out = []

    def visit(st, path):
        for field in ("body", "orelse"):
            block = getattr(st, field, None)
            if not isinstance(block, list):
                continue
            for sub in block:
                got = _reset_target(sub, made)
                if got is not None:
                    out.append((path + [(st, block)], sub) + got)
                visit(sub, path + [(st, block)])
    got = _reset_target(top, made)
    if got is not None:
        out.append(([], top) + got)
    visit(top, [])
    return out


def _without(st, dead):
    """``st`` with the statements in ``dead`` (ids) removed from its blocks, copied where
    something changed."""
    new = None
    for field in ("body", "orelse"):
        block = getattr(st, field, None)
        if not isinstance(block, list):
            continue
        kept = [_without(s, dead) for s in block if id(s) not in dead]
        if len(kept) != len(block) or any(a is not b for a, b in zip(kept, block)):
            if new is None:
                new = copy.copy(st)
            setattr(new, field, kept or [gast.Pass()])
    return st if new is None else new


def drop_dead_resets(body, made):
    out = list(body)
    nonneg = nonnegative_names(body)
    for k, top in enumerate(body):
        later = body[k + 1:]
        dead = set()
        for path, st, name, idx in _resets(top, made):
            if not path:
                continue        # a top-level reset: rare, kept
            if not only_elementwise(body, name):
                continue
            if not any(_mentions(s, name) for s in later) and \
                    _removable(top, path, st, name, idx, nonneg):
                dead.add(id(st))
            elif _removable_shifted(top, path, st, name, idx, later):
                dead.add(id(st))
        if dead:
            out[k] = _without(top, dead)
    return out
