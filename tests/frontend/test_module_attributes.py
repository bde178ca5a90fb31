"""Module attributes and negative shape axes, as users write them.

* ``consts.COEF[j]`` (an array attribute of an imported module) is a read-only input, as a
  module-level array read by its bare name is; both spellings of one array are one input, and
  a write into it is refused, naming it.  Before, ``consts.COEF`` was refused ("attribute
  .COEF is not supported here") while ``consts.SCALE`` (a number) was accepted.
* ``A.shape[-1]`` is ``A.shape[A.ndim - 1]``, as in NumPy; before, any negative axis was refused.
"""
from __future__ import annotations

import numpy as np
import pytest

import coarsen
from tests import module_consts as consts
from tests.oracle import assert_grad_close, fd_grad

COEF = consts.COEF


def weighted(x, w):
    s = 0.0
    for j in range(consts.COEF.shape[0]):
        s += consts.COEF[j] * x[j] * consts.SCALE
    for i in range(consts.WEIGHTS.shape[0]):
        for k in range(consts.WEIGHTS.shape[1]):
            s += consts.WEIGHTS[i, k] * x[i] * w[k]
    return s + np.sum(consts.COEF * x * x) + np.sum(COEF * x)


def last_axis(A, x):
    s = 0.0
    for i in range(A.shape[-1]):
        s += A[0, i] * x[i] * A.shape[-2]
    m, n = A.shape
    return s + np.sum(A[:, -1]) * x[0] * A.shape[-1] * m + np.sum(x) * x.shape[-1]


X = np.array([0.3, -1.2, 2.0])
W = np.array([0.7, -0.4])
A = np.arange(6.0).reshape(2, 3) / 7.0


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_module_array_attribute(target):
    g = coarsen.differentiate(weighted, target=target)
    value, (dx, dw) = g.value_and_grad(X, W)
    assert value == pytest.approx(weighted(X, W), rel=1e-14)
    # the gradient, written out: d/dx = 2.5 COEF + WEIGHTS @ w + 2 COEF x + COEF
    assert np.allclose(dx, 2.5 * COEF + consts.WEIGHTS @ W + 2 * COEF * X + COEF, rtol=1e-14, atol=0)
    assert np.allclose(dw, consts.WEIGHTS.T @ X, rtol=1e-14, atol=0)
    assert_grad_close((dx, dw), fd_grad(weighted, (X, W), (0, 1)))
    # consts.COEF and COEF are one array: one input of the generated code
    assert g.source.count("g_coef") > 0 and "g_coef_" not in g.source.split("\n# signature")[0]
    assert len(g._global_arrays) == 2


def test_write_into_module_array_attribute_is_refused():
    def write(x):
        consts.COEF[0] = x[0]
        return x[0]
    with pytest.raises(coarsen.CoarsenError, match="module-level array 'consts.COEF'") as e:
        coarsen.differentiate(write)(X)
    assert "line" in str(e.value) or e.value.lineno


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_negative_shape_axes(target):
    g = coarsen.differentiate(last_axis, wrt=("A", "x"), target=target)
    value, (dA, dx) = g.value_and_grad(A, X)
    assert value == pytest.approx(last_axis(A, X), rel=1e-14)
    assert_grad_close((dA, dx), fd_grad(last_axis, (A, X), (0, 1)))


def test_negative_shape_axis_out_of_range_is_refused():
    def f(A, x):
        return A.shape[-3] * x[0]
    with pytest.raises(coarsen.CoarsenError, match="shape index -3 out of range for a 2-D array"):
        coarsen.differentiate(f, wrt="x")(A, X)


def flagged(x):
    s = x * consts.SCALE
    if consts.DOUBLE:
        s = s * 2.0
    return s


def test_module_bool_attribute():
    """``consts.DOUBLE`` was refused ("attribute .DOUBLE is not supported here") where the same
    bool read by name was taken."""
    g = coarsen.differentiate(flagged, target="python")
    assert g.value_and_grad(1.5) == (flagged(1.5), (5.0,))
