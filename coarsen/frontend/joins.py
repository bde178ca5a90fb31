"""Joining, splitting and building arrays, and lists of values passed to NumPy, desugared into
primitives (``coarsen.ir.primitives.joins`` and ``building``).

Requires: a ``Lowerer`` (``coarsen.frontend.lower``) lowering a call that resolved to one of
``JOIN_OPS`` (its arguments bound to NumPy's signature by the caller: anything not in
``JOIN_UNDERSTOOD[op]`` was refused there, naming it), or a list display that the fence let
through (``list_argument_literals``: the lists, nested ones included, passed directly as an
argument of a NumPy function other than the constructors' shapes, or of the builtin ``sum``).
Guarantees, before any code is generated (every count, axis and option a constant, or a
``CoarsenError`` at the argument):

* a sequence argument (``np.concatenate([a, b])``, ``np.stack((a, b))``) is a list or tuple
  display, whose elements are lowered left to right (a nested list display is an array, as
  NumPy makes one: ``stack`` along axis 0), or a tuple value (``parts = np.split(x, 3)``, a
  helper's tuple); anything else (an array iterated over its rows) is refused;
* ``np.concatenate(seq, axis=0)`` (``axis=None``: every element flattened first);
  ``np.stack(seq, axis=0)``; ``np.vstack``/``np.row_stack`` (each element ``atleast_2d``, axis
  0); ``np.hstack`` (``atleast_1d``; axis 0 for 1-D elements, else 1); ``np.column_stack`` (a
  scalar or 1-D element made a column, axis 1); ``np.append(arr, values, axis=None)``
  (flattened without an axis);
* ``np.split``/``np.array_split``/``np.vsplit``/``np.hsplit``/``np.dsplit`` of a constant section
  count or a list or tuple of constant indices: a tuple value of the pieces (views, NumPy's
  slices; ``np.split`` raises NumPy's ``ValueError`` at run time where the sections do not
  divide the axis; ``array_split`` gives the first ``n % k`` pieces one more; ``vsplit`` needs
  2 or more dimensions, ``dsplit`` 3, ``hsplit`` splits axis 1, or 0 of a 1-D array);
* ``np.flipud``/``np.fliplr`` (views: ``m[::-1]``, ``m[:, ::-1]``); ``np.rot90(m, k, axes)``;
  ``np.roll(a, shift, axis=None)`` (an integer shift; flattened and reshaped back without an
  axis); ``np.repeat(a, repeats, axis=None)`` (one integer count; flattened without an axis);
  ``np.tile(A, reps)`` (an integer or a tuple of integer constants: one ``along`` per axis,
  new leading axes where ``reps`` is longer than ``A``'s rank); ``np.kron`` is the registry's;
  ``np.linspace(start, stop, num=50, endpoint=True)``;
* ``np.gradient(f, *varargs, axis=None, edge_order=1)`` with at most one scalar spacing: the
  ``gradient`` primitive, of a 1-D ``f`` (checked at type inference), or of any rank with an
  integer ``axis``; several axes or coordinate arrays are refused;
* ``np.select(condlist, choicelist, default=0)`` of lists or tuples written out: ``np.where``
  from the last pair to the first (the first true condition wins), NumPy's broadcasting and
  dtype, each condition boolean (``condition``, refusing others as NumPy does);
* ``sum(seq, start=0)`` of a list or tuple display: ``((start + a) + b) + ...``, as Python adds;
* a list display elsewhere (``np.mean([a, b])``) is ``np.array`` of it: ``stack`` along axis 0
  of its elements (scalars make a 1-D array; equal-shaped arrays one more axis); so is a tuple
  display or value passed as an array (``stack_tuple``, through ``calls.lower_operand``);
* ``STACKED_SITES``/``stacked_site``: the ``np.array([...])`` calls whose elements type
  inference found to be arrays (``coarsen.transforms.prepare.typed_ir`` lowers the function
  again with them set), lowered here as a ``stack`` by ``coarsen.frontend.array_literals``.
"""
from __future__ import annotations

from contextvars import ContextVar

import gast

from ..ir.nodes import Const
from .helpers_inline import TupleValue
from .source import Known

# the NumPy spellings of the sugar lowered here (the registry spells concatenate, stack,
# linspace and kron itself), and the builtin ``sum``
BUILTIN_SUM = "builtin_sum"

