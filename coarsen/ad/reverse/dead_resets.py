"""Dead adjoint resets: ``x_bar[i, j] = 0.0`` after the last read of that element.

The reverse of an element write ``x[i, j] = e`` reads ``x_bar[i, j]`` and resets it, since the
value before the write had no part in ``e``.  When nothing reads ``x_bar`` after the loop nest
that does this, and each trip of the nest touches its own element, the reset writes memory that
no one reads again: a whole pass over the array (gemver's ``n x n`` matrix adjoint).

Requires: the generated function's top-level statements (gast) and the names the compiler made.
Guarantees: ``drop_dead_resets(body, made)`` returns the statements with such resets removed,
the others unchanged (the input is not modified: changed loops are rebuilt).  A reset
``X[idx] = 0.0`` (``X`` a compiler-made array, never aliased: before and in its top-level
statement, ``X`` only appears allocated fresh, indexed element by element, or updated as a
whole with ``X += ...``: ``cleanup.only_elementwise``) is removed only when

* no later top-level statement reads ``X``;
* within its top-level statement, every occurrence of ``X`` is ``X[idx]`` with the same index,
  in statements of the reset's own block (none nested deeper), none after the reset;
* ``idx`` is the distinct loop variables of all the ``for ... in range(...)`` loops around the
  reset in that statement, none of them assigned in its loop: different trips, different
  elements (so no later trip reads an element the reset cleared).

The values the function computes are unchanged.
"""
from __future__ import annotations

import copy

import gast

from .cleanup import only_elementwise

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


def _removable(top, path, st, name, idx):
    """The reset ``st`` (reached from ``top`` through ``path``: [(statement, block)]) is dead
    within ``top`` (module docstring)."""
    names = _index_names(idx)
    if names is None:
        return False
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
    for k, top in enumerate(body):
        later = body[k + 1:]
        dead = set()
        for path, st, name, idx in _resets(top, made):
            if any(_mentions(s, name) for s in later):
                continue
            if not only_elementwise(body[:k + 1], name):
                continue
            if not path:
                continue        # a top-level reset: rare, kept
            if _removable(top, path, st, name, idx):
                dead.add(id(st))
        if dead:
            out[k] = _without(top, dead)
    return out
