"""Axis moves and rank changes: ``permute_axes`` (``np.moveaxis``, ``np.swapaxes``,
``np.rollaxis``), ``squeeze`` (``np.squeeze``, ``x.squeeze``), ``atleast_nd``
(``np.atleast_2d``, ``np.atleast_3d``).

Requires: ``core``, ``coarsen.codegen.build``; the frontend (``coarsen.frontend.numpy_forms``)
gives each its static attributes: ``permute_axes`` ``how``, one of ``("move", sources,
destinations)``, ``("swap", a, b)``, ``("roll", axis, start)`` of integer constants as written;
``squeeze`` ``axes`` (a tuple of integer constants); ``atleast_nd`` ``n`` (2 or 3).
Guarantees, with NumPy's semantics:

* ``permutation(how, ndim)`` is the permutation NumPy's function applies (negative axes counted
  from the rank; ``rollaxis``'s ``start`` adjusted as NumPy adjusts it), or a ``ValueError``
  with NumPy's complaint, which the type rule reports as a ``CoarsenError`` at the call; the
  result is a view (``np.transpose`` by that permutation; none at all for the identity) and the
  adjoint is the inverse permutation of the result's adjoint;
* ``squeeze`` drops the given axes, a view; an axis whose length is not 1 raises NumPy's
  ``ValueError`` at run time (``_squeeze_axis``), and ``np.squeeze(x)`` without an axis is
  refused (its rank would depend on the run-time shape); the adjoint is the result's adjoint
  with those axes put back (``np.expand_dims``);
* ``atleast_nd`` of a scalar is a fresh ``(1, 1)``/``(1, 1, 1)`` array of its dtype; of a 1-D
  array ``x[None, :]`` (2-D) or ``x[None, :, None]`` (3-D), of a 2-D array ``x[:, :, None]``
  (3-D), views as in NumPy; an array of rank ``n`` or more is returned as it is; the adjoint
  reads the inserted axes at 0.

* ``merge_last_axes`` (attribute ``count``) merges an array's last ``count`` axes into one (a
  C-ordered copy, reshaped), and ``keep_reduced`` (attribute ``axes``) reshapes a reduction's
  result (operand 0) to the shape of the array it reduced (operand 1) with ``axes`` of length
  1: the frontend's reduction over a tuple of axes (``coarsen.frontend.numpy_forms``); their
  adjoints reshape back.

Forward mode: each is linear (``deflinear``: the same op on the tangent; ``keep_reduced`` in
operand 0).
"""
from __future__ import annotations

import gast

from ...codegen import build as B
from ...codegen.build import X
from ..nodes import Array
from .core import CostClass, Primitive, deflinear, defstructural, dt, err, make, nd, register


def _axis(a, ndim, what="axis"):
    if not -ndim <= a < ndim:
        raise ValueError(f"{what} {a} is out of bounds for array of dimension {ndim}")
    return a % ndim


def permutation(how, ndim):
    """The axes of the result, as indices into the operand's (NumPy's order)."""
    kind = how[0]
    if kind == "swap":
        a, b = _axis(how[1], ndim, "axis1"), _axis(how[2], ndim, "axis2")
        perm = list(range(ndim))
        perm[a], perm[b] = perm[b], perm[a]
        return tuple(perm)
    if kind == "roll":
        axis = _axis(how[1], ndim)
        start = how[2]
        if not -ndim <= start < ndim + 1:
            raise ValueError(f"start {start} is out of bounds for array of dimension {ndim}")
        if start < 0:
            start += ndim
        if axis < start:
            start -= 1
        if axis == start:
            return tuple(range(ndim))
        perm = [k for k in range(ndim) if k != axis]
        perm.insert(start, axis)
        return tuple(perm)
    sources = [_axis(a, ndim, "source") for a in how[1]]
    dests = [_axis(a, ndim, "destination") for a in how[2]]
    if len(sources) != len(dests):
        raise ValueError("`source` and `destination` arguments must have the same number of "
                         "elements")
    if len(set(sources)) != len(sources) or len(set(dests)) != len(dests):
        raise ValueError("repeated axis in `source` or `destination` argument")
    order = [k for k in range(ndim) if k not in sources]
    for dest, src in sorted(zip(dests, sources)):
        order.insert(dest, src)
    return tuple(order)


