"""The range guard of a closed form's powers of the trip count.

Requires: a closed form's final values and their partials (SymPy, in the entry values, the
loop invariants and the trip count ``trips``), as ``coarsen.ad.lift.closed_form_segment``
builds them, already in floats (``_floats``).

Guarantees: ``power_guards(values, partials, trips)`` gives ``(strict, after)``.  ``strict``:
conditions for the singular-point list, one per power ``b**e`` (``exp(e)``: ``b = E``) whose
exponent holds the trip count (its base not 0 or +-1); where one holds the loop runs instead
of the closed form.  ``after``: conditions to be evaluated only once every other singular
point has been ruled out (``symbolic.OrElse``: they divide by what those rule out), or None.

* A power that overflows (``e log|b| > POWER_RANGE``) always runs the loop: ``(1/r)**n`` at
  ``r = 1e-200`` is inf where the loop's value is 1.5e200.
* A power that underflows (``e log|b| < -POWER_RANGE``: below 1e-304, subnormal from about
  ``e**-708``, 0 from ``e**-745``) keeps the closed form when every expression ``F`` (final
  value or partial) that holds it is a polynomial in it (no division by it, no root or
  function of it: ``_polynomial_in``) and, at run time, ``UnderflowCosts(dF/dP, F)`` is false
  for each ``F`` that is read (of a variable read after the loop: ``read``): the power's error (at most a unit of the smallest subnormal, 2**-1074; at most 0
  for ``P = 0``, the true value being below ``e**-700``) times its slope is below a 16th of
  half an ulp of ``F`` plus one subnormal unit, and ``F`` is finite.  ``s = s*r + c`` with
  ``|r| < 1`` thus stays closed at any trip count where ``|s| / |c / (1 - r)|`` is below about
  1e288, and runs the loop where the power's lost digits would show (``s0 = 1e300, c = 0``:
  the loop's ``1e300 * 0.5**1500`` is 3e-152, the closed form's 0).  Otherwise (a power in a
  denominator, slopes too big to print) the underflow runs the loop too, as
  ``PowerOutOfRange`` did for both directions (found: ``s = s*r + c`` at ``r = 0.999``,
  ``n = 1e7`` taped 8 bytes a trip, 80 MB, because ``r**n`` underflowed).
"""
from __future__ import annotations

import sympy

from .. import symbolic as S

__all__ = ["power_guards"]

#: the most operations the slopes of one power may take in the guard; above, the strict guard
MAX_SLOPE_OPS = 400


def _powers(expr, trips):
    """The powers of ``expr`` whose exponent holds the trip count, as ``(power, base, exponent)``."""
    out = []
    for p in expr.atoms(sympy.Pow, sympy.exp):
        b, e = (sympy.E, p.args[0]) if isinstance(p, sympy.exp) else p.args
        if e.has(trips) and not (b.is_number and (b == 0 or abs(b) == 1)):
            out.append((p, b, e))
    return out


def _polynomial_in(expr, p):
    """Whether ``expr`` is built from ``p`` by sums, products, nonnegative integer powers and
    the values (not the conditions) of ``Piecewise`` arms and branch phis: its slope in ``p``
    is then finite at ``p = 0`` and divides by nothing ``expr`` does not divide by."""
    if expr == p or p not in expr.free_symbols:
        return True
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        return all(_polynomial_in(a, p) for a in expr.args)
    if isinstance(expr, sympy.Pow):
        e = expr.exp
        return e.is_Integer and e >= 0 and _polynomial_in(expr.base, p)
    if isinstance(expr, sympy.Piecewise):
        return all(p not in c.free_symbols and _polynomial_in(v, p) for v, c in expr.args)
    if S.is_branch_phi(expr):
        c, a, b = expr.args
        return p not in c.free_symbols and _polynomial_in(a, p) and _polynomial_in(b, p)
    return False


def _costs(power, exprs):
    """``UnderflowCosts(dF/dP, F)`` for each ``F`` of ``exprs`` holding ``power``, or None when
    one of them is not a polynomial in it or the slopes are too big."""
    p = sympy.Dummy("p")
    out = []
    ops = 0
    for f in exprs:
        if not f.has(power):
            continue
        fp = f.xreplace({power: p})
        if fp.has(power) or not _polynomial_in(fp, p):    # the power within another of its base
            return None
        slope = sympy.diff(fp, p).xreplace({p: power})
        ops += S.count_ops([slope])
        if ops > MAX_SLOPE_OPS:
            return None
        out.append(S.UnderflowCosts(slope, f))
    return out


def power_guards(values, partials, trips, read=None):
    """``(strict, after)`` for the closed form whose final values are ``values`` and partials
    ``partials`` (see the module docstring); ``read``: those of them whose digits matter (the
    final values, and their partials, of the variables read after the loop; None: all).  The
    others are still evaluated, so they too must hold an underflowing power polynomially (a
    division by it would raise on the python target), but their digits are not checked."""
    exprs = list(values) + list(partials)
    read = exprs if read is None else list(read)
    found = {}
    for f in exprs:
        for p, b, e in _powers(f, trips):
            found.setdefault(p, (b, e))
    strict, after = [], []
    for p in sorted(found, key=sympy.default_sort_key):
        b, e = found[p]
        costs = _costs(p, read) if _costs(p, exprs) is not None else None
        if costs is None:
            strict.append(S.PowerOutOfRange(b, e))
            continue
        strict.append(S.PowerOverflows(b, e))
        if costs:
            after.append(sympy.And(S.PowerUnderflows(b, e), sympy.Or(*costs)))
    return strict, (sympy.Or(*after) if after else None)
