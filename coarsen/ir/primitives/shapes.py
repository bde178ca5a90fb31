"""Indexing and shape primitives: ``getitem``, ``dim``/``size``/``ndim``, ``transpose``,
``reshape``, ``ravel``, ``flip``, ``expand_dims``; ``slice_start``/``slice_len``/
``bcast_len``/``bcast_stride``/``same_len`` (the integer bookkeeping of
``coarsen.ir.scalarize``).

Requires: ``core``, ``coarsen.codegen.build``.
Guarantees: type rules (indices must be integers or slices; fancy indexing is refused), the
emitted primal, and structural VJPs: an element or slice read scatters its adjoint into the
region it read; reshapes reshape the adjoint back; ``flip`` and ``.T`` flip and transpose it;
``transpose`` with the attribute ``axes`` (``np.transpose(x, axes)``: a permutation of
``range(ndim)``, which its type rule checks against the rank) permutes the axes as NumPy does
and its adjoint by the inverse permutation (without the attribute: all axes reversed, ``.T``);
in forward mode each is linear (``deflinear``: the same op on the tangent).
"""
from __future__ import annotations

import gast

from ...codegen import build as B
from ...codegen.build import X
from ..nodes import I64, Array
from .core import CostClass, Primitive, deflinear, defstructural, dt, err, make, nd, register


def _getitem_type(c, s, ts):
    return make(ts[0].dtype, c.index_type(s, ts[0], s.index, fancy=True))


def _dim_type(c, s, ts):
    if not isinstance(ts[0], Array):
        raise err(s, "len()/shape of a scalar")
    k = s.args[1].value
    if not -ts[0].ndim <= k < ts[0].ndim:
        raise err(s, f"shape index {k} out of range for a {ts[0].ndim}-D array")
    return I64     # a negative axis is made non-negative after inference (typeinfer.normalize_dims)


def _int_type(c, s, ts):
    return I64


def _transpose_type(c, s, ts):
    if not isinstance(ts[0], Array):
        raise err(s, ".T of a scalar")
    axes = s.attr("axes")
    if axes is not None and len(axes) != ts[0].ndim:
        raise err(s, f"transpose axes {axes} do not match a {ts[0].ndim}-D array",
                  f"give each of its {ts[0].ndim} axes once")
    return ts[0]


def _same_type(c, s, ts):
    return ts[0]


def _ravel_type(c, s, ts):
    return make(dt(ts[0]), 1)


def _reshape_type(c, s, ts):
    if s.attr("like"):          # x.reshape(a.shape)
        if not isinstance(ts[1], Array):
            raise err(s, ".shape of a scalar")
        return make(dt(ts[0]), ts[1].ndim)
    for d in s.args[1:]:
        c.expect_int(d, s, "reshape dimensions")
    return make(dt(ts[0]), len(s.args) - 1)


def _expand_dims_type(c, s, ts):
    return make(dt(ts[0]), nd(ts[0]) + 1)


def _emit_getitem(em, s, v):
    node = B.subscript(v[0], em.index_node(s.index))
    if s.target in em.f.materialize and isinstance(em.types[s.target], Array):
        return B.call(gast.Attribute(value=node, attr="copy", ctx=gast.Load()))
    return node


def _emit_dim(em, s, v):
    return B.subscript(B.attr(f"{s.args[0].name}.shape"), s.args[1].value)


def _emit_size(em, s, v):
    return B.attr(f"{s.args[0].name}.size")


def _emit_ndim(em, s, v):
    return B.const(em.nd(s.args[0]))


def _permuted(node, axes):
    """``node`` with its axes permuted by ``axes`` (None: all reversed, ``.T``)."""
    if axes is not None and list(axes) == list(range(len(axes))):
        return B.ex(node)                   # the identity: the array itself (a view of it)
    if axes is None or list(axes) == list(range(len(axes)))[::-1]:
        return gast.Attribute(value=B.ex(node), attr="T", ctx=gast.Load())
    return B.call("np.transpose", node, B.tuple_(*(B.const(a) for a in axes)))


def _inverse(axes):
    """The permutation that undoes ``axes`` (None for None)."""
    if axes is None:
        return None
    inv = [0] * len(axes)
    for k, a in enumerate(axes):
        inv[a] = k
    return tuple(inv)


def _emit_transpose(em, s, v):
    if s.attr("axes") is not None:
        return _permuted(v[0], s.attr("axes"))
    return B.attr(f"{s.args[0].name}.T")


def _contiguous(em, node):
    """``node`` made contiguous for Numba's ``reshape``/``ravel``; as it is in coarsen's input
    language (a JVP read back by reverse mode: ``coarsen.hessian``), where NumPy copies."""
    return B.ex(node) if getattr(em, "input_language", False) else B.call("np.ascontiguousarray", node)


