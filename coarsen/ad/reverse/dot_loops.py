"""Dot loops: a loop that only sums products of two array elements as one ``_dot_acc`` call,
one that only sums array elements as one ``_sum_acc`` call.

A dot product the scalarizer made into a loop (``L[i, :i] @ x[:i]``, a row of ``A @ x``)
runs as ``acc = acc + a[.., k, ..] * b[.., k, ..]`` per trip: one chain of dependent
additions, since Numba may not reorder a float sum, so the loop runs at the latency of an
addition per element where NumPy's (BLAS) dot runs several at once.  ``_dot_acc(acc, a_view,
b_view, n)`` (``coarsen.codegen.helpers``) sums the same products in four partial sums (lane
``k % 4``), added at the end (below eight terms, the loop's own order).

Requires: the generated function's statements (gast), after every pass that reads the code's
loops (this one hides a loop inside a call: it runs last of the entry's passes), and the types
of its names (``ir.nodes`` types).
Guarantees: ``dot_loop_calls(body, types, loops)`` returns ``(statements, helpers)``: a new list
(the input not modified; a statement that changes is a new node) in which every loop whose
variable is in ``loops`` (the pipeline passes the loops the scalarizer made; ``None``: any)
``for k in range(n): <temporaries>; acc = acc + p`` (or ``acc = p + acc``) whose product ``p``,
the temporaries substituted, is ``a[I] * b[J]`` (either order) is the statement
``acc = _dot_acc(acc, a[I'], b[J'], n)``; one whose sum, the temporaries substituted, is a
single read ``a[I]`` (``np.sum(e, axis=1)``'s rows: the product with 1) is
``acc = _sum_acc(acc, a[I'], n)``, the same lanes.  ``acc += p`` counts as ``acc = acc + p``
(the same rounding).  Where

* ``acc`` is a float64 scalar: of that type, or a local the statements before the loop in its
  block last assign an element ``s = z[...]`` of a float64 array ``z`` (all its indexes, no
  slice: ``invariant_sums`` holds an element a loop only adds into so); ``a`` and ``b`` are
  float64 arrays; ``I`` and ``J`` are basic indexes in which ``k`` is one whole item (the
  views ``a[I']``, ``b[J']`` put a full slice there, so the view's element ``k`` is the
  loop's) and the other items are constants or names the loop does not assign;
* the loop has no ``else``, and its body only assigns names: the temporaries (each assigned
  once, read only by the statements after it in the body and mentioned nowhere else in the
  function) and ``acc``, last; ``k`` is read nowhere outside the loop but inside loops that
  bind it again.

The loop read nothing it wrote and wrote nothing but ``acc`` and names nothing else mentions,
so the call computes the same sum of the same products in another order (a dot product's
rounding, as NumPy's BLAS dot has its own) from eight products on; below eight, the loop's
order and bits.  Other statements
are unchanged.  Meant for the cpu target (on the python target a loop is the slow path either
way, and its source is the readable one).
"""
from __future__ import annotations

import copy

import gast

from ...codegen import build as B
from ...codegen.gast_queries import substitute
from ...ir.nodes import Array, Scalar
from .cleanup import index_elts, rewrite_inner

__all__ = ["dot_loop_calls"]

HELPER = "_dot_acc"
SUM_HELPER = "_sum_acc"


def dot_loop_calls(body, types, loops=None):
    mentions = {}
    for node in gast.walk(gast.Module(body=list(body), type_ignores=[])):
        if isinstance(node, gast.Name):
            mentions[node.id] = mentions.get(node.id, 0) + 1
    helpers = set()

    def block(stmts):
        out, local = [], {}         # the float64 locals the statements so far assigned
        for st in stmts:
            new = _dot_call(st, {**types, **local} if local else types, mentions, body) \
                if isinstance(st, gast.For) and (loops is None or (isinstance(st.target, gast.Name)
                                                                   and st.target.id in loops)) else None
            _note_local(local, st, types)
            if new is not None:
                helpers.add(new.value.func.id)
                out.append(new)
                continue
            if isinstance(st, (gast.For, gast.While, gast.If)):
                st = rewrite_inner(st, block)
            out.append(st)
        return out

    return block(list(body)), helpers


def _dot_call(loop, types, mentions, body):
    """The statement ``acc = _dot_acc(...)`` that ``loop`` is (module docstring), else None."""
    if loop.orelse or not isinstance(loop.target, gast.Name) or not _is_range1(loop.iter):
        return None
    k = loop.target.id
    stmts = [_as_assign(s) for s in loop.body]
    if not stmts or not all(isinstance(s, gast.Assign) and len(s.targets) == 1
                            and isinstance(s.targets[0], gast.Name) for s in stmts):
        return None
    acc = stmts[-1].targets[0].id
    if types.get(acc) != Scalar("f64"):
        return None
    temps = {}
    for s in stmts[:-1]:
        t = s.targets[0].id
        # a temporary: assigned once, here, and mentioned only by this loop's statements
        if t in temps or t in (acc, k) or mentions[t] != _count(stmts, t):
            return None
        temps[t] = _substituted(s.value, temps)
    last = stmts[-1].value
    if not (isinstance(last, gast.BinOp) and isinstance(last.op, gast.Add)):
        return None
    sides = [last.left, last.right]
    own = [s for s in sides if isinstance(s, gast.Name) and s.id == acc]
    if len(own) != 1:
        return None
    product = _substituted(sides[1] if sides[0] is own[0] else sides[0], temps)
    if isinstance(product, gast.BinOp) and isinstance(product.op, gast.Mult):
        reads, helper = (product.left, product.right), HELPER
    elif isinstance(product, gast.Subscript):
        reads, helper = (product,), SUM_HELPER     # a plain sum: the product with 1
    else:
        return None
    if _reached(stmts, temps) != set(temps):
        return None             # a temporary the sum does not read: its value would be lost
    # the temporaries substituted, the product names nothing the loop assigns but ``k`` and
    # ``acc``, which it may not read but as the index item ``k``
    views = [_view(r, k, types) for r in reads]
    if None in views or acc in _names(product) or not _loop_var_local(body, loop, k):
        return None
    call = B.call(B.name(helper), B.name(acc), *views, loop.iter.args[0])
    new = B.assign(acc, call)
    comment = getattr(loop, "coarsen_comment", None)
    if comment:
        new.coarsen_comment = comment
    return new


