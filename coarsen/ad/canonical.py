"""Name-independent lifting: segments of interest are lifted under canonical names.

Requires: a ``Segment`` (and, for a closed-form loop, its ``For``), the variable types and
the active set; a lifting function of ``coarsen.ad.lift``.
Guarantees: the lifting function sees the segment with every variable renamed to
``_cv<segment>_<k>`` (``_cl<segment>_<k>`` for a closed-form loop), numbered in order of
first appearance, so what it computes depends on the program's structure only (compiler
temporaries, ``temps``: the function's ``fn.temps``, numbered in program order, keep their
names).  SymPy orders the terms of sums and products, and CSE its
temporaries, by symbol name: lifted under the user's names, a renamed program would round
differently.  The result returned (``coarsen.analysis.plans``) is mapped back: names in keys,
lists, decisions and texts are the real ones again; SymPy expressions keep the canonical
symbols, which ``real_name`` maps back when the emitter prints them (the result's ``names``
holds the segment's map).  The segment itself is not modified.
"""
from __future__ import annotations

import re
from dataclasses import replace

from ..analysis.plans import ClosedFormLoop, Fallback
from ..ir.primitives import REGISTRY
from ..ir.nodes import (
    Assign,
    Const,
    For,
    If,
    Segment,
    Slice,
    Store,
    Var,
    While,
    uses,
    walk,
)

# a lifter's intermediate (``_s<seg>_<name>_<k>``) or output symbol of a canonical variable
_DERIVED = re.compile(r"(_s\d+_)(_c[vl]\d+_\d+)(_\w+)")


def real_name(name: str, names: dict) -> str:
    """The name to print for a symbol lifted under canonical names (``names``: canonical ->
    real); any other name is returned unchanged."""
    if name in names:
        return names[name]
    m = _DERIVED.fullmatch(name)
    if m and m.group(2) in names:
        return m.group(1) + names[m.group(2)] + m.group(3)
    return name


def real_text(text, names):
    """A formula or message with canonical names replaced by the real ones."""
    if not isinstance(text, str) or not names:
        return text
    return re.sub(r"\b_s\d+__c[vl]\d+_\d+_\w+|\b_c[vl]\d+_\d+\b",
                  lambda m: real_name(m.group(0), names), text)


def _order(stmts, loop):
    seen = []

    def see(v):
        if v not in seen:
            seen.append(v)
    if loop is not None:
        see(loop.var)
        for b in (loop.start, loop.stop, loop.step):
            if isinstance(b, Var):
                see(b.name)
    for st in walk(stmts):
        for u in uses(st):
            if isinstance(u, Var):
                see(u.name)
        if isinstance(st, Assign):
            see(st.target)
        elif isinstance(st, Store):
            see(st.array)
        elif isinstance(st, For):
            see(st.var)
    return seen


def _rename_operand(op, m):
    if isinstance(op, Var):
        return Var(m.get(op.name, op.name))
    return op


def _rename_index(index, m):
    out = []
    for item in index:
        if isinstance(item, Var):
            out.append(_rename_operand(item, m))
        elif isinstance(item, Slice):
            out.append(Slice(*(_rename_operand(p, m) if p is not None else None
                               for p in (item.lower, item.upper, item.step))))
        else:
            out.append(item)
    return tuple(out)


def _rename(st, m, done):
    if isinstance(st, Assign):
        new = replace(st, target=m.get(st.target, st.target),
                      args=tuple(_rename_operand(a, m) for a in st.args),
                      index=_rename_index(st.index, m))
    elif isinstance(st, Store):
        new = replace(st, array=m.get(st.array, st.array), value=_rename_operand(st.value, m),
                      index=_rename_index(st.index, m))
    elif isinstance(st, If):
        new = replace(st, cond=_rename_operand(st.cond, m),
                      body=[_rename(s, m, done) for s in st.body],
                      orelse=[_rename(s, m, done) for s in st.orelse])
    elif isinstance(st, For):
        new = replace(st, var=m.get(st.var, st.var), start=_rename_operand(st.start, m),
                      stop=_rename_operand(st.stop, m), step=_rename_operand(st.step, m),
                      body=[_rename(s, m, done) for s in st.body])
    elif isinstance(st, While):
        new = replace(st, test_body=[_rename(s, m, done) for s in st.test_body],
                      test=_rename_operand(st.test, m), body=[_rename(s, m, done) for s in st.body])
    else:
        raise TypeError(st)
    done[id(st)] = new
    return new


def _back(result, names):
    """The lifting result with the real names in every key, list, decision and text."""
    def r(n):
        return names.get(n, n)

    def partials(p):
        return {(r(o), r(i)): e for (o, i), e in p.items()}

    def decisions(ds):
        return tuple((_rename_operand(c, names), flag) for c, flag in ds)

    if isinstance(result, Fallback):
        return replace(result, reason=real_text(result.reason, names))
    if isinstance(result, ClosedFormLoop):
        return replace(result, partials=partials(result.partials),
                       carried=[r(n) for n in result.carried],
                       finals={r(n): e for n, e in result.finals.items()},
                       finals_n={r(n): e for n, e in result.finals_n.items()},
                       formula=real_text(result.formula, names), names=dict(names))
    return replace(result, partials=partials(result.partials),
                   paths=[(decisions(d), partials(p), jac) for d, p, jac in result.paths],
                   vjp_paths=[replace(v, decisions=decisions(v.decisions),
                                      cotangents={r(i): e for i, e in v.cotangents.items()},
                                      seeds={r(o): s for o, s in v.seeds.items()})
                              for v in result.vjp_paths],
                   dags=[(a, w, c, {sym: r(v) for sym, v in f.items()}, {r(v): e for v, e in h.items()})
                         for a, w, c, f, h in result.dags],
                   formula=real_text(result.formula, names), names=dict(names))


