"""Closed forms of loop recurrences (the mu-phi calculus), exact on the whole domain.

Requires: a loop ``for k in range(start, stop, step): <body>`` whose loop-carried scalars are
given as an ordered dict ``carried = {x: F_x}``: the simultaneous update ``x_new = F_x(x_old...,
k, params)`` (the caller composes a sequential body into this form); each ``x`` is also the
symbol of its value on entry.  ``start``, ``stop``, ``step`` are SymPy integer expressions (ints
or symbols; ``step`` a nonzero int or a symbol of unknown sign).  Other free symbols are
loop-invariant parameters.

Guarantees: :func:`closed_form_loop` returns a :class:`ClosedForm` or ``None``, never a guess:

* ``trip_count`` is ``n = Max(0, ceiling((stop - start)/step))``, Python's ``len(range(...))``
  for either sign of ``step`` (zero and negative trip counts included); trip ``j = 0..n-1`` has
  ``k = start + step*j``;
* each ``finals[x]`` is an exact expression of the value after the loop, in terms of the entry
  values, ``start``, ``stop``, ``step`` and the parameters, valid for every trip count including
  0 (the recurrences are solved as functions ``X(j)`` valid for all ``j >= 0`` and evaluated at
  ``j = n``); a symbolic geometric ratio ``c`` is guarded by ``Piecewise((.., Eq(c, 1)), (.., True))``;
  ratios 0 and -1 need no guard (``0**0 == 1`` in SymPy and Python alike);
* supported (solved in dependency order, so triangular systems work: a variable's update may use
  other carried variables whose closed forms are already known):
  - unchanged ``x``;
  - affine ``x_new = a*x + b`` with ``a`` free of ``x`` and ``k``, ``b`` free of ``x``: ``b`` may
    depend on ``k`` (and on solved variables) through sums of terms ``coeff * k**d * c**k``
    (polynomials in ``k``: Faulhaber sums via Bernoulli polynomials; geometric-polynomial terms
    via ``(c d/dc)**d`` of the geometric sum) when ``a`` is 1 or a nonzero number; only
    ``k``-free ``b`` when ``a`` is symbolic (geometric series with the ``a == 1`` guard);
  - products ``x_new = x * g(k)`` where ``g`` is a product of a ``k``-free factor and powers
    ``base**e(k)`` / ``exp(e(k))`` with ``e`` polynomial in ``k`` (exponents summed exactly);
  - ``x_new = h(k, solved vars)`` free of ``x`` (the last trip's value, guarded for ``n == 0``);
* everything else returns ``None``: non-affine self-dependence (the logistic map
  ``x = r*x*(1 - x)``), mutually dependent carried variables, a product with a polynomial factor
  in ``k`` (its closed form needs rising factorials, which ``math`` cannot print safely),
  conditions on ``k``.  Those loops take the coarse per-trip step of
  :func:`~.derivatives.local_step_jacobian` instead.
* No ``rsolve``, no general ``summation``/``simplify``: only pattern matching, Bernoulli
  polynomials, derivatives of rational functions and ``factor`` of small polynomials; every
  intermediate is checked against the budget.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy
from sympy.core.sorting import default_sort_key

from .budget import Budget

__all__ = ["ClosedForm", "closed_form_loop", "trip_count"]


@dataclass
class ClosedForm:
    """Final values of a loop's carried variables, as exact expressions."""

    finals: dict = field(default_factory=dict)      # {x: Expr}
    trip_count: sympy.Expr = sympy.S.Zero
    description: str = ""
    kinds: dict = field(default_factory=dict)       # {x: "unchanged"|"affine"|"sum"|...}
    n_symbol: sympy.Symbol = sympy.Symbol("n")     # stands for trip_count in finals_n
    finals_n: dict = field(default_factory=dict)    # {x: Expr in n_symbol}: print n once


class _NoClosedForm(Exception):
    pass


def trip_count(start, stop, step):
    """``len(range(start, stop, step))`` as a SymPy expression: Max(0, ceiling((stop-start)/step))."""
    start, stop, step = (sympy.sympify(v) for v in (start, stop, step))
    if step == 0:
        raise ValueError("range() step must not be zero")
    return sympy.Max(0, sympy.ceiling((stop - start) / step))


