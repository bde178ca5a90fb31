"""Print SymPy expressions as Python expressions for Numba nopython code.

Requires: expressions built from arithmetic, ``math``-module functions, ``Abs``, ``Max``/``Min``,
``floor``/``ceiling``, ``sign``, ``Heaviside``, relationals and ``And``/``Or``/``Not``, the branch
phi ``gamma``, ``Piecewise`` whose last arm is ``True``, and the stable forms ``expm1``,
``log1p``, ``logaddexp``.  Anything else raises (the printer runs in SymPy's strict mode), never
prints something silently wrong.

Guarantees (built on SymPy's ``PythonCodePrinter``, settings ``fully_qualified_modules``,
``strict``):

* functions print as ``math.exp``, ``math.log``, ``math.expm1``, ``math.log1p``, ``math.sqrt``,
  ``math.sin``..., ``math.atan2``, ``math.erf``; ``Abs`` as ``abs``, ``Max``/``Min`` as
  ``max``/``min``;
* ``gamma(c, a, b)`` and ``Piecewise`` print as conditional expressions ``((a) if (c) else (b))``;
* rationals print as floats: ``0.5``, ``-0.25``, and ``(1.0/3.0)`` when the decimal does not
  terminate; Floats as ``repr(float)``; integers as integers; a product of such a rational
  ``p/q`` with integer-valued factors multiplies those first, in floats, then by ``p``, then
  divides by ``q`` (``(float(n)*(n - 1)*1/6)``: exact while the product is below 2**53);
  ``float_of(n)`` (``float_of`` module) prints as ``float(n)`` and counts as integer-valued there;
* powers: ``x**2``, ``x**3`` as ``(x*x)``, ``(x*x*x)``; ``x**-1``..``x**-3`` as ``(1.0/x)``,
  ``(1.0/(x*x))``...; ``x**0.5`` as ``math.sqrt(x)``, ``x**-0.5`` as ``(1.0/math.sqrt(x))``; any
  other power as ``x**n`` (parenthesized as needed);
* ``ceiling(p/q)`` prints as ``(-((-(p))//(q)))`` (exact for integers, and equal to the ceiling for
  floats); ``floor(p/q)`` as ``((p)//(q))``; other ceilings/floors via ``math.ceil``/``math.floor``;
* ``sign(x)`` as ``(0.0 if x == 0 else math.copysign(1.0, x))``; ``Heaviside(x, h0)`` as
  ``(1.0 if x > 0 else (h0 if x == 0 else 0.0))``; ``logaddexp(a, b)`` as the stable
  ``(max(a, b) + math.log1p(math.exp(-abs(a - b))))``;
* the guards of closed forms (never evaluated by SymPy, printed so that they never raise):
  ``PowerOutOfRange(b, e)`` as ``|e log|b|| > POWER_RANGE``, its halves ``PowerOverflows`` /
  ``PowerUnderflows`` as ``e log|b| > POWER_RANGE`` / ``< -POWER_RANGE`` (a zero base is in
  range), ``UnderflowCosts(slope, value)`` as the nan-safe ``not (|slope| * UNDERFLOW_SLACK <=
  |value| * 2**-53 + UNDERFLOW_SLACK and |value| <= DBL_MAX)``, and ``OrElse(a, b, ...)`` as
  ``a or b or ...`` in that order;
* output is deterministic: same expression, same string.
"""
from __future__ import annotations

import sympy
from sympy.logic.boolalg import BooleanFunction
from sympy.printing.pycode import PythonCodePrinter
from sympy.printing.precedence import precedence, PRECEDENCE

from .float_of import float_of, integer_valued
from .phi import gamma as _phi_gamma

__all__ = ["CoarsenPythonPrinter", "to_python", "assignments_to_python", "PowerOutOfRange",
           "POWER_RANGE", "PowerOverflows", "PowerUnderflows", "UnderflowCosts", "OrElse",
           "UNDERFLOW_SLACK"]


def _terminates(q: int) -> bool:
    for p in (2, 5):
        while q % p == 0:
            q //= p
    return q == 1


