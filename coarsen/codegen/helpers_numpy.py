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
* ``_sort_along(a, axis)``/``_sort_adj(a, g, axis)``: the same along any axis of any rank
  (the axis swapped last, rows of a C-ordered copy); ``_partition_along(a, kth, axis)`` is
  ``np.partition`` as ``a[np.argpartition(a, kth)]`` along the axis (NumPy's own arrangement
  on the python target, Numba's ``argpartition`` on the cpu target: the same two sides, an
  order within them NumPy leaves undefined), ``_partition_adj`` its adjoint through that
  permutation, ``_sort_tangent``/``_partition_tangent`` the tangents (the transposed maps:
  gathered by the permutation, ``sort``'s averaged over runs of equal values); ``_kth`` raises NumPy's ``ValueError`` for a ``kth`` out of bounds;
* ``_diag_of(a, k)``: ``np.diagonal(a, k)`` of a 2-D array (a fresh array);
  ``_diag_adj(g, k, shape)``: its adjoint into an array of ``shape``; ``_trace_adj(g, k,
  shape)``: the adjoint of ``np.trace(a, k)``; ``_diag_last2``, ``_diag_last2_adj``,
  ``_trace_last2_adj``: the same over the last two axes of an array of any rank (the
  diagonal last, as NumPy puts it); ``_tri_keep(x, k, lower)``: ``np.tril``
  (``lower``) or ``np.triu`` of the last two axes of ``x`` (a copy, the rest zeroed);
* ``_last3(x)``: ``x``, or a ``ValueError`` where its last axis is not of length 3;
* ``_nan_to_num_kw(x, nan, posinf, neginf)``: ``np.nan_to_num`` of a float array with those
  replacements (Numba's takes ``nan`` only);
* ``_pad1``/``_pad2``/``_pad3(x, before0, after0, ..., c)``: ``np.pad(x, widths,
  mode="constant", constant_values=c)`` of a 1-, 2- or 3-D ``x`` (its dtype).
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


def _diag_adj(g, k, shape):
    out = np.zeros((shape[0], shape[1]))
    i0 = -k if k < 0 else 0
    j0 = k if k > 0 else 0
    for t in range(g.shape[0]):
        out[i0 + t, j0 + t] += g[t]
    return out


def _trace_adj(g, k, shape):
    out = np.zeros((shape[0], shape[1]))
    i0 = -k if k < 0 else 0
    j0 = k if k > 0 else 0
    length = max(0, min(shape[0] - i0, shape[1] - j0))
    for t in range(length):
        out[i0 + t, j0 + t] = g
    return out


def _diag_last2(a, k):
    n = a.shape[-2]
    m = a.shape[-1]
    i0 = -k if k < 0 else 0
    j0 = k if k > 0 else 0
    length = max(0, min(n - i0, m - j0))
    out = np.empty(a.shape[:-2] + (length,), a.dtype)
    for t in range(length):
        out[..., t] = a[..., i0 + t, j0 + t]
    return out


def _diag_last2_adj(g, k, shape):
    out = np.zeros(shape)
    i0 = -k if k < 0 else 0
    j0 = k if k > 0 else 0
    for t in range(g.shape[-1]):
        out[..., i0 + t, j0 + t] = g[..., t]
    return out


def _trace_last2_adj(g, k, shape):
    out = np.zeros(shape)
    i0 = -k if k < 0 else 0
    j0 = k if k > 0 else 0
    length = max(0, min(shape[-2] - i0, shape[-1] - j0))
    for t in range(length):
        out[..., i0 + t, j0 + t] = g
    return out


def _tri_keep(x, k, lower):
    out = x.copy()
    n = x.shape[-2]
    m = x.shape[-1]
    for i in range(n):
        for j in range(m):
            if (lower and j - i > k) or (not lower and j - i < k):
                out[..., i, j] = 0
    return out


def _sort_along(a, axis):
    t = np.ascontiguousarray(np.swapaxes(a, axis, -1))
    n = t.shape[-1]
    s2, p2 = _sort_rows(t.reshape((t.size // max(n, 1), n)))
    return np.ascontiguousarray(np.swapaxes(s2.reshape(t.shape), axis, -1))


def _sort_adj(a, g, axis):
    t = np.ascontiguousarray(np.swapaxes(a, axis, -1))
    n = t.shape[-1]
    rows = t.size // max(n, 1)
    s2, p2 = _sort_rows(t.reshape((rows, n)))
    g2 = np.ascontiguousarray(np.swapaxes(g, axis, -1)).reshape((rows, n))
    return np.ascontiguousarray(np.swapaxes(_sort_adj_rows(s2, p2, g2).reshape(t.shape), axis, -1))


def _partition_rows(a2, kth):
    rows = a2.shape[0]
    n = a2.shape[1]
    perm = np.empty((rows, n), np.int64)
    out = np.empty((rows, n), a2.dtype)
    for r in range(rows):
        p = np.argpartition(a2[r], kth)
        for j in range(n):
            perm[r, j] = p[j]
            out[r, j] = a2[r, p[j]]
    return out, perm


def _kth(kth, n):
    if not -n <= kth < n:
        raise ValueError("kth out of bounds")
    return kth % n


def _partition_along(a, kth, axis):
    t = np.ascontiguousarray(np.swapaxes(a, axis, -1))
    n = t.shape[-1]
    s2, p2 = _partition_rows(t.reshape((t.size // max(n, 1), n)), _kth(kth, n))
    return np.ascontiguousarray(np.swapaxes(s2.reshape(t.shape), axis, -1))


def _partition_adj(a, g, kth, axis):
    t = np.ascontiguousarray(np.swapaxes(a, axis, -1))
    n = t.shape[-1]
    rows = t.size // max(n, 1)
    s2, p2 = _partition_rows(t.reshape((rows, n)), _kth(kth, n))
    g2 = np.ascontiguousarray(np.swapaxes(g, axis, -1)).reshape((rows, n))
    out = np.zeros((rows, n))
    for r in range(rows):
        for j in range(n):
            out[r, p2[r, j]] += g2[r, j]
    return np.ascontiguousarray(np.swapaxes(out.reshape(t.shape), axis, -1))


def _sort_tangent(a, d, axis):
    t = np.ascontiguousarray(np.swapaxes(a, axis, -1))
    n = t.shape[-1]
    rows = t.size // max(n, 1)
    s2, p2 = _sort_rows(t.reshape((rows, n)))
    d2 = np.ascontiguousarray(np.swapaxes(d, axis, -1)).reshape((rows, n))
    out = np.empty((rows, n))
    for r in range(rows):
        j = 0
        while j < n:
            e = j + 1
            total = d2[r, p2[r, j]]
            while e < n and s2[r, e] == s2[r, j]:
                total += d2[r, p2[r, e]]
                e += 1
            share = total / (e - j) if e - j > 1 else total
            for q in range(j, e):
                out[r, q] = share
            j = e
    return np.ascontiguousarray(np.swapaxes(out.reshape(t.shape), axis, -1))


def _partition_tangent(a, d, kth, axis):
    t = np.ascontiguousarray(np.swapaxes(a, axis, -1))
    n = t.shape[-1]
    rows = t.size // max(n, 1)
    s2, p2 = _partition_rows(t.reshape((rows, n)), _kth(kth, n))
    d2 = np.ascontiguousarray(np.swapaxes(d, axis, -1)).reshape((rows, n))
    out = np.empty((rows, n))
    for r in range(rows):
        for j in range(n):
            out[r, j] = d2[r, p2[r, j]]
    return np.ascontiguousarray(np.swapaxes(out.reshape(t.shape), axis, -1))


def _last3(x):
    if x.shape[-1] != 3:
        raise ValueError("coarsen: np.cross of vectors of length 3 only (2-vectors give a result "
                         "of another rank)")
    return x


def _pad1(x, b0, a0, c):
    out = np.full((x.shape[0] + b0 + a0,), c, x.dtype)
    out[b0:b0 + x.shape[0]] = x
    return out


def _pad2(x, b0, a0, b1, a1, c):
    out = np.full((x.shape[0] + b0 + a0, x.shape[1] + b1 + a1), c, x.dtype)
    out[b0:b0 + x.shape[0], b1:b1 + x.shape[1]] = x
    return out


def _pad3(x, b0, a0, b1, a1, b2, a2, c):
    out = np.full((x.shape[0] + b0 + a0, x.shape[1] + b1 + a1, x.shape[2] + b2 + a2), c, x.dtype)
    out[b0:b0 + x.shape[0], b1:b1 + x.shape[1], b2:b2 + x.shape[2]] = x
    return out


def _nan_to_num_kw(x, nan, posinf, neginf):
    flat = np.ascontiguousarray(x).copy().reshape(x.size)
    for i in range(flat.size):
        v = flat[i]
        if v != v:
            flat[i] = nan
        elif v == np.inf:
            flat[i] = posinf
        elif v == -np.inf:
            flat[i] = neginf
    return flat.reshape(x.shape)


#: name -> helper, in the order written here
NUMPY_HELPERS = {f.__name__: f for f in (
    _squeeze_axis, _sort_rows, _sort_adj_rows, _diag_of, _diag_adj, _trace_adj, _diag_last2,
    _diag_last2_adj, _trace_last2_adj, _tri_keep,
    _sort_along, _sort_adj, _partition_rows, _kth, _partition_along, _partition_adj,
    _sort_tangent, _partition_tangent, _last3, _pad1, _pad2, _pad3, _nan_to_num_kw)}
