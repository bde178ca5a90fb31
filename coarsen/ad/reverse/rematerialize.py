"""Rank-one adjoints rematerialized: a matrix adjoint written as ``r_i * x[j]`` is not stored.

The reverse of ``w = A @ x`` writes the matrix adjoint ``A_bar[i, j] = w_bar[i] * x[j]``, one
element per trip of a nest over the matrix, and a later nest (the reverse of the statement that
made ``A``) reads it back element by element.  That is two passes over an n x m array in memory
for a value that costs one multiplication: the reverse sweep keeps the n row values
``w_bar[i]`` instead, and the reading nest computes each element where it needs it (gemver's
``A @ x``, and any dense layer ``W @ h`` whose input matrix is computed).

Requires: the generated function's top-level statements (gast), the names the compiler made,
the ranks of the arrays (``{name: ndim}``) and the names of float scalars (adjoints included).
Guarantees: ``rematerialize(body, made, ranks, floats)`` returns ``(statements, new names)``: a new list,
the input unchanged (changed statements are copies).  A compiler-made 2-D array ``X`` is
rewritten only when

* ``X`` appears in three top-level statements only: its allocation ``X = np.empty(S)`` (every
  element the function reads it wrote first), the *writer* ``W`` and the *reader* ``R``, in
  that order;
* ``W`` is ``for i in range(...)`` whose body holds, directly, ``for j in range(...)`` whose
  body holds, directly, ``X[i, j] = v``, the only mention of ``X`` in ``W`` (``i`` and ``j``
  assigned by their loops only);
* ``v``, with the temporaries assigned once in the inner body before the store written out
  (their operands not assigned in the inner body), is at most ``MAX_OPS`` additions,
  subtractions, multiplications and negations of constants, element reads ``Z[j]`` or
  ``Z[i]`` of 1-D arrays, and float scalars not assigned in the inner body: *row values*, at
  most ``MAX_ROWS`` of them, where ``W``, the statements between ``W`` and
  ``R`` or ``R`` assign them, and other scalars as they are (nothing from ``W`` to ``R``
  assigns them); a temporary written out reads only temporaries assigned before it;
* from ``W`` to ``R`` nothing writes a ``Z``: every array stored into there is ``X`` or an
  array no other name reaches up to ``R`` (``invariant_sums.no_alias``), not a ``Z``, and the only calls
  are ``range``, ``math`` functions and ``loop_order.PURE_CALLS``;
* in ``R`` every mention of ``X`` is ``X[p, q]``, with one pair of names ``p``, ``q`` (assigned
  by their loops only), in statements directly in one block (the body of the loop over ``q``);
  where ``R`` writes ``X``, the loops around that block are exactly the loops over ``p`` and
  ``q`` (different trips, different elements); ``R`` only adds into ``X[p, q]``, subtracts from
  it or reads it, never assigns it whole (each element ``R`` touches was written by ``W``:
  ``W``'s trip ``(p, q)`` read the same ``Z`` elements and saved the row values of ``p``).

Where ``W`` and ``R`` are one statement (``fuse_loops`` ran them as one nest), it is rewritten
when every mention of ``X`` there is ``X[p, q]`` in one block directly in the loops over ``p``
and ``q``, the only loops around it, the first one ``X[p, q] = e``: each trip writes its own
element before reading it, and a local ``_rmN`` takes the element's place (the allocation
goes).

Otherwise each row value ``s`` is saved per row (``_rowN[i] = s`` just before the inner loop of
``W``, ``_rowN = np.empty(S[0])`` in place of the allocation), the store and the temporaries
only it read leave ``W``, and the block of ``R`` starts with ``_rmN = v`` (``i``, ``j`` read as
``p``, ``q``; row values as ``_rowN[p]``) and reads and writes ``_rmN`` in place of
``X[p, q]``.  ``v`` is evaluated with the same operations on the same values, so the results
are the same bits.
"""
from __future__ import annotations

import copy

import gast

from ...codegen import build as B
from .cleanup import index_elts, plain_range
from ...codegen.gast_queries import names_read, substitute
from .invariant_sums import no_alias
from .loop_order import PURE_CALLS

