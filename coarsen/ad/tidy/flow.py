"""Facts about one generated function that the tidy rewrites need: stores, reads, liveness.

Requires: a ``gast.FunctionDef`` as the drivers emit it (statements ``Assign``, ``AugAssign``,
``AnnAssign``, ``Expr``, ``If``, ``For``, ``While``, ``Return``, ``Raise``, ``Assert``,
``Pass``, ``Break``, ``Continue``; anything else makes ``plain`` false).
Guarantees:

* ``plain(fn)``: the function's statements are all of those kinds and it has no nested scope
  (``lambda``, comprehension, nested ``def``), no ``global``/``nonlocal``, no ``del``: a
  name is then bound only by the stores the walk sees, and the analyses below are exact
  about names (they say nothing of array elements, which no rewrite here touches).
* ``store_counts(fn)``: {name: how many statements bind it} (parameters count one each).
* ``live_after(fn)``: {id of each statement: the names that some path from the end of that
  statement reads before binding them again}: a backward may-liveness over the structured
  code, loops iterated to their fixed point, ``break``/``continue`` to their loop's exit or
  head, ``return``/``raise`` ending the path.  Conservative: a store kills a name only when
  it binds the whole name (``x = ...``, a ``for`` target); ``x += ...`` and ``x[i] = ...``
  read ``x``.
* ``remove(fn, ids)``: a new function without the statements whose ids are given, each
  removed statement's comment handed to the statement after it in its block (its description
  lines prepended; its copy of the source line only where that statement comes from the same
  line, or from none and has no comment of its own and is no ``return``); a block the
  removal would leave empty keeps ``pass``.  The input is not changed.
"""
from __future__ import annotations

import gast

from .nodes import clone, walk
_STMTS = (gast.Assign, gast.AugAssign, gast.AnnAssign, gast.Expr, gast.If, gast.For, gast.While,
          gast.Return, gast.Raise, gast.Assert, gast.Pass, gast.Break, gast.Continue)
_SCOPES = (gast.Lambda, gast.ListComp, gast.SetComp, gast.DictComp, gast.GeneratorExp,
           gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef, gast.Global, gast.Nonlocal,
           gast.Delete, gast.NamedExpr)


def blocks(stmts):
    """Every statement list of ``stmts`` and below, ``stmts`` first (depth first)."""
    out = [stmts]
    for st in stmts:
        for field in ("body", "orelse"):
            sub = getattr(st, field, None)
            if isinstance(sub, list) and sub:
                out += blocks(sub)
    return out


def plain(fn):
    """See the module docstring."""
    for node in walk(fn):
        if node is not fn and isinstance(node, _SCOPES):
            return False
        if isinstance(node, gast.stmt) and not isinstance(node, _STMTS) and node is not fn:
            return False
    return True


def reads(node):
    """The names ``node`` (an expression or a statement and its blocks) reads."""
    return {n.id for n in walk(node) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load)}


def store_counts(fn):
    """See the module docstring."""
    counts = {}
    for a in fn.args.args:
        if isinstance(a, gast.Name):
            counts[a.id] = counts.get(a.id, 0) + 1
    for node in walk(fn):
        for name in bound_by(node):
            counts[name] = counts.get(name, 0) + 1
    return counts


def bound_by(node):
    """The names ``node`` binds itself, one per store in its targets (an ``Assign``,
    ``AugAssign``, ``AnnAssign`` or ``For``; nothing for any other node)."""
    targets = ()
    if isinstance(node, gast.Assign):
        targets = node.targets
    elif isinstance(node, (gast.AugAssign, gast.AnnAssign, gast.For)):
        targets = (node.target,)
    return [n.id for t in targets for n in walk(t)
            if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)]


def _target_kills_reads(target):
    """(names bound whole, names read) of an assignment target."""
    if isinstance(target, gast.Name):
        return {target.id}, set()
    if isinstance(target, (gast.Tuple, gast.List)):
        kills, rd = set(), set()
        for e in target.elts:
            k, r = _target_kills_reads(e)
            kills |= k
            rd |= r
        return kills, rd
    # x[i] = ..., x.a = ...: the object is read, no name is bound
    return set(), reads(target) | {n.id for n in walk(target) if isinstance(n, gast.Name)}


