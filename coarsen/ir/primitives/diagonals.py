"""Diagonals: ``diagonal`` (``np.diagonal``), ``diag`` (``np.diag``), ``trace`` (``np.trace``),
``tril``/``triu`` (``np.tril``, ``np.triu``).

Requires: ``core``, ``coarsen.codegen.build``; the runtime helpers ``_diag_of``, ``_diag_adj``,
``_trace_adj``, ``_tri_keep`` (``coarsen.codegen.helpers_numpy``); the frontend
(``coarsen.frontend.numpy_forms``) gives each its offset as the attribute ``k`` (an integer
constant; ``diagonal``'s ``axis1``, ``axis2`` as ``axes``, (0, 1) or (1, 0)).
Guarantees, with NumPy's values and dtypes:

* ``diagonal(a, k)`` of a 2-D array: the ``k``-th diagonal (above the main one for ``k > 0``),
  a fresh 1-D array (NumPy's is a read-only view: nothing can write through it); with
  ``axes`` (1, 0) the diagonal of ``a.T``; an array of another rank is refused;
* ``diag(v, k)``: of a 1-D ``v`` the square matrix with ``v`` on its ``k``-th diagonal, of a
  2-D ``v`` its ``k``-th diagonal (``np.diag`` on both targets); other ranks refused;
* ``trace(a, k)``: the sum of ``diagonal(a, k)``, of ``a``'s dtype;
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
from .core import CostClass, Primitive, deflinear, defstructural, dt, err, make, register


def _shape(em, arg, pre_fwd, pre_rev):
    return em.shape_of(arg, pre_fwd, pre_rev) if arg.name in em.f.set_temps \
        else B.attr(f"{em.bar(arg.name)}.shape")


def _two_d(s, t, what):
    if not isinstance(t, Array) or t.ndim != 2:
        rank = t.ndim if isinstance(t, Array) else 0
        raise err(s, f"{what} of a {rank}-D array is not supported", f"{what} takes a 2-D array")


def _transposed(s):
    return tuple(a % 2 for a in s.attr("axes", (0, 1))) == (1, 0)


def _diagonal_type(c, s, ts):
    _two_d(s, ts[0], "np.diagonal")
    axes = s.attr("axes", (0, 1))
    if len(axes) != 2 or any(not -2 <= a < 2 for a in axes) or axes[0] % 2 == axes[1] % 2:
        raise err(s, f"np.diagonal's axis1 and axis2 {axes} are not two different axes of a "
                  "2-D array", "np.diagonal(a, k) or np.diagonal(a, k, 1, 0)")
    return make(ts[0].dtype, 1)


def _emit_diagonal(em, s, v):
    a = B.attr(f"{s.args[0].name}.T") if _transposed(s) else v[0]
    return B.call(em.helper("_diag_of"), a, s.attr("k", 0))


def _vjp_diagonal(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[p]
    shape = _shape(em, arg, pre_fwd, pre_rev)
    if _transposed(s):
        adj = B.call(em.helper("_diag_adj"), g, s.attr("k", 0),
                     B.tuple_(B.subscript(shape, 1), B.subscript(shape, 0)))
        contrib = X(B.call("np.ascontiguousarray", B.call("np.transpose", adj)), True)
    else:
        contrib = X(B.call(em.helper("_diag_adj"), g, s.attr("k", 0), shape), True)
    em.accumulate(arg.name, contrib, pre_fwd, pre_rev, out)


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
    _two_d(s, ts[0], "np.trace")
    return make(ts[0].dtype, 0)


def _emit_trace(em, s, v):
    return B.call("np.sum", B.call(em.helper("_diag_of"), v[0], s.attr("k", 0)))


def _vjp_trace(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[p]
    contrib = X(B.call(em.helper("_trace_adj"), g, s.attr("k", 0),
                       _shape(em, arg, pre_fwd, pre_rev)), True)
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
