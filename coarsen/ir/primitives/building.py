"""Building arrays from one array, along an axis whose position is known only once the rank is:
``promote`` (``np.atleast_2d`` and ``np.column_stack``'s columns), ``axis_slice`` and
``axis_len`` (a slice and the length along an axis: ``split``, ``roll``, ``np.gradient``),
``along`` (``repeat``, ``tile`` and ``roll`` along one axis), ``rot90``, ``kron``.

Requires: ``core``, ``coarsen.codegen.build``; the runtime helpers ``_gradient_rows`` and
``_gradient_rows_adj`` (``coarsen.codegen.helpers``) and the loops generated per rank and axis
``_repeat_*``, ``_tile_*``, ``_roll_*``, ``_kron*`` (``coarsen.codegen.building_loops``, through
``coarsen.codegen.runtime``).  The frontend's sugar (``coarsen.frontend.joins``) builds them
with static attributes: ``axis`` (an integer, maybe negative; ``"h"``: ``np.hsplit``'s, 1 for
arrays of 2 or more dimensions, else 0), ``min_rank``, ``step`` (1 or -1), ``form``
(``"row"``/``"col"``), ``kind`` (``"repeat"``, ``"tile"``, ``"roll"``), ``k`` and ``axes``.
Guarantees (each axis normalized against the operand's rank by the type rule, which refuses
one out of range, as NumPy does):

* ``promote(x)``: a scalar becomes a 1 x 1 array, a 1-D array a row ``(1, n)`` (``form="row"``)
  or a column ``(n, 1)`` (``"col"``), anything else is ``x`` itself (a view); adjoint: the
  element, the row or column back, or the adjoint itself; linear in forward mode.
* ``lead_axes(x)``: ``x`` with leading axes of length 1 up to the rank ``ndim`` (``np.tile``'s
  reps longer than the rank), a view; adjoint: its element ``[0, ..., 0]`` of those axes.
* ``axis_slice(x, [lo], [hi])``: ``x[:, ..., lo:hi:step]`` along the axis (``lo``/``hi``
  integer operands where the attributes ``lo``/``hi`` say so, else absent: NumPy's slice
  rules), a view; adjoint: added into that region.
* ``axis_len(x)``: ``x.shape[axis]``, an integer (no derivative).
* ``along(x, r)``: along the axis (``kind``): ``repeat`` (each element ``r`` times in turn,
  NumPy's ``np.repeat``), ``tile`` (the axis ``r`` times over: one axis of ``np.tile``),
  ``roll`` (element ``i`` to ``(i + r) % n``: ``np.roll``), a loop per rank and axis; a
  negative count raises NumPy's ``ValueError``.  Adjoint: the sum over the copies, the roll
  back; linear in forward mode (in ``x``; ``r`` is an integer).  In coarsen's input language
  (a JVP read back for ``coarsen.hessian``): ``np.repeat``/``np.tile``/``np.roll`` themselves.
* ``gradient(f, h)``: NumPy's ``np.gradient`` along one axis with the scalar spacing ``h``
  (attributes ``axis``, ``edge_order`` 1 or 2; ``rank``: the rank ``f`` must have, where
  NumPy returns one array per axis otherwise): central differences inside, one-sided ones of
  that order at the ends, each as NumPy writes it (the same bits), its ``ValueError`` where
  the axis is shorter than ``edge_order + 1``; float64.  Its adjoint in ``f`` is the
  transposed stencil (``_gradient_rows_adj``), in ``h`` ``-sum(g * result) / h``; forward mode
  the same stencil on the tangent, ``- result * dh / h``.
* ``rot90(x)``: NumPy's ``rot90`` by ``k`` in the plane ``axes`` (flips along an axis and a
  swap of the two), a view; adjoint ``rot90`` by ``-k``; linear.
* ``kron(a, b)``: arrays of one rank; NumPy's ``np.kron`` (every product ``a_i * b_j``, one
  multiplication each, at NumPy's place), a loop nest per rank; adjoints ``a_bar[i] = sum_j
  g[...] * b[j]`` and the same for ``b``; bilinear in forward mode.
"""
from __future__ import annotations