def lift_canonically(lift, seg, types, active, budget, loop=None, temps=frozenset(),
                      live_after=None):
    """``lift(seg, types, active, budget, temps)`` (or ``lift(loop, seg, ...)`` when ``loop``
    is given) on the canonically renamed segment, with the result mapped back (module
    docstring).  ``temps``: the compiler's temporaries (``fn.temps``); ``live_after`` (with
    ``loop``): the variables read outside the loop, passed on renamed."""
    order = _order(seg.stmts, loop)
    # compiler temporaries keep their names: they are numbered in program order already, and
    # the lifter recognizes them by name (single-use temporaries are inlined)
    # a closed-form loop and its segment (lifted again as the loop's body) use two name
    # spaces, so the emitter's one map back stays a function
    kind = "l" if loop is not None else "v"
    to_canon = {v: f"_c{kind}{seg.index}_{k}" for k, v in enumerate(order) if v not in temps}
    names = {c: v for v, c in to_canon.items()}
    done = {}
    stmts = [_rename(s, to_canon, done) for s in seg.stmts]
    cseg = Segment(stmts, seg.loc, seg.index,
                   passengers=[done[id(p)] for p in seg.passengers],
                   inputs=[to_canon.get(v, v) for v in seg.inputs],
                   outputs=[to_canon.get(v, v) for v in seg.outputs], plan=seg.plan)
    ctypes = dict(types)
    for v, c in to_canon.items():
        if v in types:
            ctypes[c] = types[v]
    cactive = set(active) | {to_canon[v] for v in active if v in to_canon}
    if loop is None:
        result = lift(cseg, ctypes, cactive, budget, temps)
    else:
        cloop = replace(loop, var=to_canon.get(loop.var, loop.var),
                        start=_rename_operand(loop.start, to_canon),
                        stop=_rename_operand(loop.stop, to_canon),
                        step=_rename_operand(loop.step, to_canon), body=[cseg])
        if live_after is None:
            result = lift(cloop, cseg, ctypes, cactive, budget, temps)
        else:
            result = lift(cloop, cseg, ctypes, cactive, budget, temps,
                          live_after={to_canon.get(v, v) for v in live_after})
    return _back(result, names)



_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


def show_temps(text, fn, depth=6):
    """``text`` (a formula for people) with each compiler temporary of ``fn`` (``fn.temps``)
    replaced by the source expression it stands for, rebuilt from its one defining statement
    (``_t1`` -> ``n`` for ``range(n)``; ``_t5`` -> ``(y * math.log(p))``); a temporary defined
    more than once, or nested deeper than ``depth``, keeps its name.  For display only."""
    if not isinstance(text, str) or not fn.temps:
        return text
    defs = {}
    for st in walk(fn.body):
        if isinstance(st, Assign) and st.target in fn.temps:
            defs[st.target] = None if st.target in defs else st

    def operand(op, d):
        if isinstance(op, Var):
            return name(op.name, d)
        return repr(op.value), 9

    def name(n, d):
        st = defs.get(n)
        if st is None or d <= 0 or st.attrs:
            return n, 9
        if st.index:
            if not REGISTRY[st.op].indexing or not all(isinstance(i, (Var, Const)) for i in st.index):
                return n, 9
            base, _ = operand(st.args[0], d - 1)
            return f"{base}[{', '.join(operand(i, d - 1)[0] for i in st.index)}]", 9
        args = [operand(a, d - 1) for a in st.args]
        prim = REGISTRY.get(st.op)
        if len(args) == 1 and prim is not None and prim.transparent:
            return args[0]
        if prim is not None and prim.prefix and len(args) == 1:
            a, p = args[0]
            return prim.prefix + (a if p >= 4 else f"({a})"), 4
        if prim is not None and prim.infix and len(args) == 2:
            sym, prec, associative = prim.infix
            (a, pa), (b, pb) = args
            a = a if pa >= prec else f"({a})"
            b = b if pb > prec or (pb == prec and associative) else f"({b})"
            return f"{a} {sym} {b}", prec
        spelled = (f"math.{prim.math[0]}" if prim is not None and prim.math else
                   f"np.{prim.numpy[0]}" if prim is not None and prim.numpy else st.op)
        return f"{spelled}({', '.join(a for a, _ in args)})", 9

    def sub(m):
        n = m.group(0)
        if n not in fn.temps:
            return n
        t, prec = name(n, depth)
        return t if prec >= 9 else f"({t})"

    def part(p):        # ``output = formula``: the output keeps its name
        lhs, eq, rhs = p.partition(" = ")
        return lhs + eq + _IDENT.sub(sub, rhs) if eq else _IDENT.sub(sub, p)
    return "; ".join(part(p) for p in text.split("; "))
