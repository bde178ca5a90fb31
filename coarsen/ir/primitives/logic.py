"""Comparisons, boolean logic and the loop-continuation test: zero derivative everywhere.

Requires: ``core``, ``coarsen.codegen.build``.
Guarantees: type rules (booleans; the truth value of an array is refused), emitted primals,
SymPy counterparts (relations and boolean connectives, so segments can lift branches).
"""
from __future__ import annotations

import gast
import sympy

from ...codegen import build as B
from ...codegen.build import X
from ..nodes import BOOL, Array, Const, Scalar
from .core import CostClass, Primitive, err, make, nd, register


def _compare_type(c, s, ts):
    return make("bool", max(nd(t) for t in ts))


def _truth_type(c, s, ts):
    if any(isinstance(t, Array) for t in ts):
        raise err(s, "the truth value of an array is ambiguous",
                  "use np.any/np.all explicitly (not supported) or compare scalars")
    return BOOL


def _bool_operand_type(c, s, ts):
    """An operand of ``and``/``or``: a boolean.  Python's ``a or b`` is one of the operands,
    not a boolean (``(s or 1.0) * a`` is ``s * a`` for ``s = 0.25``); the IR's connectives
    compute the truth value, so a float or int operand is refused rather than differentiated
    as ``bool(a)``."""
    t = ts[0]
    if isinstance(t, Array):
        return _truth_type(c, s, ts)
    if t != BOOL:
        kind = {"f64": "float", "i64": "int"}.get(t.kind, t.kind)
        raise err(s, f"`and`/`or` used as a value, with an operand of type {kind}: Python's "
                  "result is then that operand itself, and coarsen computes truth values only",
                  "compare explicitly (`x != 0.0 and y > 0.0`), or write the value as "
                  "`a if a != 0.0 else b`")
    return BOOL


def _bool_type(c, s, ts):
    return BOOL


def _emit_compare(symbol):
    def emit(em, s, v):
        return B.compare(v[0], symbol, v[1])
    return emit


def _emit_not(em, s, v):
    if em.is_arr(s.args[0]):
        return B.call("np.logical_not", v[0])
    return gast.UnaryOp(op=gast.Not(), operand=B.ex(v[0]))


def _emit_truth(em, s, v):
    a = s.args[0]
    if isinstance(a, Const):
        return B.const(bool(a.value))
    if em.types.get(a.name) == Scalar("bool"):
        return B.ex(v[0])
    return B.call("bool", v[0])


def _emit_boolop(em, s, v):
    return gast.BoolOp(op=gast.Or() if s.op == "or" else gast.And(), values=[B.ex(v[0]), B.ex(v[1])])


def _emit_range_cont(em, s, v):
    step = s.args[2]
    if isinstance(step, Const):
        return B.compare(v[0], "<" if step.value > 0 else ">", v[1])
    return B.call(em.helper("_range_cont"), *v)


_REL = {"lt": ("<", sympy.Lt, "Lt"), "le": ("<=", sympy.Le, "LtE"), "gt": (">", sympy.Gt, "Gt"),
        "ge": (">=", sympy.Ge, "GtE"), "eq": ("==", sympy.Eq, "Eq"), "ne": ("!=", sympy.Ne, "NotEq")}
for _name, (_sym, _rel, _cls) in _REL.items():
    register(Primitive(_name, _compare_type, _emit_compare(_sym), arity=2, zero=True,
                       operators=(_cls,), cost=CostClass.ADD,
                       passenger=True, boolean=True, broadcasting=False,
                       sympy=(lambda r: lambda a, b: r(a, b, evaluate=False))(_rel)))
register(Primitive("not", _truth_type, _emit_not, arity=1, zero=True, passenger=True,
                   operators=("Not",), cost=CostClass.ADD,
                   boolean=True, keeps_booleans=True, sympy=sympy.Not))
register(Primitive("truth", _truth_type, _emit_truth, arity=1, zero=True, passenger=True,
                   cost=CostClass.FREE,
                   boolean=True, transparent=True, keeps_booleans=True, sympy=lambda a: a))
register(Primitive("bool_operand", _bool_operand_type, _emit_truth, arity=1, zero=True,
                   cost=CostClass.FREE,
                   passenger=True, boolean=True, transparent=True, keeps_booleans=True,
                   sympy=lambda a: a))
register(Primitive("or", _bool_type, _emit_boolop, arity=2, zero=True, passenger=True,
                   cost=CostClass.ADD,
                   boolean=True, keeps_booleans=True, sympy=sympy.Or))
register(Primitive("and", _bool_type, _emit_boolop, arity=2, zero=True, passenger=True,
                   cost=CostClass.ADD,
                   boolean=True, keeps_booleans=True, sympy=sympy.And))
register(Primitive("range_cont", _bool_type, _emit_range_cont, arity=3, zero=True,
                   passenger=True, cost=CostClass.ADD))

__all__ = ["X"]
