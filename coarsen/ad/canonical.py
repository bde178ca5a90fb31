"""Name-independent lifting: segments of interest are lifted under canonical names.

Requires: a ``Segment`` (and, for a closed-form loop, its ``For``), the variable types and
the active set; a lifting function of ``coarsen.ad.lift``.
Guarantees: the lifting function sees the segment with every variable renamed to
``_cv<segment>_<k>`` (``_cl<segment>_<k>`` for a closed-form loop), numbered in order of
first appearance, so what it computes depends on the program's structure only (compiler
temporaries ``_t<k>``, numbered in program order, keep their names).  SymPy orders the terms of sums and products, and CSE its
temporaries, by symbol name: lifted under the user's names, a renamed program would round
differently.  The info returned is mapped back: names in keys, lists, decisions and texts are
the real ones again; SymPy expressions keep the canonical symbols, which ``real_name`` maps
back when the emitter prints them (``info["names"]`` holds the segment's map).  The segment
itself is not modified.
"""
from __future__ import annotations

import re
from dataclasses import replace

from ..analysis.activity import is_temp
from ..ir.nodes import Assign, For, If, Segment, Slice, Store, Var, While, uses, walk

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


def _back_info(info, names):
    """The lifted info with the real names in every key, list, decision and text."""
    def r(n):
        return names.get(n, n)

    def partials(p):
        return {(r(o), r(i)): e for (o, i), e in p.items()}

    def decisions(ds):
        return tuple((_rename_operand(c, names), flag) for c, flag in ds)

    out = dict(info)
    if "partials" in out:
        out["partials"] = partials(out["partials"])
    if "paths" in out:
        out["paths"] = [(decisions(d), partials(p), jac) for d, p, jac in out["paths"]]
    for key in ("inputs", "outputs"):
        if isinstance(out.get(key), dict):
            out[key] = {s: r(n) for s, n in out[key].items()}
    if "carried" in out:
        out["carried"] = [r(n) for n in out["carried"]]
    for key in ("finals", "finals_n"):
        if key in out:
            out[key] = {r(n): e for n, e in out[key].items()}
    for key in ("formula", "fallback"):
        if key in out:
            out[key] = real_text(out[key], names)
    if "fallback" not in out:
        out["names"] = dict(names)
    return out


def lift_canonically(lift, seg, types, active, budget, loop=None):
    """``lift(seg, types, active, budget)`` (or ``lift(loop, seg, ...)`` when ``loop`` is
    given) on the canonically renamed segment, with the info mapped back (module docstring)."""
    order = _order(seg.stmts, loop)
    # compiler temporaries keep their names: they are numbered in program order already, and
    # the lifter recognizes them by name (single-use temporaries are inlined)
    # a closed-form loop and its segment (lifted again as the loop's body) use two name
    # spaces, so the emitter's one map back stays a function
    kind = "l" if loop is not None else "v"
    to_canon = {v: f"_c{kind}{seg.index}_{k}" for k, v in enumerate(order) if not is_temp(v)}
    names = {c: v for v, c in to_canon.items()}
    done = {}
    stmts = [_rename(s, to_canon, done) for s in seg.stmts]
    cseg = Segment(stmts, seg.loc, seg.index,
                   passengers=[done[id(p)] for p in seg.passengers],
                   inputs=[to_canon.get(v, v) for v in seg.inputs],
                   outputs=[to_canon.get(v, v) for v in seg.outputs], info=dict(seg.info))
    ctypes = dict(types)
    for v, c in to_canon.items():
        if v in types:
            ctypes[c] = types[v]
    cactive = set(active) | {to_canon[v] for v in active if v in to_canon}
    if loop is None:
        info = lift(cseg, ctypes, cactive, budget)
    else:
        cloop = replace(loop, var=to_canon.get(loop.var, loop.var),
                        start=_rename_operand(loop.start, to_canon),
                        stop=_rename_operand(loop.stop, to_canon),
                        step=_rename_operand(loop.step, to_canon), body=[cseg])
        info = lift(cloop, cseg, ctypes, cactive, budget)
    return _back_info(info, names)

