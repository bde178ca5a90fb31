"""Adjoint rows: the adjoint of a history array kept as a ring of the rows its reverse loop reaches.

A time loop that writes a history array row by row (``u[t + 1, i] = f(u[t, ...])``, heat's
stencil, an RNN's states) reverses into a loop over ``t`` running down that reads
``u_bar[t + 1, ...]`` and adds into ``u_bar[t, ...]``: at any trip it reaches a window of
``w`` rows (here 2), but the adjoint is allocated, zeroed and swept as large as the whole
history.  At heat's size l (4001 x 400) that is 12.8 MB written twice per call for 6.4 KB of
live rows.  A hand-written adjoint keeps two rows and swaps them.

Requires: the generated function's top-level statements (gast), the names the compiler made,
and the rank of each array name.
Guarantees: ``adjoint_rows(body, made, ranks)`` returns ``(statements, new names)``: a new list
(the input is not modified; changed statements are copies).  A compiler-made array ``X`` is
rewritten when

* it is allocated once, at the top level, by ``X = np.zeros(S)`` (``S`` ``Y.shape`` with
  ``Y``'s rank in ``ranks``, or a tuple), before every other statement that mentions it, and
  every other occurrence of ``X`` is ``X[i0, i1, ...]`` with one index per axis and no slice
  (no view, no whole-array use, not returned);
* exactly one top-level statement after it, ``L``, is ``for t in range(a, b, -1)`` (``b`` an
  int constant) for which the conditions below hold (a loop that sets the first rows
  reverses into such a loop too), whose every ``X[i0, ...]`` has ``i0 = t + c`` (``c`` a constant), with no
  ``break`` or ``return`` in it and ``t`` not assigned in it; ``c`` spans ``[cmin, cmax]``,
  the window, ``w = cmax - cmin + 1`` rows, and ``b + 1 + cmin >= 0`` (no row of the loop is
  negative);
* every mention between the allocation and ``L`` has ``i0 = a + k`` with ``cmin < k <= cmax``
  (the rows of the first trip's window that its trip does not clear), where ``i0`` and ``a``
  are sums of constants and names that hold one value from the allocation on (parameters
  never assigned, or names assigned once, at the top level, before the allocation; ``a``
  need not be such a sum where nothing mentions ``X`` before ``L``);
* every mention after ``L`` has ``i0`` in ``[b + 1 + cmin, b + 1 + cmax]`` (the last trip's
  window): an int constant, or the variable of a loop ``for v in range(c0, c1)`` (or its
  reverse, ``range(c1 - 1, c0 - 1, -1)``) of the same
  top-level statement, with constant bounds and ``v`` assigned nowhere else in it (a scheme
  of several steps sets its first rows in a loop).

Then ``X`` is allocated with ``R`` rows, ``R = w`` where the loop runs at least once and the
whole history's row count otherwise, and row ``r`` lives at ``r % R``; each trip of ``L``
first computes the slot of every row offset it uses and zeroes the slot of row ``t + cmin``.
That row entered the window with this trip: in the whole array no statement before it reached
the row (earlier trips reach rows ``t' + cmin > t + cmin``, the statements before ``L`` rows
above ``a + cmin``), so it holds zeros there, and the slot it takes held row
``t + cmin + w = (t + 1) + cmax``, which no later trip reaches.  By induction the ring holds
the window's rows as the whole array does at every trip, and after the last trip
(``t = b + 1``) the rows the statements after ``L`` read.  Where the loop runs no trip,
``R`` is the history's row count and ``r % R`` is Python's own index of ``r``: the same
elements.  (The test of whether ``L`` runs reads ``a`` where ``X`` is allocated; where
nothing mentions ``X`` before ``L``, ``a`` may change before ``L`` and the test be wrong, and
the ring is right either way: each trip clears the row entering its window, which the whole
array holds as zeros, and the rows after ``L`` lie in ``[0, w)`` or index a one-row-per-slot
array.)  ``X``'s other extents are read once, where it is allocated, for the trips' zeroing
loops.  The values the function computes are unchanged, bit for bit.
"""
from __future__ import annotations

