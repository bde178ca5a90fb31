"""NumPy's element-wise functions beyond ``math``'s, and the complex-number functions on real
input: ``deg2rad``/``radians``, ``rad2deg``/``degrees``, ``exp2``, ``logaddexp2``, ``real``,
``real_if_close``, ``imag``, ``conj``/``conjugate``, ``angle``, ``nan_to_num``.

Requires: ``core`` (the registry), ``calls.fn``, ``coarsen.codegen.build``.
Guarantees, with NumPy's values and dtypes (coarsen's arrays are never complex, so each
complex function is its real-input case):

* ``deg2rad(x)`` is ``x * (pi / 180)`` and ``rad2deg(x)`` is ``x * (180 / pi)``, the product
  NumPy's C loops compute, bit for bit; float results (an int operand gives a float);
* ``exp2``, ``logaddexp2``: NumPy's ufuncs on both targets (``np.exp2`` on scalars too), float
  results; partials ``log(2) 2**x`` and ``2**(x - logaddexp2(x, y))``;
* ``real(x)`` and ``real_if_close(x)`` are ``x`` itself (a view: NumPy returns ``x.real``, which
  shares ``x``'s memory, and ``real_if_close`` returns ``x``), of ``x``'s dtype; ``conj(x)`` is a
  new array equal to ``x`` (a ufunc); each passes the derivative through unchanged;
* ``imag(x)`` is zeros of ``x``'s dtype and shape, ``angle(x)`` is ``arctan2(0.0, x)`` (0 for
  ``x >= +0.0``, pi for ``x < 0`` and ``-0.0``, nan for nan), float: both have zero derivative
  (piecewise constant on the reals);
* ``nan_to_num(x)`` replaces nan by 0.0 and +-inf by the largest finite floats (NumPy's
  defaults; ints unchanged), or by the constants of the attribute ``replace`` (``nan``,
  ``posinf``, ``neginf``; None for a default; ``coarsen.frontend.numpy_forms``); its partial
  is 1 where ``x`` is finite and 0 elsewhere.

Forward mode takes the partials (``real``, ``real_if_close``: linear).  None is lifted into
segments (no SymPy form): each is evaluated as an array routine or a scalar call.
"""
from __future__ import annotations

import math

from ...codegen import build as B
from ...codegen.build import X, select
from .calls import fn
from .core import (CostClass, Primitive, deflinear, defstructural, defvjp, dt, make, nd,
                   register)

ADD, MUL, EXP, TRIG = CostClass.ADD, CostClass.MUL, CostClass.EXP, CostClass.TRIG
DEG2RAD = math.pi / 180.0
RAD2DEG = 180.0 / math.pi
BIG = 1.7976931348623157e308        # np.finfo(np.float64).max: nan_to_num's default +-inf


def _float_type(c, s, ts):
    return make("f64", max(nd(t) for t in ts))


def _same_type(c, s, ts):
    return ts[0]


def _scale(factor):
    def emit(em, s, v):
        return B.binop(v[0], "*", B.const(factor))
    return emit


def _emit_np(name):
    def emit(em, s, v):
        return B.call(f"np.{name}", *v)
    return emit


def _emit_identity(em, s, v):
    return B.ex(v[0])


def _emit_conj(em, s, v):
    if em.is_arr(s.args[0]):
        return B.call("np.copy", v[0])
    return B.ex(v[0])


def _emit_imag(em, s, v):
    if em.is_arr(s.args[0]):
        return B.call("np.zeros_like", v[0])
    return B.const(0.0 if dt(em.types[s.target]) == "f64" else 0)


def _emit_angle(em, s, v):
    if em.is_arr(s.args[0]):
        return B.call("np.arctan2", 0.0, v[0])
    return B.call("math.atan2", 0.0, v[0])


def _emit_nan_to_num(em, s, v):
    if dt(em.types[s.target]) != "f64":
        return B.ex(v[0]) if not em.is_arr(s.args[0]) else B.call("np.copy", v[0])
    given = s.attr("replace")
    if given is None:
        return B.call("np.nan_to_num", v[0])
    nan, posinf, neginf = (BIG if r is None and k == 1 else -BIG if r is None and k == 2 else
                           r for k, r in enumerate(given))
    if em.is_arr(s.args[0]):
        return B.call(em.helper("_nan_to_num_kw"), v[0], float(nan), float(posinf), float(neginf))
    x = B.ex(v[0])
    inner = B.ifexp(B.compare(x, "==", B.attr("math.inf")), float(posinf),
                    B.ifexp(B.compare(x, "==", B.ex(B.binop(0.0, "-", B.attr("math.inf")))),
                            float(neginf), x))
    return B.ifexp(B.compare(x, "!=", x), float(nan), inner)


def _unary(name, type_rule, emit, *, numpy, cost, **flags):
    flags.setdefault("partial_cost", ADD)
    register(Primitive(name, type_rule, emit, arity=1, numpy=numpy, shape_like=True,
                       elementwise=True, float_result=type_rule is _float_type, cost=cost,
                       **flags))


_unary("deg2rad", _float_type, _scale(DEG2RAD), numpy=("deg2rad", "radians"), cost=MUL)
_unary("rad2deg", _float_type, _scale(RAD2DEG), numpy=("rad2deg", "degrees"), cost=MUL)
_unary("exp2", _float_type, _emit_np("exp2"), numpy=("exp2",), np_only=True, cost=EXP)
register(Primitive("logaddexp2", _float_type, _emit_np("logaddexp2"), arity=2,
                   numpy=("logaddexp2",), np_only=True, float_result=True, broadcasting=True,
                   elementwise=True, cost=(ADD, ADD, ADD, EXP, EXP), partial_cost=ADD))
register(Primitive("real", _same_type, _emit_identity, arity=1, numpy=("real", "real_if_close"),
                   view=True, shape_like=True, cost=CostClass.FREE))
_unary("conj", _same_type, _emit_conj, numpy=("conj", "conjugate"), cost=CostClass.FREE)
_unary("imag", _same_type, _emit_imag, numpy=("imag",), zero=True, cost=CostClass.FREE)
_unary("angle", _float_type, _emit_angle, numpy=("angle",), zero=True, cost=TRIG)
_unary("nan_to_num", _same_type, _emit_nan_to_num, numpy=("nan_to_num",), np_only=True,
       cost=(ADD, ADD))


def _vjp_identity(em, s, p, g, pre_fwd, pre_rev, out):
    em.accumulate(s.args[p].name, g, pre_fwd, pre_rev, out)


defvjp("deg2rad", lambda x: X(DEG2RAD))
defvjp("rad2deg", lambda x: X(RAD2DEG))
defvjp("exp2", lambda x: math.log(2.0) * fn("exp2", x))
defvjp("logaddexp2", lambda x, y: fn("exp2", x - fn("logaddexp2", x, y)),
       lambda x, y: fn("exp2", y - fn("logaddexp2", x, y)))
defstructural("real", _vjp_identity, (0,))
deflinear("real")
defvjp("conj", lambda x: X(1.0))
# 1 where x is finite (x - x is 0 there, nan at nan and +-inf), else 0
defvjp("nan_to_num", lambda x: select((x - x).cmp("==", 0.0), 1.0, 0.0))
