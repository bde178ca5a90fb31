"""Stored rereads: a taped scalar whose every value is stored into its own array element is
re-read from the element in the reverse sweep, not taped.

``e = np.exp(X - m[:, None])`` runs as a loop nest whose trip computes ``t = math.exp(u)``
and stores ``e[i, j] = t``.  The reverse of exp reads its result ``t``, and ``t`` is
overwritten by every trip, so the emitter saves it on the float tape before each assignment
(``_ftape[_fpos] = t``) and restores it trip by trip in the reverse nest.  The push keeps the
forward loop from being vectorized and writes a tape as large as ``e`` for values ``e``
already holds: the reverse trip reads ``e[i, j]`` instead, and push and pop go.

Requires: the generated function's statements (gast) as the reverse driver assembled them
(each push ``_ftape[_fpos] = t; _fpos += 1`` right before the assignment it saves for, each
pop ``_fpos -= 1; t = _ftape[_fpos]`` in the mirror of the push's loops, which have the same
loop variables), before the passes that reorder or fuse loops; the function's parameters and
the types of its names (``ir.nodes`` types); the cpu or python target (CUDA's workspace mode
writes its tapes otherwise).
Guarantees: ``stored_rereads(body, params, types)`` returns ``(statements, changed)``: a new
list, the input unchanged (changed statements are copies).  A float push of ``t`` in the
block ``K`` of a top-level loop nest ``F`` and its pop in a top-level statement ``R`` after
``F`` go when

* ``t`` is assigned by ``F`` once, ``t = v`` right after the push in
  ``K`` (the tape-lines count of the push between them, if any), by the pop, and otherwise
  only by top-level assignments of constants before ``F``; it is pushed and popped once;
* ``K`` stores ``a[I] = t`` after ``t = v`` (so the last value of ``t`` in every trip is
  stored); ``I`` is the loop variables of the loops from ``F`` down to ``K``, each once (all
  ``range`` loops without ``else``): different trips store different elements; ``F`` has no
  ``break``, ``continue`` or ``return``;
* ``a`` is a float64 array of as many axes as ``I`` (a store into another dtype would round
  or truncate ``t``), not a parameter, bound only by top-level assignments before ``F`` of
  ``np.empty``/``np.zeros``/``np.ones``/``np.full`` calls (a fresh array no other name
  reaches), and is otherwise mentioned only in element reads (as many indexes as ``I``, no
  slice: no view), ``a.shape``/``a.size``/
  ``a.ndim``, the store and top-level copies ``b = a`` after ``F`` (an inlined helper's
  result), whose names are held to the same conditions: nothing else writes it, so each
  element keeps the value its trip stored to the end of the function;
* the pop's block ``P`` sits in loops from ``R`` down whose variables are ``F``'s, in the
  same order; no loop variable is assigned in ``F`` or ``R`` but by its loop;
* ``t`` is read in ``R`` only in ``P`` before the pop, and nowhere after ``R``.

The reverse trip of ``P`` reads ``t`` before its pop, where it holds the value the matching
forward trip left, the one that trip stored into ``a[I]`` (the mirror loops run the same
values of the same variables); those reads become ``a[I]``, the same bits.  Push and pop
removed together keep every other push and pop paired (the tape is a stack).  The
reservation right before ``F`` is dropped when ``F`` pushes nothing else; otherwise it
reserves more than the pushes need, as allowed.  Reads of ``t`` between ``F`` and ``R`` are
unchanged: before the first pop ``t`` holds the same value either way.
"""
from __future__ import annotations

import copy

import gast

from ...codegen import build as B
from ...codegen.gast_queries import substitute
from ...ir.nodes import Array
from .cleanup import index_elts, np_call, plain_range
from .tapes import FP, FT, TLF

__all__ = ["stored_rereads"]

_FRESH = frozenset({"empty", "zeros", "ones", "full"})
_SHAPE_ATTRS = frozenset({"shape", "size", "ndim"})