import gast

from ...codegen import build as B
from ...codegen import runtime as R
from ...codegen.build import X
from ..nodes import I64, NEWAXIS, Array, Const, Slice
from .core import (CostClass, Primitive, defjvp, deflinear, defstructural, dt, dtype_join, err,
                   make, nd, register)


def _attr_node(node, name):
    return gast.Attribute(value=B.ex(node), attr=name, ctx=gast.Load())


def _method(node, name, *args):
    return B.call(_attr_node(node, name), *args)


def normal_axis(s, rank, axis=None):
    """``s``'s attribute ``axis`` (or ``axis``) normalized against ``rank`` (``"h"``: 1 for
    ranks of 2 or more, else 0), or a CoarsenError naming it out of range."""
    axis = s.attr("axis") if axis is None else axis
    if axis == "h":
        return 1 if rank > 1 else 0
    if not -rank <= axis < rank:
        raise err(s, f"axis {axis} is out of range for a {rank}-D array",
                  f"give an axis from {-rank} to {rank - 1}" if rank else "pass an array")
    return axis % rank


def _rank_checked(s, t, what):
    rank = nd(t)
    need = s.attr("min_rank") or 1
    if rank < need:
        raise err(s, f"{what} needs an array of {need} or more dimensions, not a {rank}-D value")
    return rank


# ------------------------------------------------------------------ promote
def _promote_type(c, s, ts):
    return make(dt(ts[0]), max(nd(ts[0]), 2))


def _emit_promote(em, s, v):
    rank = em.nd(s.args[0])
    if rank == 0:
        return B.call("np.full", B.tuple_(1, 1), v[0])
    if rank == 1:
        return B.call("np.expand_dims", v[0], 0 if s.attr("form") == "row" else 1)
    return B.ex(v[0])


def _vjp_promote(em, s, p, g, pre_fwd, pre_rev, out):
    rank = em.nd(s.args[0])
    if rank == 0:
        part = X(B.subscript(g, B.tuple_(0, 0)))
    elif rank == 1:
        idx = B.tuple_(0, B.slice_()) if s.attr("form") == "row" else B.tuple_(B.slice_(), 0)
        part = X(B.subscript(g, idx), True)
    else:
        part = g
    em.accumulate(s.args[p].name, part, pre_fwd, pre_rev, out)


register(Primitive("promote", _promote_type, _emit_promote, arity=1, view=True,
                   cost=CostClass.FREE))
defstructural("promote", _vjp_promote, (0,))
deflinear("promote")


# ------------------------------------------------------------------ lead_axes
def _lead_axes_type(c, s, ts):
    return make(dt(ts[0]), max(nd(ts[0]), s.attr("ndim")))


def _emit_lead_axes(em, s, v):
    node = B.ex(v[0])
    for _ in range(s.attr("ndim") - em.nd(s.args[0])):
        node = B.call("np.expand_dims", node, 0)
    return node


def _vjp_lead_axes(em, s, p, g, pre_fwd, pre_rev, out):
    extra = s.attr("ndim") - em.nd(s.args[0])
    part = X(B.subscript(g, B.tuple_(*([0] * extra))), True) if extra > 0 else g
    em.accumulate(s.args[p].name, part, pre_fwd, pre_rev, out)


register(Primitive("lead_axes", _lead_axes_type, _emit_lead_axes, arity=1, view=True,
                   cost=CostClass.FREE))
defstructural("lead_axes", _vjp_lead_axes, (0,))
deflinear("lead_axes")


# ------------------------------------------------------------------ axis_slice, axis_len
def _axis_slice_type(c, s, ts):
    rank = _rank_checked(s, ts[0], s.attr("what") or "this slice")
    normal_axis(s, rank)
    for t in ts[1:]:
        if isinstance(t, Array) or dt(t) != "i64":
            raise err(s, "slice bounds must be integers")
    return ts[0]


