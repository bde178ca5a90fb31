"""Views inside expressions of an array written afterwards: ``A.T @ B`` then ``A *= 2``.

A temporary view (``A.T``, ``np.flip(u)``, ``u.reshape(-1)``, ``np.atleast_1d(u)``) of an
array that is written later is materialized (activity analysis's ``materialize``), so the
reverse sweep reads the values the expression read.  Only ``getitem`` and ``copy`` made that
copy; the other view primitives handed the reverse sweep the view, which showed the array as
it was after the write: ``C = A.T @ B; A *= 2.0`` gave twice B's gradient, on every target
and mode (found by a probe of array-style programs).  ``ReverseEmitter.primal`` now copies
any view primitive's materialized result.  Checked against extended-precision finite
differences, coarse and fine, on both targets.
"""
import numpy as np
import pytest

import coarsen
from tests.oracle import assert_grad_close, fd_grad


def mm_t(A0, B):
    A = A0.copy()
    C = A.T @ B
    A *= 2.0
    return np.sum(C)


def solve_t(A0, b):
    A = A0.copy()
    x = np.linalg.solve(A.T, b)
    A *= 2.0
    return np.sum(x * x)


def einsum_t(A0, B):
    A = A0.copy()
    C = np.einsum('ij,jk->ik', A.T, B)
    A *= 2.0
    return np.sum(C * C)


def axis_sum_t(A0, W):
    A = A0.copy()
    r = np.sum(A.T * W, axis=0)
    A *= 2.0
    return np.sum(r * r)


def symmetrize(A0, W):
    A = A0.copy()
    for t in range(2):
        A[:, :] = 0.5 * (A + A.T * W)
    return np.sum(A * A)


def self_store_t(A0, W):
    A = A0.copy()
    A[:, :] = A.T * W
    return np.sum(A * A)


def self_store_flip(u0, w):
    u = u0.copy()
    u[:] = np.flip(u) * w
    return np.sum(u * u)


def self_store_reshape(u0, w):
    u = u0.copy()
    u[:] = u.reshape(-1) * w + np.atleast_1d(u) * w
    return np.sum(u * u)


def add_flip(u0, s):
    u = u0.copy()
    u += np.exp(np.flip(u)) * s
    return np.sum(u * u)


def flip_then_zero(u0, w):
    u = u0.copy()
    v = np.flip(u) * w
    u[:] = 0.0
    return np.sum(v * v)


def input_written(A, x):
    y = A.T @ x
    A *= 2.0
    return np.sum(y * y) + np.sum(A)


_A = np.array([[1.0, 2.0, 0.5], [3.0, 5.0, -1.0], [0.2, -0.7, 4.0]])
_W = np.array([[0.5, -1.0, 2.0], [1.5, 0.3, -0.4], [0.9, 1.1, 0.6]])
_u = np.array([1.0, 2.0, -0.5])
_w = np.array([0.5, -1.0, 2.0])
CASES = [
    (mm_t, (_A, _W[:, :1])), (solve_t, (_A, _w)), (einsum_t, (_A, _W)),
    (axis_sum_t, (_A, _W)), (symmetrize, (_A, _W)), (self_store_t, (_A, _W)),
    (self_store_flip, (_u, _w)), (self_store_reshape, (_u, _w)), (add_flip, (_u, 0.5)),
    (flip_then_zero, (_u, _w)), (input_written, (_A, _w)),
]


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False])
def test_views_read_before_a_write(target, coarse):
    for fn, args in CASES:
        want = fd_grad(fn, [a.copy() if isinstance(a, np.ndarray) else a for a in args],
                       [0, 1])
        g = coarsen.differentiate(fn, target=target, coarsen=coarse)
        got = g(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        assert_grad_close(list(got), want, rtol=1e-8, err_msg=fn.__name__)


def _product(_t1, B):
    return _t1 @ B


def mm_t_renamed_split(A_bar, _y):
    """``mm_t`` with compiler-like names and the product in a helper."""
    _t1 = A_bar.copy()
    C = _product(_t1.T, _y)
    _t1 *= 2.0
    return np.sum(C)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_view_renamed_and_split(target):
    args = (_A, _W[:, :1])
    g = coarsen.differentiate(mm_t, target=target)(*args)
    h = coarsen.differentiate(mm_t_renamed_split, target=target)(*args)
    assert all(np.array_equal(a, b) for a, b in zip(g, h))
    np.testing.assert_array_equal(g[1], _A @ np.ones((3, 1)))
