"""Reading and annotating generated code, for both AD modes and their passes.

Requires: gast statements (as ``coarsen.codegen.build`` makes them); a statement the frontend
lowered from a source line carries ``_coarsen_loc`` (a ``Loc``: filename, line, text).
Guarantees: ``names_read(nodes, ctx)`` is the set of the names the code reads (or, with
``ctx=gast.Store``, assigns), nothing changed; ``shape_only(nodes, names)`` those of ``names``
the code reads only as ``name.shape``; ``comment_pass(stmts)`` sets ``coarsen_comment``
(the source line's text, which the printer writes as a comment) on the first statement of
each run of statements from one source line, in place, and keeps a comment already set;
``substitute(node, replace)`` is ``node`` (modified in place) with each subtree for which
``replace`` gives a node replaced by it, outermost first.
"""
from __future__ import annotations

import gast


def names_read(nodes, ctx=gast.Load):
    """The names the code ``nodes`` reads (``ctx=gast.Store``: assigns)."""
    out = set()
    for n in nodes:
        for sub in gast.walk(n):
            if isinstance(sub, gast.Name) and isinstance(sub.ctx, ctx):
                out.add(sub.id)
    return out


def name_counts(nodes):
    """``{name: how many times the code nodes mentions it}`` (a node two places share counts
    twice, as a walk meets it)."""
    out = {}
    for n in nodes:
        for sub in gast.walk(n):
            if isinstance(sub, gast.Name):
                out[sub.id] = out.get(sub.id, 0) + 1
    return out


def mentions(node, name):
    """How many times ``node`` mentions ``name`` (read, bound or deleted)."""
    return sum(1 for sub in gast.walk(node) if isinstance(sub, gast.Name) and sub.id == name)


def shape_only(nodes, names):
    """Those of ``names`` that ``nodes`` read as ``name.shape`` and in no other way."""
    other, shaped = set(), set()
    for n in nodes:
        for sub in gast.walk(n):
            if isinstance(sub, gast.Attribute) and sub.attr == "shape" and \
                    isinstance(sub.value, gast.Name):
                shaped.add(id(sub.value))
    for n in nodes:
        for sub in gast.walk(n):
            if isinstance(sub, gast.Name) and isinstance(sub.ctx, gast.Load) and \
                    id(sub) not in shaped:
                other.add(sub.id)
    return {n for n in names if n not in other}


def comment_pass(stmts, last=None):
    """Comment each run of statements from one source line with that line (in place); returns
    the last line commented (the caller's ``last`` for the statements that follow)."""
    for st in stmts:
        loc = getattr(st, "_coarsen_loc", None)
        if loc is not None:
            key = (loc.filename, loc.lineno)
            if getattr(st, "coarsen_comment", None):
                last = key
            elif key != last:
                st.coarsen_comment = f"{loc.text}"
                last = key
        for field in ("body", "orelse"):
            sub = getattr(st, field, None)
            if isinstance(sub, list) and sub and field in ("body", "orelse"):
                comment_pass(sub, last)
    return last


def substitute(node, replace):
    """``node`` (modified in place) with each subtree for which ``replace`` gives a node
    replaced by it, outermost first."""
    new = replace(node)
    if new is not None:
        return new
    for field, value in gast.iter_fields(node):
        if isinstance(value, gast.AST):
            setattr(node, field, substitute(value, replace))
        elif isinstance(value, list):
            setattr(node, field, [substitute(v, replace) if isinstance(v, gast.AST) else v
                                  for v in value])
    return node
