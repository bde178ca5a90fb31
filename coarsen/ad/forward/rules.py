"""The tangent of one assignment, from the primitive registry's forward rule.

Requires: a forward emitter (``coarsen.ad.forward.emitter.ForwardEmitter``: ``active``,
``dot``, ``val``, ``nd``, ``is_arr``, ``substituted``) and the registry
(``coarsen.ir.primitives``: ``forward_rule``).
Guarantees: ``tangent(em, s, out)`` returns the gast expression of the tangent of ``s.target``
after ``s``, or ``None`` when it is zero (no operand through which derivatives flow has a
tangent: the symbolic zero, never materialized here).  Zero tangents drop their terms: only
operands that are active (``Facts.active``) contribute.  The rule shapes:

* ``partials`` (element-wise ``defvjp``): ``sum_i partial_i * dot_i`` (a partial ``1.0`` adds
  the tangent itself, ``-1.0`` its negation; a partial that is the primal expression itself,
  ``exp``'s, reads the result instead of evaluating it again); broadcasting happens in the arithmetic, and
  where an array operand has no tangent the sum is broadcast to the result's shape
  (``+ np.zeros_like(out)``), so the tangent always has the result's shape; a bare tangent
  variable of an array is copied (``.copy()``) unless the primitive is a view, so a later store
  into the result never writes into an operand's tangent;
* ``linear`` (``deflinear``): the primitive's own emitter on the statement with one operand
  replaced by its tangent, summed over the operands that have one (views stay views, copies
  copies, as in the primal);
* ``jvp`` (``defjvp``): the rule's expression;
* no rule, or ``refuse_jvp``: ``CoarsenError`` at the statement, before code is generated.

``out`` is the primal result's expression (``codegen.build.X``), valid where the tangent is
evaluated.
"""
from __future__ import annotations

import gast

from ...ir.nodes import Array, Const, Var
from ...ir.primitives import err, forward_rule, primitive
from ...codegen import build as B
from ...codegen.build import X

HINT = ("forward mode (coarsen.jvp) has no rule for it; use coarsen.differentiate (reverse "
        "mode), or keep the differentiated inputs away from it")


def active_positions(em, s):
    """The operand positions of ``s`` through which a tangent flows (active variables)."""
    prim = primitive(s.op)
    return [p for p in prim.diff_positions(len(s.args))
            if isinstance(s.args[p], Var) and s.args[p].name in em.active]


def _is_one(node):
    return isinstance(node, gast.Constant) and node.value == 1.0 and not isinstance(node.value, bool)


def _is_minus_one(node):
    return isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub) and _is_one(node.operand)


def _add(terms):
    """The sum of ``(sign, X)`` terms (``a - b`` for a negative term after the first)."""
    sign, out = terms[0]
    out = out if sign > 0 else -out
    for sign, t in terms[1:]:
        out = out + t if sign > 0 else out - t
    return out


def _same(a, b):
    """Are the gast expressions ``a`` and ``b`` the same text?"""
    return type(a) is type(b) and gast.dump(a) == gast.dump(b)


def check_refused(em, s):
    """Raise ``CoarsenError`` at ``s`` when a tangent flows into a primitive that forward mode
    refuses (``refuse_jvp``): also for statements lifted into a segment, whose tangents come
    from the segment's partials (``coarsen.ad.forward.segments``)."""
    prim = primitive(s.op)
    if forward_rule(prim) == "refused" and active_positions(em, s):
        why = prim.jvp_refused
        raise err(s, why(s) if callable(why) else
                  f"forward mode cannot differentiate {s.op!r}: {why}", HINT)


def tangent(em, s, out):
    """The tangent expression of ``s.target`` after ``s`` (see the module docstring)."""
    pos = active_positions(em, s)
    if not pos:
        return None
    check_refused(em, s)
    prim = primitive(s.op)
    how = forward_rule(prim)
    n = len(s.args)
    dots = tuple(Var(em.dot(s.args[p].name)) if p in pos else None for p in range(n))
    target_arr = isinstance(em.types.get(s.target), Array)
    if how == "jvp":
        return B.ex(prim.jvp(em, s, dots, out))
    if how == "linear":
        lin = {p % n for p in prim.linear}
        terms = [(1, X(em.substituted(s, {p: dots[p]}), target_arr)) for p in pos if p in lin]
        if not terms:
            return None
        return B.ex(_add(terms))
    if how == "partials":
        vals = [em.val(a) for a in s.args]
        primal_node = B.ex(em.primal(s))
        terms = []
        for p in pos:
            rule = prim.partials[p]
            if prim.partials_see_constants:
                partial = rule(*vals, consts=tuple(a.value if isinstance(a, Const) else None
                                                   for a in s.args))
            else:
                partial = rule(*vals)
            pn = B.ex(partial)
            if _same(pn, primal_node):     # exp: the partial is the result itself
                pn = B.ex(out)
            d = em.val(dots[p])
            if _is_one(pn):
                terms.append((1, d))
            elif _is_minus_one(pn):
                terms.append((-1, d))
            elif prim.name == "pow" and p == 1:
                # x**y's partial in y, log(x) x**y, is nan at x < 0 (Python's math.log raises)
                # where x**y itself is defined (an integer y): along a direction that does not
                # move y the term is 0, as reverse mode leaves it out of x's adjoint
                dx = X(d) if not isinstance(d, X) else d
                term = X(pn, getattr(partial, "array", False)) * dx
                terms.append((1, B.select(dx.cmp("==", 0.0), 0.0, term)))
            else:
                terms.append((1, X(pn, getattr(partial, "array", False)) * d))
        expr = B.ex(_add(terms))
        if target_arr:
            arrays = [p for p, a in enumerate(s.args) if em.is_arr(a)]
            if not all(p in pos for p in arrays):
                # an array operand without a tangent may give the result its shape
                expr = B.binop(expr, "+", B.call("np.zeros_like", B.ex(out)))
            elif isinstance(expr, gast.Name) and not prim.view:
                expr = B.call(gast.Attribute(value=expr, attr="copy", ctx=gast.Load()))
        return expr
    raise err(s, f"forward mode has no rule for {s.op!r}", HINT)