def stored_rereads(body, params, types):
    body = list(body)
    changed = False
    while True:
        new = _one(body, frozenset(params), types)
        if new is None:
            return body, changed
        body, changed = new, True


def _one(body, params, types):
    """The body with one push and pop removed, or None."""
    for f, top in enumerate(body):
        if not isinstance(top, gast.For):
            continue
        for block, chain in _loop_blocks(top, [top]):
            for j in range(len(block)):
                t = _pushed(block, j)
                if t is None:
                    continue
                new = _try(body, f, block, j, chain, t, params, types)
                if new is not None:
                    return new
    return None


def _loop_blocks(loop, chain):
    """``(body, loops from the top-level loop down)`` of ``loop`` and of the loops directly
    in the bodies below it (not through an ``if``)."""
    yield loop.body, chain
    for st in loop.body:
        if isinstance(st, gast.For):
            yield from _loop_blocks(st, chain + [st])


def _pushed(block, j):
    """``t`` where ``block[j:]`` starts ``_ftape[_fpos] = t; _fpos += 1``, else None."""
    st = block[j]
    if not (isinstance(st, gast.Assign) and len(st.targets) == 1 and _is_slot(st.targets[0])
            and isinstance(st.value, gast.Name) and j + 1 < len(block)
            and _is_step(block[j + 1], gast.Add)):
        return None
    return st.value.id


def _is_slot(node):
    """``_ftape[_fpos]``."""
    return isinstance(node, gast.Subscript) and _is_name(node.value, FT) and _is_name(node.slice, FP)


def _is_step(st, op):
    """``_fpos += 1`` (``op`` Add) or ``_fpos -= 1`` (Sub)."""
    return isinstance(st, gast.AugAssign) and _is_name(st.target, FP) and isinstance(st.op, op) \
        and isinstance(st.value, gast.Constant) and st.value.value == 1


def _is_name(node, n):
    return isinstance(node, gast.Name) and node.id == n


def _is_count(st):
    """The tape-lines count of a push: ``_tlf[site] += ...``."""
    return isinstance(st, gast.AugAssign) and isinstance(st.target, gast.Subscript) \
        and _is_name(st.target.value, TLF)


def _try(body, f, block, j, chain, t, params, types):
    top = body[f]
    k = j + 2 + (j + 2 < len(block) and _is_count(block[j + 2]))
    if not (k < len(block) and isinstance(block[k], gast.Assign) and len(block[k].targets) == 1
            and _is_name(block[k].targets[0], t)):
        return None
    counters = [loop.target.id if isinstance(loop.target, gast.Name) else None for loop in chain]
    if None in counters or len(set(counters)) != len(counters) or \
            any(loop.orelse or not plain_range(loop) for loop in chain):
        return None
    store = next((s for s in block[k + 1:] if isinstance(s, gast.Assign) and len(s.targets) == 1
                  and isinstance(s.targets[0], gast.Subscript) and _is_name(s.value, t)), None)
    if store is None or not isinstance(store.targets[0].value, gast.Name):
        return None
    a = store.targets[0].value.id
    if types.get(a) != Array("f64", len(counters)):
        return None             # a store into another dtype rounds or truncates ``t``
    items = index_elts(store.targets[0].slice)
    if [it.id if isinstance(it, gast.Name) else None for it in items] != counters:
        return None
    if any(isinstance(n, (gast.Break, gast.Continue, gast.Return)) for n in gast.walk(top)) or \
            set(counters) - _loop_targets(top):
        return None
    pop = _find_pop(body, f, t, counters)
    if pop is None:
        return None
    r, pblock, p = pop
    if not _assignments_ok(body, f, r, t, block[k], pblock[p + 1]) or \
            not _array_ok(body, f, a, store, params):
        return None
    if not _reads_ok(body, r, t, pblock, p):
        return None
    return _rewrite(body, f, r, block, j, k, pblock, p, t, store)