def _inverse(perm):
    inv = [0] * len(perm)
    for k, a in enumerate(perm):
        inv[a] = k
    return tuple(inv)


def permuted(node, perm):
    """``node`` with its axes permuted by ``perm`` (none at all for the identity)."""
    if list(perm) == list(range(len(perm))):
        return B.ex(node)
    if list(perm) == list(range(len(perm)))[::-1]:
        return gast.Attribute(value=B.ex(node), attr="T", ctx=gast.Load())
    return B.call("np.transpose", node, B.tuple_(*(B.const(a) for a in perm)))


def _permute_type(c, s, ts):
    if not isinstance(ts[0], Array):
        raise err(s, "the axes of a scalar cannot be moved", "pass an array")
    try:
        permutation(s.attr("how"), ts[0].ndim)
    except ValueError as e:
        raise err(s, str(e), "give axes within the array's rank") from None
    return ts[0]


def _emit_permute(em, s, v):
    return permuted(v[0], permutation(s.attr("how"), em.nd(s.args[0])))


def _vjp_permute(em, s, p, g, pre_fwd, pre_rev, out):
    perm = permutation(s.attr("how"), em.nd(s.args[p]))
    em.accumulate(s.args[p].name, X(permuted(g, _inverse(perm)), True), pre_fwd, pre_rev, out)


def _squeezed(s, ndim):
    axes = sorted({_axis(a, ndim) for a in s.attr("axes")})
    if len(axes) != len(s.attr("axes")):
        raise ValueError("repeated axis in np.squeeze")
    return axes


def _squeeze_type(c, s, ts):
    if not isinstance(ts[0], Array):
        raise err(s, "np.squeeze of a scalar", "pass an array")
    try:
        axes = _squeezed(s, ts[0].ndim)
    except ValueError as e:
        raise err(s, str(e), "give axes within the array's rank") from None
    return make(ts[0].dtype, ts[0].ndim - len(axes))


def _emit_squeeze(em, s, v):
    rank = em.nd(s.args[0])
    axes = _squeezed(s, rank)
    shape = B.attr(f"{s.args[0].name}.shape")
    index = [B.call(em.helper("_squeeze_axis"), B.subscript(shape, k)) if k in axes
             else B.slice_() for k in range(rank)]
    return B.subscript(v[0], B.tuple_(*index))


def _vjp_squeeze(em, s, p, g, pre_fwd, pre_rev, out):
    node = B.ex(g)
    for k in _squeezed(s, em.nd(s.args[p])):
        node = B.call("np.expand_dims", node, k)
    em.accumulate(s.args[p].name, X(node, True), pre_fwd, pre_rev, out)


def _inserted(rank, n):
    """Where ``atleast_nd`` puts new axes for an operand of ``rank`` (``None`` marks a new axis,
    a slice an existing one); None when the operand is returned as it is."""
    if rank >= n:
        return None
    if n == 2:
        return [None, slice(None)]
    return [None, slice(None), None] if rank == 1 else [slice(None), slice(None), None]


def _atleast_type(c, s, ts):
    a = ts[0]
    return make(dt(a), max(nd(a), s.attr("n")))


def _emit_atleast(em, s, v):
    rank, n = em.nd(s.args[0]), s.attr("n")
    if rank == 0:
        return B.call("np.full", B.tuple_(*([1] * n)), v[0])
    where = _inserted(rank, n)
    if where is None:
        return B.ex(v[0])
    index = [B.const(None) if w is None else B.slice_() for w in where]
    return B.subscript(v[0], B.tuple_(*index))


def _vjp_atleast(em, s, p, g, pre_fwd, pre_rev, out):
    rank, n = em.nd(s.args[p]), s.attr("n")
    if rank == 0:
        contrib = X(B.subscript(g, B.tuple_(*([B.const(0)] * n))))
    else:
        where = _inserted(rank, n)
        contrib = g if where is None else X(B.subscript(g, B.tuple_(
            *(B.const(0) if w is None else B.slice_() for w in where))), True)
    em.accumulate(s.args[p].name, contrib, pre_fwd, pre_rev, out)


