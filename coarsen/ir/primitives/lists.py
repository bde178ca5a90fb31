"""Growable lists (``xs = []``, ``xs.append(v)``; ``coarsen.frontend.growable`` lowers them):
``list_grow``, ``list_item``, ``list_index``, ``list_sum``, ``list_count``.

Requires: ``core``, ``coarsen.codegen.build``, the fixed helpers ``_list_*``
(``coarsen.codegen.helpers_lists``).  A list is a buffer ``buf`` (rows: the elements, one
dtype and shape) and a count ``n``; ``buf`` starts as a ``list_start`` (typed by type
inference from its appends, then an empty array).
Guarantees:

* ``list_grow(buf, n, v)``: a new buffer with room for more rows, the first ``n`` copied; typed
  from the appended ``v`` alone (``buf`` may be untyped yet: its type comes from here), and a
  ``CoarsenError`` where the list already holds elements of another dtype or rank; linear in
  ``buf`` (its adjoint: the first ``n`` rows of the new buffer's), no derivative to ``n``, ``v``;
* ``list_item(v, buf)``: ``v``, checked at run time to have a row's shape (arrays); its
  derivative passes to ``v``;
* ``list_index(k, n)``: Python's list index (negative from the end, ``IndexError`` outside);
  no derivative;
* ``list_sum(buf, n)``: Python's ``sum(xs)`` in its order; linear in ``buf``; ``ValueError``
  at run time for an empty list of arrays (Python's ``0`` is no array of their shape);
* ``list_count(buf, n)``: ``n``, the rows of a list passed to NumPy; for a list of arrays
  checked at run time to be at least 1 (NumPy makes shape ``(0,)`` of an empty list, not the
  rank the buffer has); no derivative.
"""
from __future__ import annotations

from ...codegen import build as B
from ...codegen.build import X
from ..nodes import Array, I64
from .core import CostClass, Primitive, deflinear, defstructural, dt, err, make, nd, register


def _element_hint(s):
    return err(s, "a list's elements must all have one type: the same dtype and number of "
                  "dimensions", "convert them to one type before appending (float(v))")


def _grow_type(c, s, ts):
    buf, v = ts[0], ts[2]
    out = Array(dt(v), nd(v) + 1)
    if dt(v) == "bool":
        raise err(s, "a list of booleans is not supported", "append float(v) or int(v)")
    if buf is not None and buf != out:
        raise _element_hint(s)
    return out


def _emit_grow(em, s, v):
    if em.nd(s.args[2]) == 0:
        return B.call(em.helper("_list_grow_s"), v[0], v[1])
    return B.call(em.helper("_list_grow_a"), *v)


def _buffer_shape(em, arg, pre_fwd, pre_rev):
    return em.shape_of(arg, pre_fwd, pre_rev) if arg.name in em.f.set_temps \
        else B.attr(f"{em.bar(arg.name)}.shape")


def _vjp_grow(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[0]
    shape = _buffer_shape(em, arg, pre_fwd, pre_rev)
    contrib = B.call(em.helper("_list_grow_adj"), g, em.val(s.args[1]), shape)
    em.accumulate(arg.name, X(contrib, True), pre_fwd, pre_rev, out)


def _item_type(c, s, ts):
    v, buf = ts
    if not isinstance(buf, Array) or buf.dtype != dt(v) or buf.ndim != nd(v) + 1:
        raise _element_hint(s)
    return v


def _emit_item(em, s, v):
    if em.nd(s.args[0]) == 0:
        return B.ex(v[0])
    return B.call(em.helper("_list_item"), *v)


def _vjp_item(em, s, p, g, pre_fwd, pre_rev, out):
    em.accumulate(s.args[0].name, g, pre_fwd, pre_rev, out)


def _index_type(c, s, ts):
    if any(dt(t) != "i64" or nd(t) for t in ts):
        raise err(s, "list indices must be integers", "index with int(k)")
    return I64


def _emit_index(em, s, v):
    return B.call(em.helper("_list_index"), *v)


def _count_type(c, s, ts):
    return I64


def _emit_count(em, s, v):
    if em.nd(s.args[0]) == 1:
        return B.ex(v[1])
    return B.call(em.helper("_list_count_a"), v[1])


def _sum_type(c, s, ts):
    return make(dt(ts[0]), nd(ts[0]) - 1)


def _emit_sum(em, s, v):
    return B.call(em.helper("_list_sum_s" if em.nd(s.args[0]) == 1 else "_list_sum_a"), *v)


def _vjp_sum(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[0]
    shape = _buffer_shape(em, arg, pre_fwd, pre_rev)
    contrib = B.call(em.helper("_list_sum_adj"), g, em.val(s.args[1]), shape)
    em.accumulate(arg.name, X(contrib, True), pre_fwd, pre_rev, out)


register(Primitive("list_grow", _grow_type, _emit_grow, arity=3, cost=CostClass.CALL))
defstructural("list_grow", _vjp_grow, (0,))
deflinear("list_grow", (0,))
register(Primitive("list_item", _item_type, _emit_item, arity=2, view=True, cost=CostClass.FREE))
defstructural("list_item", _vjp_item, (0,))
deflinear("list_item", (0,))
register(Primitive("list_index", _index_type, _emit_index, arity=2, zero=True, cost=CostClass.ADD))
register(Primitive("list_count", _count_type, _emit_count, arity=2, zero=True,
                   cost=CostClass.FREE))
register(Primitive("list_sum", _sum_type, _emit_sum, arity=2, cost=CostClass.CALL))
defstructural("list_sum", _vjp_sum, (0,))
deflinear("list_sum", (0,))
