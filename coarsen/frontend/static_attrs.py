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
* ``np.einsum(spec, a, b)``: one ``einsum`` of ``a`` and ``b`` with the attribute ``spec``, the
  string constant as written (the registry's type rule parses it and refuses what is not
  supported);
* the fence (``Lowerer._fence``) lets a string constant through only as the subscripts of an
  ``np.einsum`` call (``einsum_spec_strings``);
* anything else is a ``CoarsenError``: other arguments (``dtype``, ``out``, ``prepend``,
  ``append``, ``optimize``) are refused by the binding to NumPy's signature
  (``coarsen.frontend.signatures``, done by the caller), naming the argument; a spec that is not
  a string constant or a wrong number of operands here, at the call.
"""
from __future__ import annotations

import gast

STATIC_ATTR_OPS = frozenset({"cumsum", "diff", "einsum"})

_EINSUM_HINT = "write np.einsum('ij,jk->ik', A, B): a string constant and two operands"


def einsum_spec_strings(lw, stmt):
    """ids of the string constants that are the subscripts of an ``np.einsum`` call in
    ``stmt`` (the fence lets strings through only there)."""
    out = set()
    for sub in gast.walk(stmt):
        if isinstance(sub, gast.Call) and sub.args and isinstance(sub.args[0], gast.Constant) \
                and isinstance(sub.args[0].value, str):
            k = lw.resolve_value(sub.func, quiet=True)
            if getattr(k, "op", None) == "einsum":
                out.add(id(sub.args[0]))
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
    if not operands or not (isinstance(operands[0], gast.Constant)
                            and isinstance(operands[0].value, str)):
        raise lw.err(node, "np.einsum's subscripts must be a string constant", _EINSUM_HINT)
    if len(operands) != 3:
        raise lw.err(node, f"np.einsum of {len(operands) - 1} operand(s) is not supported",
                     _EINSUM_HINT)
    ops = [lw.lower_expr(a) for a in operands[1:]]
    return lw.op(node, target, "einsum", ops, attrs=(("spec", operands[0].value),))