def _slice_index(s, rank):
    """The IR index of ``axis_slice`` ``s``: its bounds are the operands after the array, the
    lower one where the attribute ``lo`` is set, then the upper one where ``hi`` is."""
    bounds = list(s.args[1:])
    lo = bounds.pop(0) if s.attr("lo") else None
    hi = bounds.pop(0) if s.attr("hi") else None
    step = s.attr("step")
    idx = [Slice(None, None, None) for _ in range(rank)]
    idx[normal_axis(s, rank)] = Slice(lo, hi, None if step in (None, 1) else Const(step))
    return tuple(idx)


def _emit_axis_slice(em, s, v):
    return B.subscript(v[0], em.index_node(_slice_index(s, em.nd(s.args[0]))))


def _vjp_axis_slice(em, s, p, g, pre_fwd, pre_rev, out):
    em.accumulate_region(s.args[p].name, _slice_index(s, em.nd(s.args[0])), g, pre_fwd, pre_rev,
                         out)


def _axis_len_type(c, s, ts):
    rank = _rank_checked(s, ts[0], s.attr("what") or "this split")
    normal_axis(s, rank)
    return I64


def _emit_axis_len(em, s, v):
    return B.subscript(_attr_node(v[0], "shape"), normal_axis(s, em.nd(s.args[0])))


register(Primitive("axis_slice", _axis_slice_type, _emit_axis_slice, view=True,
                   cost=CostClass.FREE))
defstructural("axis_slice", _vjp_axis_slice, (0,))
deflinear("axis_slice")
register(Primitive("axis_len", _axis_len_type, _emit_axis_len, arity=1, zero=True,
                   passenger=True, cost=CostClass.FREE))


# ------------------------------------------------------------------ along: repeat, tile, roll
def _along_type(c, s, ts):
    if not isinstance(ts[0], Array):
        raise err(s, f"np.{s.attr('kind')} of a scalar is not supported here",
                  "make it an array first: np.atleast_1d(x)")
    normal_axis(s, ts[0].ndim)
    if isinstance(ts[1], Array) or dt(ts[1]) != "i64":
        raise err(s, f"np.{s.attr('kind')}'s count must be one integer here",
                  "pass an int (repeat counts per element are not supported)")
    return ts[0]


def _moves(rank, ax):
    """The permutation moving axis ``ax`` to the front, and its inverse."""
    perm = (ax,) + tuple(d for d in range(rank) if d != ax)
    inv = [0] * rank
    for k, a in enumerate(perm):
        inv[a] = k
    return perm, tuple(inv)


def _transposed(node, perm):
    if list(perm) == list(range(len(perm))):
        return B.ex(node)
    return B.call("np.transpose", node, B.tuple_(*perm))


def _to_rows(node, shape, rank, ax):
    """``node`` (of the given shape expression) as a contiguous ``(n, rest)`` array, axis
    ``ax`` first."""
    perm, _ = _moves(rank, ax)
    rest = B.const(1)
    for d in perm[1:]:
        rest = B.binop(rest, "*", B.subscript(shape, d)) if not (
            isinstance(rest, gast.Constant) and rest.value == 1) else B.subscript(shape, d)
    front = B.call("np.ascontiguousarray", _transposed(node, perm))
    return _method(front, "reshape", B.tuple_(B.subscript(shape, ax), rest))


def _from_rows(node, shape, rank, ax):
    """The ``(N, rest)`` array ``node`` back in the layout of ``shape`` with ``N`` along ``ax``."""
    perm, inv = _moves(rank, ax)
    dims = [B.subscript(_attr_node(node, "shape"), 0)] + [B.subscript(shape, d) for d in perm[1:]]
    return _transposed(_method(node, "reshape", B.tuple_(*dims)), inv)


