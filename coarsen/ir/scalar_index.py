"""Index and shape arithmetic of scalarization (``coarsen.ir.scalarize``): the axes and leaves
a nest reads, composing two basic reads into one, the keys that compare slices and regions,
and which arrays share a shape.

Requires: IR index items (``coarsen.ir.nodes``: integers as operands, ``Slice``, ``NEWAXIS``) and
a typed ``ir.Function`` (``shape_roots``).
Guarantees: plain records and pure functions of their arguments; nothing is modified.
"""
from __future__ import annotations

from dataclasses import dataclass

from .nodes import NEWAXIS, Array, Assign, Const, Slice, Var, walk
from .primitives import REGISTRY

__all__ = ["Axis", "Leaf", "compose_index", "slice_key", "full_axes", "int_items", "shape_roots",
           "constant_slice", "same_slice_length"]


@dataclass(frozen=True)
class Axis:
    """One axis of a value the nest reads or writes: ``array``'s ``axis`` through ``slice``,
    or a new axis of length 1 (``axis`` None)."""
    axis: int | None
    slice: Slice | None


@dataclass
class Leaf:
    """An array read element by element: ``array[items]`` (``stmt`` its absorbed ``getitem``),
    or the whole array (``stmt`` None)."""
    array: str
    items: tuple
    stmt: Assign | None
    transposed: bool = False      # ``array.T`` (a 2-D array read whole)


def compose_index(outer, inner, ndim):
    """The basic index ``i3`` with ``a[i3]`` equal to ``a[outer][inner]``, for an ``outer`` of
    integers and full slices on an ``ndim``-array: the k-th full slice of ``outer`` is the k-th
    axis of ``a[outer]``, which ``inner``'s k-th axis item indexes.  Axes in ``a``'s order,
    new axes where ``inner`` puts them (an integer makes no axis, so where ``outer``'s go
    changes nothing)."""
    outer = list(outer) + [Slice(None, None, None)] * (ndim - len(outer))
    free = [m for m, it in enumerate(outer) if isinstance(it, Slice)]
    items = list(inner)
    used = sum(1 for it in items if it != NEWAXIS)
    items += [Slice(None, None, None)] * (len(free) - used)
    out, m, j = [], 0, 0
    for it in items:
        if it == NEWAXIS:
            out.append(NEWAXIS)
            continue
        target = free[j]
        j += 1
        while m < target:
            out.append(outer[m])        # an integer of outer
            m += 1
        out.append(it)
        m += 1
    out.extend(outer[m:])
    return tuple(out)


def slice_key(sl):
    return (sl.lower, sl.upper, sl.step)


def full_axes(axes):
    return tuple((a.axis, slice_key(a.slice) if a.slice is not None else None) for a in axes)


def int_items(items):
    return tuple(it for it in items if not isinstance(it, Slice) and it != NEWAXIS)


def shape_roots(fn):
    """{array variable: the variable whose shape it has wherever it is defined}: arrays assigned
    once, by a primitive that makes a new array of its operand's shape (``shape_like``: a
    copy, an element-wise function of one array) or aliases it, of an array that itself
    keeps one shape (a parameter never assigned, or such an array).  Stores never change a
    shape, so their dimensions are their root's (read at any point both are defined)."""
    defs = {}
    for st in walk(fn.body):
        if isinstance(st, Assign):
            defs.setdefault(st.target, []).append(st)
    roots = {}

    def root(v, seen=()):
        if v in roots:
            return roots[v]
        ds = defs.get(v, [])
        r = None
        if not ds:
            r = v if v in fn.params and isinstance(fn.types.get(v), Array) else None
        elif len(ds) == 1 and v not in fn.params and v not in seen:
            st = ds[0]
            prim = REGISTRY.get(st.op)
            t = fn.types.get(v)
            if prim is not None and (prim.shape_like or st.op == "copy") and st.args and \
                    isinstance(st.args[0], Var) and isinstance(t, Array) and \
                    isinstance(fn.types.get(st.args[0].name), Array) and \
                    fn.types[st.args[0].name].ndim == t.ndim:
                r = root(st.args[0].name, seen + (v,))
        roots[v] = r
        return r
    out = {}
    for v, t in fn.types.items():
        if isinstance(t, Array):
            r = root(v)
            if r is not None and r != v:
                out[v] = r
    return out


def constant_slice(sl):
    """A slice with constant (or missing) bounds and step as a Python ``slice``, else None."""
    parts = []
    for b in (sl.lower, sl.upper, sl.step):
        if b is None:
            parts.append(None)
        elif isinstance(b, Const) and type(b.value) is int:
            parts.append(b.value)
        else:
            return None
    return slice(*parts)


def same_slice_length(a, b):
    """Whether ``len(range(n)[a]) == len(range(n)[b])`` for every ``n >= 0``.  For steps of 1
    and bounds at most ``K`` in magnitude, a length is ``max(0, c + s*n)`` beyond ``n = K``
    (``s`` in -1, 0, 1; ``|c| <= 2K``), so linear beyond ``2K``: equal on ``0 .. 2K + 2``
    means equal everywhere.  Other steps: only identical slices."""
    if a == b:
        return True
    if (a.step or 1) != 1 or (b.step or 1) != 1:
        return False
    k = max([abs(x) for x in (a.start, a.stop, b.start, b.stop) if x is not None] or [0])
    return all(len(range(n)[a]) == len(range(n)[b]) for n in range(2 * k + 3))

