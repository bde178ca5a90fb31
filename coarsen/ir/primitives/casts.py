"""Copies and conversions: ``copy`` (plain assignment), ``copyarr`` (``a.copy()``),
``float``, ``int``, ``astype``.

Requires: ``core``, ``coarsen.codegen.build``.
Guarantees: type rules, emitted primals (a copy materializes only where activity analysis
says the value must not alias), and derivatives: the identity for floats, zero for ``int``.
"""
from __future__ import annotations

import gast

from ...codegen import build as B
from ...codegen.build import X
from ..nodes import F64, I64, Array, Scalar
from .core import CostClass, Primitive, deflinear, defstructural, defvjp, err, make, nd, register


def _same_type(c, s, ts):
    return ts[0]


def _float_type(c, s, ts):
    if isinstance(ts[0], Array):
        raise err(s, "float() of an array", "index the element first")
    return F64


def _int_type(c, s, ts):
    if isinstance(ts[0], Array):
        raise err(s, "int() of an array", "index the element first")
    return I64


def _astype_type(c, s, ts):
    return make(s.attr("dtype"), nd(ts[0]))


def _emit_copy(em, s, v):
    if s.target in em.f.materialize:
        return B.call(gast.Attribute(value=B.ex(v[0]), attr="copy", ctx=gast.Load()))
    return B.ex(v[0])


def _emit_copyarr(em, s, v):
    if not em.is_arr(s.args[0]):
        return B.ex(v[0])       # np.copy / np.array of a number: the number (a 0-d array acts as one)
    return B.call(gast.Attribute(value=B.ex(v[0]), attr="copy", ctx=gast.Load()))


def float_of(em, a, v):
    """``float(a)`` for a scalar operand ``a`` (``v``: its expression): a constant is its float
    (``float(True)``: 1.0), a bool variable goes through ``int`` (Numba has no ``float`` of a
    bool).  The ``float`` cast and Python's true division and powers of ints use it."""
    if hasattr(a, "value"):
        return B.const(float(a.value))
    if em.types.get(a.name) == Scalar("bool"):
        return B.call("float", B.call("int", v))
    return B.call("float", v)


def _emit_float(em, s, v):
    return float_of(em, s.args[0], v[0])


def _emit_int(em, s, v):
    return B.call("int", v[0])


def _emit_astype(em, s, v):
    d = {"f64": "np.float64", "i64": "np.int64", "bool": "np.bool_"}[s.attr("dtype")]
    return B.call(gast.Attribute(value=B.ex(v[0]), attr="astype", ctx=gast.Load()), B.attr(d))


def _vjp_identity(em, s, p, g, pre_fwd, pre_rev, out):
    em.accumulate(s.args[p].name, g, pre_fwd, pre_rev, out)


def _one(*_):
    return X(1.0)


register(Primitive("copy", _same_type, _emit_copy, arity=1, view=True, passenger=True, plain_copy=True,
                   transparent=True, shape_like=True, keeps_booleans=True,
                   sympy=lambda a: a, cost=CostClass.FREE))
register(Primitive("copyarr", _same_type, _emit_copyarr, arity=1, numpy=("copy",),
                   shape_like=True, cost=CostClass.CALL))
defstructural("copyarr", _vjp_identity, (0,))
register(Primitive("float", _float_type, _emit_float, arity=1, numpy=("float64",),
                   transparent=True, sympy=lambda a: a, cost=CostClass.FREE))
register(Primitive("int", _int_type, _emit_int, arity=1, zero=True, passenger=True,
                   cost=CostClass.FREE))
register(Primitive("astype", _astype_type, _emit_astype, arity=1, shape_like=True,
                   cost=CostClass.CALL))
defvjp("copy", _one)
defvjp("float", _one)
defvjp("astype", _one)
# forward mode: copies are the same op on the tangent (an alias where the primal aliases, a
# copy where it copies); float and astype take their partials
deflinear("copy")
deflinear("copyarr")