# the parameters each lowering here reads
JOIN_UNDERSTOOD = {
    "concatenate": frozenset({"arrays", "axis"}), "stack": frozenset({"arrays", "axis"}),
    "vstack": frozenset({"tup"}), "row_stack": frozenset({"tup"}),
    "hstack": frozenset({"tup"}), "column_stack": frozenset({"tup"}),
    "append": frozenset({"arr", "values", "axis"}),
    "roll": frozenset({"a", "shift", "axis"}), "flipud": frozenset({"m"}),
    "fliplr": frozenset({"m"}), "rot90": frozenset({"m", "k", "axes"}),
    "tile": frozenset({"A", "reps"}), "repeat": frozenset({"a", "repeats", "axis"}),
    "linspace": frozenset({"start", "stop", "num", "endpoint"}),
    "gradient": frozenset({"f", "varargs", "axis", "edge_order"}),
    **{op: frozenset({"ary", "indices_or_sections", "axis"})
       for op in ("split", "array_split", "vsplit", "hsplit", "dsplit")},
    "select": frozenset({"condlist", "choicelist", "default"}),
    BUILTIN_SUM: frozenset({"iterable", "start"}),
}
JOIN_OPS = frozenset(JOIN_UNDERSTOOD)

# NumPy functions whose list arguments are shapes, axes or indices (read by their lowering),
# not arrays: the fence leaves their lists alone
_LIST_SHAPES = frozenset({"zeros", "ones", "empty", "full", "reshape", "transpose", "eye",
                          "einsum", "expand_dims", "shape", "array", "asarray"})


def list_argument_literals(lw, stmt):
    """ids of the list displays in ``stmt`` that are (nested in) an argument of a call of a
    NumPy function (not one whose lists are shapes or axes) or of the builtin ``sum``; the
    fence lets them through, and they are lowered here."""
    out = set()
    for sub in gast.walk(stmt):
        if not isinstance(sub, gast.Call):
            continue
        k = lw.resolve_value(sub.func, quiet=True)
        if not isinstance(k, Known):
            continue
        numpy = k.origin == "numpy" and k.op not in _LIST_SHAPES
        if numpy or (k.origin == "builtin" and k.op == BUILTIN_SUM):
            for a in sub.args + [kw.value for kw in sub.keywords]:
                if isinstance(a, gast.List):
                    out |= nested_displays(a)
    return out


def nested_displays(node):
    """ids of ``node`` and of the list and tuple displays nested in it, where ``node`` is a
    list or tuple display (nothing otherwise)."""
    if not isinstance(node, (gast.List, gast.Tuple)):
        return set()
    out = {id(node)}
    for e in node.elts:
        out |= nested_displays(e)
    return out


def static_int(lw, node, what, default=None):
    """The value of an integer constant node (``-k`` too); ``default`` where it is absent or
    None; else a CoarsenError at it."""
    if node is None or (isinstance(node, gast.Constant) and node.value is None):
        return default
    v = _int_constant(node)
    if v is None:
        raise lw.err(node, f"{what} must be an integer constant")
    return v


def _int_constant(node):
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
        v = _int_constant(node.operand)
        return None if v is None else -v
    if isinstance(node, gast.Constant) and type(node.value) is int:
        return node.value
    return None


def _static_bool(lw, node, what, default):
    if node is None:
        return default
    if isinstance(node, gast.Constant) and isinstance(node.value, bool):
        return node.value
    raise lw.err(node, f"{what} must be True or False")


def lower_list(lw, node, target=None):
    """A list or tuple display as an array: ``stack`` along axis 0 of its elements (nested
    displays first), NumPy's ``np.array`` of them."""
    if not node.elts:
        raise lw.err(node, "an empty list is not supported here", "give it at least one value")
    parts = [lower_list(lw, e) if isinstance(e, (gast.List, gast.Tuple)) else lw.lower_expr(e)
             for e in node.elts]
    return lw.op(node, target, "stack", parts, attrs=(("axis", 0),))


def stack_tuple(lw, node, val):
    """The tuple value ``val`` as an array (``stack`` along axis 0), as NumPy converts one."""
    return lw.op(node, None, "stack", list(val.items), attrs=(("axis", 0),))


def elements(lw, node, what):
    """The operands of a sequence argument: a list or tuple display (nested displays are
    arrays) or a tuple value."""
    if isinstance(node, (gast.List, gast.Tuple)):
        if not node.elts:
            raise lw.err(node, f"{what} of an empty sequence is not supported",
                         "give it at least one array")
        return [lower_list(lw, e) if isinstance(e, (gast.List, gast.Tuple)) else lw.lower_expr(e)
                for e in node.elts]
    val = lw.lower_expr(node, allow_tuple=True)
    if isinstance(val, TupleValue):
        return list(val.items)
    raise lw.err(node, f"{what} takes a list or tuple of arrays here",
                 "write them out: np.concatenate([a, b]); an array's rows: list them, a[0], a[1]")


