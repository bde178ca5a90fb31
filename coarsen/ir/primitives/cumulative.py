"""Cumulative and differencing primitives: ``cumsum`` (``np.cumsum``) and ``diff`` (``np.diff``).

Requires: ``core``, ``coarsen.codegen.build``; the runtime helpers ``_cumsum2``, ``_rcumsum1``,
``_rcumsum2``, ``_diff_adj1``, ``_diff_adj2`` (``coarsen.codegen.runtime``), and above 2-D
``_cumsum_nd``, ``_rcumsum_nd``, ``_diff_adj_nd`` (``coarsen.codegen.helpers_nd``).  The frontend
(``coarsen.frontend.static_attrs``) gives both an ``axis`` attribute (``None`` or an integer)
and lowers ``np.diff(x, n)`` to ``n`` chained ``diff``s.
Guarantees: type rules accept integer or float arrays of any rank (``cumsum`` without an
axis of an array above 1-D flattens it in C order, as NumPy does, and its adjoint is shaped
back; booleans and scalars are refused with a hint); the primal is NumPy's (``np.cumsum`` in 1-D, a sequential loop along the axis in
2-D and above, ``x[1:] - x[:-1]`` along the axis for ``diff``); the VJPs are the reverse cumulative sum of
the adjoint (``cumsum``) and ``x_bar[:-1] -= g; x_bar[1:] += g`` along the axis (``diff``).
"""
from __future__ import annotations

import gast

from ...codegen import build as B
from ...codegen.build import X
from ..nodes import Array
from .core import CostClass, Primitive, deflinear, defstructural, err, make, register


def _axis_of(s, a):
    """The normalized static axis of ``s`` on the array type ``a`` (CoarsenError if out of range)."""
    axis = s.attr("axis")
    if axis is None:
        return None
    if not -a.ndim <= axis < a.ndim:
        raise err(s, f"axis {axis} is out of range for a {a.ndim}-D array")
    return axis % a.ndim


def _checked_array(s, ts, what):
    a = ts[0]
    if not isinstance(a, Array):
        raise err(s, f"np.{what} of a scalar is not supported", f"np.{what} takes an array")
    if a.dtype == "bool":
        raise err(s, f"np.{what} of a boolean array is not supported",
                  "convert it first: x.astype(np.int64) or x.astype(np.float64)")
    return a


def _cumsum_type(c, s, ts):
    a = _checked_array(s, ts, "cumsum")
    axis = _axis_of(s, a)
    if axis is None:        # NumPy flattens (C order) and sums the 1-D array
        return make(a.dtype, 1)
    return make(a.dtype, a.ndim)


def _diff_type(c, s, ts):
    a = _checked_array(s, ts, "diff")
    _axis_of(s, a)
    return make(a.dtype, a.ndim)


def _flat(em, node):
    """``node`` raveled in C order (as NumPy's ``cumsum`` without an axis reads it)."""
    src = B.ex(node) if getattr(em, "input_language", False) else B.call("np.ascontiguousarray", node)
    return B.call(gast.Attribute(value=src, attr="ravel", ctx=gast.Load()))


def _emit_cumsum(em, s, v):
    rank = em.nd(s.args[0])
    if rank == 1:
        return B.call("np.cumsum", v[0])
    if s.attr("axis") is None:
        return B.call("np.cumsum", _flat(em, v[0]))
    if rank > 2:
        return B.call(em.helper("_cumsum_nd"), v[0], s.attr("axis") % rank)
    return B.call(em.helper("_cumsum2"), v[0], s.attr("axis") % rank)


def _diff_axis(em, s):
    rank = em.nd(s.args[0])
    axis = s.attr("axis")
    return rank, (rank - 1 if axis is None else axis % rank)   # NumPy's default: the last axis


def _emit_diff(em, s, v):
    rank, axis = _diff_axis(em, s)

    def part(lo, hi):
        idx = [B.slice_() for _ in range(rank)]
        idx[axis] = B.slice_(lo, hi)
        return B.subscript(v[0], idx[0] if rank == 1 else B.tuple_(*idx))

    return B.binop(part(1, None), "-", part(None, -1))


def _vjp_cumsum(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[p]
    rank = em.nd(arg)
    if rank == 1:
        contrib = B.call(em.helper("_rcumsum1"), g)
    elif s.attr("axis") is None:    # flattened: the 1-D adjoint, shaped back
        shape = em.shape_of(arg, pre_fwd, pre_rev) if arg.name in em.f.set_temps \
            else B.attr(f"{em.bar(arg.name)}.shape")
        contrib = B.call(gast.Attribute(value=B.call(em.helper("_rcumsum1"), g), attr="reshape",
                                        ctx=gast.Load()), shape)
    elif rank > 2:
        contrib = B.call(em.helper("_rcumsum_nd"), g, s.attr("axis") % rank)
    else:
        contrib = B.call(em.helper("_rcumsum2"), g, s.attr("axis") % rank)
    em.accumulate(arg.name, X(contrib, True), pre_fwd, pre_rev, out)


def _vjp_diff(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[p]
    rank, axis = _diff_axis(em, s)
    # the argument's shape: np.diff of an axis of length 0 or 1 is empty, and its adjoint is
    # not one element longer than it
    shape = em.shape_of(arg, pre_fwd, pre_rev)
    if rank == 1:
        contrib = B.call(em.helper("_diff_adj1"), g, shape)
    elif rank > 2:
        contrib = B.call(em.helper("_diff_adj_nd"), g, axis, shape)
    else:
        contrib = B.call(em.helper("_diff_adj2"), g, axis, shape)
    em.accumulate(arg.name, X(contrib, True), pre_fwd, pre_rev, out)


register(Primitive("cumsum", _cumsum_type, _emit_cumsum, arity=1, numpy=("cumsum",),
                   cost=CostClass.CALL))
register(Primitive("diff", _diff_type, _emit_diff, arity=1, numpy=("diff",),
                   cost=CostClass.CALL))
defstructural("cumsum", _vjp_cumsum, (0,))
defstructural("diff", _vjp_diff, (0,))
deflinear("cumsum")       # forward mode: the same op on the tangent
deflinear("diff")