__all__ = ["rematerialize", "MAX_OPS", "MAX_ROWS"]

#: the most operations one element's recomputation may take
MAX_OPS = 4
#: the most row values saved per array
MAX_ROWS = 2

_OPS = (gast.Add, gast.Sub, gast.Mult)


def _names(node, ctx=None):
    return [n for n in gast.walk(node) if isinstance(n, gast.Name)
            and (ctx is None or isinstance(n.ctx, ctx))]


def _mentions(node, name):
    return any(n.id == name for n in _names(node))


def _assigned_names(nodes):
    """Names assigned (as targets or loop variables) anywhere in ``nodes``."""
    return names_read(nodes, (gast.Store, gast.Del))


def _element(node, name):
    """``(p, q)`` of ``name[p, q]`` with ``p``, ``q`` names, else None."""
    if not (isinstance(node, gast.Subscript) and isinstance(node.value, gast.Name)
            and node.value.id == name):
        return None
    idx = index_elts(node.slice)
    if len(idx) != 2 or not all(isinstance(e, gast.Name) for e in idx) or idx[0].id == idx[1].id:
        return None
    return idx[0].id, idx[1].id


def _loop_var(loop):
    return loop.target.id if isinstance(loop, gast.For) and plain_range(loop) and not loop.orelse \
        else None


class _Value:
    """``v`` of the writer's store as an expression over the inner trip: leaves classified."""

    def __init__(self, inner_body, store_at, i, j, ranks):
        self.i, self.j, self.ranks = i, j, ranks
        before = inner_body[:store_at]
        assigned_inner = _assigned_names(inner_body)
        counts = {}
        for st in inner_body:
            for n in _names(st, gast.Store):
                counts[n.id] = counts.get(n.id, 0) + 1
        self.temps, self.order = {}, {}
        for k, st in enumerate(before):
            if isinstance(st, gast.Assign) and len(st.targets) == 1 and \
                    isinstance(st.targets[0], gast.Name) and counts.get(st.targets[0].id) == 1:
                self.temps[st.targets[0].id] = st.value
                self.order[st.targets[0].id] = k
        self.assigned_inner = assigned_inner
        self.arrays, self.scalars, self.used_temps = set(), set(), set()
        self.ops = 0

    def expand(self, node, depth=0):
        """``node`` with the temporaries written out, or None where it does not qualify."""
        if depth > 16:
            return None
        if isinstance(node, gast.Constant) and type(node.value) in (int, float):
            return copy.deepcopy(node)
        if isinstance(node, gast.BinOp) and isinstance(node.op, _OPS):
            self.ops += 1
            left, right = self.expand(node.left, depth + 1), self.expand(node.right, depth + 1)
            if left is None or right is None:
                return None
            return gast.BinOp(left=left, op=copy.deepcopy(node.op), right=right)
        if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
            self.ops += 1
            operand = self.expand(node.operand, depth + 1)
            return None if operand is None else gast.UnaryOp(op=gast.USub(), operand=operand)
        if isinstance(node, gast.Subscript) and isinstance(node.value, gast.Name) and \
                isinstance(node.slice, gast.Name) and node.slice.id in (self.i, self.j) and \
                self.ranks.get(node.value.id) == 1:
            self.arrays.add(node.value.id)
            return copy.deepcopy(node)
        if isinstance(node, gast.Name):
            n = node.id
            if n in self.temps:
                self.used_temps.add(n)
                value = self.temps[n]
                # its operands hold at the store what they held at its assignment
                if any(x.id in self.assigned_inner and (x.id not in self.temps or
                                                        self.order[x.id] >= self.order[n])
                       for x in _names(value)):
                    return None
                return self.expand(value, depth + 1)
            if n in (self.i, self.j) or n in self.assigned_inner or n in self.ranks:
                return None
            self.scalars.add(n)
            return B.name(n)
        return None


