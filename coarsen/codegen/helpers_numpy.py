"""Fixed runtime helpers of NumPy functions Numba lacks or spells otherwise (issue 44a):
``np.squeeze``'s check of an axis, ``np.sort``/``np.partition`` along an axis with the
permutation their adjoints need, ``np.trace``/``np.diagonal`` and their adjoints.

Requires: NumPy (``np``) only; each helper calls only NumPy, builtins and the helpers of this
module (``coarsen.codegen.runtime`` lists them in ``HELPERS`` beside the others, so generated
modules carry them as they carry the others).
Guarantees: written for Numba's nopython mode and plain NumPy alike, each computes what the
NumPy function computes:

* ``_squeeze_axis(n)`` is 0 (the index of the one element of an axis of length ``n == 1``) and
  raises NumPy's ``ValueError`` for any other length;
* ``_sort_rows(a2)``: ``a2`` (2-D) sorted along its rows and, for each row, the stable
  (mergesort) permutation that sorts it; ``_sort_adj_rows(s2, p2, g2)``: the adjoint of that sort
  for the result's adjoint ``g2``, where the adjoint of each run of equal sorted values is
  shared evenly among the run (the convention of ``np.max``'s ties: sorting is the same
  function whichever tied element goes where);
* ``_diag_of(a, k)``: ``np.diagonal(a, k)`` of a 2-D array (a fresh array);
  ``_diag_adj(g, k, n, m)``: its adjoint into an ``n x m`` array.
"""
from __future__ import annotations

import numpy as np


def _squeeze_axis(n):
    if n != 1:
        raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
    return 0


def _sort_rows(a2):
    rows = a2.shape[0]
    n = a2.shape[1]
    perm = np.empty((rows, n), np.int64)
    out = np.empty((rows, n), a2.dtype)
    for r in range(rows):
        p = np.argsort(a2[r], kind="mergesort")
        for j in range(n):
            perm[r, j] = p[j]
            out[r, j] = a2[r, p[j]]
    return out, perm


def _sort_adj_rows(s2, p2, g2):
    rows = s2.shape[0]
    n = s2.shape[1]
    out = np.zeros((rows, n))
    for r in range(rows):
        j = 0
        while j < n:
            e = j + 1
            total = g2[r, j]
            while e < n and s2[r, e] == s2[r, j]:
                total += g2[r, e]
                e += 1
            share = total / (e - j) if e - j > 1 else total
            for q in range(j, e):
                out[r, p2[r, q]] += share
            j = e
    return out


def _diag_of(a, k):
    n = a.shape[0]
    m = a.shape[1]
    i0 = -k if k < 0 else 0
    j0 = k if k > 0 else 0
    length = max(0, min(n - i0, m - j0))
    out = np.empty(length, a.dtype)
    for t in range(length):
        out[t] = a[i0 + t, j0 + t]
    return out


def _diag_adj(g, k, n, m):
    out = np.zeros((n, m))
    i0 = -k if k < 0 else 0
    j0 = k if k > 0 else 0
    for t in range(g.shape[0]):
        out[i0 + t, j0 + t] += g[t]
    return out


#: name -> helper, in the order written here
NUMPY_HELPERS = {f.__name__: f for f in (_squeeze_axis, _sort_rows, _sort_adj_rows, _diag_of,
                                          _diag_adj)}
