"""The overlap check of a gradient's array arguments.

Requires: the arguments of one call, the module-level arrays the entry takes after them, and
``written``: the positions (parameters, then module-level arrays) the function may write.
Guarantees: ``overlap(args, module_arrays, written)`` is the first pair of positions ``(i, j)``
whose arrays share memory where either is written, or None; ``alias_error(fname, params, i, j,
written)`` the ``CoarsenError`` that names them.  The generated code copies written arrays at
entry, so it would not see one write through the other as the function itself does.
(``coarsen.forward_api.check_aliasing`` is the forward transforms' check, with its own
message.)
"""
from __future__ import annotations

import numpy as np

from ..errors import CoarsenError

__all__ = ["alias_error", "overlap"]


def overlap(args, module_arrays, written):
    arrays = [(i, a) for i, a in enumerate(tuple(args) + tuple(module_arrays))
              if isinstance(a, np.ndarray)]
    n = len(arrays)
    for x in range(n):
        i, a = arrays[x]
        for y in range(x + 1, n):
            j, b = arrays[y]
            if (i in written or j in written) and np.may_share_memory(a, b) \
                    and np.shares_memory(a, b):
                return i, j
    return None


def alias_error(fname, params, i, j, written):
    n = len(params)

    def what(k):
        return f"parameter {params[k]!r}" if k < n else f"a module-level array that {fname} reads"
    names = [params[k] for k in (i, j) if k < n and k in written]
    return CoarsenError(
        f"{what(i)} and {what(j)} of {fname} overlap in memory, and {fname} writes "
        f"{' and '.join(repr(m) for m in names)}; the gradient would treat them as separate arrays",
        hint=f"pass a copy of one of them (e.g. {params[j if j < n else i]}.copy())")
