"""Growable lists: ``xs = []``, ``xs.append(v)`` (in loops, branches), then ``np.array(xs)``,
any NumPy function of ``xs``, ``sum(xs)``, ``len(xs)``, ``xs[k]``: the usual way to record a
trajectory, built as one array of one element type.

Requires: a ``Lowerer`` (``coarsen.frontend.lower``) that calls ``growable_lists`` on a body
before fencing it (the fence lets the ``[]`` of a list start through: ``list_literals``) and the
hooks below from its statements and expressions; the primitives ``list_*``
(``coarsen.ir.primitives.lists``); type inference types a ``list_start`` from its appends.
Guarantees, before any code is generated:

* a name is a growable list where the body assigns it ``[]`` (only ever ``[]``); every other
  use of it is one of: ``xs.append(v)`` as a statement (one argument), ``len(xs)``,
  ``sum(xs)`` (without ``start``), ``xs[k]`` (an integer ``k``; a read), or an argument of a
  NumPy function (``np.array(xs)``, ``np.sum(xs)``, ``np.stack(xs)``...: NumPy reads a list as
  the array of its elements).  Anything else (a parameter of that name, ``for x in xs``, slices,
  ``xs + ys``, passing it to a helper, ``ys = xs``, a use inside a nested ``def``) is a
  ``CoarsenError`` at its use, with a hint;
* ``xs = []`` is a buffer ``xs`` (``list_start``: an empty array of the elements' type) and a
  count ``_xs_n = 0``; ``xs.append(v)`` evaluates ``v``, grows the buffer where it is full
  (``list_grow``: the capacity doubles, so a list of ``N`` appends copies fewer than ``2 N``
  rows), stores ``list_item(v, xs)`` (``v`` checked to have a row's shape) into row ``_xs_n``
  and counts it; ``xs`` as a NumPy argument is ``xs[:_xs_n]`` (a view: ``np.array`` copies
  it, as NumPy makes a new array of a list; an empty list of arrays raises ``ValueError``
  there, and in ``sum(xs)``: NumPy's ``(0,)`` and Python's ``0`` are not of the rank the
  buffer has); ``xs[k]`` is ``xs[list_index(k, _xs_n)]``
  (Python's index: from the end where negative, ``IndexError`` outside the list);
  ``len(xs)`` is ``_xs_n``; ``sum(xs)`` is ``list_sum`` (Python's order: the same bits).
  Elements of one dtype and rank (else a ``CoarsenError``: ``primitives.lists``) and one shape
  (else a ``ValueError`` at run time); booleans are refused.  Differentiation sees only
  arrays, element stores and the buffer's copies: both modes and both targets as for any
  array code.
"""
from __future__ import annotations

from dataclasses import dataclass

import gast

from ..ir.nodes import Assign, Const, If, Slice, Store, Var
from .source import Known

HINT = ("a list may be appended to (xs.append(v)), indexed (xs[k]), measured (len(xs)), summed "
        "(sum(xs)) or passed to NumPy (np.array(xs)); for x in xs: write for k in range(len(xs))")


@dataclass(frozen=True)
class GrowableList:
    """A list's buffer (the IR name of the source variable) and count (a compiler name)."""
    buffer: str
    count: str


def is_list_start(value):
    return isinstance(value, gast.List) and not value.elts


def _starts(body):
    """Source names assigned ``[]`` in ``body`` (outside nested defs), and those nodes."""
    names, nodes = set(), set()
    for node in _walk(body):
        if isinstance(node, gast.Assign) and is_list_start(node.value) and len(node.targets) == 1 \
                and isinstance(node.targets[0], gast.Name):
            names.add(node.targets[0].id)
            nodes.add(id(node.value))
    return names, nodes


def _walk(body, nested=False):
    """Every node of ``body`` outside nested defs and lambdas; with ``nested``, those inside."""
    stack = [(n, False) for n in reversed(body)]
    while stack:
        node, inside = stack.pop()
        if inside == nested:
            yield node
        deeper = inside or isinstance(node, (gast.FunctionDef, gast.Lambda))
        stack.extend((c, deeper) for c in reversed(list(gast.iter_child_nodes(node))))


def list_literals(lw, body):
    """ids of the ``[]`` of list starts in ``body`` (the fence lets them through)."""
    return _starts(body)[1]


def _allowed_parents(lw, body, names):
    """ids of the ``Name`` nodes of ``names`` used as the module docstring allows."""
    ok = set()
    for node in _walk(body):
        if isinstance(node, gast.Assign) and is_list_start(node.value) and len(node.targets) == 1:
            ok.add(id(node.targets[0]))
        elif isinstance(node, gast.Expr) and is_append(node.value, names):
            ok.add(id(node.value.func.value))
        elif isinstance(node, gast.Subscript) and isinstance(node.value, gast.Name) \
                and node.value.id in names and isinstance(node.ctx, gast.Load) \
                and not isinstance(node.slice, (gast.Slice, gast.Tuple)):
            ok.add(id(node.value))
        elif isinstance(node, gast.Call):
            k = lw.resolve_value(node.func, quiet=True)
            numpy = isinstance(k, Known) and k.origin == "numpy"
            builtin = isinstance(k, Known) and k.op in ("len", "builtin_sum")
            for a in node.args if numpy else node.args[:1] if builtin else ():
                if isinstance(a, gast.Name) and a.id in names:
                    ok.add(id(a))
    return ok


