"""Tensor products: ``tensordot`` (``np.tensordot`` in every ``axes`` form, and ``np.inner``)
and ``cross`` (``np.cross`` of 3-vectors).

Requires: ``core``, ``einsum`` (``EinSpec``, ``emit_spec``, ``vjp_spec``: each contraction is
an einsum loop nest), ``coarsen.codegen.build``; the runtime helper ``_last3``
(``coarsen.codegen.helpers_numpy``); the frontend (``coarsen.frontend.numpy_forms``) gives
``tensordot`` the attribute ``axes``: an integer N (the last N axes of ``a`` with the first N
of ``b``) or a pair of tuples of integer constants (``np.inner``: ``((-1,), (-1,))``).
Guarantees, with NumPy's values:

* ``tensordot_spec(axes, na, nb)``: the einsum of NumPy's contraction (``a``'s free axes, then
  ``b``'s, in order), or a ``ValueError`` with NumPy's complaint (axes out of range, repeated,
  of different counts); contracted lengths must be equal (no broadcasting, as in NumPy); a
  float64 result (all-integer operands are refused, as by ``einsum``); scalars are refused
  (``np.inner`` of a scalar is a product: write ``a * b``);
* ``cross(a, b)``: ``np.cross`` on both targets, its operands broadcast; a last axis of length
  other than 3 raises ``ValueError`` at run time (2-vectors would give a result of another
  rank); the adjoints ``cross(b, g)`` and ``cross(g, a)``, summed over broadcast axes.

Forward mode: both are bilinear (``deflinear`` in each operand).
"""
from __future__ import annotations

from ...codegen import build as B
from ...codegen.build import X
from ..nodes import Array
from .core import CostClass, Primitive, deflinear, defstructural, dt, err, make, nd, register
from .einsum import LETTERS, EinSpec, emit_spec, vjp_spec


def _norm(a, n, what):
    if not -n <= a < n:
        raise ValueError(f"{what} axis {a} is out of range for a {n}-D array")
    return a % n


def tensordot_spec(axes, na, nb):
    """The ``EinSpec`` of ``np.tensordot(a, b, axes)`` for operands of ranks ``na``, ``nb``."""
    if isinstance(axes, int):
        if axes < 0 or axes > min(na, nb):
            raise ValueError(f"axes={axes} does not fit arrays of {na} and {nb} dimensions")
        pa, pb = tuple(range(na - axes, na)), tuple(range(axes))
    else:
        pa = tuple(_norm(a, na, "the first operand's") for a in axes[0])
        pb = tuple(_norm(b, nb, "the second operand's") for b in axes[1])
        if len(pa) != len(pb):
            raise ValueError("shape-mismatch for sum: the two axes lists differ in length")
        if len(set(pa)) != len(pa) or len(set(pb)) != len(pb):
            raise ValueError("repeated axis in tensordot's axes")
    letters = iter(LETTERS)
    la = [next(letters) for _ in range(na)]
    lb = [next(letters) for _ in range(nb)]
    for x, y in zip(pa, pb):
        lb[y] = la[x]
    out = "".join(la[k] for k in range(na) if k not in pa) + \
        "".join(lb[k] for k in range(nb) if k not in pb)
    contracted = "".join(la[x] for x in pa)
    return EinSpec(("".join(la), "".join(lb)), out, contracted + out)


def _spec(s, na, nb):
    return tensordot_spec(s.attr("axes"), na, nb)


def _tensordot_type(c, s, ts):
    a, b = ts
    if not isinstance(a, Array) or not isinstance(b, Array):
        raise err(s, "np.tensordot/np.inner of a scalar is not supported", "write a * b")
    if dt(a) != "f64" and dt(b) != "f64":
        raise err(s, "np.tensordot/np.inner of integer arrays only is not supported",
                  "convert one of them: x.astype(np.float64)")
    try:
        es = _spec(s, a.ndim, b.ndim)
    except ValueError as e:
        raise err(s, str(e), "give axes within each operand's rank") from None
    return make("f64", len(es.out))


def _emit_tensordot(em, s, v):
    return emit_spec(em, _spec(s, em.nd(s.args[0]), em.nd(s.args[1])), v)


def _vjp_tensordot(em, s, p, g, pre_fwd, pre_rev, out):
    vjp_spec(em, _spec(s, em.nd(s.args[0]), em.nd(s.args[1])), s, p, g, pre_fwd, pre_rev, out)


def _cross_type(c, s, ts):
    a, b = ts
    if not isinstance(a, Array) or not isinstance(b, Array):
        raise err(s, "np.cross of a scalar", "np.cross takes arrays of 3-vectors")
    return make("f64" if "f64" in (dt(a), dt(b)) else "i64", max(nd(a), nd(b)))


def _emit_cross(em, s, v):
    if getattr(em, "input_language", False):    # read back by reverse mode (coarsen.hessian),
        return B.call("np.cross", v[0], v[1])   # which checks the lengths as it lowers it here
    return B.call("np.cross", B.call(em.helper("_last3"), v[0]), B.call(em.helper("_last3"), v[1]))


def _vjp_cross(em, s, p, g, pre_fwd, pre_rev, out):
    a, b = (em.val(x) for x in s.args)
    contrib = X(B.call("np.cross", b, g) if p == 0 else B.call("np.cross", g, a), True)
    other = s.args[1 - p]
    contrib = em.reduce_to(s.args[p], contrib, em.nd(s.args[0]) if em.nd(s.args[0]) >= em.nd(
        s.args[1]) else em.nd(s.args[1]), em.is_arr(other), pre_fwd, pre_rev)
    em.accumulate(s.args[p].name, contrib, pre_fwd, pre_rev, out)


register(Primitive("tensordot", _tensordot_type, _emit_tensordot, arity=2,
                   numpy=("tensordot", "inner"), cost=CostClass.CALL))
register(Primitive("cross", _cross_type, _emit_cross, arity=2, numpy=("cross",),
                   cost=CostClass.CALL))
defstructural("tensordot", _vjp_tensordot, (0, 1))
defstructural("cross", _vjp_cross, (0, 1))
deflinear("tensordot", (0, 1))
deflinear("cross", (0, 1))
