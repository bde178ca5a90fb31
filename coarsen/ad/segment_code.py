"""The code of a lifted segment that both AD modes emit the same way.

Requires: a lifted segment's SymPy expressions (``coarsen.symbolic``) and an emitter of either
mode (``fresh``, ``types``, ``made``, ``sym_expr``, ``lifted_names``); the canonical names of
``coarsen.ad.canonical``.
Guarantees: ``sym_to_gast`` prints a SymPy expression as a gast expression in the real names;
``closed_form_values`` emits the values of a loop in closed form (the trip count, the shared
subexpressions once, each value converted to its variable's type) and leaves assigning the
variables to the mode; ``held_replacements`` names the replacements of a Jacobian whose value
a variable of the segment already holds, so the code reads the variable instead of computing
the value again, and ``held_calls`` does so for the function calls inside them (a preaccumulated
partial multiplies the primal's ``exp`` and ``sin`` results).  Nothing here mutates its inputs except the emitter's name tables (``made``,
``types``) for the names it takes.  Forward mode and reverse mode import this module, never
each other's.
"""
from __future__ import annotations

import copy
from dataclasses import replace

import gast
import sympy

from .. import symbolic as S
from ..codegen import build as B
from ..ir.nodes import Scalar
from .canonical import real_name


def sym_to_gast(expr, names, subst=None):
    """A SymPy expression of a lifted segment as a gast expression: ``subst`` ({symbol name:
    gast expression}) printed in place of those symbols, then the canonical names printed as
    the real ones (``names``: canonical -> real)."""
    node = gast.parse(S.to_python(expr)).body[0].value
    if subst:
        class Seeds(gast.NodeTransformer):
            def visit_Name(self, n):
                return copy.deepcopy(subst[n.id]) if n.id in subst else n
        node = Seeds().visit(node)
    if names:
        class Real(gast.NodeTransformer):
            def visit_Name(self, n):
                n.id = real_name(n.id, names)
                return n
        node = Real().visit(node)
    return node


def closed_form_values(em, seg):
    """The values of a loop in closed form (``seg.plan.lifted``, a ``ClosedFormLoop``) as
    code of the emitter ``em`` (``fresh``, ``types``, ``made``, ``sym_expr``): ``(statements,
    [(carried variable, the temporary holding its final value)])``: the trip count ``_n``, the
    carried values' shared subexpressions (``r**n``, once: ``guarded_cse``), then each value
    converted to its variable's type.  The caller assigns the variables (reverse mode tapes
    the values they held first; forward mode computes the tangents first)."""
    info = seg.plan.lifted
    n = em.fresh("_n")
    em.types[n] = Scalar("i64")
    nsym = sympy.Symbol(n, integer=True)
    code = [B.assign(n, B.call("int", em.sym_expr(info.trip_count)))]
    reps, finals = S.guarded_cse(
        [info.finals_n[v].xreplace({info.n_symbol: nsym}) for v in info.carried],
        f"_s{seg.index}_f")
    for sym, e in reps:
        em.made.add(sym.name)
        code.append(B.assign(sym.name, em.sym_expr(e)))
    tmps = []
    for v, e in zip(info.carried, finals):
        t = em.fresh("_closed")
        em.types[t] = em.types[v]
        conv = "float" if em.types[v].kind == "f64" else "int"
        code.append(B.assign(t, B.call(conv, em.sym_expr(e))))
        tmps.append((v, t))
    return code, tmps


def held_replacements(jac, held, reads):
    """{replacement symbol name: variable} for the replacements of ``jac`` whose value a
    variable of the segment holds at its end (``held``: the temporaries inlined into the DAG,
    compared with each replacement expanded through the earlier ones): code after the
    segment reads the variable (``math.exp(x)`` computed once, by the primal)."""
    if not held:
        return {}
    by_value = {}
    for v, e in held.items():
        by_value.setdefault(e, v)
    out = {}
    for sym, value in _expansions(jac):
        if sym.name not in reads and value in by_value:
            out[sym.name] = by_value[value]
    return out


def _expansions(jac):
    """``(symbol, value)`` of each replacement of ``jac`` that SymPy can expand, its value
    expanded through the earlier replacements whose expansions stay small (``HELD_NODES``:
    no swell)."""
    full = {}
    for sym, e in jac.replacements:
        try:
            value = e.xreplace(full)
        except (TypeError, ValueError):     # a derivative object of SymPy's: left as it is
            continue
        if _small(value, HELD_NODES):
            full[sym] = value
        yield sym, value


def _expanded(jac):
    """{replacement symbol: its small expansion} (``_expansions``)."""
    return {sym: value for sym, value in _expansions(jac) if _small(value, HELD_NODES)}


#: the largest expanded replacement compared with the held values (tree nodes)
HELD_NODES = 64


def held_calls(jac, partials, held, index):
    """``(jac', partials', reads)``: ``jac`` and ``partials`` with each function call
    (``exp``, ``sin``...) whose value a variable of the segment holds at its end (``held``,
    compared expanded through the replacements, as ``held_replacements`` compares) read
    through a new replacement symbol ``_s<index>_held<k>``, and ``reads``: {that symbol's
    name: the variable}.  A preaccumulated partial ``exp(-b*x**2)*sin(3*x)`` then multiplies
    the primal's ``exp`` and ``sin`` results instead of calling both again (the composite
    trapezoid rule evaluated each twice per node).  The variable's value is the call's
    computed in the primal's own rounding of its argument: the partial of the function the
    primal computed.  Neither input is modified."""
    if not held:
        return jac, partials, {}
    full = _expanded(jac)
    by_value = {}
    for v, e in sorted(held.items()):
        if isinstance(e, sympy.Function):
            by_value.setdefault(e.xreplace(full), v)
    if not by_value:
        return jac, partials, {}
    named, reads, out = {}, {}, []

    def rewrite(expr):
        if not isinstance(expr, sympy.Basic):
            return expr, []
        new = []
        calls = sorted((f for f in expr.atoms(sympy.Function)), key=sympy.default_sort_key)
        for f in calls:
            if f in named:
                continue
            try:
                key = f.xreplace(full)
            except (TypeError, ValueError):
                continue
            var = by_value.get(key)
            if var is not None:
                sym = sympy.Symbol(f"_s{index}_held{len(named)}", real=True)
                named[f] = sym
                reads[sym.name] = var
                new.append((sym, f))
        return expr.xreplace(named), new

    for sym, e in jac.replacements:
        e2, new = rewrite(e)
        out.extend(new)
        out.append((sym, e2))
    parts = {}
    for k, e in partials.items():
        e2, new = rewrite(e)
        out.extend(new)
        parts[k] = e2
    if not named:
        return jac, partials, {}
    return replace(jac, replacements=out), parts, reads


def _small(expr, limit):
    """Has the SymPy expression at most ``limit`` tree nodes (counted up to the limit)?"""
    for count, _ in enumerate(sympy.preorder_traversal(expr)):
        if count >= limit:
            return False
    return True

