"""The body of a ``custom_vjp`` backward rule, typed for the types of one call.

Requires: a ``BackwardRule`` (``coarsen.ir.primitives.custom``), the residuals' and the
output's types, and type inference itself (``infer``, a parameter: inference reaches this
module from the type rule of ``custom_vjp_out``, ``Inference.typed_backward``, so importing
inference here would close a cycle).
Guarantees: the rule object is never changed: its body is deep-copied into a new ``Function``
of the residuals and ``g``, which is then typed.
"""
from __future__ import annotations

import copy

from .nodes import Function, Var


def typed_backward(rule, residual_types, g_type, infer, names=None):
    """A typed copy of ``rule``'s body as a ``Function`` of the residuals and ``g``, taking
    the names it makes (in-place rewriting) from ``names``, the supply of the module that
    runs it (None: a typing whose code is never emitted, such as inference's check of the
    cotangents' types, names from a supply of its own); ``infer`` is type inference
    (``coarsen.ir.typeinfer.infer``, passed in: inference calls this from a type rule)."""
    cotangents = frozenset(c.name for c in rule.cotangents if isinstance(c, Var))
    fn = Function(rule.name, list(rule.residuals) + [rule.g], copy.deepcopy(list(rule.body)),
                  rule.g, rule.filename, temps=rule.temps, live_out=cotangents, names=names)
    infer(fn, list(residual_types) + [g_type])
    return fn