def _loop_targets(node):
    """The names bound as the variable of a loop in ``node``, each bound nowhere else there
    (a name also bound otherwise is left out)."""
    loops = [n.target.id for n in gast.walk(node) if isinstance(n, gast.For)
             and isinstance(n.target, gast.Name)]
    other = set()
    for n in gast.walk(node):
        if isinstance(n, (gast.Assign, gast.AugAssign)):
            targets = n.targets if isinstance(n, gast.Assign) else [n.target]
            other |= {x.id for tg in targets for x in gast.walk(tg)
                      if isinstance(x, gast.Name) and isinstance(x.ctx, gast.Store)}
    return set(loops) - other


def _find_pop(body, f, t, counters):
    """``(r, block, p)``: the only pop of ``t``, at ``block[p]`` (``_fpos -= 1``) and
    ``block[p + 1]``, in the top-level statement ``body[r]`` after ``f``, in loops from it down
    whose variables are ``counters``; None otherwise."""
    found = []
    for r, top in enumerate(body):
        for block, chain in _all_blocks(top, []):
            for p in range(len(block) - 1):
                nxt = block[p + 1]
                if _is_step(block[p], gast.Sub) and isinstance(nxt, gast.Assign) and \
                        len(nxt.targets) == 1 and _is_name(nxt.targets[0], t) and \
                        isinstance(nxt.value, gast.Subscript) and _is_slot(nxt.value):
                    found.append((r, block, p, chain))
    if len(found) != 1:
        return None
    r, block, p, chain = found[0]
    if r <= f or not all(isinstance(c, gast.For) for c in chain) or \
            [c.target.id if isinstance(c, gast.For) and isinstance(c.target, gast.Name) else None
             for c in chain] != counters:
        return None
    if any(c.orelse or not plain_range(c) for c in chain) or \
            set(counters) - _loop_targets(body[r]):
        return None
    return r, block, p


def _all_blocks(st, chain):
    """``(block, enclosing statements from ``st`` down)`` of every statement list in ``st``
    (an ``if`` or ``while`` on the way is in the chain too)."""
    if isinstance(st, gast.For):
        inner = chain + [st]
        yield st.body, inner
        for s in st.body:
            yield from _all_blocks(s, inner)
    elif isinstance(st, (gast.If, gast.While)):
        inner = chain + [st]
        for part in (st.body, st.orelse):
            yield part, inner
            for s in part:
                yield from _all_blocks(s, inner)


def _assignments_ok(body, f, r, t, assign, pop):
    """``t`` bound only by ``assign`` (in ``F``), by ``pop`` and by top-level assignments of
    constants before ``F``; never a loop variable, an augmented or a tuple target."""
    for i, top in enumerate(body):
        for n in gast.walk(top):
            if isinstance(n, gast.Name) and n.id == t and isinstance(n.ctx, gast.Store):
                owner = _owner(top, n)
                if owner is assign or owner is pop:
                    continue
                if owner is top and i < f and isinstance(top.value, gast.Constant):
                    continue
                return False
    return True


def _owner(top, name):
    """The statement of ``top`` whose direct (single) target is ``name``, else None."""
    for n in gast.walk(top):
        if isinstance(n, gast.Assign) and len(n.targets) == 1 and n.targets[0] is name:
            return n
    return None


