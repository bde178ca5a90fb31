"""History arrays: rows a time loop writes once, after every read of them in its trips.

Requires: a typed (and planned) ``ir.Function``.
Guarantees: ``history_rows(fn)`` gives, per ``range`` loop of step 1, the arrays it fills row
by row (``u[t + 1, i] = ...`` in trip ``t``, the heat equation's and an RNN's state history)
and the stores that fill them: ``{id(loop): {array: frozenset(ids of its stores)}}``.  An array
qualifies when, inside the loop,

* every store into it has first index ``t + c`` with one constant ``c >= 1`` for them all
  (``t`` the loop's index, through integer temporaries ``_t = t + 1``);
* every element read of it has first index ``t + d`` with a constant ``d < c``, or ``d == c``
  in a statement of the loop body after every one that stores into it (the row this trip
  wrote, read once it is written);
* it appears in nothing else (no whole-array use, no view), and is neither a view nor viewed.

Then each row the loop writes is written in one trip only, and every read in the loop's trips
of a row the loop writes comes after that write: no read inside the loop sees an element that
a store of the loop later overwrites.  If, in addition, nothing read in the reverse sweep
before the loop is pending on the array when the loop starts (``recording.tape_sites``
checks this), those stores need not save the elements they overwrite.  Nothing is modified.
"""
from __future__ import annotations

from ..ir.nodes import Assign, Const, For, Store, Var, walk

__all__ = ["history_rows"]


def history_rows(fn):
    defs = {}
    for st in walk(fn.body):
        if isinstance(st, Assign):
            defs.setdefault(st.target, []).append(st)
    viewed = set(fn.views) | set(fn.views.values())

    def offset(item, var):
        """``c`` when ``item`` is ``var + c`` (``var`` itself: 0), else None."""
        for _ in range(8):
            if item == Var(var):
                return 0
            if not isinstance(item, Var) or len(defs.get(item.name, [])) != 1:
                return None
            d = defs[item.name][0]
            if d.op == "copy" and len(d.args) == 1:
                item = d.args[0]
                continue
            if d.op in ("add", "sub") and len(d.args) == 2:
                a, b = d.args
                if d.op == "add" and isinstance(a, Const) and a.value is not None:
                    a, b = b, a
                if a == Var(var) and isinstance(b, Const) and type(b.value) is int:
                    return b.value if d.op == "add" else -b.value
            return None
        return None

    out = {}
    for loop in walk(fn.body):
        if not isinstance(loop, For) or loop.step != Const(1):
            continue
        writes, reads, other = {}, {}, set()
        top = {id(x): k for k, t in enumerate(loop.body) for x in walk([t])}
        for st in walk(loop.body):
            if isinstance(st, Store):
                c = offset(st.index[0], loop.var) if st.index else None
                writes.setdefault(st.array, []).append((st, c, top[id(st)]))
                if isinstance(st.value, Var):
                    other.add(st.value.name)
                other.update(it.name for it in st.index if isinstance(it, Var))
            elif isinstance(st, Assign):
                args = [a.name for a in st.args if isinstance(a, Var)]
                if st.op == "getitem" and args:
                    d = offset(st.index[0], loop.var) if st.index else None
                    reads.setdefault(args[0], []).append((d, top[id(st)]))
                    args = args[1:]
                elif st.op == "dim":
                    args = []
                other.update(args)
                other.update(it.name for it in st.index if isinstance(it, Var))
            else:
                for attr in ("cond", "test", "start", "stop", "step"):
                    v = getattr(st, attr, None)
                    if isinstance(v, Var):
                        other.add(v.name)
        found = {}
        for a, ws in writes.items():
            cs = {c for _, c, _ in ws}
            if len(cs) != 1 or None in cs or min(cs) < 1 or a in other or a in viewed:
                continue
            c = cs.pop()
            last = max(k for _, _, k in ws)
            if any(d is None or d > c or (d == c and k <= last) for d, k in reads.get(a, ())):
                continue
            found[a] = frozenset(id(st) for st, _, _ in ws)
        if found:
            out[id(loop)] = found
    return out
