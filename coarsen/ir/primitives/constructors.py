"""Array constructors: ``zeros``, ``ones``, ``empty``, ``full``, their ``*_like`` forms and
``eye``.

Requires: ``core``, ``coarsen.codegen.build``.
Guarantees: type rules (shapes must be integers; the dtype is the ``dtype`` attribute the
frontend read, or the model array's), emitted primals, and derivatives: zero, except through
``full``'s fill value, whose adjoint is the sum of the array's.
"""
from __future__ import annotations

from ...codegen import build as B
from ...codegen.build import X
from ..nodes import Array
from .core import (CostClass, Primitive, deflinear, defstructural, dt, dtype_join, err, make,
                   register)


def _shape_type(c, s, ts):
    rank = s.attr("ndim")
    for d in s.args[:rank]:
        c.expect_int(d, s, "array shapes")
    dtype = s.attr("dtype")
    if dtype == "fill":
        # np.full(shape, v) without a dtype: NumPy's dtype of v (np.full(3, 2) is an int array,
        # and a float stored into it is truncated, so it carries no derivative)
        if isinstance(ts[rank], Array):
            raise err(s, "np.full with an array fill value is not supported",
                      "fill with a scalar, or use np.empty and assign the array")
        dtype = dt(ts[rank])
        if dtype == "bool":
            raise err(s, "np.full with a bool fill value makes a bool array, which is not supported",
                      "fill with a float or an int, or give dtype=np.float64")
    return make(dtype, rank)


def _like_type(c, s, ts):
    a = ts[0]
    if not isinstance(a, Array):
        raise err(s, f"np.{s.op} of a scalar")
    how = s.attr("dtype")
    if how in ("like", "elements"):
        # dtype=x.dtype ("like") and np.array([...]) ("elements"): the dtype of the operands
        # after the op's own (coarsen.frontend.array_literals)
        return Array(dtype_of_operands(s, ts[2 if s.op == "full_like" else 1:], how), a.ndim)
    return Array(how or a.dtype, a.ndim)


# the refusal of np.array([...]) holding arrays among its scalars' stores: the transforms
# (coarsen.transforms.prepare.lower_for) lower such a call again as a stack of its elements
ARRAYS_IN_LITERAL = "np.array of a list holding arrays is not supported here (NumPy would stack them)"


def dtype_of_operands(s, ts, how):
    """NumPy's dtype for ``dtype=x.dtype`` (``how == "like"``: ``x``'s, an array) or for
    ``np.array`` of scalars (``"elements"``: float if any is, else int); bool is refused (the
    constructors emit float or int arrays only)."""
    if how == "like" and not isinstance(ts[0], Array):
        raise err(s, "x.dtype of a scalar", "use the dtype itself: np.float64 or np.int64")
    if how == "elements" and any(isinstance(t, Array) for t in ts):
        raise err(s, ARRAYS_IN_LITERAL, "np.array([...]) takes scalars or arrays of one shape; "
                  "allocate np.empty((k, n)) and assign rows a[i] = row")
    out = dt(ts[0])
    for t in ts[1:]:
        out = dtype_join(out, dt(t))
    if out == "bool":
        raise err(s, "a bool array made by np.array([...]) or dtype=x.dtype is not supported",
                  "use float or int values")
    return out


def _eye_type(c, s, ts):
    c.expect_int(s.args[0], s, "np.eye size")
    return Array(s.attr("dtype"), 2)


def _dtype_args(d):
    return [B.attr("np.int64")] if d == "i64" else []


def _emit_shape(em, s, v):
    rank = s.attr("ndim")
    shape = B.tuple_(*v[:rank])
    extra = _dtype_args(em.types[s.target].dtype)
    if s.op == "full":
        return B.call("np.full", shape, v[rank], *extra)
    return B.call(f"np.{s.op}", shape, *extra)


def _emit_like(em, s, v):
    base = s.op[:-5]
    extra = _dtype_args(em.types[s.target].dtype)
    shape = B.attr(f"{s.args[0].name}.shape")
    if base == "full":
        return B.call("np.full", shape, v[1], *extra)
    return B.call(f"np.{base}", shape, *extra)


def _emit_eye(em, s, v):
    return B.call("np.eye", v[0], *_dtype_args(s.attr("dtype")))


def _vjp_fill(em, s, p, g, pre_fwd, pre_rev, out):
    em.accumulate(s.args[p].name, X(B.call("np.sum", g)), pre_fwd, pre_rev, out)


for _name in ("zeros", "ones", "empty"):
    register(Primitive(_name, _shape_type, _emit_shape, numpy=(_name,), zero=True,
                       shape_operands=True, cost=CostClass.CALL))
register(Primitive("full", _shape_type, _emit_shape, numpy=("full",), shape_operands=True,
                   cost=CostClass.CALL))
defstructural("full", _vjp_fill, (-1,))
deflinear("full", (-1,))          # forward mode: filled with the fill value's tangent
for _name in ("zeros_like", "ones_like", "empty_like"):
    register(Primitive(_name, _like_type, _emit_like, arity=1, numpy=(_name,), zero=True,
                       shape_like=True, cost=CostClass.CALL))
register(Primitive("full_like", _like_type, _emit_like, arity=2, numpy=("full_like",),
                   shape_like=True, cost=CostClass.CALL))
defstructural("full_like", _vjp_fill, (1,))
deflinear("full_like", (1,))
register(Primitive("eye", _eye_type, _emit_eye, arity=1, numpy=("eye", "identity"), zero=True,
                   cost=CostClass.CALL))
