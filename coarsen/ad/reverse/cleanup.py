"""Cleanup of the generated function: dead compiler-made assignments, reservation placeholders
that reserve nothing, initial values, and source lines as comments.

Requires: gast statements from the emitter.
Guarantees: the user's own statements are never removed; passes return new statement lists.
``only_elementwise(stmts, name)`` tells whether an array is never aliased there (allocated
fresh, indexed element by element, updated as a whole; given its rank, a read of fewer axes is
a view, which a name may hold): the adjoint rewrites that reason about its elements
(``dead_resets``, ``loop_order``) rely on it; ``elementwise_uses`` gives those
uses for a pass that allows more (``invariant_sums.no_alias``); ``int_value`` reads an int
constant, ``affine`` an index ``name + c``, ``index_elts`` a subscript's axes,
``plain_range`` a ``for ... in range(...)`` loop, ``np_call`` a call ``np.<kind>(...)``,
``fresh_elementwise`` whether a user's array is as unaliased, ``runs_test`` the test that one runs at
least once and ``pure_index`` an index of names, constants and arithmetic; ``FreshNames`` the
names ``<stem><k>`` a rewrite of the emitted code makes (``invariant_sums``, ``invariant_reads``,
``lane_sums``); ``carried_names`` the names a loop body hands from one trip to the next
(``lane_sums``, ``vector_exp``); ``rewrite_inner`` a compound statement with its blocks
rewritten, copied on write (``dot_loops``, ``vector_exp``).
"""
from __future__ import annotations

import copy

import gast

from ...ir.nodes import Array
from ...codegen import build as B
from ...codegen.gast_queries import names_read


def drop_dead_adjoint_code(body, made):
    """Remove compiler-made assignments whose value is never read (adjoints nobody
    accumulates into, captured adjoints, unused segment temporaries, initial values), until
    none is left: generated modules have no dead temporaries.  ``made``: the names the
    compiler made (the emitter's fresh names and segment symbols, the adjoints), known by
    origin; the user's own statements are never removed."""
    def removable(st, loaded):
        if isinstance(st, gast.AugAssign) and isinstance(st.target, gast.Name):
            name = st.target.id      # x_bar += ... with x_bar never read
            return name not in loaded and name in made
        if not (isinstance(st, gast.Assign) and len(st.targets) == 1
                and isinstance(st.targets[0], gast.Name)):
            return False
        name = st.targets[0].id
        if name in loaded:
            return False
        return name in made or getattr(st, "_coarsen_init", False)

    while True:
        loaded = {n.id for st in body for n in gast.walk(st)
                  if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load)}
        changed = False

        def prune(stmts):
            nonlocal changed
            out = []
            for st in stmts:
                if removable(st, loaded):
                    changed = True
                    continue
                for field in ("body", "orelse"):
                    sub = getattr(st, field, None)
                    if isinstance(sub, list) and sub:
                        new = prune(sub)
                        setattr(st, field, new or [gast.Pass()])
                out.append(st)
            return out

        body = prune(body)
        if not changed:
            return body


def drop_marked(stmts):
    """Remove the reservation placeholders that turned out to reserve nothing."""
    out = []
    for st in stmts:
        if getattr(st, "_coarsen_drop", False):
            continue
        for field in ("body", "orelse"):
            sub = getattr(st, field, None)
            if isinstance(sub, list) and sub:
                new = drop_marked(sub)
                setattr(st, field, new or [gast.Pass()])
        out.append(st)
    return out


def init_value(t):
    if isinstance(t, Array):
        dt = {"f64": [], "i64": [B.attr("np.int64")], "bool": [B.attr("np.bool_")]}[t.dtype]
        return B.call("np.empty", B.tuple_(*([0] * t.ndim)), *dt)
    return {"f64": B.const(0.0), "i64": B.const(0), "bool": B.const(False)}[t.kind]


