"""Custom derivative rules (``@coarsen.custom_vjp``, ``@coarsen.custom_jvp``) as primitives.

Requires: ``core``, ``coarsen.codegen.build``, the runtime helper ``_custom_shape``; the frontend
(``coarsen.frontend.custom_calls``) builds these statements around the inlined rules.
Guarantees: four primitives, none of them liftable to SymPy (a segment of interest never spans
a custom call), each with a type rule that names the rule and the call site when the rule's
result has the wrong type:

* ``custom_stop(x)``: ``x`` (a copy for arrays: the rules never alias the caller's arrays, which
  it may write later) with no derivative; the rules' inputs, so what a rule computes from them
  (a solver's iterations) is never differentiated;
* ``custom_seed(x)``: zero shaped like ``x``, with derivative 1: the tangents passed to a
  ``custom_jvp`` rule, so differentiating the rule's tangent output (linear in the tangents)
  with respect to them gives the rule's Jacobian, in both modes;
* ``custom_jvp_out(p, t)``: ``p`` (a copy for arrays), derivative 1 with respect to ``t``, 0
  with respect to ``p``: a ``custom_jvp`` call's value, whose derivative is its tangent output;
  ``t`` must have ``p``'s type (checked here) and shape (checked when it runs);
* ``custom_vjp_out(out, r_1..r_k, x_1..x_n)`` (``attrs``: ``backward``, a ``BackwardRule``
  with k residual placeholders): ``out`` (a copy for arrays), whose adjoint ``g`` runs the
  backward rule on the residuals and ``g`` in the reverse sweep (``coarsen.ad.custom_backward``,
  through ``emitter.custom_backward``, once per call) and adds its k-th cotangent to the k-th
  float argument's adjoint.  There must be one cotangent per float argument, or one per
  argument (an int or bool argument's is dropped: ``float_arguments``), each float argument's
  of its type (checked here, on a typed copy of the rule: ``checker.typed_backward``) and shape
  (checked when it runs).  Forward mode refuses it (a ``CoarsenError`` at the call).

Every message names the rule and the call site (``attrs``: ``rule``, ``site``, ``params``).
"""
from __future__ import annotations

from dataclasses import dataclass

import gast

from ...codegen import build as B
from ...codegen.build import X
from ..nodes import Array, Const, F64, Scalar, Var, is_float
from .core import CostClass, Primitive, defjvp, defstructural, defvjp, err, refuse_jvp, register


def _same_type(c, s, ts):
    return ts[0]


def _emit_stop(em, s, v):
    if em.is_arr(s.args[0]):
        return B.call(gast.Attribute(value=B.ex(v[0]), attr="copy", ctx=gast.Load()))
    return B.ex(v[0])


def _emit_seed(em, s, v):
    if em.is_arr(s.args[0]):
        return B.call("np.zeros_like", v[0])
    kind = operand_type(em.types, s.args[0]).kind
    return B.const({"f64": 0.0, "i64": 0, "bool": False}[kind])


def _one(*_):
    return X(1.0)


def _describe(t):
    if isinstance(t, Array):
        return f"a {t.ndim}-D {t.dtype} array"
    return {"f64": "a float", "i64": "an int", "bool": "a bool"}.get(t.kind, str(t))


def _message(s, problem):
    """``problem`` prefixed with the rule's name and call site (for run-time errors)."""
    return f"coarsen: the {s.attr('kind')} rule {s.attr('rule')} (called at {s.attr('site')}) {problem}"


def _shape_checked(em, s, value, a, b, problem):
    """``value``, after a run-time check that the shapes ``a`` and ``b`` are equal."""
    return B.call(em.helper("_custom_shape"), value, a, b,
                  gast.Constant(value=_message(s, problem), kind=None))


def _shape(value):
    return gast.Attribute(value=B.ex(value), attr="shape", ctx=gast.Load())


# ------------------------------------------------------------------ custom_jvp
def _jvp_out_type(c, s, ts):
    p, t = ts
    rule = s.attr("rule")
    if not is_float(p):
        raise err(s, f"the custom_jvp rule {rule} returns {_describe(p)} as its primal output",
                  "a custom_jvp rule returns (primal_out, tangent_out) with a float primal_out")
    if t != p:
        raise err(s, f"the custom_jvp rule {rule} returns a tangent that is {_describe(t)}, "
                  f"but its primal output is {_describe(p)}",
                  "return a tangent_out of primal_out's shape and dtype")
    return p


def _emit_jvp_out(em, s, v):
    if not em.is_arr(s.args[0]):
        return B.ex(v[0])
    checked = _shape_checked(em, s, v[0], _shape(v[1]), _shape(v[0]),
                             "returned a tangent whose shape is not the primal output's")
    return B.call(gast.Attribute(value=checked, attr="copy", ctx=gast.Load()))


def _vjp_jvp_out(em, s, p, g, pre_fwd, pre_rev, out):
    em.accumulate(s.args[p].name, g, pre_fwd, pre_rev, out)


def _jvp_jvp_out(em, s, dots, out):
    if dots[1] is None:
        return X(B.const(0.0))      # not reached: p (operand 0) never has a tangent
    return em.val(dots[1])


# ------------------------------------------------------------------ custom_vjp
def operand_type(types, a):
    """The IR type of operand ``a`` (``types``: variable -> type)."""
    if isinstance(a, Const):
        v = a.value
        return Scalar("bool") if isinstance(v, bool) else Scalar("i64") if isinstance(v, int) else F64
    return types.get(a.name)