def _faulhaber(d, j):
    """sum_{i=0}^{j-1} i**d as a polynomial in j."""
    if d == 0:
        return j
    p = (sympy.bernoulli(d + 1, j) - sympy.bernoulli(d + 1, 0)) / (d + 1)
    p = sympy.expand(p)
    return sympy.factor(p) if d <= 4 else p


def _geom_poly_sum(c, d, j):
    """sum_{i=0}^{j-1} i**d * c**i, exact for every value of c (guarded at c == 1)."""
    if c == 1:
        return _faulhaber(d, j)
    u = sympy.Dummy("u")
    g = (u**j - 1) / (u - 1)
    for _ in range(d):
        g = sympy.together(u * sympy.diff(g, u))
    general = g.xreplace({u: c})
    if c.is_number:
        if c.is_zero:
            # sum i**d 0**i = [d == 0] * [j >= 1]
            return (1 - sympy.Pow(0, j)) if d == 0 else sympy.S.Zero
        return general
    return sympy.Piecewise((_faulhaber(d, j), sympy.Eq(c, 1)), (general, True))


def _linear_in(e, j):
    """(e1, e0) with e == e1*j + e0 and e1, e0 free of j; None if e is not linear in j."""
    e1 = sympy.diff(e, j)
    if j in e1.free_symbols:
        return None
    e0 = e.xreplace({j: 0})
    if sympy.expand(e - e1 * j - e0) != 0:
        return None
    return e1, e0


def _term_sum(T, j, budget):
    """sum_{i=0}^{j-1} T(i) for T a sum of coeff * i**d * c**i terms; raises _NoClosedForm."""
    budget.check(T)
    T = sympy.expand(T, power_exp=True, power_base=False, log=False, deep=True)
    budget.check(T)
    groups = {}
    for term in sympy.Add.make_args(T):
        coeff, deg, ratio = sympy.S.One, 0, sympy.S.One
        for f in sympy.Mul.make_args(term):
            if j not in f.free_symbols:
                coeff *= f
            elif f == j:
                deg += 1
            elif f.is_Pow and f.base == j and f.exp.is_Integer and f.exp > 0:
                deg += int(f.exp)
            elif f.is_Pow and j not in f.base.free_symbols:
                lin = _linear_in(f.exp, j)
                if lin is None:
                    raise _NoClosedForm("exponent not linear in k")
                ratio *= f.base ** lin[0]
                coeff *= f.base ** lin[1]
            elif isinstance(f, sympy.exp):
                lin = _linear_in(f.args[0], j)
                if lin is None:
                    raise _NoClosedForm("exponent not linear in k")
                ratio *= sympy.exp(lin[0])
                coeff *= sympy.exp(lin[1])
            else:
                raise _NoClosedForm(f"term {f} is not polynomial-geometric in k")
        key = (ratio, deg)
        groups[key] = groups.get(key, sympy.S.Zero) + coeff
        budget.check_time()
    total = sympy.S.Zero
    for (ratio, deg) in sorted(groups, key=lambda k: (default_sort_key(k[0]), k[1])):
        total += groups[(ratio, deg)] * _geom_poly_sum(ratio, deg, j)
        budget.check(total)
    return total


def _solve_one(x, f, j, budget):
    """X(j) with X(0) = x and X(j+1) = f(X(j), j); returns (expr, kind)."""
    if x not in f.free_symbols:
        if f == x:
            return x, "unchanged"
        return sympy.Piecewise((x, sympy.Eq(j, 0)), (f.xreplace({j: j - 1}), True)), "last value"
    if f == x:
        return x, "unchanged"
    A = sympy.diff(f, x)
    budget.check(A)
    if x in A.free_symbols:
        raise _NoClosedForm(f"update of {x} is not affine in {x}")
    B = f.xreplace({x: sympy.S.Zero})
    if B.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo):
        raise _NoClosedForm("update undefined at 0")
    if j not in A.free_symbols:
        if B == 0:
            return A**j * x, "geometric"
        if j not in B.free_symbols:
            return A**j * x + B * _geom_poly_sum(A, 0, j), "affine"
        if A == 1:
            return x + _term_sum(B, j, budget), "sum"
        if A.is_number and not A.is_zero:
            S = _term_sum(B * A**(-j), j, budget)
            return A**j * x + A**(j - 1) * S, "affine"
        raise _NoClosedForm("affine update with symbolic ratio and k-dependent increment")
    if B != 0:
        raise _NoClosedForm("k-dependent ratio with an increment")
    # product of g(i) for i < j with g = coeff * prod base**e(i) * exp(e(i))
    coeff, expo = sympy.S.One, []
    for fac in sympy.Mul.make_args(A):
        if j not in fac.free_symbols:
            coeff *= fac
        elif fac.is_Pow and j not in fac.base.free_symbols:
            if not fac.exp.is_polynomial(j):
                raise _NoClosedForm("exponent not polynomial in k")
            expo.append((fac.base, fac.exp))
        elif isinstance(fac, sympy.exp) and fac.args[0].is_polynomial(j):
            expo.append((sympy.E, fac.args[0]))
        else:
            raise _NoClosedForm(f"product of {fac} over k has no math-printable closed form")
    out = coeff**j * x
    for base, e in expo:
        s = _term_sum(e, j, budget)
        out *= sympy.exp(s) if base is sympy.E else base**s
    return out, "product"


