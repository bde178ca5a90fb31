"""``np.array`` / ``np.asarray``, and dtypes taken from another array, desugared into primitives.

Requires: a ``Lowerer`` (``coarsen.frontend.lower``) lowering a call that resolved to
``np.array`` or ``np.asarray`` (the fence lets lists through only as their argument), its
arguments bound to NumPy's signature (``coarsen.frontend.signatures``: ``object``/``a`` and
``dtype``, by position or keyword; every other argument, ``copy=``, ``ndmin=``..., refused
there, naming it).
Guarantees, before any code is generated:

* ``np.array([a, b, c])`` and nested lists of equal lengths (``[[a, b], [c, d]]``, any rank) of
  scalar expressions become one new array and one element store per scalar, in C order, after
  every element has been evaluated (as Python does)::

      _e = empty(3)                      # the shape
      t = empty_like(_e, a, b, c)        # dtype "elements": NumPy's dtype of a, b, c
      t[0] = a;  t[1] = b;  t[2] = c

  so the rest of the pipeline differentiates it like any array written element by element.
  The dtype follows NumPy: float if any element is a float, else int (``np.array([1, 2])`` is
  an int array); type inference (``coarsen.ir.typeinfer``) resolves it from the elements and
  refuses arrays among them (stacking) and all-bool lists.  ``dtype=np.float64``/``np.int64``
  /``float``/``int`` allocates that dtype directly (a float stored into an int array is
  refused, as elsewhere); ``dtype=x.dtype`` takes ``x``'s.  ``np.array([])`` is an empty
  float64 array.  Ragged lists are refused; comprehensions are refused by the fence.
* ``np.array([a, b])`` whose elements type inference finds to be arrays is lowered again as
  NumPy stacks them (``coarsen.frontend.joins.stacked_site``: the ``stack`` primitive, nested
  lists included; with ``dtype=``, converted after), by ``coarsen.transforms.prepare.typed_ir``.
* a list display in a subscript (``v[[0, 2, 2]]``: NumPy's advanced indexing) is lowered as
  ``np.array`` of it (``lower_list_literal``; ``index_list_literals`` names them for the fence);
* ``np.array(x)`` of an existing array is a copy (``copyarr``; with ``dtype=``, ``astype``,
  which copies too); ``np.asarray(x)`` is ``x`` itself (an alias, as NumPy returns it), so
  writes through it are seen by ``x``; ``np.asarray(x, dtype=...)`` is refused (NumPy copies or
  not depending on ``x``'s dtype).  A copy of a scalar is refused by type inference.
* ``DtypeLike``: what ``Lowerer.dtype_of`` returns for ``dtype=x.dtype``; constructors then
  carry ``x`` as a trailing operand of a ``*_like`` primitive with the attribute
  ``dtype="like"`` (``np.zeros(shape, dtype=x.dtype)`` is ``zeros_like(empty(shape), x)``), and
  type inference gives the result ``x``'s dtype.  ``float32`` is refused by the lowering:
  coarsen computes in float64 (float32 parameters are converted to float64 at the API), and
  float32 storage computed in float64 would give other values than NumPy.
"""
from __future__ import annotations

from dataclasses import dataclass

import gast

from ..ir.nodes import Const, Store, Var
from .joins import lower_list, stacked_site

Operand = Var | Const


@dataclass(frozen=True)
class DtypeLike:
    """``dtype=x.dtype``: the dtype of ``operand``, resolved by type inference."""
    operand: Operand


def literal_shape(lw, node):
    """``(shape, element nodes in C order)`` of a (nested) list or tuple literal; refuses
    ragged nesting."""
    if not isinstance(node, (gast.List, gast.Tuple)):
        return (), [node]
    if not node.elts:
        return (0,), []
    parts = [literal_shape(lw, e) for e in node.elts]
    first = parts[0][0]
    for e, (shape, _) in zip(node.elts, parts):
        if shape != first:
            raise lw.err(e, "np.array of a ragged nested list (rows of different lengths or depths) "
                         "is not supported", "give every row the same number of scalars")
    return (len(node.elts),) + first, [x for _, flat in parts for x in flat]


