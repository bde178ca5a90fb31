"""Matrix products: ``matmul`` (``@``) and ``dot``, of arrays of any rank (``dot`` also of
scalars); ``solve`` (``np.linalg.solve``).  ``einsum`` is its own family (``einsum``).

Requires: ``core``, ``coarsen.codegen.build``; the runtime helpers ``_mm*`` (loops),
``_bmm*`` (float64: BLAS at and above the crossover sizes), ``_outer``, ``_solve*`` (Gaussian
elimination: no LAPACK);
``einsum`` for products above 2-D (``product_spec``: ``@``'s batch axes broadcast as NumPy's).
Guarantees: type rules (``solve`` takes a 2-D ``A`` and a 1-D or
2-D ``b``; a product with an operand above 2-D is an einsum loop nest: ``@`` broadcasts its
batch axes, ``np.dot`` sums the last axis of ``a`` with the second-to-last of ``b``), the emitted primal
(the runtime helpers, which check the inner dimensions and, for ``solve``, raise
``np.linalg.LinAlgError`` on a singular matrix; where the emitter asks for coarsen's input
language, ``em.input_language``, the primal and the tangents are ``a @ b``,
``np.linalg.solve`` and ``np.einsum`` instead), and the VJPs ``A_bar += g @ B.T``, ``B_bar += A.T @ g`` in every rank combination (float64
products in BLAS in both sweeps: a transpose passed as its strides, a strided view, ``_layout``
``"A"``, copied contiguous first, so that Numba never copies behind a warning); for ``solve``
``gb = solve(A.T, g)``, ``b_bar += gb``, ``A_bar -= gb x^T`` with ``x = solve(A, b)`` recomputed
from ``A`` and ``b``.
Forward mode: the products are bilinear (``deflinear(name, (0, 1))``: the same
op with one operand replaced by its tangent, summed); ``solve``'s tangent is
``solve(A, db - dA @ x)``.
"""
from __future__ import annotations

import gast

from ...codegen import build as B
from ...codegen.build import X
from ..nodes import NEWAXIS, Array, Assign, Scalar, Slice, Var, walk
from .core import (REGISTRY, CostClass, Primitive, defjvp, deflinear, defstructural, dt, dtype_join, err,
                   make, nd, register)
from .einsum import emit_product, product_spec, vjp_product


def _product_type(c, s, ts):
    a, b = ts
    if isinstance(a, Scalar) or isinstance(b, Scalar):
        if s.op == "dot":
            return make(dtype_join(dt(a), dt(b)), max(nd(a), nd(b)))
        raise err(s, "@ needs arrays on both sides")
    if a.ndim > 12 or b.ndim > 12:
        raise err(s, f"{'@' if s.op == 'matmul' else 'np.dot'} of arrays above 12 dimensions "
                     "is not supported")
    if a.ndim > 2 or b.ndim > 2:    # the loop nests of ``einsum``: batch axes broadcast by @
        return make(dtype_join(a.dtype, b.dtype), len(product_spec(s.op, a.ndim, b.ndim).out))
    rank = {(2, 2): 2, (2, 1): 1, (1, 2): 1, (1, 1): 0}[(a.ndim, b.ndim)]
    return make(dtype_join(a.dtype, b.dtype), rank)


def _blas(em, *operands):
    """The helpers' prefix for a product of these operands: ``_bmm`` (BLAS at and above the
    crossover sizes, ``coarsen.codegen.helpers``) when every operand is a float64 array,
    ``_mm`` (loops; Numba's np.dot takes floats of one dtype only) otherwise."""
    ok = all(isinstance(o, Var) and isinstance(em.types.get(o.name), Array)
             and em.types[o.name].dtype == "f64" for o in operands)
    return "_bmm" if ok else "_mm"


def _layout(fn, name, seen=()):
    """The memory layout Numba types the array ``name`` with, as far as the IR tells: ``"C"``
    (parameters, which callers pass contiguous, and every array a primitive allocates), ``"F"``
    (the transpose of a ``"C"`` matrix), ``"A"`` (a strided view, or not known).  Numba's own
    rule for basic subscripts: integers, then at most one slice without a step, on a ``"C"``
    array keep it ``"C"``.  A wrong ``"C"`` costs a Numba performance warning and a copy,
    never a wrong value."""
    defs = [s for s in walk(fn.body) if isinstance(s, Assign) and s.target == name]
    if name in seen or len(defs) > 1:
        return "A"
    if not defs or defs[0].op not in ("transpose", "getitem", "copy") \
            or not isinstance(defs[0].args[0], Var):
        return "A" if defs and REGISTRY[defs[0].op].view else "C"
    s = defs[0]
    base = _layout(fn, s.args[0].name, seen + (name,))
    if s.op == "copy":
        return "C"
    if s.op == "transpose":
        return {"C": "F", "F": "C"}.get(base, "A") if s.attr("axes") is None else "A"
    items = s.index
    if base != "C" or any(isinstance(i, Slice) or i == NEWAXIS for i in items[:-1]):
        return "A"
    last = items[-1] if items else None
    return "C" if not isinstance(last, Slice) or last.step is None else "A"