import copy

import gast

from ...codegen import build as B
from .cleanup import affine, index_elts, int_value, np_allocation, plain_range, runs_test

__all__ = ["adjoint_rows"]

#: the widest window kept as a ring (a wider one is left whole)
MAX_WINDOW = 8


def _names(node):
    return [n for n in gast.walk(node) if isinstance(n, gast.Name)]


def _subs(node, name):
    return [n for n in gast.walk(node) if isinstance(n, gast.Subscript)
            and isinstance(n.value, gast.Name) and n.value.id == name]


def _assigned(node):
    return {n.id for n in _names(node) if isinstance(n.ctx, gast.Store)}


def _linear(e, stable, defs, depth=0):
    """``(terms, const)`` of an int expression built from ``+``, ``-``, int constants and
    names, names resolved through their single top-level assignment; None otherwise."""
    if depth > 16:
        return None
    c = int_value(e)
    if c is not None:
        return {}, c
    if isinstance(e, gast.Name):
        if e.id not in stable:
            return None
        if e.id in defs:
            return _linear(defs[e.id], stable, defs, depth + 1)
        return {e.id: 1}, 0
    if isinstance(e, gast.BinOp) and isinstance(e.op, (gast.Add, gast.Sub)):
        a, b = _linear(e.left, stable, defs, depth + 1), _linear(e.right, stable, defs, depth + 1)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e.op, gast.Add) else -1
        terms = dict(a[0])
        for k, v in b[0].items():
            terms[k] = terms.get(k, 0) + sign * v
        return {k: v for k, v in terms.items() if v}, a[1] + sign * b[1]
    return None


def _allocation(st, made, ranks):
    """``(X, shape node, rank)`` of ``X = np.zeros(S)``, else None."""
    alloc = np_allocation(st, made, kinds=("zeros",))
    if alloc is None:
        return None
    name, _, shape = alloc
    if isinstance(shape, gast.Attribute) and shape.attr == "shape" and \
            isinstance(shape.value, gast.Name) and ranks.get(shape.value.id):
        return name, shape, ranks[shape.value.id]
    if isinstance(shape, gast.Tuple) and shape.elts:
        return name, shape, len(shape.elts)
    return None


def _extents(shape, rank):
    """The per-axis extents of the allocation's shape ``S``, as expressions."""
    if isinstance(shape, gast.Tuple):
        return [copy.deepcopy(e) for e in shape.elts]
    return [B.subscript(copy.deepcopy(shape), B.const(k)) for k in range(rank)]


def _plan(body, pos, name, rank, stable, defs):
    """``(loop position, t, cmin, cmax)`` where ``X`` (allocated at ``pos``) qualifies."""
    mentions = [k for k, st in enumerate(body) if any(n.id == name for n in _names(st))]
    if not mentions or mentions[0] != pos:
        return None
    for k in mentions[1:]:
        st = body[k]
        subs = _subs(st, name)
        if len(subs) != sum(1 for n in _names(st) if n.id == name):
            return None         # a whole-array use
        if any(len(index_elts(s.slice)) != rank or
               any(isinstance(i, gast.Slice) for i in index_elts(s.slice)) for s in subs):
            return None
    loops = []
    for k in mentions[1:]:
        st = body[k]
        if isinstance(st, gast.For) and plain_range(st) and len(st.iter.args) == 3 and \
                int_value(st.iter.args[2]) == -1 and int_value(st.iter.args[1]) is not None:
            t = st.target.id
            rows = [affine(index_elts(s.slice)[0]) for s in _subs(st, name)]
            if all(r is not None and r[0] == t for r in rows):
                loops.append((k, t, [r[1] for r in rows]))
    # the loop the window is about: the one candidate for which the rest holds (the reverse
    # of a loop that sets the first rows, ``for k in range(1, -1, -1)``, looks like one too)
    found = [p for p in (_window(body, mentions, name, c, stable, defs) for c in loops) if p]
    return found[0] if len(found) == 1 else None


