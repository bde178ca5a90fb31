"""Loop nests versioned on their broadcast strides: the common case, no broadcasting, runs with
the strides as the constant 1.

The scalarizer indexes each operand of an element-wise array expression through a broadcast
stride, ``s = _bcast_stride(len, n)``: 1 where the operand's extent is the result's, 0 where it
is broadcast (``hz[s0 * i + 1, s1 * j]``).  Numba (LLVM) sees a stride it does not know and
reads the operand element by element; with the constant 1 the same loop reads rows of
consecutive elements and vectorizes (fdtd-2d's gradient: 2.2x faster, the same bits).

Requires: the generated function's statements (gast), in which ``_bcast_stride`` is the runtime
helper (private renaming keeps the user's names off the compiler's).
Guarantees: ``stride_versions(body)`` returns the statements with every outermost ``for``
loop that reads stride names and assigns none of them versioned::

    if s0 == 1 and s1 == 1:
        <the loop, each of its reads of s0, s1 the constant 1>
    else:
        <the loop as it was>

A stride name is a name that every one of its assignments sets to a ``_bcast_stride(...)``
call (its value is 0 or 1).  Inside the loop it holds the value it had at the test (the loop
assigns none of them), so where the test holds, reading 1 reads its value: the two versions
compute the same values, bit for bit, and the test picks one.  In the first version a product
of a stride and an index (``1 * i``) is written as the index, which it equals (strides
multiply integer indices only).  A loop that assigns a stride it reads is not versioned; the
loops inside it are considered instead.  A loop is versioned only where the copy can pay: where one of its innermost loops that reads a stride
carries no scalar from trip to trip (``acc = acc + v``, ``s_bar += e``: a chain of dependent
additions, which keeps a loop from vectorizing whatever its strides); the others would only
grow the code Numba compiles (correlation's first gradient: 4.5 s, 5.2 s with every nest
versioned).  The input is not modified (versioned loops are copies).
"""
from __future__ import annotations

import copy

import gast

from ...codegen import build as B
from ...codegen.gast_queries import names_read

__all__ = ["stride_versions", "STRIDE_HELPER"]

#: the runtime helper whose results are broadcast strides (``coarsen.codegen.helpers``)
STRIDE_HELPER = "_bcast_stride"


def stride_names(body):
    """The names that every assignment of ``body`` sets to a stride."""
    stores, strided = {}, {}
    for node in gast.walk(gast.Module(body=list(body), type_ignores=[])):
        if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, gast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], gast.Name) and isinstance(node.value, gast.Call) \
                and isinstance(node.value.func, gast.Name) and node.value.func.id == STRIDE_HELPER:
            strided[node.targets[0].id] = strided.get(node.targets[0].id, 0) + 1
    return frozenset(n for n, k in strided.items() if stores.get(n) == k)


class _One(gast.NodeTransformer):
    """Reads of the stride names become the constant 1; a product by such a constant
    (``1 * i``, ``i * 1``) becomes its other operand.  Other products are left as they are."""

    def __init__(self, names):
        self.names = names
        self.ones = set()       # ids of the constants that stand for a stride

    def visit_Name(self, node):
        if node.id in self.names and isinstance(node.ctx, gast.Load):
            one = gast.Constant(value=1, kind=None)
            self.ones.add(id(one))
            return one
        return node

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, gast.Mult):
            if id(node.left) in self.ones and id(node.right) not in self.ones:
                return node.right
            if id(node.right) in self.ones and id(node.left) not in self.ones:
                return node.left
        return node


def _read(loop, strides):
    """The stride names a loop reads, in order of first read."""
    seen = []
    for n in gast.walk(loop):
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load) and n.id in strides \
                and n.id not in seen:
            seen.append(n.id)
    return seen


def _innermost(loop):
    """The ``for`` loops inside ``loop`` (itself included) that hold no other."""
    return [n for n in gast.walk(loop) if isinstance(n, gast.For)
            and not any(isinstance(m, gast.For) and m is not n for m in gast.walk(n))]


def _carries(loop):
    """Does a trip of ``loop`` read a float scalar an earlier trip computed: ``acc = acc + v``
    or ``s_bar += e`` before the trip assigns it, and no assignment of a value that does not
    read it (``s_bar = 0.0`` after its use: the next trip starts from that constant)?  Steps by
    an integer constant (``_fpos += 1``) are inductions, no chain.  Such a chain of dependent
    operations keeps the loop from vectorizing whatever its strides.  (A profitability test
    only: a loop it misses is versioned, which is always right.)"""
    assigned, chained, reset = set(), set(), set()
    for n in _in_order(loop.body):
        if isinstance(n, gast.AugAssign) and isinstance(n.target, gast.Name):
            if n.target.id not in assigned and not _int_step(n.value):
                chained.add(n.target.id)
        elif isinstance(n, gast.Assign):
            reads = names_read([n.value])
            step = isinstance(n.value, gast.BinOp) and _int_step(n.value.right)
            for t in n.targets:
                if not isinstance(t, gast.Name):
                    continue
                if t.id in reads:
                    if t.id not in assigned and not step:
                        chained.add(t.id)
                else:
                    reset.add(t.id)
                assigned.add(t.id)
    return bool(chained - reset)


def _in_order(stmts):
    """The statements of a block and of the blocks inside it, in program order."""
    for st in stmts:
        yield st
        for field in ("body", "orelse", "finalbody"):
            yield from _in_order(getattr(st, field, None) or [])


def _int_step(e):
    """An integer constant: ``pos += 1`` (a tape position) is an induction, no chain."""
    return isinstance(e, gast.Constant) and type(e.value) is int


def _pays(loop, strides):
    """Is a version with strides of 1 worth its code?  Where one of the innermost loops that
    read a stride carries no scalar from trip to trip: that loop can vectorize."""
    return any(_read(inner, strides) and not _carries(inner) for inner in _innermost(loop))


def _versioned(loop, names):
    tests = [B.compare(B.name(n), "==", B.const(1)) for n in names]
    test = tests[0] if len(tests) == 1 else gast.BoolOp(op=gast.And(), values=tests)
    fast = _One(frozenset(names)).visit(copy.deepcopy(loop))
    return gast.If(test=test, body=[fast], orelse=[loop])


def _block(stmts, strides):
    out = []
    for st in stmts:
        if isinstance(st, gast.For):
            names = _read(st, strides)
            if names and not set(names) & names_read([st], gast.Store):
                out.append(_versioned(st, names) if _pays(st, strides) else st)
                continue
            st = copy.copy(st)
            st.body, st.orelse = _block(st.body, strides), _block(st.orelse, strides)
        elif isinstance(st, (gast.If, gast.While)):
            st = copy.copy(st)
            st.body, st.orelse = _block(st.body, strides), _block(st.orelse, strides)
        out.append(st)
    return out


def stride_versions(body):
    """``body`` with its stride-reading loop nests versioned (the module docstring)."""
    strides = stride_names(body)
    if not strides:
        return list(body)
    return _block(body, strides)