def _integer_twins(syms):
    return {s: sympy.Dummy(s.name, integer=True) for s in sorted(syms, key=default_sort_key)
            if isinstance(s, sympy.Symbol) and not s.is_integer}


def closed_form_loop(carried, k, start, stop, step, budget=None, avoid=frozenset()):
    """Closed form of ``for k in range(start, stop, step)`` with simultaneous updates ``carried``.

    Returns a :class:`ClosedForm` or ``None``; see the module docstring.  ``avoid``: names
    the trip count's symbol must not take in the description (the function's variables,
    which a report shows in place of the compiler's temporaries).
    """
    budget = (budget if budget is not None else Budget()).ensure_started()
    k = sympy.sympify(k)
    start, stop, step = (sympy.sympify(v) for v in (start, stop, step))
    if step == 0:
        raise ValueError("range() step must not be zero")
    carried = {sympy.sympify(x): sympy.sympify(f) for x, f in carried.items()}
    for f in carried.values():
        budget.check(f)
    twins = _integer_twins({k} | start.free_symbols | stop.free_symbols | step.free_symbols)
    back = {v: s for s, v in twins.items()}
    k_, start_, stop_, step_ = (v.xreplace(twins) for v in (k, start, stop, step))
    upd = {x: f.xreplace(twins) for x, f in carried.items()}
    n = trip_count(start_, stop_, step_)
    j = sympy.Dummy("j", integer=True, nonnegative=True)
    kj = start_ + step_ * j

    # dependency order (triangular systems only)
    xs = list(upd)
    deps = {x: {y for y in upd[x].free_symbols if y in upd and y != x} for x in xs}
    order, done = [], set()
    while len(order) < len(xs):
        ready = [x for x in xs if x not in done and deps[x] <= done]
        if not ready:
            return None  # mutually dependent carried variables
        for x in ready:
            order.append(x)
            done.add(x)
    X, kinds = {}, {}
    try:
        for x in order:
            f = upd[x].xreplace({k_: kj, **{y: X[y] for y in deps[x]}})
            budget.check(f)
            X[x], kinds[x] = _solve_one(x, f, j, budget)
            budget.check(X[x])
    except _NoClosedForm:
        return None
    except (sympy.PolynomialError, sympy.polys.polyerrors.PolificationFailed):
        return None
    finals = {x: X[x].xreplace({j: n}).xreplace(back) for x in xs}
    taken = {str(v) for v in k.free_symbols | start.free_symbols | stop.free_symbols
             | step.free_symbols} | {s.name for f in carried.values() for s in f.free_symbols}
    taken |= {x.name for x in xs}
    # the names the description shows, after ``back`` (``range(n, -n, -3)``: the user's n)
    taken |= {str(v) for v in n.xreplace(back).free_symbols}
    taken |= {str(v) for f in finals.values() for v in f.free_symbols}
    taken |= set(avoid)
    name = "trips"
    while name in taken:
        name += "_"
    nsym = sympy.Symbol(name, integer=True, nonnegative=True)
    finals_n = {x: X[x].xreplace({j: nsym}).xreplace(back) for x in xs}
    lines = [f"{x} = {sympy.sstr(finals_n[x])}" for x in xs
             if kinds[x] != "unchanged"]
    desc = "; ".join(lines) + f"  where {name} = {sympy.sstr(n.xreplace(back))}"
    for v in finals.values():
        budget.check(v)
    return ClosedForm(finals, n.xreplace(back), desc, kinds, nsym, finals_n)