def is_append(call, names):
    return isinstance(call, gast.Call) and isinstance(call.func, gast.Attribute) \
        and call.func.attr == "append" and isinstance(call.func.value, gast.Name) \
        and call.func.value.id in names


def growable_lists(lw, body):
    """{source name: GrowableList} of ``body``; refuses every use the module docstring does
    not allow."""
    names, _ = _starts(body)
    if not names:
        return {}
    for p in lw.params:
        if p in names:
            raise lw.err(lw.src.node, f"the parameter {p!r} is assigned a list", HINT)
    for node in _walk(body, nested=True):
        if isinstance(node, gast.Name) and node.id in names:
            raise lw.err(node, f"the list {node.id!r} is used inside a nested function",
                         "use it in the function that makes it")
    for node in _walk(body):
        if isinstance(node, gast.For) and isinstance(node.iter, gast.Call) and getattr(
                lw.resolve_value(node.iter.func, quiet=True), "op", None) == "prange":
            for sub in _walk(node.body):
                if isinstance(sub, gast.Expr) and is_append(sub.value, names):
                    raise lw.err(sub, "appending to a list inside a prange loop (its trips run "
                                      "in parallel) is not supported", "use range, or write "
                                      "into a preallocated array at the trip's own index")
    ok = _allowed_parents(lw, body, names)
    for node in _walk(body):
        if isinstance(node, gast.Name) and node.id in names and id(node) not in ok:
            raise lw.err(node, f"this use of the list {node.id!r} is not supported", HINT)
        if isinstance(node, gast.Expr) and is_append(node.value, names):
            call = node.value
            if len(call.args) != 1 or call.keywords or isinstance(call.args[0], gast.Starred):
                raise lw.err(call, "list.append takes one argument")
    return {n: GrowableList(lw.name(n), lw.namer.fresh(f"_{lw.name(n)}_n")) for n in sorted(names)}


def lower_list_start(lw, target, s):
    """``xs = []``: an empty buffer (typed by its appends) and a count of 0."""
    gl = lw.growable[target.id]
    loc = lw.loc(s)
    lw.emit(Assign(gl.buffer, "copy", (Const(0.0),), loc, attrs=(("list_start", True),)))
    lw.emit(Assign(gl.count, "copy", (Const(0),), loc))


def lower_append(lw, call):
    """``xs.append(v)``: grow where full, store ``v`` into the next row, count it."""
    gl = lw.growable[call.func.value.id]
    loc = lw.loc(call)
    v = lw.lower_expr(call.args[0])
    buf, n = Var(gl.buffer), Var(gl.count)
    rows = lw.op(call, None, "dim", [buf, Const(0)])
    full = lw.op(call, None, "eq", [n, rows])
    lw.emit(If(full, [Assign(gl.buffer, "list_grow", (buf, n, v), loc)], [], loc))
    item = lw.op(call, None, "list_item", [v, buf])
    lw.emit(Store(gl.buffer, (n,), item, None, loc))
    lw.emit(Assign(gl.count, "add", (n, Const(1)), loc))


def lower_list_value(lw, node, target):
    """``xs`` as an argument of a NumPy function: its elements, ``xs[:n]`` (``n`` checked at
    run time to be at least 1 for a list of arrays: ``list_count``)."""
    gl = lw.growable[node.id]
    n = lw.op(node, None, "list_count", [Var(gl.buffer), Var(gl.count)])
    return lw.op(node, target, "getitem", [Var(gl.buffer)], index=(Slice(None, n, None),))


def lower_list_index(lw, node, target):
    """``xs[k]``: the row at Python's list index ``k``."""
    gl = lw.growable[node.value.id]
    k = lw.op(node, None, "list_index", [lw.lower_expr(node.slice), Var(gl.count)])
    return lw.op(node, target, "getitem", [Var(gl.buffer)], index=(k,))


def lower_list_len(lw, node, name, target):
    return lw.op(node, target, "copy", [Var(lw.growable[name].count)])


def lower_list_sum(lw, node, name, start, target):
    """``sum(xs)``; ``start`` (its node, or None) is refused: Python adds it first, and
    ``start + sum(xs)`` would round otherwise."""
    if start is not None:
        raise lw.err(start, "sum(xs, start) of a list is not supported", "write start + sum(xs)")
    gl = lw.growable[name]
    return lw.op(node, target, "list_sum", [Var(gl.buffer), Var(gl.count)])
