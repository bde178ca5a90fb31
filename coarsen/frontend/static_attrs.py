"""Calls whose static arguments become IR attributes: ``np.cumsum``, ``np.diff``, ``np.einsum``.

Requires: a ``Lowerer`` (``coarsen.frontend.lower``) lowering a call that resolved to one of
``STATIC_ATTR_OPS`` (the registry's ``cumsum``, ``diff``, ``einsum``), its arguments bound to
NumPy's signature (``a``, ``axis``; ``a``, ``n``, ``axis``; ``operands``) and read here only.
Guarantees, before any code is generated:

* ``np.cumsum(x)``, ``np.cumsum(x, axis)``, ``np.cumsum(x, axis=k)``: one ``cumsum`` with the
  attribute ``axis`` (``None`` or the integer constant as written);
* ``np.diff(x)``, ``np.diff(x, n)``, ``np.diff(x, n, axis)`` (or keywords): ``n`` chained
  ``diff`` statements, each with the attribute ``axis`` (``None``: the last axis, NumPy's
  default); ``n`` must be a positive integer constant (``None`` is 1);
* ``np.einsum(spec, a, b, ...)``: one ``einsum`` of the operands with the attribute ``spec``, the
  string constant as written (the registry's type rule parses it and refuses what is not
  supported); the sublist form ``np.einsum(a, [0, 1], b, [1, 2][, out])`` (lists or tuples of
  integer constants 0..51 and ``Ellipsis``) as the string NumPy reads it (``einsum_operands``);
* the fence (``Lowerer._fence``) lets a string constant through only as the subscripts of an
  ``np.einsum`` call, and lists only as its sublists (``einsum_spec_strings``);
* anything else is a ``CoarsenError``: other arguments (``dtype``, ``out``, ``prepend``,
  ``append``, ``optimize``) are refused by the binding to NumPy's signature
  (``coarsen.frontend.signatures``, done by the caller), naming the argument; a spec that is not
  a string constant or a wrong number of operands here, at the call.
"""
from __future__ import annotations

import gast

STATIC_ATTR_OPS = frozenset({"cumsum", "diff", "einsum"})

_EINSUM_HINT = ("write np.einsum('ij,jk->ik', A, B) (a string constant and the operands) or "
                "np.einsum(A, [0, 1], B, [1, 2])")


def einsum_spec_strings(lw, stmt):
    """ids of the string constants that are the subscripts of an ``np.einsum`` call in
    ``stmt``, and of the lists of its sublist form (the fence lets strings and lists through
    only there)."""
    out = set()
    for sub in gast.walk(stmt):
        if isinstance(sub, gast.Call) and sub.args:
            k = lw.resolve_value(sub.func, quiet=True)
            if getattr(k, "op", None) != "einsum":
                continue
            if isinstance(sub.args[0], gast.Constant) and isinstance(sub.args[0].value, str):
                out.add(id(sub.args[0]))
            else:
                out.update(id(a) for a in sub.args[1:] if isinstance(a, (gast.List, gast.Tuple)))
    return out


def _static_int(lw, node, what):
    if node is None or (isinstance(node, gast.Constant) and node.value is None):
        return None
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub) \
            and isinstance(node.operand, gast.Constant) and type(node.operand.value) is int:
        return -node.operand.value
    if isinstance(node, gast.Constant) and type(node.value) is int:
        return node.value
    raise lw.err(node, f"{what} must be an integer constant")


def lower_static_attr_call(lw, node, op, args, target):
    """Lower a call of ``op`` (one of ``STATIC_ATTR_OPS``), whose arguments ``args`` (a
    ``coarsen.frontend.signatures.Bound``) the caller bound to NumPy's signature, into IR
    statements; return the operand holding its result."""
    if op == "cumsum":
        axis = _static_int(lw, args.get("axis"), "axis")
        return lw.op(node, target, "cumsum", [lw.lower_expr(args["a"])], attrs=(("axis", axis),))
    if op == "diff":
        n_node = args.get("n")
        n = _static_int(lw, n_node, "n")
        n = 1 if n is None else n
        if n < 1:
            raise lw.err(n_node, "np.diff with n < 1 is not supported", "n is 1 or more")
        axis = _static_int(lw, args.get("axis"), "axis")
        acc = lw.lower_expr(args["a"])
        for k in range(n):
            acc = lw.op(node, target if k == n - 1 else None, "diff", [acc],
                        attrs=(("axis", axis),))
        return acc
    # einsum
    operands = args.get("operands") or []
    spec, arrays = einsum_operands(lw, node, operands)
    ops = [lw.lower_expr(a) for a in arrays]
    return lw.op(node, target, "einsum", ops, attrs=(("spec", spec),))


_SUBLIST_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _sublist(lw, node):
    """The letters of a sublist (``[0, 1]``, ``[Ellipsis, 1]``) as a subscripts term."""
    if not isinstance(node, (gast.List, gast.Tuple)):
        raise lw.err(node, "np.einsum's sublist form needs a list of integer constants "
                           "after each operand", _EINSUM_HINT)
    out = []
    for e in node.elts:
        if isinstance(e, gast.Constant) and e.value is Ellipsis or \
                isinstance(e, gast.Name) and e.id == "Ellipsis":
            out.append("...")
        elif isinstance(e, gast.Constant) and type(e.value) is int and 0 <= e.value < 52:
            out.append(_SUBLIST_LETTERS[e.value])
        else:
            raise lw.err(e, "np.einsum's sublists hold integer constants 0..51 or Ellipsis",
                         _EINSUM_HINT)
    return "".join(out)


def einsum_operands(lw, node, operands):
    """(the subscripts as a string, the operand expressions) of ``np.einsum(*operands)``: a
    string constant and the operands, or the sublist form ``a, [0, 1], b, [1, 2][, [0, 2]]``
    spelled as the string NumPy reads it (``0..25`` as ``A..Z``, ``26..51`` as ``a..z``)."""
    if not operands:
        raise lw.err(node, "np.einsum needs subscripts and operands", _EINSUM_HINT)
    first = operands[0]
    if isinstance(first, gast.Constant) and isinstance(first.value, str):
        if len(operands) < 2:
            raise lw.err(node, "np.einsum needs at least one operand", _EINSUM_HINT)
        return first.value, list(operands[1:])
    if isinstance(first, (gast.List, gast.Tuple)) or len(operands) < 2:
        raise lw.err(node, "np.einsum's subscripts must be a string constant or the sublist "
                           "form", _EINSUM_HINT)
    pairs = operands[:len(operands) - len(operands) % 2]
    terms = [_sublist(lw, pairs[k + 1]) for k in range(0, len(pairs), 2)]
    spec = ",".join(terms)
    if len(operands) % 2:
        spec += "->" + _sublist(lw, operands[-1])
    return spec, [pairs[k] for k in range(0, len(pairs), 2)]