class CoarsenPythonPrinter(PythonCodePrinter):
    """PythonCodePrinter specialised for Numba nopython code using only ``math``."""

    printmethod = "_coarsen_pycode"

    def __init__(self, settings=None):
        s = {"fully_qualified_modules": True, "strict": True}
        s.update(settings or {})
        super().__init__(s)

    # numbers ---------------------------------------------------------------
    def _print_Rational(self, expr):
        p, q = int(expr.p), int(expr.q)
        if q == 1:
            return str(p)
        if _terminates(q):
            return repr(p / q)
        return "(%s/%s)" % (repr(float(p)), repr(float(q)))

    _print_Half = _print_Rational

    def parenthesize(self, item, level, strict=False):
        # positive rationals print as a float literal or an already parenthesized quotient
        if isinstance(item, sympy.Rational) and not item.is_Integer and item > 0:
            return self._print(item)
        return super().parenthesize(item, level, strict)

    def _print_Float(self, expr):
        return repr(float(expr))

    def _print_Integer(self, expr):
        return str(int(expr))

    def _print_BooleanTrue(self, expr):
        return "True"

    def _print_BooleanFalse(self, expr):
        return "False"

    # powers ----------------------------------------------------------------
    def _print_Pow(self, expr, rational=False):
        b, e = expr.base, expr.exp
        if e == sympy.S.Half:
            return "math.sqrt(%s)" % self._print(b)
        if e == -sympy.S.Half:
            return "(1.0/math.sqrt(%s))" % self._print(b)
        if e.is_Integer and 1 <= abs(int(e)) <= 3:
            bs = self.parenthesize(b, PRECEDENCE["Pow"], strict=False)
            prod = "*".join([bs] * abs(int(e)))
            if int(e) > 0:
                return "(%s)" % prod if abs(int(e)) > 1 else bs
            if abs(int(e)) == 1:
                return "(1.0/%s)" % bs
            return "(1.0/(%s))" % prod
        if e.is_Float and float(e) == 0.5:
            return "math.sqrt(%s)" % self._print(b)
        PREC = precedence(expr)
        bs = self.parenthesize(b, PREC, strict=True)
        es = self.parenthesize(e, PREC, strict=True)
        if e.is_Rational and not e.is_Integer:
            es = self._print(e)
            if not es.startswith("("):
                es = "(%s)" % es
        return "%s**%s" % (bs, es)

    # phis and conditionals -------------------------------------------------
    def _print_Mul(self, expr):
        # a rational coefficient that has no exact float (1/6 of n (n - 1) (2n - 1)): the
        # integer-valued factors are multiplied first, in floats, times p, then divided by q,
        # so a closed form's integer coefficient comes out exact (91 for n = 7, not
        # 90.99999999999999: a chaotic loop amplifies that last bit); a float product
        # cannot overflow as an int64 one would
        c, rest = expr.as_coeff_Mul()
        if isinstance(c, sympy.Rational) and not c.is_Integer and not _terminates(int(c.q)):
            ints = [f for f in sympy.Mul.make_args(rest) if integer_valued(f)]
            if ints:
                others = [f for f in sympy.Mul.make_args(rest) if not integer_valued(f)]
                if ints[0].has(float_of):           # float(n) - 1 is a float already
                    first = self.parenthesize(ints[0], PRECEDENCE["Mul"])
                else:
                    first = f"float({self._print(ints[0])})"
                head = "*".join([first] +
                                [self.parenthesize(f, PRECEDENCE["Mul"]) for f in ints[1:]])
                text = f"({head}*{int(c.p)}/{int(c.q)})"
                if others:
                    text = f"({text}*{self._print(sympy.Mul(*others))})"
                return text
        return super()._print_Mul(expr)

    def _print_float_of(self, expr):
        return "float(%s)" % self._print(expr.args[0])

    def _print_gamma(self, expr):
        if isinstance(expr, _phi_gamma):
            c, a, b = expr.args
            return "((%s) if (%s) else (%s))" % (self._print(a), self._print(c), self._print(b))
        return "math.gamma(%s)" % self._print(expr.args[0])

    def _print_Piecewise(self, expr):
        if expr.args[-1].cond is not sympy.true:
            raise ValueError("to_python: Piecewise needs a final True arm: %s" % (expr,))
        out = self._print(expr.args[-1].expr)
        for arm in reversed(expr.args[:-1]):
            out = "((%s) if (%s) else (%s))" % (self._print(arm.expr), self._print(arm.cond), out)
        return out

    def _print_And(self, expr):
        return "(" + " and ".join("(%s)" % self._print(a) for a in expr.args) + ")"

    def _print_Or(self, expr):
        return "(" + " or ".join("(%s)" % self._print(a) for a in expr.args) + ")"

    def _print_Not(self, expr):
        return "(not (%s))" % self._print(expr.args[0])

    def _print_Relational(self, expr):
        ops = {"==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
        op = ops[expr.rel_op]
        return "(%s %s %s)" % (self._print(expr.lhs), op, self._print(expr.rhs))

    # functions -------------------------------------------------------------
    def _print_Abs(self, expr):
        return "abs(%s)" % self._print(expr.args[0])

    def _print_Max(self, expr):
        return "max(%s)" % ", ".join(self._print(a) for a in expr.args)

    def _print_Min(self, expr):
        return "min(%s)" % ", ".join(self._print(a) for a in expr.args)

    def _print_ceiling(self, expr):
        num, den = expr.args[0].as_numer_denom()
        if den != 1:
            return "(-((-(%s))//(%s)))" % (self._print(num), self._print(den))
        return "math.ceil(%s)" % self._print(expr.args[0])

    def _print_floor(self, expr):
        num, den = expr.args[0].as_numer_denom()
        if den != 1:
            return "((%s)//(%s))" % (self._print(num), self._print(den))
        return "math.floor(%s)" % self._print(expr.args[0])

    def _print_sign(self, expr):
        a = self._print(expr.args[0])
        return "(0.0 if %s == 0 else math.copysign(1.0, %s))" % (a, a)

    def _print_Heaviside(self, expr):
        a = self._print(expr.args[0])
        h0 = expr.args[1] if len(expr.args) > 1 else sympy.S.Half
        return "(1.0 if %s > 0 else (%s if %s == 0 else 0.0))" % (a, self._print(h0), a)

    def _print_logaddexp(self, expr):
        a, b = (self._print(x) for x in expr.args)
        return "(max(%s, %s) + math.log1p(math.exp(-abs(%s - (%s)))))" % (a, b, a, b)

    def _print_exp(self, expr):
        return "math.exp(%s)" % self._print(expr.args[0])

    def _print_Exp1(self, expr):
        return "math.e"

    def _print_PowerOutOfRange(self, expr):
        b, e = (self._print(a) for a in expr.args)
        if expr.args[0] == sympy.E:
            return "(abs(%s) > %r)" % (e, POWER_RANGE)
        return "((%s) != 0 and abs(%s) * abs(math.log(abs(%s))) > %r)" % (b, e, b, POWER_RANGE)

    def _print_PowerOverflows(self, expr):
        return self._signed_range(expr, ">", POWER_RANGE)

    def _print_PowerUnderflows(self, expr):
        return self._signed_range(expr, "<", -POWER_RANGE)

    def _signed_range(self, expr, op, bound):
        b, e = (self._print(a) for a in expr.args)
        if expr.args[0] == sympy.E:
            return "((%s) %s %r)" % (e, op, bound)
        return "((%s) != 0 and (%s) * math.log(abs(%s)) %s %r)" % (b, e, b, op, bound)

    def _print_UnderflowCosts(self, expr):
        g, f = (self._print(a) for a in expr.args)
        return "(not (abs(%s) * %r <= abs(%s) * %r + %r and abs(%s) <= %r))" % (
            g, UNDERFLOW_SLACK, f, 2.0 ** -53, UNDERFLOW_SLACK, f, 1.7976931348623157e308)

    def _print_OrElse(self, expr):
        return "(%s)" % " or ".join("(%s)" % self._print(a) for a in expr.args)

    def _print_log(self, expr):
        if len(expr.args) == 2:
            return "(math.log(%s)/math.log(%s))" % (self._print(expr.args[0]),
                                                    self._print(expr.args[1]))
        return "math.log(%s)" % self._print(expr.args[0])


class PowerOutOfRange(BooleanFunction):
    """True where ``base ** exponent`` leaves the range where float64 keeps its digits,
    ``|exponent * log|base|| > POWER_RANGE``, printed so that it never raises (``base == 0``
    is in range: a zero base's powers are 0, 1 or a singular point of their own; base ``E``,
    for ``exp(exponent)``, prints as ``abs(exponent) > POWER_RANGE``). A closed form
    holding such a power would overflow or underflow where the loop it replaces stays finite
    (``(1/r)**n`` at ``r = 1e-200``, ``r**n`` at ``r = 10``, ``n = 400``): its guard runs the
    loop there. Never evaluated by SymPy."""

    @classmethod
    def eval(cls, base, exponent):
        return None


#: the largest ``|exponent * log|base||`` of a closed form's power: e**700 is 1e304
POWER_RANGE = 700.0

#: 16 units of the smallest subnormal (2**-1074): what ``UnderflowCosts`` allows a power
#: below ``e**-700`` to be off by, times its slope (``pow`` is within one such unit there)
UNDERFLOW_SLACK = 2.0 ** -1070


class PowerOverflows(BooleanFunction):
    """True where ``base ** exponent`` is above ``e**POWER_RANGE`` in magnitude
    (``exponent * log|base| > POWER_RANGE``; never for base 0; base ``E``: ``exponent >
    POWER_RANGE``): the overflowing half of ``PowerOutOfRange``. Never evaluated by SymPy."""

    @classmethod
    def eval(cls, base, exponent):
        return None


class PowerUnderflows(BooleanFunction):
    """True where ``base ** exponent`` is below ``e**-POWER_RANGE`` in magnitude (subnormal
    or 0 from about ``e**-708``): the underflowing half of ``PowerOutOfRange``. Never
    evaluated by SymPy."""

    @classmethod
    def eval(cls, base, exponent):
        return None


class UnderflowCosts(BooleanFunction):
    """``UnderflowCosts(slope, value)``: True unless an error of ``UNDERFLOW_SLACK`` in a power
    whose ``value`` has this ``slope`` (d value / d power) stays within a 16th of half an ulp
    of ``value`` plus one subnormal unit, and ``value`` is finite; printed nan-safe (a nan
    slope or value costs: ``not (... <= ...)``).  Never evaluated by SymPy."""

    @classmethod
    def eval(cls, slope, value):
        return None


class OrElse(BooleanFunction):
    """``a or b or ...`` evaluated in this order (SymPy's ``Or`` sorts its arguments): the later
    conditions may divide by what the earlier ones rule out. Never evaluated by SymPy."""

    @classmethod
    def eval(cls, *args):
        return None

_PRINTER = None


def to_python(expr) -> str:
    """A Python expression (``math`` module only) for ``expr``; see the module docstring."""
    global _PRINTER
    if _PRINTER is None:
        _PRINTER = CoarsenPythonPrinter()
    if isinstance(expr, bool):
        return repr(expr)
    if isinstance(expr, int):
        return str(expr)
    if isinstance(expr, float):
        return repr(expr)
    expr = sympy.sympify(expr)
    out = _PRINTER.doprint(expr)
    if expr.is_Pow and out.startswith("(") and _outer_parens(out):
        out = out[1:-1]
    return out


def _outer_parens(s: str) -> bool:
    """True when s is one parenthesized group '( ... )'."""
    depth = 0
    for i, ch in enumerate(s):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and i < len(s) - 1:
            return False
    return s.endswith(")")


def assignments_to_python(replacements) -> list[str]:
    """``["name = expr", ...]`` for an ordered list of ``(Symbol, Expr)`` pairs."""
    return ["%s = %s" % (to_python(s), to_python(e)) for s, e in replacements]