def _calls_ok(nodes):
    for st in nodes:
        for n in gast.walk(st):
            if isinstance(n, gast.Call):
                f = n.func
                if isinstance(f, gast.Name) and (f.id in PURE_CALLS or f.id == "range"):
                    continue
                if isinstance(f, gast.Attribute) and isinstance(f.value, gast.Name) and \
                        f.value.id == "math":
                    continue
                return False
    return True


def _stored_arrays(nodes):
    out = set()
    for st in nodes:
        for n in gast.walk(st):
            target = None
            if isinstance(n, gast.AugAssign):
                target = n.target
            elif isinstance(n, gast.Assign):
                for t in n.targets:
                    for x in gast.walk(t):
                        if isinstance(x, gast.Subscript) and isinstance(x.ctx, gast.Store):
                            target = x
            if isinstance(target, gast.Subscript):
                base = target.value
                if not isinstance(base, gast.Name):
                    return None
                out.add(base.id)
    return out


def _reader_block(reader, x, assign_ok=False):
    """``(block, loops, (p, q), writes)`` of the reader: the one block holding every mention of
    ``x``, the loops around it (outermost first), the index names, whether it writes ``x``."""
    found = []

    def visit(stmts, loops):
        for k, st in enumerate(stmts):
            if isinstance(st, gast.For):
                if _mentions(st.iter, x):
                    found.append(None)
                visit(st.body, loops + [st])
                visit(st.orelse, loops + [None])
            elif isinstance(st, (gast.While, gast.If)):
                if _mentions(st.test, x):
                    found.append(None)
                visit(st.body, loops + [None])
                visit(st.orelse, loops + [None])
            elif _mentions(st, x):
                found.append((stmts, tuple(loops), st))

    visit([reader], [])
    if not found or any(f is None for f in found):
        return None
    blocks = {id(f[0]) for f in found}
    if len(blocks) != 1:
        return None
    block, loops = found[0][0], found[0][1]
    pairs, writes = set(), False
    for _, _, st in found:
        if not assign_ok and isinstance(st, gast.Assign) and any(_mentions(t, x) for t in st.targets):
            return None       # assigned whole: not read first
        subs = [n for n in gast.walk(st) if isinstance(n, gast.Subscript)
                and isinstance(n.value, gast.Name) and n.value.id == x]
        if len(subs) != sum(1 for n in _names(st) if n.id == x):
            return None       # x whole (a call's argument, an alias)
        for s in subs:
            pq = _element(s, x)
            if pq is None:
                return None
            pairs.add(pq)
            if isinstance(s.ctx, gast.Store):
                writes = True
    if len(pairs) != 1:
        return None
    p, q = next(iter(pairs))
    if any(lp is None for lp in loops):
        return None
    vars_ = [_loop_var(lp) for lp in loops]
    if p not in vars_ or q not in vars_ or vars_.count(p) != 1 or vars_.count(q) != 1:
        return None
    # p and q hold still within the block's trips: assigned by their loops only
    assigned = {}
    for n in _names(reader, gast.Store):
        assigned[n.id] = assigned.get(n.id, 0) + 1
    if assigned.get(p) != 1 or assigned.get(q) != 1:
        return None
    if writes and len(loops) != 2:
        return None
    return block, loops, (p, q), writes