def np_allocation(st, made, kinds=("zeros", "empty")):
    """``(X, kind, S)`` of a statement ``X = np.<kind>(S)`` (one argument, no keyword; ``kind``
    in ``kinds``) with ``X`` a compiler-made name, else None."""
    if not (isinstance(st, gast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], gast.Name) and st.targets[0].id in made):
        return None
    v = st.value
    if not (isinstance(v, gast.Call) and isinstance(v.func, gast.Attribute)
            and isinstance(v.func.value, gast.Name) and v.func.value.id == "np"
            and v.func.attr in kinds and len(v.args) == 1 and not v.keywords):
        return None
    return st.targets[0].id, v.func.attr, v.args[0]


def elementwise_uses(body, name, rank=None):
    """``(ids, allocated)``: the ids of the ``Name`` nodes of ``name`` in ``body`` that are
    allocations (``name = np.zeros(...)`` / ``np.empty(...)``), indexings without slices or
    whole targets of ``name += ...`` / ``name -= ...``, and whether an allocation is among
    them.  With ``rank`` (``name``'s number of axes) a read indexing fewer axes is no element
    but a view (``X[0]`` of a matrix: a row a name may be bound to); a store into it
    (``X[0] = ...``) copies and stays allowed."""
    allowed, allocated = set(), False
    for st in body:
        for n in gast.walk(st):
            if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name) and n.value.id == name:
                if _element_index(n, rank):
                    allowed.add(id(n.value))
            elif isinstance(n, gast.AugAssign) and isinstance(n.target, gast.Name) and \
                    n.target.id == name and isinstance(n.op, (gast.Add, gast.Sub)):
                allowed.add(id(n.target))
            elif isinstance(n, gast.Assign) and len(n.targets) == 1 and \
                    isinstance(n.targets[0], gast.Name) and n.targets[0].id == name:
                v = n.value
                if fresh_allocation(v) and \
                        not any(isinstance(x, gast.Name) and x.id == name for x in gast.walk(v)):
                    allowed.add(id(n.targets[0]))
                    allocated = True
    return allowed, allocated


def _element_index(sub, rank):
    """Does the subscript ``sub`` index without slices, and, read with ``rank`` given, all of
    its ``rank`` axes?"""
    idx = index_elts(sub.slice)
    if any(isinstance(i, gast.Slice) for i in idx):
        return False
    return rank is None or isinstance(sub.ctx, gast.Store) or len(idx) == rank


def np_call(v, kinds):
    """Is ``v`` a call ``np.<kind>(...)`` with ``kind`` in ``kinds``?"""
    return isinstance(v, gast.Call) and isinstance(v.func, gast.Attribute) and \
        isinstance(v.func.value, gast.Name) and v.func.value.id == "np" and v.func.attr in kinds


def fresh_allocation(v):
    """``np.zeros(...)``, ``np.empty(...)``, or ``np.empty(S) if c else np.zeros(S)`` (a first
    write decided at runtime: ``first_writes.guarded_first_writes``)."""
    if isinstance(v, gast.IfExp):
        return np_call(v.body, ("empty",)) and np_call(v.orelse, ("zeros",)) and \
            len(v.body.args) == 1 == len(v.orelse.args) and not v.body.keywords and \
            not v.orelse.keywords and gast.dump(v.body.args[0]) == gast.dump(v.orelse.args[0])
    return np_call(v, ("zeros", "empty"))


def fresh_elementwise(body, name, rank=None):
    """``name`` is a user's array that no other name reaches: every assignment of it is a fresh
    allocation (``np.zeros``/``empty``/``ones``/``full``, ``np.copy(...)`` or ``....copy()``),
    at least one, and otherwise it is only indexed without slices (read at all its axes, with
    ``rank`` given: ``elementwise_uses``) or read for its ``.shape`` (no call, return or
    expression takes it whole)."""
    allowed, allocated = set(), False
    for st in body:
        for n in gast.walk(st):
            if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name) and n.value.id == name:
                if _element_index(n, rank):
                    allowed.add(id(n.value))
            elif isinstance(n, gast.Attribute) and n.attr == "shape" and \
                    isinstance(n.value, gast.Name) and n.value.id == name:
                allowed.add(id(n.value))
            elif isinstance(n, gast.Assign) and len(n.targets) == 1 and \
                    isinstance(n.targets[0], gast.Name) and n.targets[0].id == name and \
                    _fresh(n.value):
                allowed.add(id(n.targets[0]))
                allocated = True
    return allocated and all(id(n) in allowed for st in body for n in gast.walk(st)
                             if isinstance(n, gast.Name) and n.id == name)