def _array_ok(body, f, a, store, params):
    """``a`` and its aliases (the names top-level copies ``b = a`` after ``F`` bind: an
    inlined helper's result) are no parameters, bound only by fresh-array calls at the top
    level before ``F`` and by those copies; their other mentions element reads, their shape,
    size or rank, and ``store``."""
    names = _aliases(body, f, a)
    if names & params:
        return False
    allowed = {id(store.targets[0].value)}
    for i, top in enumerate(body):
        if isinstance(top, gast.Assign) and len(top.targets) == 1 and \
                isinstance(top.targets[0], gast.Name) and top.targets[0].id in names:
            if i < f and np_call(top.value, _FRESH):
                allowed.add(id(top.targets[0]))
            elif i > f and isinstance(top.value, gast.Name) and top.value.id in names:
                allowed |= {id(top.targets[0]), id(top.value)}
            else:
                return False
    rank = len(index_elts(store.targets[0].slice))
    for top in body:
        for n in gast.walk(top):
            if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name) and \
                    n.value.id in names and isinstance(n.ctx, gast.Load) and \
                    len(index_elts(n.slice)) == rank and \
                    not any(isinstance(it, gast.Slice) for it in index_elts(n.slice)):
                allowed.add(id(n.value))        # an element, not a view
            elif isinstance(n, gast.Attribute) and isinstance(n.value, gast.Name) and \
                    n.value.id in names and n.attr in _SHAPE_ATTRS:
                allowed.add(id(n.value))
    return all(id(n) in allowed for top in body for n in gast.walk(top)
               if isinstance(n, gast.Name) and n.id in names)


def _aliases(body, f, a):
    """``a`` and the names bound to it by top-level copies after ``body[f]``, transitively."""
    names, grew = {a}, True
    while grew:
        grew = False
        for top in body[f + 1:]:
            if isinstance(top, gast.Assign) and len(top.targets) == 1 and \
                    isinstance(top.targets[0], gast.Name) and isinstance(top.value, gast.Name) and \
                    top.value.id in names and top.targets[0].id not in names:
                names.add(top.targets[0].id)
                grew = True
    return names


def _reads_ok(body, r, t, pblock, p):
    """``t`` read in ``body[r]`` only by ``pblock[:p]`` and nowhere after ``body[r]``."""
    before = {id(n) for st in pblock[:p] for n in gast.walk(st)}
    for i, top in enumerate(body[r:], r):
        for n in gast.walk(top):
            if _is_name(n, t) and isinstance(n.ctx, gast.Load) and (i > r or id(n) not in before):
                return False
    return True


def _rewrite(body, f, r, block, j, k, pblock, p, t, store):
    target = store.targets[0]
    element = B.subscript(B.name(target.value.id), copy.deepcopy(target.slice))

    def reread(n):
        return copy.deepcopy(element) if _is_name(n, t) and isinstance(n.ctx, gast.Load) else None

    fwd = _replace_block(body[f], block, block[:j] + block[k:])
    rev = _replace_block(body[r], pblock,
                         [substitute(copy.deepcopy(s), reread) for s in pblock[:p]] + pblock[p + 2:])
    out = body[:f] + [fwd] + body[f + 1:r] + [rev] + body[r + 1:]
    if f > 0 and _reservation(out[f - 1]) and not _pushes(out[f]):
        out = out[:f - 1] + out[f:]
    return out


def _replace_block(top, old, new):
    """A copy of ``top`` (copied along the path to ``old``) with the list ``old`` replaced by
    ``new``."""
    out = copy.copy(top)
    for field in ("body", "orelse"):
        part = getattr(top, field, None)
        if part is None:
            continue
        if part is old:
            setattr(out, field, list(new) or [gast.Pass()])
            continue
        setattr(out, field, [_replace_block(s, old, new) if _contains(s, old) else s for s in part])
    return out


def _contains(st, block):
    return any(getattr(n, "body", None) is block or getattr(n, "orelse", None) is block
               for n in gast.walk(st))


def _reservation(st):
    """``_ftape = _reserve(_ftape, ...)``."""
    return isinstance(st, gast.Assign) and len(st.targets) == 1 and _is_name(st.targets[0], FT) \
        and isinstance(st.value, gast.Call) and _is_name(st.value.func, "_reserve")


def _pushes(st):
    return any(isinstance(n, gast.Subscript) and _is_name(n.value, FT) and isinstance(n.ctx, gast.Store)
               for n in gast.walk(st))
