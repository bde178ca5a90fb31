"""Calls of the NumPy functions of issue 44a whose arguments are static: axis moves
(``np.moveaxis``, ``np.swapaxes``, ``np.rollaxis``), ``np.squeeze``/``x.squeeze()``,
``np.atleast_2d``/``np.atleast_3d``, diagonals (``np.diagonal``, ``np.diag``, ``np.trace``,
``np.tril``, ``np.triu``: the offset), products (``np.tensordot``'s ``axes``, ``np.inner``,
``np.cross``), ``np.sort``/``np.partition`` (``axis``, ``kth``), and the reductions' ``ddof``
and tuple axes.

Requires: a ``Lowerer`` (``coarsen.frontend.lower``) lowering a call that resolved to one of
``FORM_OPS``, its arguments bound to NumPy's signature (``coarsen.frontend.signatures``) with
the parameters of ``FORMS_UNDERSTOOD``, read here only.
Guarantees, before any code is generated: each call becomes the registry's primitive with its
static arguments as attributes (``coarsen.ir.primitives.axes``: ``permute_axes``' ``how``,
``squeeze``'s ``axes``, ``atleast_nd``'s ``n``; ``diagonals``' ``k``; ``products``'
``axes``: ``np.tensordot``'s default 2, ``np.inner`` ``((-1,), (-1,))``; ``sorting``'s
``axis`` and ``kth``, ``axis=None`` a ``ravel`` first); an axis that is not an integer constant (or a
tuple of them), ``np.squeeze`` without an axis (its rank would depend on the run-time shape)
and ``atleast_2d(a, b)`` of several arrays (a list result) are ``CoarsenError``s at the
argument.  A reduction over a tuple of axes (``np.sum(x, axis=(0, 2))``) is the reduction over
one axis of ``x`` with those axes moved last and merged (``permute_axes``, ``reshape``), its
result reshaped back where ``keepdims``: one reduction, so ties of ``max``/``min`` share the
adjoint evenly over the whole tuple, as over one axis.
"""
from __future__ import annotations

import gast

# the ops lowered here and the parameters each reads (NumPy's names, every spelling's)
FORMS_UNDERSTOOD = {
    "permute_axes": frozenset({"a", "source", "destination", "axis1", "axis2", "axis", "start"}),
    "squeeze": frozenset({"a", "axis"}),
    "atleast_nd": frozenset({"arys"}),
    "diagonal": frozenset({"a", "offset", "axis1", "axis2"}),
    "diag": frozenset({"v", "k"}), "trace": frozenset({"a", "offset", "axis1", "axis2"}),
    "tril": frozenset({"m", "k"}), "triu": frozenset({"m", "k"}),
    "tensordot": frozenset({"a", "b", "axes"}), "cross": frozenset({"a", "b"}),
    "sort": frozenset({"a", "axis", "kind"}), "partition": frozenset({"a", "kth", "axis", "kind"}),
    "pad": frozenset({"array", "pad_width", "mode", "constant_values"}),
    "angle": frozenset({"z", "deg"}), "real": frozenset({"val", "a", "tol"}),
    "nan_to_num": frozenset({"x", "copy", "nan", "posinf", "neginf"}),
}
FORM_OPS = frozenset(FORMS_UNDERSTOOD)
FORM_METHODS = {"squeeze": frozenset({"axis"})}

_AXES_HINT = "write the axes as integer constants, e.g. np.moveaxis(x, 0, -1)"


def constant_int(node):
    """The value of an integer constant node (``-k`` too), else None."""
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
        v = constant_int(node.operand)
        return None if v is None else -v
    if isinstance(node, gast.Constant) and type(node.value) is int:
        return node.value
    return None


def static_axes(lw, node, what, allow_none=False):
    """An integer constant or a tuple of them as a tuple of ints (None: the constant None,
    where ``allow_none``); anything else is a ``CoarsenError`` at ``node``."""
    if allow_none and (node is None or (isinstance(node, gast.Constant) and node.value is None)):
        return None
    elts = node.elts if isinstance(node, (gast.Tuple, gast.List)) else [node]
    out = [constant_int(e) for e in elts]
    if node is None or any(v is None for v in out):
        raise lw.err(node, f"{what} must be an integer constant or a tuple of them", _AXES_HINT)
    return tuple(out)