class _Liveness:
    def __init__(self):
        self.after = {}
        self.loops = []     # (exit liveness, head liveness) of the enclosing loops

    def block(self, stmts, live):
        for st in reversed(stmts):
            self.after[id(st)] = self.after.get(id(st), frozenset()) | live
            live = self.stmt(st, live)
        return live

    def stmt(self, st, live):
        if isinstance(st, gast.Assign):
            kills, rd = set(), set()
            for t in st.targets:
                k, r = _target_kills_reads(t)
                kills |= k
                rd |= r
            return (live - kills) | rd | reads(st.value)
        if isinstance(st, gast.AugAssign):
            return live | reads(st.value) | {n.id for n in walk(st.target) if isinstance(n, gast.Name)}
        if isinstance(st, gast.AnnAssign):
            k, r = _target_kills_reads(st.target)
            return (live - k) | r | (reads(st.value) if st.value is not None else set())
        if isinstance(st, gast.If):
            return reads(st.test) | self.block(st.body, live) | self.block(st.orelse, live)
        if isinstance(st, (gast.For, gast.While)):
            return self.loop(st, live)
        if isinstance(st, (gast.Return, gast.Raise)):
            return frozenset(reads(st))
        if isinstance(st, gast.Break):
            return self.loops[-1][0]
        if isinstance(st, gast.Continue):
            return self.loops[-1][1]
        return live | reads(st)         # Expr, Assert, Pass

    def loop(self, st, live):
        exit_live = frozenset(self.block(st.orelse, live)) if st.orelse else frozenset(live)
        head = exit_live
        while True:
            # the head: leave (the test fails, the iterator ends) or run the body again
            self.loops.append((frozenset(live), head))
            body = self.block(st.body, head)
            self.loops.pop()
            if isinstance(st, gast.For):
                kills, rd = _target_kills_reads(st.target)
                new = frozenset(head | (body - kills) | rd)
            else:
                new = frozenset(head | body | reads(st.test))
            if new == head:
                break
            head = new
        return head | (reads(st.iter) if isinstance(st, gast.For) else set())


def live_after(fn):
    """See the module docstring."""
    an = _Liveness()
    an.block(fn.body, frozenset())
    return an.after


def _source_text(st):
    loc = getattr(st, "_coarsen_loc", None)
    return getattr(loc, "text", None)


def _line(st):
    loc = getattr(st, "_coarsen_loc", None)
    return None if loc is None else (getattr(loc, "filename", None), getattr(loc, "lineno", None))


def _hand_on(removed, nxt):
    """Give ``removed``'s comment to ``nxt`` (see the module docstring)."""
    text = getattr(removed, "coarsen_comment", None)
    if not text or nxt is None:
        return
    own = getattr(nxt, "coarsen_comment", None)
    lines = text.split("\n")
    # the copy of the removed statement's source line stays only where the next statement
    # comes from the same line, or from none and is no return (its group goes on)
    src = _source_text(removed)
    same = _line(nxt) == _line(removed) if _line(nxt) is not None else \
        not own and not isinstance(nxt, gast.Return)
    if not same:
        lines = [ln for ln in lines if ln != src]
    if own:
        lines = [ln for ln in lines if ln not in own.split("\n")]
    if lines:
        nxt.coarsen_comment = "\n".join(lines + ([own] if own else []))


def _remove_block(stmts, ids):
    # a removed statement hands its comment on to the next one, removed or not (in order)
    for k, st in enumerate(stmts):
        if id(st) in ids:
            _hand_on(st, stmts[k + 1] if k + 1 < len(stmts) else None)
    out = []
    for st in stmts:
        if id(st) in ids:
            continue
        for field in ("body", "orelse"):
            sub = getattr(st, field, None)
            if isinstance(sub, list) and sub:
                new = _remove_block(sub, ids)
                if not new:
                    new = [] if field == "orelse" else [gast.Pass()]
                setattr(st, field, new)
        out.append(st)
    return out


def remove(fn, ids):
    """See the module docstring (``ids``: ids of statements of ``fn``, not of a copy)."""
    if not ids:
        return fn
    # copy, carrying the ids over: map each original statement to its copy
    new = clone(fn)
    old_stmts = [s for b in blocks(fn.body) for s in b]
    new_stmts = [s for b in blocks(new.body) for s in b]
    remove_in_place(new, {id(n) for o, n in zip(old_stmts, new_stmts) if id(o) in ids})
    return new


def remove_in_place(fn, ids):
    """``remove`` on the function itself (for a rewrite working on its own copy)."""
    fn.body = _remove_block(fn.body, ids) or [gast.Pass()]
