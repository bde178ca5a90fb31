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

import gast

from .flow import blocks, plain, remove_in_place, store_counts
from .nodes import clone, walk


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
               for n in walk(st))


def _loads(node, name):
    return [n for n in walk(node)
            if isinstance(n, gast.Name) and n.id == name and isinstance(n.ctx, gast.Load)]


def _load_counts(fn):
    """{name: how many times ``fn`` reads it}."""
    counts = {}
    for n in walk(fn):
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load):
            counts[n.id] = counts.get(n.id, 0) + 1
    return counts


def _try(fn, block, k, t, s, loads):
    """Propagate ``block[k]`` (``t = s``) if it qualifies; True when done.  ``loads`` is
    {name: how many times ``fn`` reads it}, kept exact here."""
    want, reachable = loads.get(t, 0), []
    for st in block[k + 1:]:
        if len(reachable) == want:
            break           # every read of t is found: the statements left read none
        if _binds(st, s):
            break
        reachable += _loads(st, t)
        # ``loads`` is exact: these are some of the ``want`` reads of t in fn, never more
        assert len(reachable) <= want
    if len(reachable) != want:
        return False
    for n in reachable:
        n.id = s
    loads[s] = loads.get(s, 0) + want - 1     # t's reads are s's; the copy's own read is gone
    loads[t] = 0
    remove_in_place(fn, {id(block[k])})
    return True


def propagate_copies(fn, temporary):
    """See the module docstring.

    Each step propagates the first qualifying copy in the order of ``flow.blocks``, then looks
    again from the start, as if the function were new: the counts are updated exactly rather
    than recounted, and a copy found not to qualify is not tried again until a step changes
    the reads, stores or statements its test looks at, that is until a step propagates a copy
    ``t2 = s2`` with ``t2`` or ``s2`` among its two names (renaming ``t2``'s reads to ``s2``,
    removing a binding of ``t2`` and a read of ``s2``, and nothing else)."""
    if not plain(fn):
        return fn
    new = clone(fn)
    return new if propagate_copies_in_place(new, temporary) else fn


def propagate_copies_in_place(fn, temporary):
    """``propagate_copies`` on ``fn`` itself, which must be ``flow.plain``; True where it
    propagated a copy."""
    counts, loads = store_counts(fn), _load_counts(fn)
    refused = {}        # id of a statement: the (t, s) it was refused as
    gone = []           # the removed statements, kept alive so that no id is reused
    done = False
    while True:
        found = None
        for block in blocks(fn.body):
            for k, st in enumerate(block):
                cand = _copy_of(st, temporary, counts)
                if cand is None or refused.get(id(st)) == cand:
                    continue
                if _try(fn, block, k, *cand, loads):
                    found = cand
                    gone.append(st)
                    break
                refused[id(st)] = cand
            if found:
                break
        if not found:
            return done
        done = True
        counts[found[0]] -= 1
        touched = set(found)
        refused = {i: ts for i, ts in refused.items() if not touched & set(ts)}
