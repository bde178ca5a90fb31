"""Matrix products: ``matmul`` (``@``) and ``dot``, of 1-D and 2-D arrays (``dot`` also of
scalars).

Requires: ``core``, ``coarsen.ad.build``; the runtime helpers ``_mm*`` and ``_outer``.
Guarantees: type rules (ranks above 2 are refused), the emitted primal (loops in the runtime
helpers, which check the inner dimensions), and the VJPs ``A_bar += g @ B.T``,
``B_bar += A.T @ g`` in every rank combination.
"""
from __future__ import annotations

from ...ad import build as B
from ...ad.build import X
from ..nodes import Scalar
from .core import Primitive, defstructural, dt, dtype_join, err, make, nd, register


def _product_type(c, s, ts):
    a, b = ts
    if isinstance(a, Scalar) or isinstance(b, Scalar):
        if s.op == "dot":
            return make(dtype_join(dt(a), dt(b)), max(nd(a), nd(b)))
        raise err(s, "@ needs arrays on both sides")
    if a.ndim > 2 or b.ndim > 2:
        raise err(s, f"{'@' if s.op == 'matmul' else 'dot'} of arrays with more than 2 "
                     "dimensions is not supported")
    rank = {(2, 2): 2, (2, 1): 1, (1, 2): 1, (1, 1): 0}[(a.ndim, b.ndim)]
    return make(dtype_join(a.dtype, b.dtype), rank)


def _emit_product(em, s, v):
    na, nb = em.nd(s.args[0]), em.nd(s.args[1])
    if na == 0 or nb == 0:
        return B.binop(v[0], "*", v[1])
    return B.call(em.helper(f"_mm{na}{nb}"), *v)


def _vjp_product(em, s, p, g, pre_fwd, pre_rev, out):
    args = s.args
    arg = args[p]
    na, nb = em.nd(args[0]), em.nd(args[1])
    other = em.val(args[1 - p])
    if na == 0 or nb == 0:   # scalar dot
        contrib = em.reduce_to(arg, g * other, max(na, nb), False, pre_fwd, pre_rev)
        em.accumulate(arg.name, contrib, pre_fwd, pre_rev, out)
        return
    o = X(B.attr(f"{args[1 - p].name}.T"), True) if em.nd(args[1 - p]) == 2 else other
    if (na, nb) == (2, 2):
        contrib = B.call(em.helper("_mm22"), g, o) if p == 0 else B.call(em.helper("_mm22"), o, g)
    elif (na, nb) == (2, 1):
        contrib = B.call(em.helper("_outer"), g, other) if p == 0 else B.call(em.helper("_mm21"), o, g)
    elif (na, nb) == (1, 2):
        contrib = B.call(em.helper("_mm21"), other, g) if p == 0 else B.call(em.helper("_outer"), other, g)
    else:
        contrib = B.binop(g, "*", other)
    em.accumulate(arg.name, X(contrib, True), pre_fwd, pre_rev, out)


for _name in ("matmul", "dot"):
    register(Primitive(_name, _product_type, _emit_product, arity=2, numpy=(_name,)))
    defstructural(_name, _vjp_product, (0, 1))