class _Rewrite:
    def __init__(self, body, made, ranks, floats):
        self.made, self.ranks, self.floats = made, ranks, floats
        self.used = {n.id for st in body for n in _names(st)}
        self.new = set()

    def fresh(self, stem):
        k = 0
        while True:
            k += 1
            name = f"{stem}{k}"
            if name not in self.used:
                self.used.add(name)
                self.new.add(name)
                return name

    def candidates(self, body):
        for a, st in enumerate(body):
            if not (isinstance(st, gast.Assign) and len(st.targets) == 1
                    and isinstance(st.targets[0], gast.Name)):
                continue
            x = st.targets[0].id
            v = st.value
            if x not in self.made or self.ranks.get(x) != 2 or not (
                    isinstance(v, gast.Call) and isinstance(v.func, gast.Attribute)
                    and isinstance(v.func.value, gast.Name) and v.func.value.id == "np"
                    and v.func.attr == "empty" and len(v.args) == 1 and not v.keywords
                    and not _mentions(v, x)):
                continue
            later = [k for k in range(a + 1, len(body)) if _mentions(body[k], x)]
            earlier = [k for k in range(a) if _mentions(body[k], x)]
            if earlier or len(later) not in (1, 2):
                continue
            yield a, later[0], later[1] if len(later) == 2 else None, x

    def local(self, body, a, w, x):
        """The one statement that mentions ``x`` writes each element before it reads it, in
        one trip of exactly the two loops around: a local in place of the element."""
        found = _reader_block(body[w], x, assign_ok=True)
        if found is None:
            return None
        block, loops, _, _ = found
        first = next(st for st in block if _mentions(st, x))
        if len(loops) != 2 or not (isinstance(first, gast.Assign) and len(first.targets) == 1
                                   and _element(first.targets[0], x) is not None
                                   and not _mentions(first.value, x)):
            return None
        name = self.fresh("_rm")
        stmt = copy.deepcopy(body[w])
        target = _find_block(stmt, body[w], block)
        target[:] = [_localize(st, x, name) for st in target]
        out = list(body)
        out[w] = stmt
        del out[a]
        return out

    def try_one(self, body, a, w, r, x):
        if r is None:
            return self.local(body, a, w, x)
        writer, reader = body[w], body[r]
        i = _loop_var(writer)
        # (the writer's own bounds may not read X either: its allocation goes away)
        if i is None or _mentions(writer.iter, x):
            return None
        inner_at = [k for k, st in enumerate(writer.body) if _mentions(st, x)]
        if len(inner_at) != 1:
            return None
        inner = writer.body[inner_at[0]]
        j = _loop_var(inner)
        # (``j is None`` first: a statement other than a ``for`` has no ``iter`` to read; an
        # inner loop over ``i`` again is refused below too, ``i`` then assigned twice in W)
        if j is None or j == i or _mentions(inner.iter, x):
            return None
        stores = [k for k, st in enumerate(inner.body) if _mentions(st, x)]
        if len(stores) != 1:
            return None
        st = inner.body[stores[0]]
        if not (isinstance(st, gast.Assign) and len(st.targets) == 1
                and _element(st.targets[0], x) == (i, j) and not _mentions(st.value, x)):
            return None
        span = body[w:r + 1]
        wcount = {}
        for n in _names(writer, gast.Store):
            wcount[n.id] = wcount.get(n.id, 0) + 1
        if wcount.get(i) != 1 or wcount.get(j) != 1:
            return None
        val = _Value(inner.body, stores[0], i, j, self.ranks)
        expr = val.expand(st.value)
        if expr is None or val.ops > MAX_OPS:
            return None
        # nothing from W to R writes a Z, nor calls what could
        stored = _stored_arrays(span)
        if stored is None or not _calls_ok(span):
            return None
        for z in stored:
            if z != x and not no_alias(body[:r + 1], z):
                return None
        if stored & val.arrays:
            return None
        assigned_span = _assigned_names(span)
        rows = sorted(s for s in val.scalars if s in assigned_span)
        if len(rows) > MAX_ROWS or any(s not in self.floats for s in val.scalars) or \
                any(z in assigned_span for z in val.arrays):
            return None
        found = _reader_block(reader, x)
        if found is None:
            return None
        block, loops, (p, q), _ = found
        if p in val.scalars or q in val.scalars or any(p == z or q == z for z in val.arrays):
            return None
        # the names the recomputation reads keep their meaning in R's block
        return self.apply(body, a, w, r, x, i, j, inner_at[0], stores[0], val, expr, rows,
                          block, (p, q))

    def apply(self, body, a, w, r, x, i, j, inner_k, store_k, val, expr, rows, block, pq):
        p, q = pq
        row_names = {s: self.fresh("_row") for s in rows}
        local = self.fresh("_rm")
        alloc = body[a]
        shape = alloc.value.args[0]
        first = copy.deepcopy(shape.elts[0]) if isinstance(shape, gast.Tuple) else \
            gast.Subscript(value=copy.deepcopy(shape), slice=gast.Constant(value=0, kind=None),
                           ctx=gast.Load())
        allocs = [B.assign(n, B.call("np.empty", copy.deepcopy(first))) for n in row_names.values()]
        if allocs and getattr(alloc, "coarsen_comment", None):
            allocs[0].coarsen_comment = alloc.coarsen_comment
        # the writer: the row values saved, the store and the temporaries only it read dropped
        writer = copy.deepcopy(body[w])
        inner = writer.body[inner_k]
        kept = inner.body[:store_k] + inner.body[store_k + 1:]
        outside = {n.id for k, st in enumerate(body) if k != w for n in _names(st, gast.Load)}
        outside |= {n.id for k, st in enumerate(writer.body) if k != inner_k
                    for n in _names(st, gast.Load)}
        changed = True
        while changed:
            changed = False
            for k, st in enumerate(kept):
                if isinstance(st, gast.Assign) and len(st.targets) == 1 and \
                        isinstance(st.targets[0], gast.Name) and st.targets[0].id in val.used_temps:
                    reads = {n.id for o, s2 in enumerate(kept) if o != k for n in _names(s2, gast.Load)}
                    if st.targets[0].id not in reads | outside:
                        kept = kept[:k] + kept[k + 1:]
                        changed = True
                        break
        inner.body = kept or [gast.Pass()]
        saves = [B.assign(B.subscript(row_names[s], B.name(i)), B.name(s)) for s in rows]
        writer.body = writer.body[:inner_k] + saves + writer.body[inner_k:]
        # the reader: the element computed at the top of its block, then a local
        sub = {i: p, j: q}

        def at_pq(node):
            node = copy.deepcopy(node)
            for n in gast.walk(node):
                if isinstance(n, gast.Subscript) and isinstance(n.slice, gast.Name) and \
                        n.slice.id in sub and isinstance(n.value, gast.Name) and n.value.id in val.arrays:
                    n.slice = B.name(sub[n.slice.id])
            return _rows_read(node, row_names, p)

        reader = copy.deepcopy(body[r])
        target_block = _find_block(reader, body[r], block)
        head = B.assign(local, at_pq(expr))
        new_block = [head] + [_localize(st, x, local) for st in target_block]
        target_block[:] = new_block
        out = list(body)
        out[a:a + 1] = allocs
        shift = len(allocs) - 1
        out[w + shift] = writer
        out[r + shift] = reader
        return out


