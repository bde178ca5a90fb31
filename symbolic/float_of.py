"""Integer values taken in floating point: ``float_of(n)``, and ``in_floats`` for closed forms.

A closed form of a float variable multiplies the trip count and the loop's integer bounds
(``n*n*n*r**n``, ``n**4/(r - 1)``).  Printed as they are, those products are int64 ones in
Numba and wrap around at 2**63 (the d/dr of ``s += c*i*i*i*p; p *= r`` had the wrong sign from
n = 55,109), where the loop computes ``c*i*i*i`` in floats from its first multiply on.

Requires: SymPy expressions; ``in_floats``'s ``whole`` the trip count (an expression or a
symbol) and ``is_int`` telling the integer-valued symbols of the expression.

Guarantees:

* ``float_of(x)`` is the value of ``x`` as a float: it prints as ``float(x)`` through
  ``coarsen.symbolic.to_python``; a number gives the number itself (exact SymPy arithmetic
  stays exact: a constant trip count folds as before); it is real, its integer-valuedness
  is ``integer_valued``'s business (SymPy's ``is_integer`` of it is unknown, so no integer-typed
  temporary is made of it), it has no derivative (an integer is piecewise constant) and it
  never raises;
* ``in_floats(expr, whole, is_int)`` is ``expr`` with the trip count ``whole`` and every other
  integer symbol in ``float_of``: every product, power and sum of them is then a float one
  (``r**float(n)`` is C's ``pow``, accurate where Numba's ``r**n`` of an int ``n`` is repeated
  multiplication); the trip count keeps its integer arithmetic inside (``float(max(0, n))``);
* ``integer_valued(e)``: whether ``e`` is an integer once ``float_of`` is taken off (the
  printer multiplies such factors first, exact while below 2**53).
"""
from __future__ import annotations

import sympy

__all__ = ["float_of", "in_floats", "integer_valued"]


class float_of(sympy.Function):
    """``float(x)``: an integer value computed with in floating point."""

    nargs = 1

    @classmethod
    def eval(cls, x):
        if x.is_Number or isinstance(x, float_of):
            return x
        return None

    def fdiff(self, argindex=1):
        return sympy.S.Zero

    def _eval_derivative(self, s):
        return sympy.S.Zero

    def _eval_is_real(self):
        return self.args[0].is_real

    def _eval_is_nonnegative(self):
        return self.args[0].is_nonnegative

    def _eval_is_positive(self):
        return self.args[0].is_positive

    def _eval_evalf(self, prec):
        return self.args[0].evalf(prec)


def integer_valued(e) -> bool:
    """Is ``e`` an integer, reading each ``float_of(x)`` as ``x``?"""
    if not e.has(float_of):
        return bool(e.is_integer)
    return bool(e.replace(lambda a: isinstance(a, float_of), lambda a: a.args[0]).is_integer)


def in_floats(expr, whole, is_int):
    """``expr`` with ``whole`` (the trip count) and the integer symbols (``is_int(symbol)``)
    outside it as ``float_of``; see the module docstring."""
    hole = sympy.Dummy("trips")
    e = expr.xreplace({whole: hole}) if whole is not None else expr
    ints = {s: float_of(s) for s in e.free_symbols if s != hole and is_int(s)}
    e = e.xreplace(ints)
    return e.xreplace({hole: float_of(whole)}) if whole is not None else e
