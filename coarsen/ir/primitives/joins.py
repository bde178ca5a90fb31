"""Joining arrays: ``concatenate`` (``np.concatenate`` and, through the frontend's sugar in
``coarsen.frontend.joins``, ``vstack``, ``hstack``, ``row_stack``, ``column_stack``,
``append``), ``stack`` (``np.stack``, ``np.array`` of arrays, lists passed to NumPy),
``condition`` (``np.select``'s), ``linspace``.

Requires: ``core``, ``coarsen.codegen.build``; the fixed runtime helpers ``_linspace`` and
``_linspace_w`` (``coarsen.codegen.helpers``).  The frontend gives ``concatenate`` its operands
(the arrays, any number, at least one) and the attribute ``axis`` (an integer, maybe
negative; ``"h"``: ``np.hstack``'s), ``stack`` the same (scalars too), ``linspace`` its operands ``start``, ``stop``, ``num`` and the attribute
``endpoint`` (a bool).
Guarantees:

* ``concatenate``: the type rule takes arrays of one rank (1 or more; a scalar or a rank
  mismatch is refused, as NumPy does), an axis in range (negative axes count from the end),
  and gives NumPy's dtype (the join of the operands': bool < int < float); the primal is
  ``np.concatenate((a, b, ...), axis)`` with every operand of another dtype converted first
  (``.astype``: Numba joins only arrays of one dtype), a new array (never a view), whose
  other dimensions NumPy (and Numba) check at run time.  The VJP of operand ``p`` is the slice
  of the output's adjoint along the axis from the sum of the extents of the operands before it
  (read from their shapes in the reverse sweep) to that plus its own; forward mode
  concatenates the tangents (a zero array of the operand's shape where one has none).
* ``stack``: values of one rank (scalars included) stacked along a new axis (``np.stack``;
  ``np.array([...])`` of scalars is ``np.array`` of the list), NumPy's dtype; the VJP of operand
  ``p`` is the adjoint's entry ``p`` along that axis; forward mode stacks the tangents.
* ``condition``: an entry of ``np.select``'s ``condlist``, itself; anything but a boolean
  scalar or array is refused, as NumPy raises.
* ``linspace``: scalar ``start``/``stop`` (arrays are refused), an integer ``num``; the primal
  is NumPy's algorithm step by step (``k * step + start`` with ``step = (stop - start) / div``,
  ``div = num - 1`` with ``endpoint``, else ``num``; ``k / div * delta + start`` where the step
  is zero; the last element ``stop`` itself with ``endpoint`` and ``num > 1``; a negative
  ``num`` raises NumPy's ``ValueError``), float64; its partials are ``1 - w`` (``start``) and
  ``w`` (``stop``) with ``w_k = k / div`` (``0`` where ``div <= 0``, and ``1`` at the endpoint).
"""
from __future__ import annotations

from dataclasses import dataclass

import gast

from ...codegen import build as B
from ...codegen.build import X
from ..nodes import Array, F64, Var
from .core import (CostClass, Primitive, defjvp, defstructural, dt, dtype_join, err, make, nd,
                   register)

_CONCAT_HINT = "np.concatenate takes arrays of one rank: np.concatenate((a, b), axis=0)"


@dataclass
class _Joined(Primitive):
    """A primitive of any number of operands, each of which may carry a derivative."""

    def diff_positions(self, nargs):
        return tuple(range(nargs))


def _concat_axis(s, rank):
    """The normalized axis (``"h"``: ``np.hstack``'s, 0 for 1-D arrays, else 1)."""
    axis = s.attr("axis")
    if axis == "h":
        return 0 if rank == 1 else 1
    if not -rank <= axis < rank:
        raise err(s, f"axis {axis} is out of range for joining {rank}-D arrays",
                  f"give an axis from {-rank} to {rank - 1}")
    return axis % rank


