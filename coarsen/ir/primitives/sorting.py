"""Sorting: ``sort`` (``np.sort``) and ``partition`` (``np.partition``) along one axis.

Requires: ``core``, ``coarsen.codegen.build``; the runtime helpers ``_sort_along``,
``_sort_adj``, ``_partition_along``, ``_partition_adj`` (``coarsen.codegen.helpers_numpy``);
the frontend (``coarsen.frontend.numpy_forms``) gives each the attribute ``axis`` (an integer
constant; ``None``: the operand flattened first, as NumPy does, by a ``ravel`` before it) and
``partition`` the attribute ``kth`` (an integer constant).
Guarantees: NumPy's values and dtypes (``np.sort``'s sorted values do not depend on the
algorithm; ``np.partition`` is ``a[np.argpartition(a, kth)]`` along the axis, which on the
python target is NumPy's own arrangement and on the cpu target Numba's: the ``kth`` element in
place, the smaller ones before and the larger after, in an order NumPy leaves undefined); a
``kth`` out of bounds raises NumPy's ``ValueError`` at run time.  Derivatives go through the
permutation: each result element's adjoint goes to the operand element it came from.  Ties
(equal values, which any permutation of them sorts) follow the convention of ``np.max``: the
adjoint of a run of equal sorted values is shared evenly among them, so ``sort(x)[-1]`` and
``max(x)`` have the same gradient; ``partition`` passes each adjoint through its permutation
as it is.  Forward mode (``defjvp``): the tangent gathered by the same permutation (``sort``:
averaged over runs of equal values), the transpose of the reverse map.
"""
from __future__ import annotations

from ...codegen import build as B
from ...codegen.build import X
from ..nodes import Array
from .core import CostClass, Primitive, defjvp, defstructural, dt, err, make, register


def _sort_type(c, s, ts):
    a = ts[0]
    if not isinstance(a, Array):
        raise err(s, f"np.{s.op} of a scalar", f"np.{s.op} takes an array")
    axis = s.attr("axis")
    if not -a.ndim <= axis < a.ndim:
        raise err(s, f"axis {axis} is out of range for a {a.ndim}-D array")
    return make(dt(a), a.ndim)


def _axis(em, s):
    return s.attr("axis") % em.nd(s.args[0])


def _emit_sort(em, s, v):
    if s.op == "sort":
        return B.call(em.helper("_sort_along"), v[0], _axis(em, s))
    return B.call(em.helper("_partition_along"), v[0], s.attr("kth"), _axis(em, s))


def _adjoint(em, s, a, g):
    if s.op == "sort":
        return B.call(em.helper("_sort_adj"), a, g, _axis(em, s))
    return B.call(em.helper("_partition_adj"), a, g, s.attr("kth"), _axis(em, s))


def _vjp_sort(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[p]
    em.accumulate(arg.name, X(_adjoint(em, s, em.val(arg), g), True), pre_fwd, pre_rev, out)


def _jvp_sort(em, s, dots, out):
    # the transpose of the adjoint's map: the tangent gathered by the permutation (sort:
    # averaged over each run of equal sorted values)
    return X(B.call(em.helper("_sort_tangent" if s.op == "sort" else "_partition_tangent"),
                    em.val(s.args[0]), em.val(dots[0]),
                    *(() if s.op == "sort" else (s.attr("kth"),)), _axis(em, s)), True)


for _name in ("sort", "partition"):
    register(Primitive(_name, _sort_type, _emit_sort, arity=1, numpy=(_name,),
                       cost=CostClass.CALL))
    defstructural(_name, _vjp_sort, (0,))
    defjvp(_name, _jvp_sort)
