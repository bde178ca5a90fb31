"""Matrix products: ``matmul`` (``@``) and ``dot``, of 1-D and 2-D arrays (``dot`` also of
scalars); ``einsum`` of two operands; ``solve`` (``np.linalg.solve``).

Requires: ``core``, ``coarsen.codegen.build``; the runtime helpers ``_mm*``, ``_outer``, ``_solve*`` (Gaussian elimination: no LAPACK)
and the per-spec ``_ein_*`` loop nests (``coarsen.codegen.runtime``).  The frontend
(``coarsen.frontend.static_attrs``) gives ``einsum`` its spec string as the ``spec`` attribute.
Guarantees: type rules (ranks above 2 are refused; ``solve`` takes a 2-D ``A`` and a 1-D or
2-D ``b``; ``einsum`` takes an explicit ``a,b->out`` spec of letters, each at most once per
operand, output letters among the operands', operand ranks matching), the emitted primal
(loops in the runtime helpers, which check the inner dimensions and, for ``solve``, raise
``np.linalg.LinAlgError`` on a singular matrix; where the emitter asks for coarsen's input
language, ``em.input_language``, the primal and the tangents are ``a @ b``,
``np.linalg.solve`` and ``np.einsum`` instead), and the VJPs ``A_bar += g @ B.T``, ``B_bar += A.T @ g`` in every rank combination; for ``solve``
``gb = solve(A.T, g)``, ``b_bar += gb``, ``A_bar -= gb x^T`` with ``x = solve(A, b)`` recomputed
from ``A`` and ``b``; for ``einsum`` the adjoint of an operand is again an einsum, of the
output's adjoint and the other operand, summed over the letters that operand lacks.
Forward mode: the products and ``einsum`` are bilinear (``deflinear(name, (0, 1))``: the same
op with one operand replaced by its tangent, summed); ``solve``'s tangent is
``solve(A, db - dA @ x)``.
"""
from __future__ import annotations

from ...codegen import build as B
from ...codegen.build import X
from ...codegen import runtime as R
from ..nodes import Array, Scalar
from .core import (CostClass, Primitive, defjvp, deflinear, defstructural, dt, dtype_join, err,
                   make, nd, register)


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
    if em.input_language:       # ``np.dot`` and ``@`` agree on ranks 1 and 2
        return B.binop(v[0], "@", v[1])
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
                 else B.call(em.helper(f"_mm2{nb}"), em.val(dots[0]), out), True)
        rhs = -prod if rhs is None else rhs - prod
    if em.input_language:
        return X(B.call("np.linalg.solve", em.val(a), rhs), True)
    return X(B.call(em.helper(f"_solve{nb}"), em.val(a), rhs), True)


defjvp("solve", _jvp_solve)


# ------------------------------------------------------------------ np.einsum
EINSUM_HINT = ("np.einsum is supported for two operands with an explicit output, letters only, "
               "each at most once per operand: np.einsum('ij,jk->ik', A, B)")


def einsum_specs(s):
    """(a, b, out) of an einsum statement's ``spec`` attribute, or a CoarsenError."""
    spec = s.attr("spec")
    if not isinstance(spec, str) or "->" not in spec:
        raise err(s, "np.einsum needs an explicit output ('...->...')", EINSUM_HINT)
    if "." in spec:
        raise err(s, "np.einsum with an ellipsis ('...') is not supported", EINSUM_HINT)
    ins, out = spec.split("->", 1)
    parts = ins.split(",")
    if len(parts) != 2:
        raise err(s, f"np.einsum with {len(parts)} operand(s) in the spec is not supported",
                  EINSUM_HINT)
    for part in parts + [out]:
        if not all(ch.isascii() and ch.isalpha() for ch in part):
            raise err(s, f"np.einsum spec {spec!r}: only letters may name indices", EINSUM_HINT)
        if len(set(part)) != len(part):
            raise err(s, f"np.einsum spec {spec!r}: an index repeated within one operand "
                         "(a diagonal or trace) is not supported", EINSUM_HINT)
    a, b = parts
    for ch in out:
        if ch not in a and ch not in b:
            raise err(s, f"np.einsum spec {spec!r}: the output index {ch!r} is in no operand")
    return a, b, out


def _einsum_type(c, s, ts):
    if len(ts) != 2:
        raise err(s, f"np.einsum of {len(ts)} operand(s) is not supported", EINSUM_HINT)
    a, b, out = einsum_specs(s)
    for k, (spec, t) in enumerate(zip((a, b), ts)):
        if nd(t) != len(spec):
            raise err(s, f"np.einsum: operand {k + 1} is {nd(t)}-D but the spec gives it "
                         f"{len(spec)} ind{'ex' if len(spec) == 1 else 'ices'} ({spec!r})")
    if dt(ts[0]) != "f64" and dt(ts[1]) != "f64":
        raise err(s, "np.einsum of two integer or boolean operands is not supported",
                  "convert one of them: x.astype(np.float64)")
    return make("f64", len(out))


def _emit_einsum(em, s, v):
    a, b, out = einsum_specs(s)
    if em.input_language:
        return B.call("np.einsum", B.const(f"{a},{b}->{out}"), *v)
    return B.call(em.helper(R.einsum(a, b, out)), *v)


def _vjp_einsum(em, s, p, g, pre_fwd, pre_rev, out_):
    specs = einsum_specs(s)
    out = specs[2]
    mine, other = specs[p], specs[1 - p]
    arg = s.args[p]
    args = [g, em.val(s.args[1 - p])]
    if any(ch not in out and ch not in other for ch in mine):   # letters summed in arg alone
        shape = em.shape_of(arg, pre_fwd, pre_rev) if arg.name in em.f.set_temps \
            else B.attr(f"{em.bar(arg.name)}.shape")
        args.append(shape)
    contrib = B.call(em.helper(R.einsum(out, other, mine)), *args)
    em.accumulate(arg.name, X(contrib, len(mine) > 0), pre_fwd, pre_rev, out_)


register(Primitive("einsum", _einsum_type, _emit_einsum, arity=2, numpy=("einsum",),
                   cost=CostClass.CALL))
defstructural("einsum", _vjp_einsum, (0, 1))
deflinear("einsum", (0, 1))       # forward mode: bilinear