def _concatenate_type(c, s, ts):
    if not ts:
        raise err(s, "np.concatenate needs at least one array", _CONCAT_HINT)
    for t in ts:
        if not isinstance(t, Array):
            raise err(s, "zero-dimensional values (scalars) cannot be concatenated",
                      "make them arrays first: np.array([x]) or np.atleast_1d(x)")
    ranks = {t.ndim for t in ts}
    if len(ranks) > 1:
        raise err(s, f"np.concatenate of arrays of different ranks {sorted(ranks)}", _CONCAT_HINT)
    rank = ts[0].ndim
    _concat_axis(s, rank)
    dtype = ts[0].dtype
    for t in ts[1:]:
        dtype = dtype_join(dtype, t.dtype)
    return Array(dtype, rank)


_NP_DTYPE = {"f64": "np.float64", "i64": "np.int64", "bool": "np.bool_"}


def _emit_concatenate(em, s, v):
    out = em.types[s.target].dtype
    parts = []
    for a, val in zip(s.args, v):
        if em.types[a.name].dtype != out:
            val = X(B.call(gast.Attribute(value=B.ex(val), attr="astype", ctx=gast.Load()),
                           B.attr(_NP_DTYPE[out])), True)
        parts.append(val)
    return B.call("np.concatenate", B.tuple_(*parts), _concat_axis(s, em.nd(s.args[0])))


def _vjp_concatenate(em, s, p, g, pre_fwd, pre_rev, out):
    rank = em.nd(s.args[0])
    axis = _concat_axis(s, rank)

    def extent(q):
        return B.subscript(em.shape_of(s.args[q], pre_fwd, pre_rev), axis)

    lo = None
    for q in range(p):
        lo = extent(q) if lo is None else B.binop(lo, "+", extent(q))
    hi = extent(p) if lo is None else B.binop(lo, "+", extent(p))
    idx = [B.slice_() for _ in range(rank)]
    idx[axis] = B.slice_(lo, hi)
    part = B.subscript(g, idx[0] if rank == 1 else B.tuple_(*idx))
    em.accumulate(s.args[p].name, X(part, True), pre_fwd, pre_rev, out)


def _jvp_concatenate(em, s, dots, out):
    parts = []
    for a, d in zip(s.args, dots):
        if d is not None:
            parts.append(em.val(d))
        else:
            parts.append(X(B.call("np.zeros", gast.Attribute(value=B.ex(em.val(a)), attr="shape",
                                                              ctx=gast.Load())), True))
    return X(B.call("np.concatenate", B.tuple_(*parts), _concat_axis(s, em.nd(s.args[0]))), True)


register(_Joined("concatenate", _concatenate_type, _emit_concatenate, numpy=("concatenate",),
                 cost=CostClass.CALL))
defstructural("concatenate", _vjp_concatenate, ())
defjvp("concatenate", _jvp_concatenate)


# ------------------------------------------------------------------ np.stack
def _stack_axis(s, rank):
    """The normalized axis of a ``stack`` of ``rank``-D operands (the result has one more)."""
    axis = s.attr("axis")
    if not -(rank + 1) <= axis <= rank:
        raise err(s, f"axis {axis} is out of range for stacking {rank}-D values",
                  f"give an axis from {-(rank + 1)} to {rank}")
    return axis % (rank + 1)


def _stack_type(c, s, ts):
    if not ts:
        raise err(s, "stacking needs at least one value", "np.stack((a, b), axis=0)")
    ranks = {nd(t) for t in ts}
    if len(ranks) > 1:
        raise err(s, f"stacking values of different ranks {sorted(ranks)} (NumPy needs one "
                     "shape)", "give every value the same shape")
    rank = ranks.pop()
    _stack_axis(s, rank)
    dtype = dt(ts[0])
    for t in ts[1:]:
        dtype = dtype_join(dtype, dt(t))
    return Array(dtype, rank + 1)


def _stacked(em, s, parts):
    rank = em.nd(s.args[0])
    if rank == 0:
        return B.call("np.array", gast.List(elts=[B.ex(p) for p in parts], ctx=gast.Load()))
    return B.call("np.stack", B.tuple_(*parts), _stack_axis(s, rank))


def _emit_stack(em, s, v):
    out = em.types[s.target].dtype
    parts = []
    for a, val in zip(s.args, v):
        mine = dt(em.types[a.name]) if isinstance(a, Var) else (
            "f64" if isinstance(a.value, float) else "bool" if isinstance(a.value, bool) else "i64")
        if mine != out:
            if em.nd(s.args[0]) == 0:
                val = X(B.call({"f64": "float", "i64": "int", "bool": "bool"}[out], val))
            else:
                val = X(B.call(gast.Attribute(value=B.ex(val), attr="astype", ctx=gast.Load()),
                               B.attr(_NP_DTYPE[out])), True)
        parts.append(val)
    return _stacked(em, s, parts)