# ------------------------------------------------ a reduction over a tuple of axes
def _merge_type(c, s, ts):
    a = ts[0]
    if not isinstance(a, Array) or a.ndim < s.attr("count"):
        raise err(s, "a reduction over more axes than the array has")
    return make(a.dtype, a.ndim - s.attr("count") + 1)


def _shape_tuple(name, dims):
    """``(name.shape[d0], name.shape[d1], ...)`` for ``dims`` (ints or lists of ints, a list
    standing for the product of those lengths)."""
    def one(d):
        if isinstance(d, list):
            out = B.subscript(B.attr(f"{name}.shape"), d[0])
            for k in d[1:]:
                out = B.binop(out, "*", B.subscript(B.attr(f"{name}.shape"), k))
            return out
        return B.subscript(B.attr(f"{name}.shape"), d)
    return B.tuple_(*(one(d) for d in dims))


def _reshaped(em, node, shape):
    src = B.ex(node) if getattr(em, "input_language", False) else \
        B.call("np.ascontiguousarray", node)
    return B.call(gast.Attribute(value=src, attr="reshape", ctx=gast.Load()), shape)


def _emit_merge(em, s, v):
    rank, count = em.nd(s.args[0]), s.attr("count")
    dims = list(range(rank - count)) + [list(range(rank - count, rank))]
    return _reshaped(em, v[0], _shape_tuple(s.args[0].name, dims))


def _vjp_merge(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[p]
    shape = em.shape_of(arg, pre_fwd, pre_rev) if arg.name in em.f.set_temps \
        else B.attr(f"{em.bar(arg.name)}.shape")
    em.accumulate(arg.name, X(_reshaped(em, g, shape), True), pre_fwd, pre_rev, out)


def _keep_type(c, s, ts):
    return make(dt(ts[0]), nd(ts[1]))


def _kept_dims(s, rank):
    axes = {a % rank for a in s.attr("axes")}
    return [k for k in range(rank) if k not in axes], axes


def _emit_keep(em, s, v):
    rank = em.nd(s.args[1])
    if em.nd(s.args[0]) == 0:
        return B.call("np.full", B.tuple_(*([1] * rank)), v[0])
    kept, axes = _kept_dims(s, rank)
    shape = B.tuple_(*(B.const(1) if k in axes else B.subscript(B.attr(f"{s.args[1].name}.shape"), k)
                       for k in range(rank)))
    return _reshaped(em, v[0], shape)


def _vjp_keep(em, s, p, g, pre_fwd, pre_rev, out):
    rank = em.nd(s.args[1])
    if em.nd(s.args[0]) == 0:
        contrib = X(B.subscript(g, B.tuple_(*([B.const(0)] * rank))))
    else:
        kept, _ = _kept_dims(s, rank)
        gname = B.ex(g)
        shape = B.tuple_(*(B.subscript(gast.Attribute(value=gname, attr="shape", ctx=gast.Load()), k)
                           for k in kept))
        contrib = X(_reshaped(em, g, shape), True)
    em.accumulate(s.args[p].name, contrib, pre_fwd, pre_rev, out)


register(Primitive("permute_axes", _permute_type, _emit_permute, arity=1, view=True,
                   numpy=("moveaxis", "swapaxes", "rollaxis"), cost=CostClass.FREE))
register(Primitive("squeeze", _squeeze_type, _emit_squeeze, arity=1, view=True,
                   numpy=("squeeze",), cost=CostClass.FREE))
register(Primitive("atleast_nd", _atleast_type, _emit_atleast, arity=1, view=True,
                   numpy=("atleast_2d", "atleast_3d"), cost=CostClass.FREE))
register(Primitive("merge_last_axes", _merge_type, _emit_merge, arity=1, cost=CostClass.CALL))
register(Primitive("keep_reduced", _keep_type, _emit_keep, arity=2, cost=CostClass.CALL))
defstructural("permute_axes", _vjp_permute, (0,))
defstructural("squeeze", _vjp_squeeze, (0,))
defstructural("atleast_nd", _vjp_atleast, (0,))
defstructural("merge_last_axes", _vjp_merge, (0,))
defstructural("keep_reduced", _vjp_keep, (0,))
for _name in ("permute_axes", "squeeze", "atleast_nd", "merge_last_axes"):
    deflinear(_name)
deflinear("keep_reduced", (0,))
