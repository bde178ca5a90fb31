"""Lifted algebra that stays what float64 computes.

Requires: the SymPy expressions ``coarsen.ad.lift.Lifter`` builds for a segment's statements,
and the symbols it gives the statements' values (``record``).
Guarantees: SymPy's sums and products are exact, so it folds what float64 rounds; a closed
form or a recomputed value would then not be what the code computes.  ``FloatAlgebra.problem``
names, for a float ``add``/``sub``/``mul``/``div`` of two operands, a term or factor that
cancels once the sums and products its symbols hold are expanded (``(x*0.5 + C) - C``,
Kahan's ``(t - s) - y``, ``(x + 1.0) - 1.0``, ``(x*1024.0)/1024.0``, ``x/x``), or None; the
lifter then keeps the segment fine-grained, statement by statement.  ``fold_float_constants``
folds two float constants as float64 folds them (SymPy's Floats would give ``(3.3 + C) - C``
as 3.3 where the code computes 3.0).  Never mutates the expressions it reads.
"""
from __future__ import annotations

import sympy

__all__ = ["FloatAlgebra", "fold_float_constants"]

_FOLDS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b}


def fold_float_constants(op, operands):
    """The float64 value of ``op`` of two SymPy Floats, or None for anything else."""
    if op in _FOLDS and len(operands) == 2 and all(isinstance(x, sympy.Float) for x in operands):
        return _FOLDS[op](float(operands[0]), float(operands[1]))
    return None


def _cancelling(parts, skip=()):
    """The first key of ``parts`` ((key, signed number) pairs) seen with both signs."""
    signs = {}
    for key, k in parts:
        if key in skip or not (k.is_positive or k.is_negative):
            continue
        seen = signs.setdefault(key, set())
        seen.add(bool(k.is_positive))
        if len(seen) == 2:
            return key
    return None


class FloatAlgebra:
    """The sums and products a segment's symbols hold, and the cancellations they would let
    SymPy fold (see the module docstring)."""

    def __init__(self):
        self.sums = {}          # symbol -> its value as (term, coefficient) pairs
        self.products = {}      # symbol -> its value as (base, exponent) pairs

    def terms(self, e, sign=1):
        """``e`` as (term, coefficient) pairs, the sums its symbols hold expanded."""
        out = []
        for arg in sympy.Add.make_args(e):
            c, rest = arg.as_coeff_Mul()
            for t, k in self.sums.get(rest, ((rest, 1),)):
                out.append((t, sign * c * k))
        return out

    def factors(self, e, sign=1):
        """``e`` as (base, exponent) pairs, the products its symbols hold expanded."""
        out = []
        for arg in sympy.Mul.make_args(e):
            b, x = arg.as_base_exp()
            for f, k in self.products.get(b, ((b, sympy.S.One),)) if x == 1 else ((b, x),):
                out.append((f, sign * k))
        return out

    def record(self, sym, e):
        """``sym`` holds ``e``: later sums and products see its terms and factors."""
        terms = self.terms(e)
        if len(terms) > 1:
            self.sums[sym] = tuple(terms)
        factors = self.factors(e)
        if len(factors) > 1:
            self.products[sym] = tuple(factors)

    def problem(self, op, operands, lineno):
        """Why ``op`` of two float ``operands`` cannot be lifted exactly, or None."""
        if len(operands) != 2:
            return None
        a, b = operands
        if op in ("add", "sub"):
            t = _cancelling(self.terms(a) + self.terms(b, -1 if op == "sub" else 1))
            if t is not None:
                what = "a constant" if t == 1 else f"the term {sympy.sstr(t)}"
                return (f"a float sum in which {what} cancels (line {lineno}): the code relies on "
                        "float64 rounding, which exact algebra would drop")
        elif op in ("mul", "div"):
            f = _cancelling(self.factors(a) + self.factors(b, -1 if op == "div" else 1), (1, -1))
            if f is not None:
                return (f"a float product in which {sympy.sstr(f)} cancels (line {lineno}): the "
                        "code relies on float64 rounding, which exact algebra would drop")
        return None
