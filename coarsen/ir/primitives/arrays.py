"""Rank promotion: ``atleast_1d`` (``np.atleast_1d``) of one operand.

Requires: ``core``, ``coarsen.codegen.build``.
Guarantees: a scalar becomes a fresh 1-element array of its dtype (``np.full(1, x)``); an array
is returned as it is (the same array, so the result is a view of operand 0, as in NumPy,
and in-place updates through it reach the operand); the VJP passes the adjoint back
unchanged for an array and reads its one element for a scalar.
"""
from __future__ import annotations

from ...codegen import build as B
from ...codegen.build import X
from ..nodes import Array
from .core import CostClass, Primitive, deflinear, defstructural, dt, make, register


def _atleast_1d_type(c, s, ts):
    a = ts[0]
    return a if isinstance(a, Array) else make(dt(a), 1)


def _emit_atleast_1d(em, s, v):
    if em.is_arr(s.args[0]):
        return B.ex(v[0])
    return B.call("np.full", 1, v[0])


def _vjp_atleast_1d(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[p]
    contrib = g if em.is_arr(arg) else X(B.subscript(g, 0))
    em.accumulate(arg.name, contrib, pre_fwd, pre_rev, out)


register(Primitive("atleast_1d", _atleast_1d_type, _emit_atleast_1d, arity=1, view=True,
                   cost=CostClass.FREE,
                   numpy=("atleast_1d",)))
defstructural("atleast_1d", _vjp_atleast_1d, (0,))
deflinear("atleast_1d")   # forward mode: the same op on the tangent