def _emit_reshape(em, s, v):
    shape = gast.Attribute(value=B.ex(v[1]), attr="shape", ctx=gast.Load()) if s.attr("like") \
        else B.tuple_(*v[1:])
    return B.call(gast.Attribute(value=_contiguous(em, v[0]), attr="reshape", ctx=gast.Load()),
                  shape)


def _emit_ravel(em, s, v):
    return B.call(gast.Attribute(value=_contiguous(em, v[0]), attr="ravel", ctx=gast.Load()))


def _emit_flip(em, s, v):
    return B.call("np.flip", v[0])


def _emit_expand_dims(em, s, v):
    ax = s.attr("axis") % (em.nd(s.args[0]) + 1)
    return B.call("np.expand_dims", v[0], ax)


def _vjp_getitem(em, s, p, g, pre_fwd, pre_rev, out):
    em.accumulate_region(s.args[p].name, s.index, g, pre_fwd, pre_rev, out)


def _vjp_transpose(em, s, p, g, pre_fwd, pre_rev, out):
    node = B.ex(g)
    if s.attr("axes") is not None:
        t = _permuted(node, _inverse(s.attr("axes")))
    elif isinstance(node, gast.Name) and node.id == em.bar(s.target):
        t = B.attr(f"{em.bar(s.target)}.T")
    else:
        t = gast.Attribute(value=node, attr="T", ctx=gast.Load())
    em.accumulate(s.args[p].name, X(t, True), pre_fwd, pre_rev, out)


def _vjp_reshape(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[p]
    shape = em.shape_of(arg, pre_fwd, pre_rev) if arg.name in em.f.set_temps \
        else B.attr(f"{em.bar(arg.name)}.shape")
    contrib = B.call(gast.Attribute(value=B.call("np.ascontiguousarray", g), attr="reshape",
                                    ctx=gast.Load()), shape)
    em.accumulate(arg.name, X(contrib, True), pre_fwd, pre_rev, out)


def _vjp_flip(em, s, p, g, pre_fwd, pre_rev, out):
    em.accumulate(s.args[p].name, X(B.call("np.flip", g), True), pre_fwd, pre_rev, out)


# an element's load, a view or a shape: no arithmetic
register(Primitive("getitem", _getitem_type, _emit_getitem, view=True, passenger=True,
                   indexing=True, cost=CostClass.FREE))
register(Primitive("dim", _dim_type, _emit_dim, arity=2, zero=True, passenger=True,
                   dimension=True, cost=CostClass.FREE))
register(Primitive("size", _int_type, _emit_size, arity=1, zero=True, passenger=True,
                   cost=CostClass.FREE))
register(Primitive("ndim", _int_type, _emit_ndim, arity=1, zero=True, cost=CostClass.FREE))
register(Primitive("transpose", _transpose_type, _emit_transpose, arity=1, view=True,
                   numpy=("transpose",), cost=CostClass.FREE))
register(Primitive("reshape", _reshape_type, _emit_reshape, view=True, numpy=("reshape",),
                   cost=CostClass.FREE))
register(Primitive("ravel", _ravel_type, _emit_ravel, arity=1, view=True, numpy=("ravel",),
                   cost=CostClass.FREE))
register(Primitive("flip", _same_type, _emit_flip, arity=1, view=True, shape_like=True,
                   numpy=("flip",), cost=CostClass.FREE))
register(Primitive("expand_dims", _expand_dims_type, _emit_expand_dims, arity=1, view=True,
                   numpy=("expand_dims",), cost=CostClass.FREE))


# ------------------------------------------------ slices and broadcasting, element by element
# the integer bookkeeping of coarsen.ir.scalarize's loop nests: NumPy's slice and broadcast
# rules, computed once before the nest (runtime helpers of the same names, with a leading _)
def _emit_helper_call(name):
    def emit(em, s, v):
        return B.call(em.helper(f"_{name}"), *v)
    return emit


for _name, _arity in (("slice_start", 3), ("slice_len", 4), ("bcast_len", 2),
                      ("bcast_stride", 2), ("same_len", 2),
                      # a slice of a slice's bounds (coarsen.ir.slice_chains)
                      ("chain_lower", 7), ("chain_upper", 7)):
    register(Primitive(_name, _int_type, _emit_helper_call(_name), arity=_arity, zero=True,
                       passenger=True, cost=CostClass.CALL))
defstructural("getitem", _vjp_getitem, (0,))
defstructural("transpose", _vjp_transpose, (0,))
for _name in ("reshape", "ravel", "expand_dims"):
    defstructural(_name, _vjp_reshape, (0,))
defstructural("flip", _vjp_flip, (0,))
# forward mode: each is linear in the array it reads (the tangent is the same op on its tangent)
for _name in ("getitem", "transpose", "reshape", "ravel", "flip", "expand_dims"):
    deflinear(_name)