def _contiguous(em, operand, value):
    """``value`` (of the array ``operand``) as BLAS takes it without a copy of Numba's: itself
    where its layout is ``"C"`` or ``"F"``, else a C-contiguous copy."""
    if em.input_language or _layout(em.fn, operand.name) != "A":
        return value
    return X(B.call("np.ascontiguousarray", value), True)


def _emit_product(em, s, v):
    na, nb = em.nd(s.args[0]), em.nd(s.args[1])
    if na == 0 or nb == 0:
        return B.binop(v[0], "*", v[1])
    if na > 2 or nb > 2:
        return emit_product(em, s, v)
    if em.input_language:       # ``np.dot`` and ``@`` agree on ranks 1 and 2
        return B.binop(v[0], "@", v[1])
    mm = _blas(em, *s.args)
    if mm == "_bmm":
        v = [_contiguous(em, a, x) for a, x in zip(s.args, v)]
    return B.call(em.helper(f"{mm}{na}{nb}"), *v)


def _vjp_product(em, s, p, g, pre_fwd, pre_rev, out):
    args = s.args
    arg = args[p]
    na, nb = em.nd(args[0]), em.nd(args[1])
    other = em.val(args[1 - p])
    if na == 0 or nb == 0:   # scalar dot
        contrib = em.reduce_to(arg, g * other, max(na, nb), False, pre_fwd, pre_rev)
        em.accumulate(arg.name, contrib, pre_fwd, pre_rev, out)
        return
    if na > 2 or nb > 2:
        vjp_product(em, s, p, g, pre_fwd, pre_rev, out)
        return
    mm = _blas(em, args[1 - p])        # the adjoint g is float64
    if mm == "_bmm":
        other = _contiguous(em, args[1 - p], other)
    o = X(gast.Attribute(value=other.node, attr="T", ctx=gast.Load()), True) \
        if em.nd(args[1 - p]) == 2 else other
    if (na, nb) == (2, 2):
        contrib = B.call(em.helper(f"{mm}22"), g, o) if p == 0 else B.call(em.helper(f"{mm}22"), o, g)
    elif (na, nb) == (2, 1):
        contrib = B.call(em.helper("_outer"), g, other) if p == 0 else B.call(em.helper(f"{mm}21"), o, g)
    elif (na, nb) == (1, 2):
        contrib = B.call(em.helper(f"{mm}21"), other, g) if p == 0 else B.call(em.helper("_outer"), other, g)
    else:
        contrib = B.binop(g, "*", other)
    em.accumulate(arg.name, X(contrib, True), pre_fwd, pre_rev, out)


for _name in ("matmul", "dot"):
    register(Primitive(_name, _product_type, _emit_product, arity=2, numpy=(_name,),
                       operators=("MatMult",) if _name == "matmul" else (), cost=CostClass.CALL))
    defstructural(_name, _vjp_product, (0, 1))
    deflinear(_name, (0, 1))      # forward mode: bilinear, dA @ B + A @ dB


# ------------------------------------------------------------------ np.linalg.solve
def _solve_type(c, s, ts):
    a, b = ts
    if not isinstance(a, Array) or a.ndim != 2:
        raise err(s, f"np.linalg.solve needs a 2-D matrix A, not a {nd(a)}-D value",
                  "solve(A, b) with A square 2-D and b 1-D or 2-D")
    if not isinstance(b, Array) or b.ndim not in (1, 2):
        raise err(s, f"np.linalg.solve needs a 1-D or 2-D right-hand side b, not a {nd(b)}-D value",
                  "solve(A, b) with A square 2-D and b 1-D or 2-D")
    return make("f64", b.ndim)


def _emit_solve(em, s, v):
    if em.input_language:
        return B.call("np.linalg.solve", *v)
    return B.call(em.helper(f"_solve{em.nd(s.args[1])}"), *v)


def _vjp_solve(em, s, p, g, pre_fwd, pre_rev, out):
    a, b = (em.val(x) for x in s.args)
    if p == 1:
        contrib = B.call(em.helper(f"_solve_adj_b{em.nd(s.args[1])}"), a, g)
    else:
        contrib = B.call(em.helper(f"_solve_adj_a{em.nd(s.args[1])}"), a, b, g)
    em.accumulate(s.args[p].name, X(contrib, True), pre_fwd, pre_rev, out)


register(Primitive("solve", _solve_type, _emit_solve, arity=2, linalg=("solve",),
                   cost=CostClass.CALL))
defstructural("solve", _vjp_solve, (0, 1))


def _jvp_solve(em, s, dots, out):
    """dx = solve(A, db - dA @ x), with x = ``out``."""
    a, b = s.args
    nb = em.nd(b)
    rhs = None if dots[1] is None else em.val(dots[1])
    if dots[0] is not None:
        prod = X(B.binop(em.val(dots[0]), "@", out) if em.input_language
                 else B.call(em.helper(f"_bmm2{nb}"), em.val(dots[0]), out), True)
        rhs = -prod if rhs is None else rhs - prod
    if em.input_language:
        return X(B.call("np.linalg.solve", em.val(a), rhs), True)
    return X(B.call(em.helper(f"_solve{nb}"), em.val(a), rhs), True)


defjvp("solve", _jvp_solve)
