"""``x.reshape(a.shape)`` and ``np.reshape(x, a.shape)``, and Hessians through reshapes.

``x.reshape(a.shape)`` was refused ("use .shape[k] or unpack it"), for users and in the JVP
that ``coarsen.hessian`` reads back (``np.prod``'s tangent rule ends with it), so the Hessian
of anything with ``np.prod`` was refused; so was one of ``x.reshape(2, 2)``, whose JVP said
``np.ascontiguousarray`` (found by a probe). The JVP read back now says what the input
language says.
"""
from __future__ import annotations

import numpy as np
import pytest

import coarsen
from tests.oracle import assert_grad_close, fd_grad


def like(x, A):
    y = (x * x).reshape(A.shape)
    z = np.reshape(x, A.shape)
    return np.sum(y * A) + np.sum(z * z * A.T.T)


def prod_tanh(x):
    return np.prod(np.tanh(x))


def det2(x):
    X2 = x.reshape(2, 2)
    return X2[0, 0] * X2[1, 1] - X2[0, 1] * X2[1, 0]


X = np.array([0.3, -0.7, 1.1, 0.4, 0.9, -0.2])
A = np.arange(6.0).reshape(2, 3) / 5.0


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_reshape_like_another_array(target):
    g = coarsen.differentiate(like, wrt=("x", "A"), target=target)
    for x in (X, np.linspace(-1.0, 1.0, 12)[::2]):           # a strided x too
        value, grads = g.value_and_grad(x, A)
        assert value == pytest.approx(like(x, A), rel=1e-14)
        assert_grad_close(grads, fd_grad(like, (x, A), (0, 1)))


def test_hessian_of_prod():
    x = X[:3]
    H = coarsen.hessian(prod_tanh, wrt="x")(x)
    t = np.tanh(x)
    d = 1.0 - t * t
    p = np.prod(t)
    want = np.outer(d / t, d / t) * p
    np.fill_diagonal(want, -2.0 * d * p)                   # d2/dx2 tanh = -2 tanh (1 - tanh^2)
    assert np.allclose(H, want, rtol=1e-13, atol=1e-15) and np.allclose(H, H.T, rtol=1e-15, atol=0)


def test_hessian_through_reshape():
    H = coarsen.hessian(det2, wrt="x")(np.array([1.0, 2.0, 3.0, 4.0]))
    assert np.array_equal(H, np.array([[0.0, 0, 0, 1], [0, 0, -1, 0], [0, -1, 0, 0], [1, 0, 0, 0]]))


def ravel_function(A):
    v = np.ravel(A)
    return np.sum(v * v) + v[1]


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_np_ravel_as_a_function(target):
    """README lists ravel; only the method was taken (np.ravel was "not supported")."""
    A = np.arange(6.0).reshape(2, 3)
    for X in (A, A.T):
        value, (g,) = coarsen.differentiate(ravel_function, target=target).value_and_grad(X)
        expect = 2.0 * X
        expect[np.unravel_index(1, X.shape)] += 1.0
        assert value == ravel_function(X) and np.array_equal(g, expect)