def _fresh(v):
    """Is ``v`` a call that returns new memory (of arrays other than its result, it reads
    elements only)?"""
    if not isinstance(v, gast.Call) or v.keywords or not isinstance(v.func, gast.Attribute):
        return False
    f = v.func
    if isinstance(f.value, gast.Name) and f.value.id == "np":
        return f.attr in ("zeros", "empty", "ones", "full", "copy")
    return f.attr == "copy" and not v.args


def only_elementwise(body, name, rank=None):
    """``name`` appears only allocated fresh, indexed without slices (read at all its axes,
    with ``rank`` given), or as the whole target of ``name += ...`` / ``name -= ...``."""
    allowed, _ = elementwise_uses(body, name, rank)
    return all(id(n) in allowed for st in body for n in gast.walk(st)
               if isinstance(n, gast.Name) and n.id == name)


def int_value(node):
    """The int a constant node holds (``-1`` may be a negated constant), else None."""
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
        v = int_value(node.operand)
        return None if v is None else -v
    if isinstance(node, gast.Constant) and type(node.value) is int:
        return node.value
    return None


def affine(e):
    """``(name or None, offset)`` of an int expression built from one name and constants with
    ``+`` and ``-`` (``i + 1 - 1`` is ``("i", 0)``), else None."""
    c = int_value(e)
    if c is not None:
        return None, c
    if isinstance(e, gast.Name):
        return e.id, 0
    if isinstance(e, gast.BinOp) and isinstance(e.op, (gast.Add, gast.Sub)):
        a, b = affine(e.left), affine(e.right)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e.op, gast.Add) else -1
        if b[0] is None:
            return a[0], a[1] + sign * b[1]
        if a[0] is None and sign == 1:
            return b[0], a[1] + b[1]
    return None


class FreshNames:
    """The compiler names ``<stem>1``, ``<stem>2``, ... that no name of ``body`` is, one per
    call (a rewrite of the emitted code registers its stem in ``coarsen.ir.fresh_check``);
    ``count``: the numbers tried so far (0: none made)."""

    def __init__(self, body, stem):
        self.taken = {n.id for st in body for n in gast.walk(st) if isinstance(n, gast.Name)}
        self.stem = stem
        self.count = 0

    def __call__(self):
        while True:
            self.count += 1
            name = f"{self.stem}{self.count}"
            if name not in self.taken:
                self.taken.add(name)
                return name


def index_elts(idx):
    """The per-axis indices of a subscript's ``slice``."""
    return idx.elts if isinstance(idx, gast.Tuple) else [idx]


def rewrite_inner(st, block):
    """``st`` (a ``for``, ``while`` or ``if``) with ``block`` applied to its body and its
    ``else``: a copy where either changed, else ``st`` itself (the input is not modified)."""
    inner, orelse = block(st.body), block(st.orelse)
    if len(inner) != len(st.body) or len(orelse) != len(st.orelse) or \
            any(a is not b for a, b in zip(inner + orelse, st.body + st.orelse)):
        st = copy.copy(st)
        st.body, st.orelse = inner, orelse
    return st


def carried_names(body):
    """The names that ``body`` reads, in a trip, before it assigns them (``x += ...`` reads
    ``x``): the values one trip hands the next."""
    assigned, early = set(), set()
    for st in body:
        reads = names_read([st])
        if isinstance(st, gast.AugAssign) and isinstance(st.target, gast.Name):
            reads.add(st.target.id)
        early |= reads - assigned
        assigned |= names_read([st], gast.Store)
    return early & assigned


def plain_range(loop):
    """Is ``loop`` ``for name in range(...)`` with one to three positional arguments?"""
    return isinstance(loop.target, gast.Name) and isinstance(loop.iter, gast.Call) and \
        isinstance(loop.iter.func, gast.Name) and loop.iter.func.id == "range" and \
        not loop.iter.keywords and 1 <= len(loop.iter.args) <= 3


