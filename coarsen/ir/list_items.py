"""The check that a growable list's array elements are not changed after they are appended.

Requires: a typed ``Function`` (``fn.types``, ``fn.views``, in-place updates already stores:
``coarsen.ir.inplace``) whose growable lists (``coarsen.frontend.growable``) append through
``list_item(v, buf)`` into buffers that ``list_grow`` makes.
Guarantees: ``check_appended(fn)`` raises a ``CoarsenError`` at the append where an appended
array ``v`` (or the array it views) is the target of any store of the function other than a
list's own rows: a Python list holds the array itself, so a later change would show in the
list, while coarsen copies it into the list's buffer when it is appended.  (Conservative: a
store before the append is refused too; ``xs.append(x.copy())`` is always accepted.)
"""
from __future__ import annotations

from ..errors import at_stmt
from .nodes import Array, Assign, Store, Var, walk


def check_appended(fn):
    """See the module docstring."""
    items = [s for s in walk(fn.body) if isinstance(s, Assign) and s.op == "list_item"]
    if not items:
        return
    buffers = {s.target for s in walk(fn.body) if isinstance(s, Assign) and s.op == "list_grow"}
    root = fn.views or {}
    stored = {root.get(s.array, s.array) for s in walk(fn.body)
              if isinstance(s, Store) and s.array not in buffers}
    for s in items:
        v = s.args[0]
        if not (isinstance(v, Var) and isinstance(fn.types.get(v.name), Array)):
            continue
        base = root.get(v.name, v.name)
        if base in stored and base not in buffers:
            raise at_stmt(s, "this array is written into elsewhere in the function; a Python list "
                             "would hold the array itself and show later changes, coarsen copies "
                             "it when it is appended", "append a copy: xs.append(x.copy())")
