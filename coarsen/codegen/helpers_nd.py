"""Fixed runtime helpers along one axis of an array of any rank: ``np.cumsum``, its adjoint,
and the adjoint of ``np.diff``.

Requires: NumPy (``np``) only; each helper calls only NumPy, builtins and the helpers of this
module (``coarsen.codegen.helpers`` lists them in ``HELPERS``, so generated modules carry them
as they carry the others).
Guarantees: the array is read as ``(pre, n, post)`` (``_split3``: the product of the axes
before ``axis``, its length, the product of those after; a C-contiguous copy where it is not
already, reshaped), so one loop nest serves every rank and axis; each result is a fresh array
of the argument's shape: ``_cumsum_nd(a, axis)`` is ``np.cumsum(a, axis=axis)`` (the same
additions in the same order, the input's dtype), ``_rcumsum_nd(g, axis)`` the reverse cumulative
sum (the adjoint of ``cumsum``), ``_diff_adj_nd(g, axis, shape)`` the adjoint of
``np.diff(x, axis=axis)`` for an ``x`` of ``shape`` (``-g`` at ``k``, ``+g`` at ``k + 1``).
"""
from __future__ import annotations

import numpy as np


def _split3(shape, axis):
    pre = 1
    for d in range(axis):
        pre *= shape[d]
    post = 1
    for d in range(axis + 1, len(shape)):
        post *= shape[d]
    return pre, shape[axis], post


def _cumsum_nd(a, axis):
    pre, n, post = _split3(a.shape, axis)
    b = np.ascontiguousarray(a).reshape((pre, n, post))
    out = np.empty((pre, n, post), a.dtype)
    for i in range(pre):
        for j in range(post):
            if n > 0:
                acc = b[i, 0, j]
                out[i, 0, j] = acc
                for k in range(1, n):
                    acc = acc + b[i, k, j]
                    out[i, k, j] = acc
    return out.reshape(a.shape)


def _rcumsum_nd(g, axis):
    pre, n, post = _split3(g.shape, axis)
    b = np.ascontiguousarray(g).reshape((pre, n, post))
    out = np.empty((pre, n, post))
    for i in range(pre):
        for j in range(post):
            acc = 0.0
            for k in range(n - 1, -1, -1):
                acc += b[i, k, j]
                out[i, k, j] = acc
    return out.reshape(g.shape)


def _diff_adj_nd(g, axis, shape):
    pre, n, post = _split3(shape, axis)
    m = g.shape[axis]
    b = np.ascontiguousarray(g).reshape((pre, m, post))
    out = np.zeros((pre, n, post))
    for i in range(pre):
        for k in range(m):
            for j in range(post):
                out[i, k, j] -= b[i, k, j]
                out[i, k + 1, j] += b[i, k, j]
    return out.reshape(shape)


#: name -> helper
ND_HELPERS = {f.__name__: f for f in (_split3, _cumsum_nd, _rcumsum_nd, _diff_adj_nd)}
