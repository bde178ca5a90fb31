"""One operation count, used everywhere in coarsen.symbolic (cost model, reports, size guard).

Requires: SymPy expressions, or (nested) lists/tuples/dicts of them; in a ``(Symbol, Expr)``
pair only the expression counts; dict values count, keys do not.

Guarantees: ``count_ops`` counts the operations of the expression *tree* (a subexpression that
appears twice counts twice; that is what evaluating the printed expression costs), close to
``sympy.count_ops`` with unit weights:

* ``a + b + c``: 2 (n-ary sums and products cost arity - 1); ``a - b``: 1 (the negation is
  absorbed into the subtraction); ``-a`` alone: 1;
* ``a*b``: 1, ``a/b``: 1 (a reciprocal factor in a product is the division), ``1/b``: 1;
* ``a**b``: 1 plus the exponent's ops (``x**2`` counts 1);
* a function call (``exp``, ``sin``, ``Max``, ``Abs``, the branch phi ``gamma``...): 1, plus
  arity - 2 for ``Max``/``Min`` of more than two arguments; ``Piecewise``: one per condition
  (the final ``True`` arm is free); a comparison: 1; ``And``/``Or``: arity - 1; ``Not``: 1;
* symbols, numbers, ``True``/``False``: 0.

With ``limit`` the walk stops as soon as the count exceeds ``limit`` and returns that partial
count (> limit), so the cost is O(limit) even for exponentially large trees held as shared DAGs.
With ``budget`` the walk also checks the budget's clock every few thousand nodes.
"""
from __future__ import annotations

import sympy
from sympy.core.relational import Relational
from sympy.logic.boolalg import And, Or, Not, Xor, BooleanAtom

__all__ = ["count_ops"]


def _iter_exprs(obj):
    if isinstance(obj, sympy.Basic):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _iter_exprs(v)
    elif isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], sympy.Symbol) \
            and isinstance(obj[1], (sympy.Basic, int, float)):
        yield from _iter_exprs(obj[1])
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _iter_exprs(v)
    elif isinstance(obj, (int, float, bool)) or obj is None:
        return
    else:
        yield sympy.sympify(obj)


def count_ops(expr_or_list, limit: int | None = None, budget=None) -> int:
    """Operation count (see module docstring); stops early once above ``limit``."""
    total = 0
    visited = 0
    # the stack holds (expr, absorbed): absorbed=True when the node's own op is absorbed by its
    # parent (a negated term in a sum is a subtraction; a reciprocal factor is a division).
    for root in _iter_exprs(expr_or_list):
        stack = [(root, False)]
        while stack:
            e, absorbed = stack.pop()
            visited += 1
            if budget is not None and visited % 4096 == 0:
                budget.check_time()
            if limit is not None and (total > limit or visited > 8 * limit + 64):
                return max(total, limit + 1)
            if e.is_Atom or isinstance(e, BooleanAtom) or not e.args:
                continue
            args = e.args
            if e.is_Add:
                total += len(args) - 1
                for a in args:
                    stack.append((a, a.is_Mul and a.args[0] is sympy.S.NegativeOne))
            elif e.is_Mul:
                factors = list(args)
                neg = factors[0] is sympy.S.NegativeOne
                if neg:
                    factors = factors[1:]
                    if not absorbed:
                        total += 1
                recips = [f for f in factors if f.is_Pow and f.exp is sympy.S.NegativeOne]
                total += len(factors) - 1
                if recips and len(recips) == len(factors):
                    total += 1  # 1/(a*b): one division plus the product
                for f in factors:
                    stack.append((f, f.is_Pow and f.exp is sympy.S.NegativeOne))
            elif e.is_Pow:
                if not absorbed:
                    total += 1
                stack.append((e.base, False))
                if e.exp is not sympy.S.NegativeOne:
                    stack.append((e.exp, False))
            elif isinstance(e, sympy.Piecewise):
                conds = [c for _, c in args]
                total += sum(1 for c in conds if c is not sympy.true)
                for ex, c in args:
                    stack.append((ex, False))
                    stack.append((c, False))
            elif isinstance(e, (And, Or, Xor)):
                total += len(args) - 1
                stack.extend((a, False) for a in args)
            elif isinstance(e, (Not, Relational)):
                total += 1
                stack.extend((a, False) for a in args)
            elif isinstance(e, (sympy.Max, sympy.Min)):
                total += max(1, len(args) - 1)
                stack.extend((a, False) for a in args)
            elif isinstance(e, (sympy.Function, sympy.Derivative, sympy.Integral, sympy.Sum,
                                sympy.Product)) or e.is_Function:
                total += 1
                stack.extend((a, False) for a in args)
            else:  # Tuple, containers, other Basic: count their contents only
                stack.extend((a, False) for a in args if isinstance(a, sympy.Basic))
    return total