def _rows_read(node, row_names, p):
    """Row values read as ``_rowN[p]``."""
    return substitute(node, lambda n: B.subscript(row_names[n.id], B.name(p))
                       if isinstance(n, gast.Name) and n.id in row_names else None)


def _localize(node, x, local):
    """``node`` with ``x[p, q]`` as the name ``local`` (its context kept)."""
    return substitute(node, lambda n: gast.Name(id=local, ctx=type(n.ctx)(), annotation=None,
                                                 type_comment=None)
                       if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name)
                       and n.value.id == x else None)


def _find_block(copied, original, block):
    """The list in ``copied`` at the place of ``block`` in ``original`` (same shape)."""
    def visit(c, o):
        for field, value in gast.iter_fields(o):
            if isinstance(value, list):
                if value is block:
                    return getattr(c, field)
                for cv, ov in zip(getattr(c, field), value):
                    if isinstance(ov, gast.AST):
                        got = visit(cv, ov)
                        if got is not None:
                            return got
            elif isinstance(value, gast.AST):
                got = visit(getattr(c, field), value)
                if got is not None:
                    return got
        return None
    return visit(copied, original)


def rematerialize(body, made, ranks, floats):
    """The module docstring's rewrite, applied to every array that qualifies."""
    rw = _Rewrite(body, made, ranks, floats)
    out = list(body)
    done = True
    while done:
        done = False
        for a, w, r, x in list(rw.candidates(out)):
            got = rw.try_one(out, a, w, r, x)
            if got is not None:
                out = got
                done = True
                break
    return out, frozenset(rw.new)
