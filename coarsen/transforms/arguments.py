"""The arguments of a transform's call: conversion, kinds and the overlap checks.

Requires: the arguments of one call, the module-level arrays the entry takes after them, and
``written``: the positions (parameters, then module-level arrays) the function may write.
Guarantees:

* ``convert_argument(a)`` is ``a`` as every generated entry takes it: float arrays as float64,
  integer arrays as int64 (copies where the dtype differs, the caller's array untouched),
  NumPy floats as ``float``, NumPy integers and ``int`` subclasses (an ``IntEnum`` member,
  which Numba types apart) as ``int``; anything else as it is.  It is the one conversion of
  the library: the transforms, their batches (workers of a Dask cluster included) and the
  export's embedded module-level arrays all use it, so all compute what ``g`` computes.
  ``convert_arguments(args, module_arrays)`` converts a call's arguments with the module-level
  arrays appended (a tuple); ``converted(arrays)`` a list of module-level arrays (converted at
  each call: a float32 or big-endian one would compute in float32 or fail to compile).
* ``kind_of(args)`` is a hashable key of the arguments' Python types (arrays: dtype and rank
  too): equal kinds have equal ``Signature``s (the transforms' fast path to a compiled
  program).
* ``overlap(args, module_arrays, written)`` is the first pair of positions ``(i, j)`` whose
  arrays share memory where either is written, or None; ``alias_error(fname, params, i, j,
  written)`` the gradient's ``CoarsenError`` that names them.  ``check_aliasing(src, params,
  args, module_arrays, written)`` raises the forward transforms' error (at the function's
  definition) for the first such pair.  The generated code copies written arrays at entry, so
  it would not see one write through the other as the function itself does.
"""
from __future__ import annotations

import numpy as np

from ..errors import CoarsenError

from .artifact import function_error

__all__ = ["alias_error", "check_aliasing", "convert_argument", "convert_arguments", "converted",
           "kind_of", "overlap"]


def convert_argument(a):
    """``a`` as generated entries take it: float64 and int64 arrays, Python scalars."""
    if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.dtype != np.float64:
        return a.astype(np.float64)
    if isinstance(a, np.ndarray) and a.dtype.kind in "iu" and a.dtype != np.int64:
        return a.astype(np.int64)
    if isinstance(a, np.floating):
        return float(a)
    if isinstance(a, np.integer) or (isinstance(a, int) and type(a) not in (int, bool)):
        return int(a)          # an IntEnum member, which Numba types apart, too
    return a


def convert_arguments(args, module_arrays=()):
    """The arguments, module-level arrays appended, as the entry takes them (a tuple)."""
    return tuple(convert_argument(a) for a in tuple(args) + tuple(module_arrays))


def converted(arrays):
    """Module-level arrays as the entries take them (``convert_argument`` of each)."""
    return [convert_argument(a) for a in arrays]


def kind_of(args):
    """A hashable key of the arguments' Python types (arrays: dtype and rank too)."""
    return tuple((np.ndarray, a.dtype.str, a.ndim) if isinstance(a, np.ndarray) else type(a)
                 for a in args)


def check_aliasing(src, params, args, module_arrays, written):
    """``CoarsenError`` at the function when two arrays of ``args`` (then ``module_arrays``)
    overlap in memory and ``written`` (positions in that order) holds either."""
    arrays = [(k, a) for k, a in enumerate(tuple(args) + tuple(module_arrays))
              if isinstance(a, np.ndarray)]
    for i, (k, a) in enumerate(arrays):
        for m, b in arrays[i + 1:]:
            if (k in written or m in written) and np.may_share_memory(a, b):
                names = list(params) + [f"<module-level array {j}>"
                                        for j in range(len(module_arrays))]
                raise function_error(src, f"arguments {names[k]!r} and {names[m]!r} overlap "
                                     "in memory and the function writes one of them",
                                     "pass copies: np.copy(...)")


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