# np.array([...]) calls whose elements turned out to be arrays (type inference refused them as
# scalars): ``(file, line, column)`` of each call, lowered as ``stack`` instead (NumPy stacks
# them); set by ``coarsen.transforms.prepare.typed_ir`` around a second lowering
STACKED_SITES: ContextVar[frozenset] = ContextVar("stacked_sites", default=frozenset())


def stacked_site(lw, node):
    """Is the ``np.array`` call ``node`` one whose list holds arrays (``STACKED_SITES``)?"""
    loc = lw.loc(node)
    return (loc.filename, loc.lineno, loc.col) in STACKED_SITES.get()


def lower_join_call(lw, node, op, b, target):
    """Lower a call of ``op`` (one of ``JOIN_OPS``), its arguments ``b`` bound to NumPy's
    signature; returns its operand, or a ``TupleValue`` for the splits."""
    return _LOWER[op](lw, node, op, b, target)


def _concatenate(lw, node, op, b, target):
    parts = elements(lw, b["arrays"], f"np.{op}")
    axis_node = b.get("axis")
    if op == "concatenate" and isinstance(axis_node, gast.Constant) and axis_node.value is None:
        parts = [lw.op(node, None, "ravel", [p]) for p in parts]
        return lw.op(node, target, "concatenate", parts, attrs=(("axis", 0),))
    if op == "stack" and isinstance(axis_node, gast.Constant) and axis_node.value is None:
        raise lw.err(axis_node, "np.stack's axis must be an integer (NumPy refuses None)")
    axis = static_int(lw, axis_node, "axis", 0)
    return lw.op(node, target, op, parts, attrs=(("axis", axis),))


def _stacks(lw, node, op, b, target):
    parts = elements(lw, b["tup"], f"np.{op}")
    if op in ("vstack", "row_stack"):
        parts = [lw.op(node, None, "promote", [p], attrs=(("form", "row"),)) for p in parts]
        return lw.op(node, target, "concatenate", parts, attrs=(("axis", 0),))
    if op == "column_stack":
        parts = [lw.op(node, None, "promote", [p], attrs=(("form", "col"),)) for p in parts]
        return lw.op(node, target, "concatenate", parts, attrs=(("axis", 1),))
    parts = [lw.op(node, None, "atleast_1d", [p]) for p in parts]          # hstack
    return lw.op(node, target, "concatenate", parts, attrs=(("axis", "h"),))


def _append(lw, node, op, b, target):
    arr, values = lw.lower_expr(b["arr"]), lw.lower_expr(b["values"])
    axis_node = b.get("axis")
    if axis_node is None or (isinstance(axis_node, gast.Constant) and axis_node.value is None):
        parts = [lw.op(node, None, "ravel", [lw.op(node, None, "atleast_1d", [p])])
                 for p in (arr, values)]
        return lw.op(node, target, "concatenate", parts, attrs=(("axis", 0),))
    axis = static_int(lw, axis_node, "axis")
    return lw.op(node, target, "concatenate", [arr, values], attrs=(("axis", axis),))


def _flips(lw, node, op, b, target):
    m = lw.lower_expr(b["m"])
    if op == "flipud":
        return lw.op(node, target, "axis_slice", [m], attrs=(
            ("axis", 0), ("step", -1), ("what", "np.flipud")))
    return lw.op(node, target, "axis_slice", [m], attrs=(
        ("axis", 1), ("step", -1), ("min_rank", 2), ("what", "np.fliplr")))


def _rot90(lw, node, op, b, target):
    m = lw.lower_expr(b["m"])
    k = static_int(lw, b.get("k"), "np.rot90's k", 1)
    axes_node = b.get("axes")
    axes = (0, 1)
    if axes_node is not None:
        elts = axes_node.elts if isinstance(axes_node, (gast.Tuple, gast.List)) else None
        axes = tuple(_int_constant(e) for e in elts) if elts is not None else (None,)
        if len(axes) != 2 or None in axes:
            raise lw.err(axes_node, "np.rot90's axes must be two integer constants",
                         "axes=(0, 1)")
    return lw.op(node, target, "rot90", [m], attrs=(("k", k), ("axes", axes)))


def _flat_then(lw, node, a, axis_node):
    """``(operand, axis, flattened)``: ``a`` raveled where the axis is absent (None)."""
    if axis_node is None or (isinstance(axis_node, gast.Constant) and axis_node.value is None):
        return lw.op(node, None, "ravel", [a]), 0, True
    return a, static_int(lw, axis_node, "axis"), False