def static_literals(lw, stmt):
    """ids of the nodes of ``stmt`` the fence lets through as static arguments read here:
    lists of integer constants passed to a call of one of ``FORM_OPS``
    (``np.tensordot(a, b, axes=([0, 1], [1, 0]))``, ``np.moveaxis(x, [0, 1], [2, 0])``)."""
    out = set()
    for call in gast.walk(stmt):
        if not isinstance(call, gast.Call):
            continue
        # a dtype named by a string (x.astype("float64"), dtype="f8"): calls.dtype_of reads it
        dtype_args = [kw.value for kw in call.keywords if kw.arg == "dtype"]
        if isinstance(call.func, gast.Attribute) and call.func.attr == "astype":
            dtype_args += call.args[:1]
        out |= {id(a) for a in dtype_args if isinstance(a, gast.Constant)
                and isinstance(a.value, str)}
        k = lw.resolve_value(call.func, quiet=True)
        if getattr(k, "op", None) not in FORM_OPS:
            continue
        # np.pad's mode, np.sort's and np.partition's kind: read (and checked) by _pad, _sort
        where = {"pad": ("mode", 2), "sort": ("kind", 2), "partition": ("kind", 3)}.get(k.op)
        if where is not None:
            name, pos = where
            out |= {id(a) for a in call.args[pos:pos + 1] + [kw.value for kw in call.keywords
                                                             if kw.arg == name]
                    if isinstance(a, gast.Constant) and isinstance(a.value, str)}
        for arg in call.args + [kw.value for kw in call.keywords]:
            for sub in gast.walk(arg):
                if isinstance(sub, gast.List) and all(
                        constant_int(e) is not None or isinstance(e, (gast.List, gast.Tuple))
                        for e in sub.elts):
                    out.add(id(sub))
    return out


def lower_form(lw, node, kind, op, b, target):
    """Lower a call of ``op`` (one of ``FORM_OPS``), spelled ``kind.name``, whose arguments
    ``b`` (a ``Bound``) the caller bound; return the operand holding its result."""
    if op == "permute_axes":
        a = lw.lower_expr(b["a"])
        spelling = kind.name.rsplit(".", 1)[-1]
        if spelling == "moveaxis":
            how = ("move", static_axes(lw, b["source"], "source"),
                   static_axes(lw, b["destination"], "destination"))
        elif spelling == "swapaxes":
            how = ("swap",) + tuple(_one_axis(lw, b[p], p) for p in ("axis1", "axis2"))
        else:
            start = b.get("start")
            how = ("roll", _one_axis(lw, b["axis"], "axis"),
                   0 if start is None else _one_axis(lw, start, "start"))
        return lw.op(node, target, "permute_axes", [a], attrs=(("how", how),))
    if op == "squeeze":
        return squeeze(lw, node, lw.lower_expr(b["a"]), b.get("axis"), target)
    if op in ("diagonal", "diag", "trace", "tril", "triu"):
        return _diagonal(lw, node, op, b, target)
    if op in ("tensordot", "cross"):
        return _product(lw, node, kind, op, b, target)
    if op in ("sort", "partition"):
        return _sort(lw, node, op, b, target)
    if op == "pad":
        return _pad(lw, node, b, target)
    if op == "angle":               # np.angle(z, deg): deg a constant
        deg = b.get("deg")
        if deg is not None and not (isinstance(deg, gast.Constant) and isinstance(deg.value, bool)):
            raise lw.err(deg, "np.angle's deg must be True or False", "np.angle(x, deg=True)")
        out = lw.op(node, None if deg is not None and deg.value else target, "angle",
                    [lw.lower_expr(b["z"])])
        return lw.op(node, target, "rad2deg", [out]) if deg is not None and deg.value else out
    if op == "nan_to_num":
        return _nan_to_num(lw, node, b, target)
    if op == "real":                # real_if_close's tol changes nothing on real input
        tol = b.get("tol")
        if tol is not None and not (isinstance(tol, gast.Constant) and type(tol.value) in (int, float)):
            raise lw.err(tol, "np.real_if_close's tol must be a number constant")
        return lw.op(node, target, "real", [lw.lower_expr(b["val"] if "val" in b.given() else b["a"])])
    arys = b.get("arys") or []
    if len(arys) != 1:
        raise lw.err(node, f"{kind.name} of {len(arys)} arrays (a list of results) is not "
                     "supported", "call it once per array")
    n = 2 if kind.name.endswith("2d") else 3
    return lw.op(node, target, "atleast_nd", [lw.lower_expr(arys[0])], attrs=(("n", n),))


