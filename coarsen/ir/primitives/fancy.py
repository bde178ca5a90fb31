"""Advanced (fancy) indexing: ``gather``, ``b[x0, x1, ...]`` by 1-D integer arrays and integers.

Requires: ``core``, ``coarsen.codegen.build``, the runtime helpers ``_gather_*``/``_scatter_*``
(``coarsen.codegen.runtime.gather``/``scatter``, ``coarsen.codegen.gather_loops``); the
statements come from ``coarsen.ir.fancy_index`` (a subscript with an integer array in it,
split after type inference into its basic part, a ``getitem`` view ``b``, and one ``gather``)
with the attributes ``axes`` (the axes of ``b`` the advanced items index), ``kinds`` (``"a"``
an array, ``"i"`` an integer, per axis) and ``front`` (NumPy's placement of the indexed axis).
Guarantees: the type rule (operand 0 an array, the others integers or 1-D integer arrays, as
the kinds say; the result of ``b``'s dtype, its rank less the indexed axes plus one); the
primal is the gather helper (where the emitter speaks coarsen's input language, NumPy's own
subscript ``b[:, x0, :, x1]``, which places the indexed axis alike) (a copy, as NumPy's; negative indices from the end, out of range
an ``IndexError``); the VJP of ``b`` scatter-adds the adjoint where each element was read (an
index repeated adds twice); the indices get no derivative; forward mode: linear in ``b``.
"""
from __future__ import annotations

from ...codegen import build as B
from ...codegen import runtime as R
from ...codegen.build import X
from ...codegen.gather_loops import GatherPlan
from ..nodes import Array
from .core import CostClass, Primitive, deflinear, defstructural, dt, err, make, nd, register


def plan_of(s, rank):
    return GatherPlan(rank, tuple(s.attr("axes")), tuple(s.attr("kinds")), bool(s.attr("front")))


def _gather_type(c, s, ts):
    b = ts[0]
    if not isinstance(b, Array):
        raise err(s, "fancy indexing of a scalar")
    for t, kind in zip(ts[1:], s.attr("kinds")):
        if dt(t) != "i64" or nd(t) != (1 if kind == "a" else 0):
            raise err(s, "fancy indices must be integers or 1-D integer arrays")
    return make(b.dtype, b.ndim - len(s.attr("axes")) + 1)


def _emit_gather(em, s, v):
    plan = plan_of(s, em.nd(s.args[0]))
    if em.input_language:      # NumPy's own subscript, which the frontend reads back
        items = [B.slice_() for _ in range(plan.rank)]
        for axis, value in zip(plan.axes, v[1:]):
            items[axis] = value
        return B.subscript(v[0], B.tuple_(*items))
    return B.call(em.helper(R.gather(plan)), *v)


def _vjp_gather(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[0]
    shape = em.shape_of(arg, pre_fwd, pre_rev) if arg.name in em.f.set_temps \
        else B.attr(f"{em.bar(arg.name)}.shape")
    idx = [em.val(a) for a in s.args[1:]]
    contrib = B.call(em.helper(R.scatter(plan_of(s, em.nd(arg)))), g, shape, *idx)
    em.accumulate(arg.name, X(contrib, True), pre_fwd, pre_rev, out)


register(Primitive("gather", _gather_type, _emit_gather, cost=CostClass.CALL))
defstructural("gather", _vjp_gather, (0,))
deflinear("gather", (0,))     # forward mode: the same gather of the tangent