def _emit_along(em, s, v):
    rank = em.nd(s.args[0])
    ax = normal_axis(s, rank)
    if getattr(em, "input_language", False):      # read back by reverse mode (hessian)
        if s.attr("kind") == "tile":
            reps = [B.const(1)] * rank
            reps[ax] = B.ex(v[1])
            return B.call("np.tile", v[0], B.tuple_(*reps))
        return B.call(f"np.{s.attr('kind')}", v[0], v[1], axis=B.const(ax))
    return B.call(em.helper(R.along(s.attr("kind"), rank, ax)), v[0], v[1])


def _vjp_along(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[0]
    rank = em.nd(arg)
    ax = normal_axis(s, rank)
    shape = em.shape_of(arg, pre_fwd, pre_rev)
    contrib = B.call(em.helper(R.along(s.attr("kind"), rank, ax, True)), g, em.val(s.args[1]),
                     B.subscript(shape, ax))
    em.accumulate(arg.name, X(contrib, True), pre_fwd, pre_rev, out)


register(Primitive("along", _along_type, _emit_along, arity=2, cost=CostClass.CALL))
defstructural("along", _vjp_along, (0,))
deflinear("along")


# ------------------------------------------------------------------ np.gradient
def _gradient_type(c, s, ts):
    f, h = ts
    if not isinstance(f, Array):
        raise err(s, "np.gradient of a scalar is not supported", "pass an array")
    if s.attr("rank") is not None and f.ndim != s.attr("rank"):
        raise err(s, f"np.gradient of a {f.ndim}-D array without axis= (one array per axis) is "
                     "not supported", "pass the axis: np.gradient(f, axis=0)")
    normal_axis(s, f.ndim)
    if isinstance(h, Array):
        raise err(s, "np.gradient with an array of spacings or coordinates is not supported",
                  "give one scalar spacing")
    return Array("f64", f.ndim)


def _gradient_rows(em, s, node, shape, h, helper):
    rank = em.nd(s.args[0])
    ax = normal_axis(s, rank)
    if getattr(em, "input_language", False) and helper == "_gradient_rows":
        return B.call("np.gradient", node, h, axis=B.const(ax),
                      edge_order=B.const(s.attr("edge_order")))
    rows = B.call(em.helper(helper), _to_rows(node, shape, rank, ax), h, B.const(s.attr("edge_order")))
    return _from_rows(rows, shape, rank, ax)


def _emit_gradient(em, s, v):
    return _gradient_rows(em, s, v[0], _attr_node(v[0], "shape"), v[1], "_gradient_rows")


def _vjp_gradient(em, s, p, g, pre_fwd, pre_rev, out):
    f, h = s.args
    if p == 0:
        shape = em.shape_of(f, pre_fwd, pre_rev)
        contrib = X(_gradient_rows(em, s, g, shape, em.val(h), "_gradient_rows_adj"), True)
    else:       # every element is linear in 1 / h: d/dh = -result / h
        result = _gradient_rows(em, s, em.val(f), _attr_node(em.val(f), "shape"), em.val(h),
                                "_gradient_rows")
        contrib = -X(B.call("np.sum", g * X(result, True))) / em.val(h)
    em.accumulate(s.args[p].name, contrib, pre_fwd, pre_rev, out)


def _jvp_gradient(em, s, dots, out):
    f, h = s.args
    terms = []
    if dots[0] is not None:
        d = em.val(dots[0])
        terms.append(X(_gradient_rows(em, s, d, _attr_node(d, "shape"), em.val(h),
                                      "_gradient_rows"), True))
    if dots[1] is not None:
        terms.append(-(out * em.val(dots[1])) / em.val(h))
    return terms[0] if len(terms) == 1 else terms[0] + terms[1]


register(Primitive("gradient", _gradient_type, _emit_gradient, arity=2, cost=CostClass.CALL))
defstructural("gradient", _vjp_gradient, (0, 1))
defjvp("gradient", _jvp_gradient)


# ------------------------------------------------------------------ rot90
def _rot90_type(c, s, ts):
    rank = nd(ts[0])
    if rank < 2:
        raise err(s, "np.rot90 needs an array of 2 or more dimensions",
                  f"it got a {rank}-D value")
    a0, a1 = (normal_axis(s, rank, a) for a in s.attr("axes"))
    if a0 == a1:
        raise err(s, "np.rot90's axes must be different", "axes=(0, 1)")
    return ts[0]


def _flipped(node, rank, ax):
    idx = [B.slice_() for _ in range(rank)]
    idx[ax] = B.slice_(None, None, -1)
    return B.subscript(node, B.tuple_(*idx))


def rotated(node, rank, k, a0, a1):
    """``np.rot90(node, k, (a0, a1))`` written with flips and a transpose, as NumPy does."""
    k %= 4
    if k == 0:
        return B.subscript(node, B.slice_())
    if k == 2:
        return _flipped(_flipped(node, rank, a0), rank, a1)
    perm = list(range(rank))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return B.call("np.transpose", _flipped(node, rank, a1), B.tuple_(*perm))
    return _flipped(B.call("np.transpose", node, B.tuple_(*perm)), rank, a1)


def _rot_params(s, rank):
    a0, a1 = (normal_axis(s, rank, a) for a in s.attr("axes"))
    return s.attr("k"), a0, a1


def _emit_rot90(em, s, v):
    rank = em.nd(s.args[0])
    k, a0, a1 = _rot_params(s, rank)
    return rotated(v[0], rank, k, a0, a1)


def _vjp_rot90(em, s, p, g, pre_fwd, pre_rev, out):
    rank = em.nd(s.args[0])
    k, a0, a1 = _rot_params(s, rank)
    em.accumulate(s.args[p].name, X(rotated(g, rank, -k, a0, a1), True), pre_fwd, pre_rev, out)


register(Primitive("rot90", _rot90_type, _emit_rot90, arity=1, view=True, cost=CostClass.FREE))
defstructural("rot90", _vjp_rot90, (0,))
deflinear("rot90")


# ------------------------------------------------------------------ kron
def _kron_type(c, s, ts):
    a, b = ts
    if not isinstance(a, Array) or not isinstance(b, Array):
        raise err(s, "np.kron of a scalar is not supported here", "multiply instead: a * b")
    if a.ndim != b.ndim:
        raise err(s, f"np.kron of a {a.ndim}-D and a {b.ndim}-D array is not supported",
                  "give both the same rank (reshape the smaller one)")
    dtype = dtype_join(a.dtype, b.dtype)
    if dtype == "bool":
        raise err(s, "np.kron of two boolean arrays is not supported",
                  "convert one: a.astype(np.int64)")
    return Array(dtype, a.ndim)


def _emit_kron(em, s, v):
    rank = em.nd(s.args[0])
    if getattr(em, "input_language", False):
        return B.call("np.kron", *v)
    dtype = em.types[s.target].dtype
    return B.call(em.helper(R.kron(rank, None, dtype)), *(
        _method(x, "astype", B.attr("np.int64" if dtype == "i64" else "np.float64"))
        if em.types[a.name].dtype != dtype else x for x, a in zip(v, s.args)))


def _vjp_kron(em, s, p, g, pre_fwd, pre_rev, out):
    rank = em.nd(s.args[0])
    other = s.args[1 - p]
    node = em.val(other)
    if em.types[other.name].dtype != "f64":
        node = _method(node, "astype", B.attr("np.float64"))
    contrib = B.call(em.helper(R.kron(rank, "ab"[p])), g, node,
                     em.shape_of(s.args[p], pre_fwd, pre_rev))
    em.accumulate(s.args[p].name, X(contrib, True), pre_fwd, pre_rev, out)


register(Primitive("kron", _kron_type, _emit_kron, arity=2, numpy=("kron",), cost=CostClass.CALL))
defstructural("kron", _vjp_kron, (0, 1))
deflinear("kron", (0, 1))

# NEWAXIS is re-exported for the frontend's sugar that builds index tuples with new axes
__all__ = ["normal_axis", "rotated", "NEWAXIS"]
