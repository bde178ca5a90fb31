"""Common subexpressions of expressions with guarded branches, shared only where that is safe.

``sympy.cse`` hoists any repeated subexpression in front of everything.  For closed forms that
is wrong: ``Piecewise((n, Eq(r, 1)), ((r**n - 1)/(r - 1), True))`` guards a division, and a
hoisted ``1/(r - 1)`` would be evaluated at ``r == 1`` too (an exception in Python, an
infinity that a later ``0 *`` turns into NaN in Numba).  ``guarded_cse`` keeps the sharing
and drops that hazard.

Requires: SymPy expressions (a list), the prefix of the names to give the shared values and
the names already taken (never reused).

Guarantees: ``guarded_cse(exprs, prefix, taken)`` returns ``(replacements, reduced)``:
``replacements`` is ``[(Symbol, Expr)]`` in evaluation order (each reads only the symbols
before it and the inputs' symbols), ``reduced`` the expressions over them, one per input, so
that substituting the replacements back gives the input expressions (``xreplace``, no
simplification; SymPy's own evaluation may regroup a sign there, ``-(a - 1)`` as ``1 - a``).  A replacement is kept only when evaluating it unconditionally, ahead of
every expression, evaluates nothing the expressions did not already evaluate unconditionally,
or only additions, multiplications, ``Max``, ``Min`` and ``float_of`` of symbols and finite
numbers (which raise nothing, in Python or in Numba).  Integer-valued replacements are never products or
powers (their type would make the product an integer one, which can overflow, where the
original expression computed in floating point).  Names are ``{prefix}0``, ``{prefix}1``, ...
skipping ``taken``; a replacement symbol is an integer symbol when its value is an integer,
else real.  Deterministic: the same expressions give the same result in every process (the
replacements are ordered by their values, not by the hash seed that orders `cse`'s output).
"""
from __future__ import annotations

import sympy

from .float_of import float_of

__all__ = ["guarded_cse"]


def _unconditional(exprs):
    """Every subexpression that evaluating ``exprs`` evaluates whatever the branches (the
    arguments of a ``Piecewise`` are conditional, and so is everything below them)."""
    seen = set()
    stack = list(exprs)
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.add(e)
        if isinstance(e, sympy.Piecewise) or isinstance(e, sympy.logic.boolalg.Boolean):
            continue
        stack.extend(e.args)
    return seen


def _raises_nothing(e):
    """Additions, multiplications, Max, Min and ``float_of`` of symbols and finite numbers (no
    division, no power, no other function): never an exception, in Python floats or in Numba."""
    if e.is_Symbol:
        return True
    if e.is_Number:
        return bool(e.is_finite)
    if isinstance(e, (sympy.Add, sympy.Max, sympy.Min)):
        return all(_raises_nothing(a) for a in e.args)
    if isinstance(e, (sympy.Mul, float_of)):
        return all(_raises_nothing(a) for a in e.args)
    return False


def _integer_safe(e):
    """An integer value whose evaluation cannot overflow where the original was floating point:
    no product, no power."""
    return not any(isinstance(s, (sympy.Mul, sympy.Pow)) for s in sympy.preorder_traversal(e))


def _canonical_order(kept):
    """``kept`` in an order that depends only on the expressions: dependencies first, and
    among the definitions ready at each step, the least by ``default_sort_key`` of its value
    over the inputs.  SymPy's ``cse`` lists independent subexpressions in an order that
    varies with the process's hash seed, and the names follow that order."""
    whole = {}
    for s, e in kept:
        whole[s] = e.xreplace(whole)
    defs = dict(kept)
    deps = {s: e.free_symbols & defs.keys() for s, e in kept}
    done, out = set(), []
    while len(out) < len(kept):
        ready = [s for s in defs if s not in done and deps[s] <= done]
        s = min(ready, key=lambda r: sympy.default_sort_key(whole[r]))
        done.add(s)
        out.append((s, defs[s]))
    return out


def guarded_cse(exprs, prefix, taken=frozenset()):
    exprs = [sympy.sympify(e) for e in exprs]
    if not exprs:
        return [], []
    reps, reduced = sympy.cse(exprs, symbols=sympy.numbered_symbols("_gcse"), list=True)
    if not reps:
        return [], list(exprs)
    safe = _unconditional(exprs)
    full = {}           # cse symbol -> its expression over the inputs only
    kept, inline = [], {}
    for sym, e in reps:
        e = e.xreplace(inline)
        whole = e.xreplace(full)
        full[sym] = whole
        ok = whole in safe or _raises_nothing(whole)
        if ok and whole.is_integer:
            ok = _integer_safe(whole)
        if ok:
            kept.append((sym, e))
        else:
            inline[sym] = e
    reduced = [r.xreplace(inline) for r in reduced]
    # fully substitute the inlined ones (an inlined value may read an earlier inlined one)
    while any(r.free_symbols & set(inline) for r in reduced) or \
            any(e.free_symbols & set(inline) for _, e in kept):
        reduced = [r.xreplace(inline) for r in reduced]
        kept = [(s, e.xreplace(inline)) for s, e in kept]
    # drop the ones used once: sharing nothing, they would only add a line
    uses = {}
    for e in [e for _, e in kept] + reduced:
        for s in e.free_symbols:
            uses[s] = uses.get(s, 0) + 1
    once = {s: e for s, e in kept if uses.get(s, 0) < 2}
    if once:
        kept = [(s, e) for s, e in kept if s not in once]
        while True:
            new_kept = [(s, e.xreplace(once)) for s, e in kept]
            new_red = [r.xreplace(once) for r in reduced]
            if new_kept == kept and new_red == reduced:
                break
            kept, reduced = new_kept, new_red
    kept = _canonical_order(kept)
    rename, k = {}, 0
    for s, e in kept:
        while f"{prefix}{k}" in taken:
            k += 1
        rename[s] = sympy.Symbol(f"{prefix}{k}", integer=True) if e.xreplace(rename).is_integer \
            else sympy.Symbol(f"{prefix}{k}", real=True)
        k += 1
    kept = [(rename[s], e.xreplace(rename)) for s, e in kept]
    reduced = [r.xreplace(rename) for r in reduced]
    return kept, reduced
