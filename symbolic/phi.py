"""The branch phi-function ``gamma(c, a, b)``: the value ``a`` when condition ``c`` holds, else ``b``.

Requires: ``c`` a SymPy Boolean (a relational such as ``x > 0``, ``And``/``Or``/``Not`` of them, a
Boolean symbol, or ``True``/``False``; Python bools are accepted), ``a`` and ``b`` expressions.

Guarantees:

* auto-evaluation: ``gamma(True, a, b) -> a``, ``gamma(False, a, b) -> b``, ``gamma(c, a, a) -> a``;
* differentiation: ``fdiff`` w.r.t. ``a`` is ``gamma(c, 1, 0)``, w.r.t. ``b`` is ``gamma(c, 0, 1)``,
  and ``diff(gamma(c, a, b), x) == gamma(c, diff(a, x), diff(b, x))``: the condition is piecewise
  constant, so it has no derivative (it is never differentiated, even when it mentions ``x``);
* ``gamma(c, a, b).rewrite(Piecewise) == Piecewise((a, c), (b, True))``; substituting numbers that
  decide ``c`` evaluates it;
* it prints as ``gamma(c, a, b)`` with ``str`` and as ``((a) if (c) else (b))`` through
  ``coarsen.symbolic.to_python``.  (SymPy's own ``lambdify`` would take the name for the
  Gamma function; always print through ``to_python``.)
"""
from __future__ import annotations

import sympy
from sympy.core.function import ArgumentIndexError
from sympy.core.logic import fuzzy_and

__all__ = ["gamma", "is_branch_phi"]


class gamma(sympy.Function):
    """Branch phi: ``gamma(c, a, b)`` is ``a`` if ``c`` else ``b``."""

    nargs = 3
    is_branch_phi = True

    @classmethod
    def eval(cls, c, a, b):
        if c is sympy.true:
            return a
        if c is sympy.false:
            return b
        if a == b:
            return a
        return None

    def fdiff(self, argindex=1):
        c = self.args[0]
        if argindex == 2:
            return gamma(c, sympy.S.One, sympy.S.Zero)
        if argindex == 3:
            return gamma(c, sympy.S.Zero, sympy.S.One)
        if argindex == 1:
            return sympy.S.Zero  # the condition is piecewise constant
        raise ArgumentIndexError(self, argindex)

    def _eval_derivative(self, s):
        c, a, b = self.args
        return gamma(c, a.diff(s), b.diff(s))

    def _eval_rewrite_as_Piecewise(self, c, a, b, **kwargs):
        return sympy.Piecewise((a, c), (b, True))

    def _eval_is_real(self):
        return fuzzy_and([self.args[1].is_real, self.args[2].is_real])

    def _eval_is_integer(self):
        return fuzzy_and([self.args[1].is_integer, self.args[2].is_integer])

    def _eval_evalf(self, prec):
        c, a, b = self.args
        if c is sympy.true:
            return a.evalf(prec)
        if c is sympy.false:
            return b.evalf(prec)
        return None


def is_branch_phi(e) -> bool:
    """True when ``e`` is an application of the branch phi (not SymPy's Gamma function)."""
    return isinstance(e, gamma)
