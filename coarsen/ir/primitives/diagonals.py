"""Diagonals: ``diagonal`` (``np.diagonal``), ``diag`` (``np.diag``), ``trace`` (``np.trace``),
``tril``/``triu`` (``np.tril``, ``np.triu``).

Requires: ``core``, ``coarsen.codegen.build``; the runtime helpers ``_diag_of``, ``_diag_adj``,
``_trace_adj``, ``_tri_keep`` (``coarsen.codegen.helpers_numpy``); the frontend
(``coarsen.frontend.numpy_forms``) gives each its offset as the attribute ``k`` (an integer
constant; ``diagonal``'s and ``trace``'s ``axis1``, ``axis2`` as ``axes``).
Guarantees, with NumPy's values and dtypes:

* ``diagonal(a, k, axis1, axis2)`` of an array of 2 or more dimensions: the ``k``-th
  diagonal (above the main one for ``k > 0``) of the planes of ``axis1`` and ``axis2``, as the
  last axis of the result, the other axes in order (NumPy's layout): a fresh array (NumPy's
  is a read-only view: nothing can write through it); a scalar or 1-D array is refused;
* ``diag(v, k)``: of a 1-D ``v`` the square matrix with ``v`` on its ``k``-th diagonal, of a
  2-D ``v`` its ``k``-th diagonal (``np.diag`` on both targets); other ranks refused;
* ``trace(a, k, axis1, axis2)``: the sum of ``diagonal(a, k, axis1, axis2)`` along its last
  axis, of ``a``'s dtype;
* ``tril(x, k)``/``triu(x, k)``: ``x`` with the elements above (below) the ``k``-th diagonal
  of its last two axes zeroed, any rank from 2 (a 1-D ``x`` is refused: NumPy reads it as a
  row broadcast to a square);
* the adjoints: the diagonal's adjoint written into zeros of the operand's shape; ``tril`` and
  ``triu`` of the adjoint. Forward mode: each is linear (``deflinear``).
"""
from __future__ import annotations

from ...codegen import build as B
from ...codegen.build import X
from ..nodes import Array
from .axes import permuted
from .core import CostClass, Primitive, deflinear, defstructural, dt, err, make, register


def _shape(em, arg, pre_fwd, pre_rev):
    return em.shape_of(arg, pre_fwd, pre_rev) if arg.name in em.f.set_temps \
        else B.attr(f"{em.bar(arg.name)}.shape")


def _two_axes(s, t, what):
    """The normalized ``(axis1, axis2)`` of ``s`` on the array type ``t`` (CoarsenError where
    NumPy refuses them)."""
    if not isinstance(t, Array) or t.ndim < 2:
        rank = t.ndim if isinstance(t, Array) else 0
        raise err(s, f"{what} of a {rank}-D array", f"{what} takes an array of 2 or more dimensions")
    axes = s.attr("axes", (0, 1))
    if any(not -t.ndim <= a < t.ndim for a in axes) or axes[0] % t.ndim == axes[1] % t.ndim:
        raise err(s, f"{what}'s axis1 and axis2 {axes} are not two different axes of a "
                  f"{t.ndim}-D array", f"{what}(a, k) or {what}(a, k, 1, 0)")
    return axes[0] % t.ndim, axes[1] % t.ndim


def _perm(em, s, arg):
    """The permutation moving ``axis1``, ``axis2`` last (the other axes in order)."""
    rank = em.nd(arg)
    a1, a2 = (a % rank for a in s.attr("axes", (0, 1)))
    return tuple(k for k in range(rank) if k not in (a1, a2)) + (a1, a2)


def _plain(em, s):
    return em.nd(s.args[0]) == 2 and _perm(em, s, s.args[0]) == (0, 1)


def _moved_shape(shape, perm):
    return B.tuple_(*(B.subscript(shape, k) for k in perm))


def _diagonal_type(c, s, ts):
    _two_axes(s, ts[0], "np.diagonal")
    return make(ts[0].dtype, ts[0].ndim - 1)


def _emit_diagonal(em, s, v):
    if _plain(em, s):
        return B.call(em.helper("_diag_of"), v[0], s.attr("k", 0))
    return B.call(em.helper("_diag_last2"), permuted(v[0], _perm(em, s, s.args[0])), s.attr("k", 0))