def squeeze(lw, node, arr, axis_node, target):
    """``np.squeeze(a, axis)`` and ``a.squeeze(axis)``: ``axis`` must be given."""
    if axis_node is None or (isinstance(axis_node, gast.Constant) and axis_node.value is None):
        raise lw.err(node, "np.squeeze without axis= is not supported: the rank of its result "
                     "would depend on the run-time shape", "name the axes: np.squeeze(x, axis=0)")
    axes = static_axes(lw, axis_node, "squeeze's axis")
    return lw.op(node, target, "squeeze", [arr], attrs=(("axes", axes),))


def _int_or(lw, node, what, default):
    if node is None:
        return default
    return _one_axis(lw, node, what)


def _diagonal(lw, node, op, b, target):
    operand = {"diag": "v", "tril": "m", "triu": "m"}.get(op, "a")
    arr = lw.lower_expr(b[operand])
    k = _int_or(lw, b.get("k" if op in ("diag", "tril", "triu") else "offset"), "the offset", 0)
    attrs = (("k", k),)
    if op in ("diagonal", "trace"):
        attrs += (("axes", (_int_or(lw, b.get("axis1"), "axis1", 0),
                            _int_or(lw, b.get("axis2"), "axis2", 1))),)
    return lw.op(node, target, op, [arr], attrs=attrs)


def _product(lw, node, kind, op, b, target):
    a, c = lw.lower_expr(b["a"]), lw.lower_expr(b["b"])
    if op == "cross":
        return lw.op(node, target, "cross", [a, c])
    if kind.name.endswith("inner"):
        axes = ((-1,), (-1,))
    else:
        given = b.get("axes")
        if given is None:
            axes = 2
        elif constant_int(given) is not None:
            axes = constant_int(given)
        elif isinstance(given, (gast.Tuple, gast.List)) and len(given.elts) == 2:
            axes = tuple(static_axes(lw, e, "tensordot's axes") for e in given.elts)
        else:
            raise lw.err(given, "tensordot's axes must be an integer constant or a pair of "
                         "(tuples of) integer constants", "np.tensordot(a, b, axes=([1, 0], [0, 1]))")
    return lw.op(node, target, "tensordot", [a, c], attrs=(("axes", axes),))


SORT_KINDS = {"sort": ("quicksort", "mergesort", "heapsort", "stable"),
              "partition": ("introselect",)}


def _sort(lw, node, op, b, target):
    kind = b.get("kind")
    if kind is not None and not (isinstance(kind, gast.Constant) and kind.value in SORT_KINDS[op]):
        shown = repr(kind.value) if isinstance(kind, gast.Constant) else "this kind"
        raise lw.err(kind, f"np.{op}'s kind {shown} is not supported",
                     f"one of {', '.join(repr(k) for k in SORT_KINDS[op])} (the sorted values "
                     "do not depend on it)")
    arr = lw.lower_expr(b["a"])
    axis_node = b.get("axis")
    flat = isinstance(axis_node, gast.Constant) and axis_node.value is None
    axis = -1 if axis_node is None or flat else _one_axis(lw, axis_node, "axis")
    if flat:                                   # axis=None: NumPy sorts the flattened array
        arr = lw.op(node, None, "ravel", [arr])
    attrs = (("axis", axis),)
    if op == "partition":
        kth = constant_int(b["kth"])
        if kth is None:
            raise lw.err(b["kth"], "np.partition's kth must be an integer constant",
                         "one kth: np.partition(x, 2) (a sequence of them is not supported)")
        attrs += (("kth", kth),)
    return lw.op(node, target, op, [arr], attrs=attrs)