def _vjp_stack(em, s, p, g, pre_fwd, pre_rev, out):
    rank = em.nd(s.args[0])
    axis = _stack_axis(s, rank)
    idx = [B.slice_() for _ in range(rank + 1)]
    idx[axis] = B.const(p)
    part = B.subscript(g, idx[0] if rank == 0 else B.tuple_(*idx))
    em.accumulate(s.args[p].name, X(part, rank > 0), pre_fwd, pre_rev, out)


def _jvp_stack(em, s, dots, out):
    rank = em.nd(s.args[0])
    parts = []
    for a, d in zip(s.args, dots):
        if d is not None:
            parts.append(em.val(d))
        elif rank == 0:
            parts.append(X(B.const(0.0)))
        else:
            parts.append(X(B.call("np.zeros", gast.Attribute(value=B.ex(em.val(a)), attr="shape",
                                                              ctx=gast.Load())), True))
    return X(_stacked(em, s, parts), True)


register(_Joined("stack", _stack_type, _emit_stack, numpy=("stack",), cost=CostClass.CALL))
defstructural("stack", _vjp_stack, ())
defjvp("stack", _jvp_stack)


# ------------------------------------------------------------------ np.select's conditions
def _condition_type(c, s, ts):
    if dt(ts[0]) != "bool":
        raise err(s, f"invalid entry {s.attr('entry')} in condlist: should be boolean ndarray "
                     "(np.select refuses other conditions)", "compare: x > 0.0")
    return ts[0]


def _emit_condition(em, s, v):
    return B.ex(v[0])


register(Primitive("condition", _condition_type, _emit_condition, arity=1, zero=True,
                   transparent=True, cost=CostClass.FREE))


# ------------------------------------------------------------------ np.linspace
def _linspace_type(c, s, ts):
    start, stop, num = ts
    for t, what in ((start, "start"), (stop, "stop")):
        if isinstance(t, Array):
            raise err(s, f"np.linspace with an array {what} is not supported",
                      "give scalar start and stop (one np.linspace per row)")
    if nd(num) or dt(num) != "i64":
        raise err(s, "np.linspace's num must be an integer", "pass an int: np.linspace(a, b, 5)")
    return make(F64.kind, 1)


def _emit_linspace(em, s, v):
    endpoint = bool(s.attr("endpoint"))
    if getattr(em, "input_language", False):
        return B.call("np.linspace", v[0], v[1], v[2], endpoint=B.const(endpoint))
    return B.call(em.helper("_linspace"), v[0], v[1], v[2], B.const(endpoint))


def _weights(em, s):
    """``w_k``: the partial of element ``k`` in ``stop`` (``1 - w_k`` in ``start``)."""
    endpoint = bool(s.attr("endpoint"))
    num = em.val(s.args[2])
    if getattr(em, "input_language", False):
        return X(B.call("np.linspace", 0.0, 1.0, num, endpoint=B.const(endpoint)), True)
    return X(B.call(em.helper("_linspace_w"), num, B.const(endpoint)), True)


def _vjp_linspace(em, s, p, g, pre_fwd, pre_rev, out):
    w = _weights(em, s)
    part = g * w if p == 1 else g * (1.0 - w)
    em.accumulate(s.args[p].name, X(B.call("np.sum", part)), pre_fwd, pre_rev, out)


def _jvp_linspace(em, s, dots, out):
    w = _weights(em, s)
    terms = []
    if dots[0] is not None:
        terms.append(em.val(dots[0]) * (1.0 - w))
    if dots[1] is not None:
        terms.append(em.val(dots[1]) * w)
    return terms[0] if len(terms) == 1 else terms[0] + terms[1]


register(Primitive("linspace", _linspace_type, _emit_linspace, arity=3, numpy=("linspace",),
                   cost=CostClass.CALL))
defstructural("linspace", _vjp_linspace, (0, 1))
defjvp("linspace", _jvp_linspace)
