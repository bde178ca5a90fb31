"""Reductions: ``sum``, ``mean``, ``prod``, ``amax``, ``amin``, ``std``, ``var``, over all
elements or one static axis, with ``keepdims``.

Requires: ``core``, ``coarsen.codegen.build``; the emitter's runtime helpers ``_red_*`` and
``_prod_grad*`` (``coarsen.codegen.runtime``).
Guarantees: type rules (the axis must be in range), emitted primals, and structural VJPs:
sums and means broadcast the adjoint back; ``amax``/``amin`` share it evenly between tied
maxima (as JAX does); ``prod`` uses a division-free product of the others; ``var``/``std``
use the deviations from the mean.  Forward mode (``coarsen.ad.forward``): ``sum`` and ``mean``
are linear; ``prod`` sums the division-free product of the others times the tangent;
``amax``/``amin`` average the tangent over the tied extrema (the VJP's convention); ``var`` is
``mean(2 dev * t)`` and ``std`` is ``sum(t * d std/d a)``.

Zero variance: ``var``'s gradient ``2 (a - mean) / n`` is finite everywhere (exactly 0 along
an axis of length 1).  ``std``'s, ``(a - mean) / (n std)``, is 0/0 where every deviation is 0
(an axis of length 1, where the std is identically 0; a constant fiber, where it is not
differentiable): there both modes and both targets give exactly 0, the minimum-norm
subgradient (PyTorch's choice; JAX and autograd give nan):
``dev / (n std + [sum |dev| == 0])``, NumPy code that forward mode reads back (forward over
reverse).  Deviations are taken from the
mean as the program computes it: ``[0.1, 0.1, 0.1]``, whose mean rounds to 0.1 + 1.4e-17,
has a std of 1.4e-17 and the gradient of that (-1/3 each), not 0; deviations too small to
square (below about 1e-154) still give inf or nan, loudly.  ``var``/``std`` take NumPy's
``ddof`` (the attribute ``ddof``, an integer constant, 0 where absent): the sum of squared
deviations is divided by ``n - ddof`` (inf or nan where that is not positive, as in NumPy), and
so are their derivatives' ``2 dev / (n - ddof)`` and ``dev / ((n - ddof) std)``.
"""
from __future__ import annotations

import gast

from ...codegen import build as B
from ...codegen import runtime as R
from ...codegen.build import X
from ..nodes import Array
from .core import CostClass, Primitive, defjvp, deflinear, defstructural, dt, err, make, register

REDUCTIONS = ("sum", "mean", "prod", "amax", "amin", "std", "var")


def _reduction_type(c, s, ts):
    op = s.op
    a = ts[0]
    if not isinstance(a, Array):
        if op in ("sum", "prod", "amax", "amin", "mean"):
            return make("f64" if op == "mean" else dt(a), 0)
        raise err(s, f"{op} of a scalar")
    axis = s.attr("axis")
    keep = s.attr("keepdims")
    d = "f64" if op in ("mean", "std", "var") or a.dtype == "f64" else "i64"
    if axis is None:
        return make(d, a.ndim if keep else 0)
    if not -a.ndim <= axis < a.ndim:
        raise err(s, f"axis {axis} is out of range for a {a.ndim}-D array")
    return make(d, a.ndim if keep else a.ndim - 1)


