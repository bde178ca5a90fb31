"""Fixed runtime helpers of growable lists (``xs = []``, ``xs.append(v)``; see
``coarsen.frontend.growable``): a buffer of one element type whose first ``n`` rows are the
list.

Requires: NumPy (``np``) only; each helper calls only NumPy and builtins.
Guarantees: ``_list_grow_s(buf, n)`` / ``_list_grow_a(buf, n, v)``: a new buffer of ``2 n + 4``
rows (scalars; rows shaped like the array ``v``), its first ``n`` rows ``buf``'s (the capacity
doubles, so all the copies of a list of ``N`` appends move fewer than ``2 N`` rows);
``_list_grow_adj(g, n, shape)``: the adjoint of the old buffer (``g``'s first ``n`` rows, zeros
after); ``_list_item(v, buf)``: ``v`` itself where its shape is a row's, else ``ValueError`` (a
list whose element shape changes is refused; a Python list would take it, NumPy could not
make an array of it); ``_list_index(k, n)``: Python's index ``k`` into a list of ``n`` (from
the end where negative), ``IndexError('list index out of range')`` outside it;
``_list_sum_s/_a(buf, n)``: Python's ``sum(xs)``, ``0 + x0 + x1 + ...`` in that order (the same
bits), of scalars or of arrays (``ValueError`` for an empty list of arrays, where Python gives
the integer 0, which no array of the elements' shape is); ``_list_sum_adj(g, n, shape)``: its
adjoint, ``g`` in each of the first ``n`` rows; ``_list_count_a(n)``: ``n``, the number of
arrays in a list passed to NumPy, ``ValueError`` where it is 0 (NumPy makes an array of shape
``(0,)`` of an empty list, whatever its elements would have been: not the rank the list has
here).
"""
from __future__ import annotations

import numpy as np


def _list_grow_s(buf, n):
    out = np.empty(2 * n + 4, buf.dtype)
    for i in range(n):
        out[i] = buf[i]
    return out


def _list_grow_a(buf, n, v):
    out = np.empty((2 * n + 4,) + v.shape, buf.dtype)
    for i in range(n):
        out[i] = buf[i]
    return out


def _list_grow_adj(g, n, shape):
    out = np.zeros(shape)
    for i in range(n):
        out[i] = g[i]
    return out


def _list_item(v, buf):
    if v.shape != buf.shape[1:]:
        raise ValueError("a list's elements must all have one shape (coarsen builds it as one array)")
    return v


def _list_index(k, n):
    if k < 0:
        k += n
    if k < 0 or k >= n:
        raise IndexError("list index out of range")
    return k


def _list_sum_s(buf, n):
    acc = np.zeros(1, buf.dtype)[0]
    for i in range(n):
        acc += buf[i]
    return acc


def _list_sum_a(buf, n):
    if n == 0:
        raise ValueError("sum() of an empty list of arrays: Python gives the integer 0, not an "
                         "array (coarsen builds the list as one array of its elements)")
    acc = np.zeros(buf.shape[1:], buf.dtype)
    for i in range(n):
        acc += buf[i]
    return acc


def _list_count_a(n):
    if n == 0:
        raise ValueError("an empty list of arrays passed to NumPy: NumPy makes an array of "
                         "shape (0,) of it, coarsen one of the elements' rank plus one")
    return n


def _list_sum_adj(g, n, shape):
    out = np.zeros(shape)
    for i in range(n):
        out[i] = g
    return out


#: name -> helper
LIST_HELPERS = {f.__name__: f for f in (_list_grow_s, _list_grow_a, _list_grow_adj, _list_item,
                                        _list_index, _list_sum_s, _list_sum_a, _list_sum_adj,
                                        _list_count_a)}