def _vjp_diagonal(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[p]
    shape = _shape(em, arg, pre_fwd, pre_rev)
    if _plain(em, s):
        contrib = X(B.call(em.helper("_diag_adj"), g, s.attr("k", 0), shape), True)
    else:
        perm = _perm(em, s, arg)
        adj = B.call(em.helper("_diag_last2_adj"), g, s.attr("k", 0), _moved_shape(shape, perm))
        contrib = X(permuted(adj, _inverse(perm)), True)
    em.accumulate(arg.name, contrib, pre_fwd, pre_rev, out)


def _inverse(perm):
    inv = [0] * len(perm)
    for k, a in enumerate(perm):
        inv[a] = k
    return tuple(inv)


def _diag_type(c, s, ts):
    t = ts[0]
    if not isinstance(t, Array) or t.ndim not in (1, 2):
        raise err(s, "np.diag of a scalar or an array above 2-D", "np.diag takes a 1-D or 2-D array")
    return make(t.dtype, 3 - t.ndim)


def _emit_diag(em, s, v):
    return B.call("np.diag", v[0], s.attr("k", 0))


def _vjp_diag(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[p]
    if em.nd(arg) == 1:
        contrib = X(B.call(em.helper("_diag_of"), g, s.attr("k", 0)), True)
    else:
        contrib = X(B.call(em.helper("_diag_adj"), g, s.attr("k", 0),
                           _shape(em, arg, pre_fwd, pre_rev)), True)
    em.accumulate(arg.name, contrib, pre_fwd, pre_rev, out)


def _trace_type(c, s, ts):
    _two_axes(s, ts[0], "np.trace")
    return make(ts[0].dtype, ts[0].ndim - 2)


def _emit_trace(em, s, v):
    if _plain(em, s):
        return B.call("np.sum", B.call(em.helper("_diag_of"), v[0], s.attr("k", 0)))
    diag = B.call(em.helper("_diag_last2"), permuted(v[0], _perm(em, s, s.args[0])), s.attr("k", 0))
    return B.call("np.sum", diag, axis=em.nd(s.args[0]) - 2)


def _vjp_trace(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[p]
    shape = _shape(em, arg, pre_fwd, pre_rev)
    if _plain(em, s):
        contrib = X(B.call(em.helper("_trace_adj"), g, s.attr("k", 0), shape), True)
    else:
        perm = _perm(em, s, arg)
        adj = B.call(em.helper("_trace_last2_adj"), g, s.attr("k", 0), _moved_shape(shape, perm))
        contrib = X(permuted(adj, _inverse(perm)), True)
    em.accumulate(arg.name, contrib, pre_fwd, pre_rev, out)


def _tri_type(c, s, ts):
    t = ts[0]
    if not isinstance(t, Array) or t.ndim < 2:
        raise err(s, f"np.{s.op} of a scalar or a 1-D array is not supported",
                  f"np.{s.op} takes an array of 2 or more dimensions")
    return make(dt(t), t.ndim)


def _emit_tri(em, s, v):
    return B.call(em.helper("_tri_keep"), v[0], s.attr("k", 0), B.const(s.op == "tril"))


def _vjp_tri(em, s, p, g, pre_fwd, pre_rev, out):
    contrib = X(B.call(em.helper("_tri_keep"), g, s.attr("k", 0), B.const(s.op == "tril")), True)
    em.accumulate(s.args[p].name, contrib, pre_fwd, pre_rev, out)


register(Primitive("diagonal", _diagonal_type, _emit_diagonal, arity=1, numpy=("diagonal",),
                   cost=CostClass.CALL))
register(Primitive("diag", _diag_type, _emit_diag, arity=1, numpy=("diag",),
                   cost=CostClass.CALL))
register(Primitive("trace", _trace_type, _emit_trace, arity=1, numpy=("trace",),
                   cost=CostClass.CALL))
register(Primitive("tril", _tri_type, _emit_tri, arity=1, numpy=("tril",), shape_like=True,
                   cost=CostClass.CALL))
register(Primitive("triu", _tri_type, _emit_tri, arity=1, numpy=("triu",), shape_like=True,
                   cost=CostClass.CALL))
for _name, _vjp in (("diagonal", _vjp_diagonal), ("diag", _vjp_diag), ("trace", _vjp_trace),
                    ("tril", _vjp_tri), ("triu", _vjp_tri)):
    defstructural(_name, _vjp, (0,))
    deflinear(_name)