def _emit_reduction(em, s, v):
    op = s.op
    a = s.args[0]
    rank = em.nd(a)
    if rank == 0:
        if op in ("sum", "prod", "amax", "amin", "mean"):
            return B.call("float", v[0]) if op == "mean" else B.ex(v[0])
    axis = s.attr("axis")
    keep = s.attr("keepdims")
    if axis is not None:
        axis %= rank
    fname = {"sum": "np.sum", "prod": "np.prod", "amax": "np.max", "amin": "np.min",
             "mean": "np.sum", "std": "np.std", "var": "np.var"}[op]
    ddof = s.attr("ddof", 0)
    if ddof and (axis is None or rank == 1):   # Numba's np.var has no ddof: written out
        size = B.attr(f"{a.name}.size")
        dev = B.binop(v[0], "-", B.binop(B.call("np.sum", v[0]), "/", size))
        red = B.binop(B.call("np.sum", B.binop(dev, "*", dev)), "/", B.binop(size, "-", ddof))
        red = B.call("np.sqrt", red) if op == "std" else red
        return B.call("np.full", B.tuple_(*([1] * rank)), red) if keep else red
    if axis is None:
        if op == "mean":
            red = B.binop(B.call("np.sum", v[0]), "/", B.attr(f"{a.name}.size"))
        else:
            red = B.call(fname, v[0])
        if keep:
            return B.call("np.full", B.tuple_(*([1] * rank)), red)
        return red
    if op in ("prod", "amax", "amin") and rank > 1:
        # NumPy's call in the input language (a JVP that reverse mode reads back: its loop
        # helper raises on an empty axis, and a raise is not in the language); Numba has no
        # axis= for these, hence the loop helper elsewhere
        red = B.call(fname, v[0], axis=axis) if getattr(em, "input_language", False) else \
            B.call(em.helper(R.reduce_axis(op, rank, axis)), v[0])
        return B.call("np.expand_dims", red, axis) if keep else red
    count = B.subscript(B.attr(f"{a.name}.shape"), axis)
    if rank == 1:
        red = B.call(fname, v[0]) if op != "mean" else B.binop(B.call("np.sum", v[0]), "/", count)
    elif op in ("sum", "mean"):
        red = B.call("np.sum", v[0], axis=axis)
        if op == "mean":
            red = B.binop(red, "/", count)
    else:  # var / std along an axis
        mean = B.call("np.expand_dims", B.binop(B.call("np.sum", v[0], axis=axis), "/", count), axis)
        dev = B.binop(v[0], "-", mean)
        red = B.binop(B.call("np.sum", B.binop(dev, "*", dev), axis=axis), "/",
                      B.binop(count, "-", ddof) if ddof else count)
        if op == "std":
            red = B.call("np.sqrt", red)
    if keep:
        if rank == 1:
            return B.call("np.full", B.tuple_(1), red)
        return B.call("np.expand_dims", red, axis)
    return red


def _array_operand(em, s, p, g, pre_fwd, pre_rev, out):
    """``(operand, its value, its rank)``; a scalar operand (a reduction of a number is the
    number) takes the adjoint as it is, and ``(None, None, 0)`` comes back."""
    arg = s.args[p]
    rank = em.nd(arg)
    if rank == 0:
        em.accumulate(arg.name, g, pre_fwd, pre_rev, out)
        return None, None, 0
    return arg, em.val(arg), rank


