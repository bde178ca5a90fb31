"""Padding: ``pad`` (``np.pad(x, pad_width, mode="constant", constant_values=c)``).

Requires: ``core``, ``coarsen.codegen.build``; the runtime helpers ``_pad1``..``_pad3``
(``coarsen.codegen.helpers_numpy``); the frontend (``coarsen.frontend.numpy_forms``) gives the
attribute ``widths`` as written (an integer, a pair, or a tuple of pairs, of integer constants)
and ``value`` (the constant fill, a number; 0 where absent); any ``mode`` but ``"constant"``
is refused there, naming it.
Guarantees: ``widths_for(widths, ndim)`` is NumPy's reading of ``pad_width`` for that rank
(``n``: n before and after every axis; ``(b, a)``: the same pair for every axis; one pair per
axis), or a ``ValueError`` (negative widths, the wrong number of pairs), refused at the call;
the primal is a new array of ``x``'s dtype (1-D to 3-D; other ranks refused) with ``x`` in its
middle and the fill around it; the adjoint is the middle of the result's adjoint (the fill is
a constant). Forward mode: linear (the tangent padded with zeros: ``defjvp``); in coarsen's
input language (a JVP that reverse mode reads back) the call is NumPy's own ``np.pad``.
"""
from __future__ import annotations

from ...codegen import build as B
from ...codegen.build import X
from ..nodes import Array
from .core import CostClass, Primitive, defjvp, defstructural, dt, err, make, register


def widths_for(widths, ndim):
    """``[(before, after)] * ndim`` from ``pad_width`` as written."""
    if isinstance(widths, int):
        pairs = [(widths, widths)] * ndim
    elif len(widths) == 2 and all(isinstance(w, int) for w in widths):
        pairs = [tuple(widths)] * ndim
    elif len(widths) == 1 and isinstance(widths[0], int):
        pairs = [(widths[0], widths[0])] * ndim
    else:
        pairs = [tuple(w) if not isinstance(w, int) else (w, w) for w in widths]
        if len(pairs) == 1:
            pairs = pairs * ndim
        if len(pairs) != ndim or any(len(p) != 2 for p in pairs):
            raise ValueError(f"pad_width {widths} does not give one (before, after) pair per "
                             f"axis of a {ndim}-D array")
    if any(w < 0 for p in pairs for w in p):
        raise ValueError("negative values in pad_width are not allowed")
    return pairs


def _pad_type(c, s, ts):
    a = ts[0]
    if not isinstance(a, Array) or a.ndim > 3:
        raise err(s, "np.pad of a scalar or an array above 3-D is not supported",
                  "pad a 1-D, 2-D or 3-D array")
    try:
        widths_for(s.attr("widths"), a.ndim)
    except ValueError as e:
        raise err(s, str(e), "np.pad(x, ((1, 2), (0, 1)), mode='constant')") from None
    if dt(a) != "f64" and isinstance(s.attr("value"), float):
        raise err(s, "a float constant_values for an integer array is not supported",
                  "convert the array: x.astype(np.float64)")
    return make(dt(a), a.ndim)


def _pairs(em, s):
    return widths_for(s.attr("widths"), em.nd(s.args[0]))


def _emit_pad(em, s, v, value=None):
    pairs = _pairs(em, s)
    fill = s.attr("value") if value is None else value
    if getattr(em, "input_language", False):    # read back by reverse mode (coarsen.hessian)
        return B.call("np.pad", v[0], B.tuple_(*(B.tuple_(b, a) for b, a in pairs)),
                      constant_values=fill)
    flat = [w for p in pairs for w in p]
    return B.call(em.helper(f"_pad{len(pairs)}"), v[0], *flat, fill)


def _middle(g, pairs):
    index = [B.slice_(b or None, -a if a else None) for b, a in pairs]
    return B.subscript(g, index[0] if len(index) == 1 else B.tuple_(*index))


def _vjp_pad(em, s, p, g, pre_fwd, pre_rev, out):
    em.accumulate(s.args[p].name, X(_middle(g, _pairs(em, s)), True), pre_fwd, pre_rev, out)


def _jvp_pad(em, s, dots, out):
    return X(_emit_pad(em, s, [em.val(dots[0])], value=0.0), True)


register(Primitive("pad", _pad_type, _emit_pad, arity=1, numpy=("pad",), cost=CostClass.CALL))
defstructural("pad", _vjp_pad, (0,))
defjvp("pad", _jvp_pad)