def _window(body, mentions, name, candidate, stable, defs):
    """``(loop position, t, cmin, cmax)`` where the statements before and after the loop
    ``candidate`` (``(position, t, row offsets)``) reach rows of its first and last
    windows, else None."""
    at, t, offsets = candidate
    loop = body[at]
    cmin, cmax = min(offsets), max(offsets)
    lo = int_value(loop.iter.args[1]) + 1
    if cmax - cmin + 1 > MAX_WINDOW or lo + cmin < 0 or t in _assigned(gast.Module(
            body=loop.body, type_ignores=[])) or \
            any(isinstance(n, (gast.Break, gast.Return)) for n in gast.walk(loop)):
        return None
    # (the start matters only to the rows before the loop)
    start = _linear(loop.iter.args[0], stable, defs) if mentions[1] < at else None
    if mentions[1] < at and start is None:
        return None
    for k in mentions[1:]:
        if k == at:
            continue
        spans = _range_vars(body[k])
        for s in _subs(body[k], name):
            i0 = index_elts(s.slice)[0]
            if k < at:
                row = _linear(i0, stable, defs)
                if row is None or row[0] != start[0] or not cmin < row[1] - start[1] <= cmax:
                    return None
            else:
                span = _span(i0, spans)
                if span is None or not lo + cmin <= span[0] <= span[1] <= lo + cmax:
                    return None
    return at, t, cmin, cmax


def _range_vars(st):
    """{v: (first, last)} of the loops ``for v in range(c)`` / ``range(c0, c1)`` /
    ``range(c1, c0, -1)`` in ``st`` with constant bounds and at least one trip, ``v`` assigned nowhere else in ``st``: every
    value ``v`` holds in ``st`` (inside the loop, or its last after it) lies in the span."""
    stores = {}
    for n in _names(st):
        if isinstance(n.ctx, gast.Store):
            stores[n.id] = stores.get(n.id, 0) + 1
    out = {}
    for n in gast.walk(st):
        if isinstance(n, gast.For) and plain_range(n) and stores.get(n.target.id) == 1:
            bounds = [int_value(a) for a in n.iter.args]
            if None in bounds:
                continue
            if len(bounds) == 3 and bounds[2] == -1:          # range(a, b, -1): b + 1 .. a
                first, last = bounds[1] + 1, bounds[0]
            elif len(bounds) == 3 and bounds[2] != 1:
                continue
            else:
                first, last = (0, bounds[0] - 1) if len(bounds) == 1 else (bounds[0], bounds[1] - 1)
            if first <= last:
                out[n.target.id] = (first, last)
    return out


def _span(i0, spans):
    """``(first, last)`` of the values of a row index after the loop: a constant, or a
    variable of ``spans`` (``_range_vars``)."""
    r = int_value(i0)
    if r is not None:
        return r, r
    if isinstance(i0, gast.Name):
        return spans.get(i0.id)
    return None


class _Fresh:
    def __init__(self, body):
        self.used = {n.id for st in body for n in _names(st)}
        self.new = set()

    def __call__(self, stem):
        k = 0
        while f"{stem}{k}" in self.used:
            k += 1
        self.used.add(f"{stem}{k}")
        self.new.add(f"{stem}{k}")
        return f"{stem}{k}"


def _slotted(st, name, slot_of):
    """A copy of ``st`` with the row index ``i0`` of every ``X[i0, ...]`` replaced by
    ``slot_of(i0)``."""
    st = copy.deepcopy(st)
    for s in _subs(st, name):
        elts = index_elts(s.slice)
        new = [slot_of(elts[0])] + list(elts[1:])
        s.slice = gast.Tuple(elts=new, ctx=gast.Load()) if len(new) > 1 else new[0]
    return st