def _vjp_sum_mean(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[p]
    rank = em.nd(arg)
    if rank == 0:
        em.accumulate(arg.name, g, pre_fwd, pre_rev, out)
        return
    axis = s.attr("axis")
    gg = g
    if s.op == "mean":
        count = B.attr(f"{arg.name}.size") if axis is None else \
            B.subscript(B.attr(f"{arg.name}.shape"), axis % rank)
        if not em.intact(arg.name) and not em.taped(arg.name):
            shp = em.shape_of(arg, pre_fwd, pre_rev)
            count = B.subscript(shp, axis % rank) if axis is not None else \
                B.call("np.prod", B.call("np.array", shp))
        gg = g / X(count)
    if axis is not None and rank > 1 and not s.attr("keepdims"):
        # the reduced axis put back so the adjoint broadcasts; a 1-D operand's result is a
        # number, which broadcasts as it is (Numba has no expand_dims of a number)
        gg = X(B.call("np.expand_dims", gg, axis % rank), True)
    em.broadcast_into(arg, gg, pre_fwd, pre_rev, out)


def _std_grad(a, mean, n, red):
    """d std / d a, ``(a - mean) / (n std)``, shaped like ``a``; ``red(e)``: ``e`` summed as
    the std reduces, shaped to broadcast against ``a``.  Where every deviation is exactly 0
    (an axis of length 1, a constant fiber) the denominator gets 1 and the gradient is 0;
    deviations that merely square to 0 (below 1e-154) keep the 0/0, loud, as before."""
    dev = a - mean
    sd = X(B.call("np.sqrt", B.ex(red(dev * dev) / n)), dev.array)
    flat = red(X(B.call("np.abs", dev), True)).cmp("==", 0.0)
    return dev / (n * sd + flat)


def _vjp_var_std(em, s, p, g, pre_fwd, pre_rev, out):
    arg = s.args[p]
    a = em.val(arg)
    rank = em.nd(arg)
    axis = s.attr("axis")
    if axis is None or rank == 1:    # a 1-D operand: its only axis is all of it, as in forward
        n = X(B.attr(f"{arg.name}.size"))
        mean = X(B.binop(B.call("np.sum", a), "/", B.attr(f"{arg.name}.size")))
        gg = g
    else:
        ax = axis % rank
        n = X(B.subscript(B.attr(f"{arg.name}.shape"), ax))
        mean = X(B.call("np.expand_dims", B.binop(B.call("np.sum", a, axis=ax), "/", n), ax), True)
        gg = g if s.attr("keepdims") else X(B.call("np.expand_dims", g, ax), True)
    # var: 2 dev / n, finite everywhere; std: dev / (n std), 0 where every deviation is 0
    # (n - ddof for both)
    nd_ = n - s.attr("ddof") if s.attr("ddof", 0) else n
    if s.op == "var":
        contrib = gg * (2.0 * (a - mean) / nd_)
    elif axis is None or rank == 1:
        contrib = gg * _std_grad(a, mean, nd_, lambda e: X(B.call("np.sum", e)))
    else:
        contrib = gg * _std_grad(a, mean, nd_, lambda e: X(B.call(
            "np.expand_dims", B.call("np.sum", e, axis=ax), ax), True))
    em.accumulate(arg.name, contrib, pre_fwd, pre_rev, out)


def _vjp_extremum(em, s, p, g, pre_fwd, pre_rev, out):
    arg, a, rank = _array_operand(em, s, p, g, pre_fwd, pre_rev, out)
    if arg is None:
        return
    fname = "np.max" if s.op == "amax" else "np.min"
    axis = s.attr("axis")
    if axis is None:
        m = X(B.call(fname, a))
        mask = X(B.compare(a, "==", m), True)
        contrib = X(B.call("np.where", mask, g / X(B.call("np.sum", mask)), 0.0), True)
    elif rank == 1:
        m = X(B.call(fname, a))
        mask = X(B.compare(a, "==", m), True)
        gs = g if not s.attr("keepdims") else X(B.subscript(B.ex(g), 0))
        contrib = X(B.call("np.where", mask, gs / X(B.call("np.sum", mask)), 0.0), True)
    else:  # ties along the axis share the adjoint evenly, as in JAX: one loop helper
        ax = axis % rank
        keep = bool(s.attr("keepdims"))
        if arg.name not in em.f.set_temps:
            # added into the adjoint in place: the bits of ``a_bar += helper(a, g)``, no
            # temporary of a's size
            helper = em.helper(R.reduce_adjoint_add(s.op, rank, ax, keep))
            out.append(gast.Expr(value=B.call(helper, B.name(em.bar(arg.name)), a, g)))
            return
        helper = em.helper(R.reduce_adjoint(s.op, rank, ax, keep))
        contrib = X(B.call(helper, a, g), True)
    em.accumulate(arg.name, contrib, pre_fwd, pre_rev, out)


def _vjp_prod(em, s, p, g, pre_fwd, pre_rev, out):
    arg, a, rank = _array_operand(em, s, p, g, pre_fwd, pre_rev, out)
    if arg is None:
        return
    axis = s.attr("axis")
    if axis is None:
        contrib = g * X(B.call(em.helper("_prod_grad"), a), True)
    elif rank == 1:
        gs = X(B.subscript(B.ex(g), 0)) if s.attr("keepdims") else g
        contrib = gs * X(B.call(em.helper("_prod_grad"), a), True)
    else:
        ax = axis % rank
        gs = g if s.attr("keepdims") else X(B.call("np.expand_dims", g, ax), True)
        contrib = gs * X(B.call(em.helper(R.prod_grad_axis(rank, ax)), a), True)
    em.accumulate(arg.name, contrib, pre_fwd, pre_rev, out)


# ------------------------------------------------------------------ forward mode
def _reduce_like(em, s, expr, rank):
    """``expr`` (an array shaped like operand 0) summed as ``s`` reduces: over all elements or
    its axis, with its ``keepdims``."""
    axis = s.attr("axis")
    keep = s.attr("keepdims")
    if axis is None or rank == 1:
        red = X(B.call("np.sum", expr))
        return X(B.call("np.full", B.tuple_(*([1] * rank)), red), True) if keep else red
    ax = axis % rank
    red = X(B.call("np.sum", expr, axis=ax), True)
    return X(B.call("np.expand_dims", red, ax), True) if keep else red


def _count_like(em, s, a, rank):
    """The number of elements ``s`` reduces into each result (a scalar expression)."""
    axis = s.attr("axis")
    if axis is None:
        return X(B.attr(f"{a.name}.size"))
    return X(B.subscript(B.attr(f"{a.name}.shape"), axis % rank))


def _jvp_prod(em, s, dots, out):
    arg = s.args[0]
    d = em.val(dots[0])
    rank = em.nd(arg)
    if rank == 0:
        return d
    a = em.val(arg)
    axis = s.attr("axis")
    if axis is None or rank == 1:
        others = X(B.call(em.helper("_prod_grad"), a), True)
    else:
        others = X(B.call(em.helper(R.prod_grad_axis(rank, axis % rank)), a), True)
    return _reduce_like(em, s, others * d, rank)


def _jvp_extremum(em, s, dots, out):
    arg = s.args[0]
    d = em.val(dots[0])
    rank = em.nd(arg)
    if rank == 0:
        return d
    a = em.val(arg)
    axis = s.attr("axis")
    if axis is None or rank == 1:
        mask = X(B.compare(a, "==", out), True)      # out broadcasts (keepdims: ones shape)
        total = X(B.call("np.sum", mask * d)) / X(B.call("np.sum", mask))
        if s.attr("keepdims"):
            return X(B.call("np.full", B.tuple_(*([1] * rank)), total), True)
        return total
    ax = axis % rank
    m = out if s.attr("keepdims") else X(B.call("np.expand_dims", out, ax), True)
    mask = X(B.compare(a, "==", m), True)
    total = X(B.call("np.sum", mask * d, axis=ax), True) / X(B.call("np.sum", mask, axis=ax), True)
    return X(B.call("np.expand_dims", total, ax), True) if s.attr("keepdims") else total


def _jvp_var_std(em, s, dots, out):
    arg = s.args[0]
    d = em.val(dots[0])
    a = em.val(arg)
    rank = em.nd(arg)
    axis = s.attr("axis")
    n = _count_like(em, s, arg, rank)
    if axis is None or rank == 1:
        mean = X(B.call("np.sum", a)) / n
        red = lambda e: X(B.call("np.sum", e))     # noqa: E731
    else:
        ax = axis % rank
        mean = X(B.call("np.expand_dims", B.binop(B.call("np.sum", a, axis=ax), "/", B.ex(n)), ax),
                 True)
        red = lambda e: X(B.call("np.expand_dims", B.call("np.sum", e, axis=ax), ax), True)  # noqa: E731
    nd_ = n - s.attr("ddof") if s.attr("ddof", 0) else n
    if s.op == "var":
        return _reduce_like(em, s, d * (2.0 * (a - mean)), rank) / nd_
    return _reduce_like(em, s, d * _std_grad(a, mean, nd_, red), rank)


_SPELL = {"sum": ("sum",), "mean": ("mean",), "prod": ("prod",), "amax": ("max", "amax"),
          "amin": ("min", "amin"), "std": ("std",), "var": ("var",)}
_VJP = {"sum": _vjp_sum_mean, "mean": _vjp_sum_mean, "prod": _vjp_prod, "amax": _vjp_extremum,
        "amin": _vjp_extremum, "std": _vjp_var_std, "var": _vjp_var_std}
for _name in REDUCTIONS:
    register(Primitive(_name, _reduction_type, _emit_reduction, arity=1, numpy=_SPELL[_name],
                       reduction=True, cost=CostClass.CALL))
    defstructural(_name, _VJP[_name], (0,))
deflinear("sum")
deflinear("mean")
defjvp("prod", _jvp_prod)
defjvp("amax", _jvp_extremum)
defjvp("amin", _jvp_extremum)
defjvp("var", _jvp_var_std)
defjvp("std", _jvp_var_std)
