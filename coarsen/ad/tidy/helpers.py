"""Unused runtime helpers and imports: a module keeps only the helpers its entries call.

Requires: a generated module: the runtime helpers are its top-level functions whose names
start with ``_`` (as ``coarsen.lowering.shared_helpers`` assumes), the entries its other
top-level functions; imports at the top.
Guarantees: ``drop_unused_helpers(module)`` returns a new module without the helpers that no
entry reaches (reads by name, transitively through the helpers it keeps, ``_reserve`` keeping
``_grow``) and without the ``import math`` / ``import numpy as np`` whose name nothing left
reads.  Every other statement is kept, in order.  The input is not changed.
"""
from __future__ import annotations

import gast

from .nodes import walk
_STANDARD = {"math", "numpy"}


def _is_helper(st):
    return isinstance(st, gast.FunctionDef) and st.name.startswith("_")


def _names(node):
    return {n.id for n in walk(node) if isinstance(n, gast.Name)}


def drop_unused_helpers(module):
    """See the module docstring."""
    helpers = {st.name: st for st in module.body if _is_helper(st)}
    used, todo = set(), []
    for st in module.body:
        if not _is_helper(st):
            todo += sorted(_names(st) & set(helpers))
    while todo:
        name = todo.pop()
        if name in used:
            continue
        used.add(name)
        todo += sorted(_names(helpers[name]) & set(helpers))
    body = [st for st in module.body if not _is_helper(st) or st.name in used]
    read = set()
    for st in body:
        if not isinstance(st, (gast.Import, gast.ImportFrom)):
            read |= _names(st)
    out = []
    for st in body:
        if isinstance(st, gast.Import):
            kept = [a for a in st.names if a.name not in _STANDARD
                    or (a.asname or a.name.split(".")[0]) in read]
            if not kept:
                continue
            if len(kept) != len(st.names):
                st = gast.Import(names=kept)
        out.append(st)
    return gast.Module(body=out, type_ignores=list(module.type_ignores))