@dataclass(frozen=True, eq=False)
class BackwardRule:
    """A ``custom_vjp`` call's backward rule, lowered apart from the function (the reverse sweep
    runs it): ``body`` (untyped IR) reads the placeholders ``residuals`` (one per residual) and
    ``g`` (the output's adjoint) and leaves ``cotangents`` (operands, one per float argument)."""
    name: str
    residuals: tuple
    g: str
    body: tuple
    cotangents: tuple
    filename: str
    temps: frozenset

    def __repr__(self):
        return self.name


def float_arguments(s, types_of):
    """``{position of a float argument: index of its cotangent}`` for a ``custom_vjp_out``
    statement ``s``; ``types_of(k)`` is operand ``k``'s type.  The backward rule returns one
    cotangent per float argument of this call, or, as JAX asks, one per argument: then the
    cotangents of int and bool arguments (``root(2, b)`` with ``root(a, b)``) are dropped, so
    one rule serves every call site.  None where its count is neither."""
    bw = s.attr("backward")
    first = 1 + len(bw.residuals)
    floats = [k for k in range(first, len(s.args)) if is_float(types_of(k))]
    if len(bw.cotangents) == len(floats):
        return {k: j for j, k in enumerate(floats)}
    if len(bw.cotangents) == len(s.args) - first:
        return {k: k - first for k in floats}
    return None


def _param(s, k):
    return s.attr("params")[k - 1 - len(s.attr("backward").residuals)]


def _vjp_out_type(c, s, ts):
    bw = s.attr("backward")
    if not is_float(ts[0]):
        raise err(s, f"the custom_vjp forward rule {s.attr('fwd')} returns {_describe(ts[0])} "
                  "as its output", "return a float or a float array, and its residuals")
    nres = len(bw.residuals)
    sub = c.typed_backward(bw, ts[1:1 + nres], ts[0])
    cts = [operand_type(sub.types, ct) for ct in bw.cotangents]
    pairs = float_arguments(s, lambda k: ts[k])
    if pairs is None:
        first = 1 + nres
        names = [_param(s, k) for k in range(first, len(s.args)) if is_float(ts[k])]
        raise err(s, f"the custom_vjp rule {bw.name} returns {len(cts)} cotangent(s), but "
                  f"{s.attr('primal')} has {len(names)} float argument(s) here"
                  + (f" ({', '.join(names)})" if names else "")
                  + f" and {len(s.args) - first} argument(s) in all",
                  "return a tuple with one cotangent per argument (those of int arguments are "
                  "dropped), or one per float argument, in order")
    for k, j in pairs.items():
        if cts[j] != ts[k]:
            raise err(s, f"the custom_vjp rule {bw.name} returns a cotangent for {_param(s, k)!r} "
                      f"that is {_describe(cts[j])}, but {_param(s, k)!r} is {_describe(ts[k])}",
                      "return each cotangent with its argument's shape and dtype")
    return ts[0]


def _emit_vjp_out(em, s, v):
    if em.is_arr(s.args[0]):      # a copy: the result never aliases a residual
        return B.call(gast.Attribute(value=B.ex(v[0]), attr="copy", ctx=gast.Load()))
    return B.ex(v[0])


def _vjp_vjp_out(em, s, p, g, pre_fwd, pre_rev, out):
    """``x_bar += ct`` for the float argument at ``p``; the backward rule runs (once per
    call) before the first active argument's update."""
    bw = s.attr("backward")
    pairs = float_arguments(s, lambda k: operand_type(em.types, s.args[k]))
    if p not in pairs:          # the output and the residuals have no adjoint
        return
    active = [k for k in pairs if isinstance(s.args[k], Var) and s.args[k].name in em.active]
    nres = len(bw.residuals)
    if p == active[0]:
        code, _ = em.custom_backward(bw, s.args[1:1 + nres], g, operand_type(em.types, s.args[0]))
        out.extend(code)
    ct = bw.cotangents[pairs[p]]
    x = s.args[p]
    if isinstance(ct, Const):
        value = X(B.const(ct.value))
    else:
        value = X(B.name(ct.name), em.is_arr(x))
    if em.is_arr(x):
        shape = (em.shape_of(x, pre_fwd, pre_rev) if x.name in em.f.set_temps
                 else B.attr(f"{em.bar(x.name)}.shape"))
        problem = f"returned a cotangent for {_param(s, p)!r} whose shape is not the shape of {_param(s, p)!r}"
        value = X(_shape_checked(em, s, value, _shape(value), shape, problem), True)
    em.accumulate(x.name, value, pre_fwd, pre_rev, out)


@dataclass
class _EveryOperand(Primitive):
    """A primitive whose every operand may carry a derivative (``custom_vjp_out``: which are
    the float arguments depends on the operands' types; its VJP skips the others)."""

    def diff_positions(self, nargs):
        return tuple(range(nargs))


register(Primitive("custom_stop", _same_type, _emit_stop, arity=1, zero=True,
                   cost=CostClass.FREE))
register(Primitive("custom_seed", _same_type, _emit_seed, arity=1, cost=CostClass.FREE))
defvjp("custom_seed", _one)
register(Primitive("custom_jvp_out", _jvp_out_type, _emit_jvp_out, arity=2,
                   cost=CostClass.CALL))
defstructural("custom_jvp_out", _vjp_jvp_out, (1,))
defjvp("custom_jvp_out", _jvp_jvp_out)
register(_EveryOperand("custom_vjp_out", _vjp_out_type, _emit_vjp_out, cost=CostClass.CALL))
defstructural("custom_vjp_out", _vjp_vjp_out, ())
refuse_jvp("custom_vjp_out", lambda s: (
    f"forward mode cannot differentiate {s.attr('primal')}(): a custom_vjp function has no "
    "forward-mode rule; give it a custom_jvp rule instead (@coarsen.custom_jvp and f.defjvp) "
    "to use it under coarsen.jvp"))
