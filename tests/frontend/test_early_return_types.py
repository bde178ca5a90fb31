"""A function or helper with several returns returns what its returns give: an array, an int.

The result's value before any return was ``0.0``, a float, so an early ``return v * c`` of an
array (a helper inlined into a loss, or a function given to ``jvp``/``jacobian``) was refused
with "variable '_ret' is f64 in one place and f64[:] in another", naming a compiler variable,
and an int helper's result was a float (``range(nterms(k))`` refused). Found by a probe. The
starting value now takes the returns' type (``coarsen.ir.typeinfer.settle_result_starts``).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import coarsen
from tests.oracle import assert_grad_close, fd_grad


def clipped(v, c):
    if c > 0.0:
        return v * c
    return v


def first_big(v, c):
    """An early return from inside a loop, of a 2-D array and a float together."""
    for i in range(v.shape[0]):
        if v[i, 0] * c > 1.0:
            return v * c, c * i
    return v - c, 0.5 * c


def loss(x, c):
    y = clipped(x, c)
    return np.sum(y * y) + c


def loss2(A, c):
    B, s = first_big(A, c)
    return np.sum(B * B) * s + np.sum(B)


def nterms(k):
    if k > 2:
        return k - 1
    return k


def series(x, k):
    s = 0.0
    for i in range(nterms(k)):
        s += math.sin(x * (i + 1))
    return s


def damp(v, c):
    if c > 0.0:
        return v * c
    return v


X = np.array([1.0, -2.0, 3.0])
A = np.array([[0.2, 1.0], [0.9, -0.5], [0.1, 0.3]])


CASES = [(loss, X, 2.0), (loss, X, -0.5),                  # an array returned early
         (loss2, A, 1.5), (loss2, A, 3.0), (loss2, A, 0.1)]   # from a loop, with a float


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("fn, arr, c", CASES)
def test_helper_returns_an_array_early(target, fn, arr, c):
    g = coarsen.differentiate(fn, target=target)
    value, grads = g.value_and_grad(arr, c)
    assert value == pytest.approx(fn(arr, c), rel=1e-14)
    assert_grad_close(grads, fd_grad(fn, (arr, c), (0, 1)))


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_int_helper_with_early_return(target):
    g = coarsen.differentiate(series, wrt="x", target=target)
    value, dx = g.value_and_grad(1.5, 4)
    assert value == pytest.approx(series(1.5, 4), rel=1e-14)
    assert dx == pytest.approx(sum((i + 1) * math.cos(1.5 * (i + 1)) for i in range(3)), rel=1e-13)


@pytest.mark.parametrize("c", [2.0, -1.0])
def test_jvp_and_jacobian_of_an_early_array_return(c):
    value, tangent = coarsen.jvp(damp, wrt=("v", "c"))(X, c, tangents=(np.ones(3), 1.0))
    assert np.array_equal(value, damp(X, c))
    assert np.allclose(tangent, (c + X) if c > 0 else np.ones(3), rtol=1e-15, atol=0)
    J = coarsen.jacobian(damp, wrt="c")(X, c)
    assert np.allclose(J, X if c > 0 else 0.0, rtol=1e-15, atol=0)
