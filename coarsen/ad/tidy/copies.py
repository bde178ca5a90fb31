"""Copy propagation of compiler temporaries: ``_t2 = _t1; y = _t2 * x`` becomes ``y = _t1 * x``.

Requires: a generated function (``flow.plain``: otherwise it is returned as it is) and the
names the rewrite may drop (``temporary``: compiler names outside the driver's vocabulary).
Guarantees: ``propagate_copies(fn, temporary)`` returns a new function (``fn`` itself where
nothing qualifies) where each statement
``T = S`` (``T`` temporary, ``S`` another name) that satisfies all of the following is gone,
every read of ``T`` reading ``S`` instead:

* ``T`` is bound by that statement and nowhere else in the function (so its value, and its
  type, is ``S``'s at that statement);
* ``S`` is a parameter or a local bound somewhere in the function (no global);
* every read of ``T`` in the whole function lies in the statements after ``T = S`` in the
  same block, before the first statement there that binds ``S`` again (a statement that binds
  ``S`` anywhere inside it, a loop's target included, ends the stretch, its own reads of ``T``
  included).

Within one run of that block, control goes from ``T = S`` to each such read only through the
statements between them, none of which binds ``S`` or ``T``: ``S`` holds ``T``'s value at
every read (for an array, the same object; no element is touched).  A read anywhere else (an
earlier trip of a loop, after the block) keeps the statement.  The comment of a removed
statement goes to the next one (``flow.remove``).  User names are never bound or removed.
"""
from __future__ import annotations

import copy

import gast

from .flow import blocks, plain, remove_in_place, store_counts


def _copy_of(st, temporary, counts):
    """``(T, S)`` of a candidate ``T = S``, else None."""
    if not (isinstance(st, gast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], gast.Name) and isinstance(st.value, gast.Name)):
        return None
    t, s = st.targets[0].id, st.value.id
    if t == s or not temporary(t) or counts.get(t) != 1 or counts.get(s, 0) < 1:
        return None
    return t, s


def _binds(st, name):
    return any(isinstance(n, gast.Name) and n.id == name and isinstance(n.ctx, gast.Store)
               for n in gast.walk(st))


def _loads(node, name):
    return [n for n in gast.walk(node)
            if isinstance(n, gast.Name) and n.id == name and isinstance(n.ctx, gast.Load)]


def _load_counts(fn):
    """{name: how many times ``fn`` reads it}."""
    counts = {}
    for n in gast.walk(fn):
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load):
            counts[n.id] = counts.get(n.id, 0) + 1
    return counts


def _try(fn, block, k, t, s, loads):
    """Propagate ``block[k]`` (``t = s``) if it qualifies; True when done.  ``loads`` is
    ``_load_counts(fn)``."""
    reachable = []
    for st in block[k + 1:]:
        if _binds(st, s):
            break
        reachable += _loads(st, t)
        if len(reachable) > loads.get(t, 0):
            return False
    if len(reachable) != loads.get(t, 0):
        return False
    for n in reachable:
        n.id = s
    remove_in_place(fn, {id(block[k])})
    return True


def propagate_copies(fn, temporary):
    """See the module docstring."""
    if not plain(fn):
        return fn
    original, fn = fn, copy.deepcopy(fn)
    done, changed = False, True
    while changed:
        changed = False
        counts, loads = store_counts(fn), _load_counts(fn)
        for block in blocks(fn.body):
            for k, st in enumerate(block):
                found = _copy_of(st, temporary, counts)
                if found and _try(fn, block, k, *found, loads):
                    changed = done = True
                    break
            if changed:
                break
    return fn if done else original
