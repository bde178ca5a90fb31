"""Numerically stable rewrites and cheap local tidying, with predictable cost.

Requires: SymPy expressions of bounded size (callers check them against a Budget first).

Guarantees:

* ``stable_rewrite(expr)`` applies ``sympy.codegen.rewriting`` optimizations that map to Python's
  ``math`` module: ``exp(x) - 1 -> expm1(x)``, ``log(1 + x) -> log1p(x)``, and
  ``log(exp(a) + exp(b)) -> logaddexp(a, b)`` only when ``a`` and ``b`` are cheap (at most
  ``LOGADDEXP_MAX_ARG_OPS`` ops each, because the stable printed form evaluates them twice).
  Each rewrite is an exact identity; it never raises the op count by more than the stable forms'
  call overhead.
* ``tidy(expr)`` tries ``sympy.cancel`` (polynomial gcd over the expression's generators) on small
  expressions only (at most ``TIDY_MAX_OPS`` ops and ``TIDY_MAX_GENS`` generators) and keeps the
  result only if it has strictly fewer ops.  This is what turns
  ``(-(y/p - (1 - y)/(1 - p))) * p*(1 - p)`` into ``p - y``.  No general ``simplify`` anywhere.
"""
from __future__ import annotations

import sympy
from sympy.codegen.rewriting import optimize, expm1_opt, log1p_opt, logaddexp_opt
from sympy.codegen.numpy_nodes import logaddexp

from .ops import count_ops

__all__ = ["stable_rewrite", "tidy", "TIDY_MAX_OPS", "TIDY_MAX_GENS", "LOGADDEXP_MAX_ARG_OPS"]

TIDY_MAX_OPS = 48
TIDY_MAX_GENS = 6
LOGADDEXP_MAX_ARG_OPS = 4


def stable_rewrite(expr, budget=None):
    """expm1/log1p (and cheap logaddexp) rewrites of ``expr``; see the module docstring."""
    if not isinstance(expr, sympy.Basic) or expr.is_Atom:
        return expr
    if not expr.has(sympy.exp, sympy.log):
        return expr
    if budget is not None:
        budget.check(expr)
    out = optimize(expr, [expm1_opt, log1p_opt, logaddexp_opt])
    if out.has(logaddexp):
        bad = any(count_ops(a) > LOGADDEXP_MAX_ARG_OPS
                  for node in out.atoms(logaddexp) for a in node.args)
        if bad:
            out = optimize(expr, [expm1_opt, log1p_opt])
    # keep the rewrite unless it made the expression clearly larger
    if count_ops(out) > count_ops(expr) + 2:
        return expr
    return out


def tidy(expr, budget=None):
    """Cheap exact rational tidying (``cancel``) of a small expression; keeps it only if smaller."""
    if not isinstance(expr, sympy.Basic) or expr.is_Atom:
        return expr
    n = count_ops(expr, limit=TIDY_MAX_OPS)
    if n > TIDY_MAX_OPS or n <= 1:
        return expr
    if expr.has(sympy.Piecewise) or any(getattr(f, "is_branch_phi", False)
                                         for f in expr.atoms(sympy.Function)):
        return expr
    if budget is not None:
        budget.check_time()
    try:
        gens = _generators(expr)
        if len(gens) > TIDY_MAX_GENS:
            return expr
        out = sympy.cancel(expr)
    except Exception:
        return expr
    if budget is not None:
        budget.check_time()
    m = count_ops(out, limit=n)
    return out if m < n else expr


def _generators(expr):
    """The non-polynomial 'atoms' cancel would treat as generators (symbols and function calls)."""
    gens = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        if e.is_Symbol or e.is_Function:
            gens.add(e)
        elif e.is_Pow and not e.exp.is_Integer:
            gens.add(e)
        elif e.args:
            stack.extend(e.args)
    return gens