def _stable_names(body, params, pos):
    """Names holding one value from statement ``pos`` on, and the single top-level
    assignment of those assigned."""
    counts = {}
    for st in body:
        for n in _names(st):
            if isinstance(n.ctx, gast.Store):
                counts[n.id] = counts.get(n.id, 0) + 1
    defs = {}
    for k, st in enumerate(body[:pos]):
        if isinstance(st, gast.Assign) and len(st.targets) == 1 and \
                isinstance(st.targets[0], gast.Name) and counts.get(st.targets[0].id) == 1:
            defs[st.targets[0].id] = st.value
    stable = {p for p in params if p not in counts} | set(defs)
    return stable, defs


def adjoint_rows(body, made, ranks, params=()):
    """See the module docstring; ``params``: the function's parameters."""
    out = list(body)
    fresh = _Fresh(body)
    pos = 0
    while pos < len(out):
        st = out[pos]
        alloc = _allocation(st, made, ranks)
        stable, defs = _stable_names(out, params, pos) if alloc else (None, None)
        plan = _plan(out, pos, alloc[0], alloc[2], stable, defs) if alloc else None
        test = runs_test(out[plan[0]]) if plan else None
        if test is None:
            pos += 1
            continue
        name, shape, rank = alloc
        at, t, cmin, cmax = plan
        loop = out[at]

        def extent(k, shape=shape, rank=rank):
            return _extents(shape, rank)[k]
        rows = fresh("_rows")
        # R rows: the window where the loop runs, the whole history where it does not; the
        # other extents as they are here (the trips' zeroing loops read them)
        exts = [fresh("_ext") for _ in range(1, rank)]
        head = [B.assign(rows, B.ifexp(test, B.const(cmax - cmin + 1), extent(0)))] + \
            [B.assign(e, extent(k)) for k, e in enumerate(exts, start=1)]
        new_alloc = B.assign(name, B.call("np.zeros", B.tuple_(B.name(rows), *exts)))
        for attr in ("coarsen_comment", "_coarsen_loc"):
            if hasattr(st, attr):
                setattr(new_alloc, attr, getattr(st, attr))

        def mod(e, rows=rows):
            return B.binop(copy.deepcopy(e), "%", B.name(rows))
        slots = {c: fresh("_row") for c in range(cmin, cmax + 1)}
        trip_head = [B.assign(slots[c], mod(B.binop(B.name(t), "+", B.const(c)) if c else B.name(t)))
                     for c in range(cmin, cmax + 1)]
        # zero the slot of row t + cmin, which enters the window with this trip
        cols = [fresh("_col") for _ in range(1, rank)]
        index = [B.name(slots[cmin])] + [B.name(v) for v in cols]
        zero = B.assign(B.subscript(B.name(name), B.tuple_(*index) if cols else index[0]),
                        B.const(0.0))
        for k in reversed(range(1, rank)):
            zero = B.for_range(cols[k - 1], [B.name(exts[k - 1])], [zero])
        trip_head.append(zero)

        def after(i0, mod=mod, w=cmax - cmin + 1, spans=None):
            # a row 0 <= r < w after the loop is r in both cases: r % w, or a row the
            # forward sweep indexed, r % R = r with r < R
            span = _span(i0, spans or {})
            return copy.deepcopy(i0) if span is not None and 0 <= span[0] <= span[1] < w \
                else mod(i0)

        def in_loop(i0, slots=slots):
            return B.name(slots[affine(i0)[1]])
        new_loop = copy.copy(loop)
        new_loop.body = trip_head + [_slotted(s, name, in_loop) for s in loop.body]
        rest = []
        for k in range(pos + 1, len(out)):
            if k == at:
                rest.append(new_loop)
            elif any(n.id == name for n in _names(out[k])):
                spans = _range_vars(out[k]) if k > at else {}
                rest.append(_slotted(out[k], name, lambda i0, spans=spans: after(i0, spans=spans)))
            else:
                rest.append(out[k])
        out = out[:pos] + head + [new_alloc] + rest
        pos += len(head) + 1
    return out, fresh.new