def _number(node):
    """The value of a number constant node (``-c`` too), else None."""
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
        v = _number(node.operand)
        return None if v is None else -v
    if isinstance(node, gast.Constant) and type(node.value) in (int, float):
        return node.value
    return None


def _nan_to_num(lw, node, b, target):
    """``np.nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None)``: the replacements
    number constants (None: NumPy's default), ``copy`` True (False writes into ``x``)."""
    copy = b.get("copy")
    if copy is not None and not (isinstance(copy, gast.Constant) and copy.value is True):
        raise lw.err(copy, "np.nan_to_num with copy=False (in place) is not supported",
                     "assign the result: x = np.nan_to_num(x)")
    given = []
    for name, default in (("nan", 0.0), ("posinf", None), ("neginf", None)):
        v = b.get(name)
        if v is None or (isinstance(v, gast.Constant) and v.value is None):
            given.append(default)
            continue
        num = _number(v)
        if num is None:
            raise lw.err(v, f"np.nan_to_num's {name} must be a number constant")
        given.append(num)
    attrs = () if given == [0.0, None, None] else (("replace", tuple(given)),)
    return lw.op(node, target, "nan_to_num", [lw.lower_expr(b["x"])], attrs=attrs)


def _static_widths(lw, node):
    """``pad_width`` as written: an int, or nested tuples/lists of ints."""
    v = constant_int(node)
    if v is not None:
        return v
    if isinstance(node, (gast.Tuple, gast.List)):
        return tuple(_static_widths(lw, e) for e in node.elts)
    raise lw.err(node, "np.pad's pad_width must be integer constants",
                 "np.pad(x, ((1, 2), (0, 1)), mode='constant')")


def _pad(lw, node, b, target):
    mode = b.get("mode")
    if mode is not None and not (isinstance(mode, gast.Constant) and mode.value == "constant"):
        shown = repr(mode.value) if isinstance(mode, gast.Constant) else "this mode"
        raise lw.err(mode, f"np.pad's mode {shown} is not supported",
                     "mode='constant' (the default) is; write other paddings with slices")
    value = b.get("constant_values")
    fill = 0
    if value is not None:
        fill = value.value if isinstance(value, gast.Constant) and type(value.value) in (int, float) \
            else constant_int(value)
        if fill is None:
            raise lw.err(value, "np.pad's constant_values must be one number constant",
                         "pad with 0 and add the fill: np.pad(x, w) + c * np.pad(0 * x + 1, w) ...")
    return lw.op(node, target, "pad", [lw.lower_expr(b["array"])],
                 attrs=(("widths", _static_widths(lw, b["pad_width"])), ("value", fill)))


def lower_form_method(lw, node, name, obj, b, target):
    """``x.squeeze(axis)`` (one of ``FORM_METHODS``)."""
    return squeeze(lw, node, obj, b.get("axis"), target)


def _one_axis(lw, node, what):
    v = constant_int(node)
    if v is None:
        raise lw.err(node, f"{what} must be an integer constant", _AXES_HINT)
    return v


def tuple_axis_reduction(lw, node, target, op, arr, axes, keep, ddof):
    """``op`` (a reduction) of ``arr`` over the tuple ``axes``: ``permute_axes`` moving them
    last, a ``reshape`` merging them, the reduction along the last axis, and, with
    ``keepdims``, a reshape to the operand's shape with those axes of length 1."""
    moved = lw.op(node, None, "permute_axes", [arr],
                  attrs=(("how", ("move", tuple(axes), tuple(range(-len(axes), 0)))),))
    red_attrs = (("axis", -1), ("keepdims", False)) + ((("ddof", ddof),) if ddof else ())
    flat = lw.op(node, None, "merge_last_axes", [moved], attrs=(("count", len(axes)),))
    out = lw.op(node, None if keep else target, op, [flat], attrs=red_attrs)
    if not keep:
        return out
    return lw.op(node, target, "keep_reduced", [out, arr], attrs=(("axes", tuple(axes)),))