def _count(lw, node_arg, what):
    if isinstance(node_arg, (gast.List, gast.Tuple)):
        raise lw.err(node_arg, f"{what} of several counts is not supported here",
                     "give one integer")
    return lw.lower_expr(node_arg)


def _roll(lw, node, op, b, target):
    a = lw.lower_expr(b["a"])
    shift = _count(lw, b["shift"], "np.roll's shift")
    src, axis, flat = _flat_then(lw, node, a, b.get("axis"))
    out = lw.op(node, None if flat else target, "along", [src, shift],
                attrs=(("kind", "roll"), ("axis", axis)))
    if flat:
        return lw.op(node, target, "reshape", [out, a], attrs=(("like", True),))
    return out


def _repeat(lw, node, op, b, target):
    a = lw.lower_expr(b["a"])
    r = _count(lw, b["repeats"], "np.repeat's repeats")
    src, axis, _ = _flat_then(lw, node, lw.op(node, None, "atleast_1d", [a]), b.get("axis"))
    return lw.op(node, target, "along", [src, r], attrs=(("kind", "repeat"), ("axis", axis)))


def _tile(lw, node, op, b, target):
    a = lw.lower_expr(b["A"])
    reps_node = b["reps"]
    elts = reps_node.elts if isinstance(reps_node, (gast.Tuple, gast.List)) else [reps_node]
    reps = [_int_constant(e) for e in elts]
    if None in reps:
        raise lw.err(reps_node, "np.tile's reps must be integer constants", "np.tile(a, (2, 3))")
    acc = lw.op(node, None, "atleast_1d", [a])
    # NumPy: a reps longer than the rank adds leading axes; a shorter one tiles the last axes
    # (coarsen.ir.primitives.building refuses an axis past the rank at type inference)
    acc = lw.op(node, None, "lead_axes", [acc], attrs=(("ndim", len(reps)),))
    todo = [(k, r) for k, r in enumerate(reps) if r != 1]
    if not todo:
        return lw.op(node, target, "copyarr", [acc])          # np.tile copies
    for j, (k, r) in enumerate(todo):
        acc = lw.op(node, target if j == len(todo) - 1 else None, "along", [acc, Const(r)],
                    attrs=(("kind", "tile"), ("axis", k - len(reps))))
    return acc


def _linspace(lw, node, op, b, target):
    start, stop = lw.lower_expr(b["start"]), lw.lower_expr(b["stop"])
    num = lw.lower_expr(b["num"]) if b.get("num") is not None else Const(50)
    endpoint = _static_bool(lw, b.get("endpoint"), "endpoint", True)
    return lw.op(node, target, "linspace", [start, stop, num], attrs=(("endpoint", endpoint),))


def _piece(lw, node, x, axis, lo, hi, what, min_rank):
    operands = [x] + [v for v in (lo, hi) if v is not None]
    return lw.op(node, None, "axis_slice", operands, attrs=(
        ("axis", axis), ("lo", lo is not None), ("hi", hi is not None), ("what", what),
        ("min_rank", min_rank)))


_SPLIT_AXES = {"vsplit": (0, 2), "hsplit": ("h", 1), "dsplit": (2, 3)}


def _split(lw, node, op, b, target):
    x = lw.lower_expr(b["ary"])
    what = f"np.{op}"
    if op in _SPLIT_AXES:
        axis, min_rank = _SPLIT_AXES[op]
    else:
        axis, min_rank = static_int(lw, b.get("axis"), "axis", 0), 1
    sec = b["indices_or_sections"]
    if isinstance(sec, (gast.List, gast.Tuple)):
        cuts = [_int_constant(e) for e in sec.elts]
        if None in cuts:
            raise lw.err(sec, f"{what}'s indices must be integer constants", "np.split(x, [2, 5])")
        bounds = [None] + [Const(c) for c in cuts] + [None]
        return TupleValue(tuple(_piece(lw, node, x, axis, lo, hi, what, min_rank)
                                for lo, hi in zip(bounds[:-1], bounds[1:])), f"{what}()")
    k = _int_constant(sec)
    if k is None or k < 1:
        raise lw.err(sec, f"{what}'s number of sections must be a positive integer constant",
                     "np.split(x, 3), or a list of indices: np.split(x, [2, 5])")
    n = lw.op(node, None, "axis_len", [x], attrs=(("axis", axis), ("what", what),
                                                   ("min_rank", min_rank)))
    each = lw.op(node, None, "floordiv", [n, Const(k)])
    extra = lw.op(node, None, "mod", [n, Const(k)])
    if op != "array_split":
        ok = lw.op(node, None, "eq", [extra, Const(0)])
        lw.op(node, None, "check", [ok], attrs=(
            ("exc", "ValueError"), ("message", "array split does not result in an equal division")))
    cuts = []
    for j in range(1, k):
        base = lw.op(node, None, "mul", [each, Const(j)])
        if op == "array_split":
            base = lw.op(node, None, "add", [base, lw.op(node, None, "minimum", [extra, Const(j)])])
        cuts.append(base)
    bounds = [None] + cuts + [None]
    return TupleValue(tuple(_piece(lw, node, x, axis, lo, hi, what, min_rank)
                            for lo, hi in zip(bounds[:-1], bounds[1:])), f"{what}()")


