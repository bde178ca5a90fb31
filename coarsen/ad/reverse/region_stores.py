"""Region stores: ``a[s] = x``, ``a[s] += x`` and ``a[s] -= x`` of whole arrays as loop helper calls.

Numba compiles each statement that assigns an array into a slice of another
(``fancy_setslice``) in about half a second, most of it the shape-mismatch error path it
compiles per statement, and runs ``a[s] += x`` as an in-place update of the view followed by a
copy of the view onto itself.  ``_region_<op><r>_<v>(a[s], x)``
(``coarsen.codegen.region_loops``) is one loop nest compiled once per module, signature and
operation, with NumPy's broadcasting, checks and overlap rule.

Requires: the generated function's statements (gast), after every pass that reads the code's
stores (this one hides a store inside a call: it runs last of the entry's passes), and the
types of its names (``ir.nodes`` types: the function's variables, their adjoints, the
emitter's own).
``arrays``: the ranks of the function's array variables and their adjoints (an adjoint, named
``<name>_bar`` and not among ``types``, is a float64 array).
Guarantees: ``region_store_calls(body, types, arrays)`` returns ``(statements, helpers)``: a new list
(the input not modified; a statement that changes is a new node) in which every
``a[i] = x``, ``a[i] += x``, ``a[i] -= x`` with ``a`` and ``x`` names of float64 arrays and
``i`` a basic index that selects a region of at least one axis (slices, ``None``, integer
constants and integer scalar names; no Ellipsis, no array) is the statement
``_region_<op><r>_<v>(a[i], x)``, and the runtime helper names it used.  The view ``a[i]`` is
the region NumPy's statement writes, and the helper writes the same values into it (element by
element, the same operation), so the function computes the same bits.  Meant for the cpu target
(on the python target NumPy's own statement is faster than a loop of Python statements).
"""
from __future__ import annotations

import copy

import gast

from ...codegen import build as B
from ...codegen.region_loops import has_region_helper
from ...codegen.runtime import store_region
from ...ir.nodes import Array, Scalar

__all__ = ["region_store_calls"]

_OPS = {gast.Add: "add", gast.Sub: "sub"}


class _Names:
    """The float64 arrays among the code's names, with their ranks, and its integer scalars."""

    def __init__(self, types, arrays):
        self.types = types
        self.arrays = arrays

    def rank(self, name):
        """The rank of the float64 array ``name`` (a variable, or an adjoint: always float64),
        else None."""
        t = self.types.get(name)
        if isinstance(t, Array):
            return t.ndim if t.dtype == "f64" and t.ndim >= 1 else None
        if t is None and name.endswith("_bar") and self.arrays.get(name, 0) >= 1:
            return self.arrays[name]
        return None

    def is_int(self, name):
        return self.types.get(name) == Scalar("i64")


def _region_rank(names, target):
    """The rank of the region ``target`` (``a[i]``) selects, or None where ``i`` is not a
    basic index this pass knows."""
    if not (isinstance(target, gast.Subscript) and isinstance(target.value, gast.Name)):
        return None
    nd = names.rank(target.value.id)
    if nd is None:
        return None
    items = target.slice.elts if isinstance(target.slice, gast.Tuple) else [target.slice]
    rank, used = nd, 0
    for it in items:
        if isinstance(it, gast.Slice):
            used += 1
        elif isinstance(it, gast.Constant) and it.value is None:
            rank += 1
        elif isinstance(it, gast.Constant) and type(it.value) is int:
            used += 1
            rank -= 1
        elif isinstance(it, gast.Name) and names.is_int(it.id):
            used += 1
            rank -= 1
        else:
            return None
    if used > nd:
        return None
    return rank if rank >= 1 else None


def _call(st, names, used):
    """The helper call replacing ``st``, or None."""
    if isinstance(st, gast.Assign) and len(st.targets) == 1:
        target, op = st.targets[0], "set"
    elif isinstance(st, gast.AugAssign) and type(st.op) in _OPS:
        target, op = st.target, _OPS[type(st.op)]
    else:
        return None
    value = st.value
    v = names.rank(value.id) if isinstance(value, gast.Name) else None
    r = _region_rank(names, target)
    if v is None or r is None or not has_region_helper(op, r, v):
        return None
    name = store_region(op, r, v)
    used.add(name)
    view = gast.Subscript(value=B.name(target.value.id), slice=target.slice, ctx=gast.Load())
    out = gast.Expr(value=B.call(name, view, B.name(value.id)))
    gast.copy_location(out, st)
    for attr, val in vars(st).items():
        if attr.startswith("coarsen_") or attr.startswith("_coarsen"):
            setattr(out, attr, val)
    return out


def _block(stmts, names, used):
    out = []
    for st in stmts:
        new = _call(st, names, used)
        if new is not None:
            out.append(new)
            continue
        fields = {}
        for field in ("body", "orelse"):
            inner = getattr(st, field, None)
            if isinstance(inner, list) and inner:
                got = _block(inner, names, used)
                if any(a is not b for a, b in zip(got, inner)):
                    fields[field] = got
        if fields:
            st = copy.copy(st)      # copy on write: the input is not modified
            for field, got in fields.items():
                setattr(st, field, got)
        out.append(st)
    return out


def region_store_calls(body, types, arrays):
    used = set()
    return _block(list(body), _Names(types, arrays), used), frozenset(used)