_BOUND_CALLS = frozenset({"max", "min"})
_INDEX_NODES = (gast.Name, gast.Constant, gast.BinOp, gast.UnaryOp, gast.Tuple, gast.Load,
                gast.operator, gast.unaryop, gast.expr_context)


def pure_index(node):
    """Names, constants and arithmetic only."""
    return all(isinstance(n, _INDEX_NODES) for n in gast.walk(node))


def _pure_bound(node):
    """A range argument: a pure index, ``.shape`` and its subscripts, ``max``/``min``."""
    for n in gast.walk(node):
        if isinstance(n, gast.Call):
            if not (isinstance(n.func, gast.Name) and n.func.id in _BOUND_CALLS) or n.keywords:
                return False
        elif isinstance(n, gast.Attribute):
            if n.attr != "shape" or not isinstance(n.value, gast.Name):
                return False
        elif not isinstance(n, _INDEX_NODES + (gast.Subscript, gast.keyword)):
            return False
    return True


def runs_test(loop):
    """The test ``len(range(...)) > 0`` (the loop runs at least once) of a plain range loop
    with pure bounds and step 1 or -1, or None."""
    if not plain_range(loop) or loop.orelse:
        return None
    args = loop.iter.args
    if not all(_pure_bound(a) for a in args):
        return None
    step = 1 if len(args) < 3 else int_value(args[2])
    if step not in (1, -1):
        return None
    lo, hi = (gast.Constant(value=0, kind=None), args[0]) if len(args) == 1 else args[:2]
    if step == -1:
        lo, hi = hi, lo
    return gast.Compare(left=copy.deepcopy(hi), ops=[gast.Gt()], comparators=[copy.deepcopy(lo)])


def nonnegative_names(body):
    """The names whose every assignment in ``body`` is the variable of a loop over
    ``range(E)``, ``range(c, ...)`` (a constant ``c >= 0``, step 1) or ``range(..., c, -1)``
    (a constant ``c >= -1``), or an int constant ``>= 0``: never negative."""
    stores, ok = {}, {}
    for st in body:
        for n in gast.walk(st):
            if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
                stores[n.id] = stores.get(n.id, 0) + 1
            if isinstance(n, gast.For) and isinstance(n.target, gast.Name) and \
                    isinstance(n.iter, gast.Call) and isinstance(n.iter.func, gast.Name) and \
                    n.iter.func.id == "range" and not n.iter.keywords:
                args = n.iter.args
                step = 1 if len(args) < 3 else int_value(args[2])
                if len(args) == 1:
                    good = True
                elif step == 1:
                    c = int_value(args[0])
                    good = c is not None and c >= 0
                elif step == -1:
                    c = int_value(args[1])
                    good = c is not None and c >= -1
                else:
                    good = False
                ok[n.target.id] = ok.get(n.target.id, 0) + (1 if good else 10 ** 6)
            if isinstance(n, gast.Assign) and len(n.targets) == 1 and \
                    isinstance(n.targets[0], gast.Name):
                c = int_value(n.value)
                good = c is not None and c >= 0
                ok[n.targets[0].id] = ok.get(n.targets[0].id, 0) + (1 if good else 10 ** 6)
    return frozenset(v for v, k in ok.items() if stores.get(v) == k)


def same_side(fa, fb, nonneg):
    """Are the int indices ``fa``, ``fb`` (``affine``: ``(name or None, offset)``) both known
    not negative (constants >= 0, or a name of ``nonneg`` plus an offset >= 0), or both
    negative constants?  Only then do different values name different elements: Python
    reads a negative index from the end (``X[-1]`` is ``X[0]`` on a one-element axis)."""
    def sure(f):
        return f[1] >= 0 and (f[0] is None or f[0] in nonneg)
    return (sure(fa) and sure(fb)) or (fa[0] is None and fb[0] is None and fa[1] < 0 and fb[1] < 0)