def _gradient(lw, node, op, b, target):
    f = lw.lower_expr(b["f"])
    spacing = b.get("varargs") or []
    if len(spacing) > 1:
        raise lw.err(spacing[1], "np.gradient with more than one spacing is not supported",
                     "differentiate along one axis: np.gradient(f, h, axis=k)")
    if spacing and isinstance(spacing[0], (gast.List, gast.Tuple)):
        raise lw.err(spacing[0], "np.gradient with coordinates is not supported",
                     "give one scalar spacing")
    h = lw.lower_expr(spacing[0]) if spacing else Const(1.0)
    edge_node = b.get("edge_order")
    order = static_int(lw, edge_node, "edge_order", 1)
    if order not in (1, 2):
        raise lw.err(edge_node, "np.gradient's edge_order must be 1 or 2")
    axis_node = b.get("axis")
    if axis_node is None or (isinstance(axis_node, gast.Constant) and axis_node.value is None):
        attrs = (("axis", 0), ("rank", 1))
    else:
        if isinstance(axis_node, (gast.Tuple, gast.List)):
            raise lw.err(axis_node, "np.gradient along several axes (one array per axis) is not "
                         "supported", "call it once per axis: np.gradient(f, axis=0)")
        attrs = (("axis", static_int(lw, axis_node, "axis")),)
    return lw.op(node, target, "gradient", [f, h], attrs=attrs + (("edge_order", order),))


def _select(lw, node, op, b, target):
    conds, choices = b["condlist"], b["choicelist"]
    for arg in (conds, choices):
        if not isinstance(arg, (gast.List, gast.Tuple)):
            raise lw.err(arg, "np.select takes lists written out here",
                         "np.select([x < 0, x > 1], [a, b], default)")
    if len(conds.elts) != len(choices.elts):
        raise lw.err(node, "list of cases must be same length as list of conditions")
    if not conds.elts:
        raise lw.err(node, "np.select of no cases is not supported")
    cs = [lw.op(node, None, "condition", [lw.lower_expr(e)], attrs=(("entry", k),))
          for k, e in enumerate(conds.elts)]
    vs = [lw.lower_expr(e) for e in choices.elts]
    acc = lw.lower_expr(b["default"]) if b.get("default") is not None else Const(0)
    for k in reversed(range(len(cs))):
        acc = lw.op(node, target if k == 0 else None, "where", [cs[k], vs[k], acc])
    return acc


def _builtin_sum(lw, node, op, b, target):
    seq = b["iterable"]
    if not isinstance(seq, (gast.List, gast.Tuple)):
        raise lw.err(seq, "the builtin sum() is not supported of this argument, only of a list "
                     "or tuple written out", "write sum([a, b, c]), or np.sum(x) for an array's "
                     "elements")
    acc = lw.lower_expr(b["start"]) if b.get("start") is not None else Const(0)
    vals = [lower_list(lw, e) if isinstance(e, (gast.List, gast.Tuple)) else lw.lower_expr(e)
            for e in seq.elts]
    if not vals:
        return acc if target is None else lw.op(node, target, "copy", [acc])
    for k, v in enumerate(vals):
        acc = lw.op(node, target if k == len(vals) - 1 else None, "add", [acc, v])
    return acc


_LOWER = {
    "concatenate": _concatenate, "stack": _concatenate,
    "vstack": _stacks, "row_stack": _stacks, "hstack": _stacks, "column_stack": _stacks,
    "append": _append, "flipud": _flips, "fliplr": _flips, "rot90": _rot90, "roll": _roll,
    "repeat": _repeat, "tile": _tile, "linspace": _linspace, "gradient": _gradient,
    **{op: _split for op in ("split", "array_split", "vsplit", "hsplit", "dsplit")},
    "select": _select, BUILTIN_SUM: _builtin_sum,
}