def index_list_literals(stmt):
    """ids of the list displays that are items of a subscript in ``stmt`` (``v[[0, 2]]``,
    ``a[[1, 0], :, [3, 2]]``; NumPy's advanced indexing), nested lists included: the fence
    lets lists through there, and ``lower_list_literal`` makes each an array."""
    out = set()

    def nested(n):
        if isinstance(n, gast.List):
            out.add(id(n))
            for e in n.elts:
                nested(e)

    for sub in gast.walk(stmt):
        if isinstance(sub, gast.Subscript):
            items = sub.slice.elts if isinstance(sub.slice, gast.Tuple) else [sub.slice]
            for it in items:
                nested(it)
    return out


def lower_list_literal(lw, node):
    """A list display in a subscript as ``np.array(node)`` (integers: an integer array, which
    type inference takes as an advanced index); returns the operand."""
    return _literal(lw, node, node, None, None)


def _unravel(k, shape):
    out = []
    for d in reversed(shape):
        out.append(k % d)
        k //= d
    return tuple(reversed(out))


def lower_array_call(lw, node, op, args, target):
    """``np.array(...)`` (``op == "array"``) or ``np.asarray(...)``, its arguments ``args``
    bound to NumPy's signature (``object``/``a`` and ``dtype``, by position or keyword); returns
    the operand."""
    name = f"np.{op}"
    obj = args["object" if op == "array" else "a"]
    dt_node = args.get("dtype")
    if isinstance(dt_node, gast.Constant) and dt_node.value is None:
        dt_node = None                                  # NumPy's default
    dtype = lw.dtype_of(dt_node) if dt_node is not None else None
    if isinstance(obj, (gast.List, gast.Tuple)):
        if stacked_site(lw, node):          # its elements are arrays: NumPy stacks them
            if isinstance(dtype, DtypeLike):
                raise lw.err(dt_node, "np.array of arrays with dtype=y.dtype is not supported",
                             "write dtype=np.float64 or dtype=np.int64")
            stacked = lower_list(lw, obj, None if dtype is not None else target)
            return stacked if dtype is None else lw.op(node, target, "astype", [stacked],
                                                       attrs=(("dtype", dtype),))
        return _literal(lw, node, obj, dtype, target)
    val = lw.lower_operand(obj)         # a tuple value (np.split's pieces): stacked
    if dtype is None:
        return lw.op(node, target, "copyarr" if op == "array" else "copy", [val])
    if op == "asarray":
        raise lw.err(node, f"{name}(x, dtype=...) of an array is not supported (NumPy returns x "
                     "itself or a converted copy depending on x's dtype)",
                     "write np.array(x, dtype=...) for a copy, or np.asarray(x)")
    if isinstance(dtype, DtypeLike):
        raise lw.err(dt_node, "np.array(x, dtype=y.dtype) of an array is not supported",
                     "write dtype=np.float64 or dtype=np.int64")
    return lw.op(node, target, "astype", [val], attrs=(("dtype", dtype),))


def _literal(lw, node, obj, dtype, target):
    shape, flat = literal_shape(lw, obj)
    elems = [lw.lower_expr(e) for e in flat]       # every element first, as Python does
    dims = [Const(d) for d in shape]
    nd = ("ndim", len(dims))
    operands = set(elems) | ({dtype.operand} if isinstance(dtype, DtypeLike) else set())
    dest = None if target is not None and Var(target) in operands else target
    if dtype is None and not elems:
        dtype = "f64"                               # np.array([]) is float64
    if isinstance(dtype, str):
        arr = lw.op(node, dest, "empty", dims, attrs=(("dtype", dtype), nd))
    else:
        like = lw.op(node, None, "empty", dims, attrs=(("dtype", "f64"), nd))
        if isinstance(dtype, DtypeLike):
            arr = lw.op(node, dest, "empty_like", [like, dtype.operand], attrs=(("dtype", "like"),))
        else:
            arr = lw.op(node, dest, "empty_like", [like] + elems, attrs=(("dtype", "elements"),))
    loc = lw.loc(node)
    for k, e in enumerate(elems):
        index = tuple(Const(i) for i in _unravel(k, shape))
        lw.emit(Store(arr.name, index, e, None, loc))
    return arr