def _as_assign(st):
    """``acc += p`` as ``acc = acc + p`` (the same rounding); other statements as they are."""
    if isinstance(st, gast.AugAssign) and isinstance(st.op, gast.Add) and \
            isinstance(st.target, gast.Name):
        return gast.Assign(targets=[B.name(st.target.id, store=True)],
                           value=gast.BinOp(left=B.name(st.target.id), op=gast.Add(), right=st.value),
                           type_comment=None)
    return st


def _note_local(local, st, types):
    """Update ``local`` (the float64 locals of a block so far) past ``st``: a local ``s =
    a[...]`` reading an element of a float64 array (all its indexes, no slice: invariant_sums'
    local of an element) is float64; any other assignment of a name not in ``types`` forgets it."""
    for n in gast.walk(st):
        if isinstance(n, (gast.Assign, gast.AugAssign)):
            for t in (n.targets if isinstance(n, gast.Assign) else [n.target]):
                if isinstance(t, gast.Name) and t.id not in types:
                    local.pop(t.id, None)
    if isinstance(st, gast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], gast.Name) \
            and st.targets[0].id not in types and isinstance(st.value, gast.Subscript) \
            and isinstance(st.value.value, gast.Name):
        t = types.get(st.value.value.id)
        items = index_elts(st.value.slice)
        if isinstance(t, Array) and t.dtype == "f64" and len(items) == t.ndim and \
                not any(isinstance(it, gast.Slice) for it in items):
            local[st.targets[0].id] = Scalar("f64")


def _reached(stmts, temps):
    """The temporaries the last statement reads, directly or through other temporaries."""
    values = {s.targets[0].id: s.value for s in stmts[:-1]}
    seen, todo = set(), [stmts[-1].value]
    while todo:
        for n in _names(todo.pop()):
            if n in temps and n not in seen:
                seen.add(n)
                todo.append(values[n])
    return seen


def _is_range1(it):
    return isinstance(it, gast.Call) and isinstance(it.func, gast.Name) and it.func.id == "range" \
        and len(it.args) == 1 and not it.keywords and isinstance(it.args[0], (gast.Name, gast.Constant))


def _count(stmts, name):
    return sum(1 for s in stmts for n in gast.walk(s) if isinstance(n, gast.Name) and n.id == name)


def _names(node):
    return {n.id for n in gast.walk(node) if isinstance(n, gast.Name)}


def _substituted(node, temps):
    """A copy of ``node`` with each temporary of ``temps`` replaced by (a copy of) the
    expression it holds."""
    return substitute(copy.deepcopy(node), lambda n: copy.deepcopy(temps[n.id])
                      if isinstance(n, gast.Name) and n.id in temps else None)


def _view(read, k, types):
    """The view ``a[I']`` of a read ``a[I]`` of a float64 array in which ``k`` is one whole
    item and the other items are integer constants or integer names other than ``k``, else
    None."""
    if not (isinstance(read, gast.Subscript) and isinstance(read.value, gast.Name)
            and isinstance(read.ctx, gast.Load)):
        return None
    t = types.get(read.value.id)
    if not (isinstance(t, Array) and t.dtype == "f64"):
        return None
    items = read.slice.elts if isinstance(read.slice, gast.Tuple) else [read.slice]
    if len(items) != t.ndim:
        return None
    at = [m for m, it in enumerate(items) if isinstance(it, gast.Name) and it.id == k]
    if len(at) != 1:
        return None
    for m, it in enumerate(items):
        if m == at[0]:
            continue
        if isinstance(it, gast.Constant) and type(it.value) is int:
            continue
        if isinstance(it, gast.Name) and it.id != k and types.get(it.id) == Scalar("i64"):
            continue
        return None
    if t.ndim == 1:
        return B.name(read.value.id)
    return B.subscript(B.name(read.value.id), B.tuple_(*[
        B.slice_() if m == at[0] else copy.copy(it) for m, it in enumerate(items)]))


def _loop_var_local(body, loop, k):
    """Is ``k`` read nowhere outside ``loop`` but inside loops that bind it again?"""

    def clean(stmts):
        for st in stmts:
            if st is loop:
                continue
            if isinstance(st, gast.For) and isinstance(st.target, gast.Name) and st.target.id == k:
                if k in _names(st.iter) or not clean(st.orelse):
                    return False
                continue
            if isinstance(st, (gast.For, gast.While, gast.If)):
                head = st.iter if isinstance(st, gast.For) else st.test
                extra = st.target if isinstance(st, gast.For) else None
                if k in _names(head) or (extra is not None and k in _names(extra)) \
                        or not clean(st.body) or not clean(st.orelse):
                    return False
                continue
            if k in _names(st):
                return False
        return True

    return clean(body)
