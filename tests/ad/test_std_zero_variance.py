"""``np.std`` / ``np.var`` where the variance is 0 (issue 41, part A).

``np.sum(np.std(x, axis=0, keepdims=True) * W)`` with ``x`` of shape (1, 3) gave a gradient of
``[nan, nan, nan]``: the VJP ``(x - mean) / (n std)`` is 0/0 there, although the std of one
element is identically 0 and its gradient exactly 0.  Where every deviation along the
reduction is 0 (an axis of length 1, a constant fiber of length n > 1, where the std is not
differentiable) the gradient and the tangent are now exactly 0, the minimum-norm subgradient
(PyTorch's choice), on both targets, coarse and fine, in reverse and forward mode;
``var``'s ``2 (x - mean) / n`` was finite already and stays so.  Elsewhere the gradient is
checked against the exact derivative in 40 digits.
"""
from __future__ import annotations

import mpmath
import numpy as np
import pytest

import coarsen

MODES = [dict(target="python"), dict(target="cpu"), dict(target="python", coarsen=False),
         dict(target="cpu", coarsen=False)]
IDS = ["python", "cpu", "python-fine", "cpu-fine"]


def std_keep(x, W):
    return np.sum(np.std(x, axis=0, keepdims=True) * W)


def std_axes(x, v):
    return (np.sum(np.std(x, axis=1) * np.array([1.0, 2.0, 3.0])) + 0.5 * np.std(v)
            + np.std(x[0:1, :]) + np.sum(np.std(x, axis=0)))


def var_axes(x):
    return np.sum(np.var(x, axis=1) * np.array([1.0, 2.0, 3.0])) + np.sum(np.var(x[0:1, :], axis=0))


def _mp_std_grad(row):
    """d std / d row in 40 digits (row has a nonzero spread)."""
    with mpmath.workdps(40):
        r = [mpmath.mpf(v) for v in row]
        n = len(r)
        m = mpmath.fsum(r) / n
        sd = mpmath.sqrt(mpmath.fsum((v - m) ** 2 for v in r) / n)
        return np.array([float((v - m) / (n * sd)) for v in r])


@pytest.mark.parametrize("kw", MODES, ids=IDS)
def test_std_along_a_length_one_axis_has_zero_gradient(kw):
    x = np.array([[1.0, 2.0, 3.0]])
    W = np.array([[0.5, 0.7, 0.9]])
    value, grad = coarsen.differentiate(std_keep, wrt="x", **kw).value_and_grad(x, W)
    assert value == 0.0
    assert np.array_equal(grad, np.zeros((1, 3))), grad


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_std_along_a_length_one_axis_has_zero_tangent(target):
    x = np.array([[1.0, 2.0, 3.0]])
    W = np.array([[0.5, 0.7, 0.9]])
    value, dot = coarsen.jvp(std_keep, wrt="x", target=target)(x, W, tangents=np.array([[1.0, -2.0, 3.0]]))
    assert value == 0.0 and dot == 0.0


@pytest.mark.parametrize("kw", MODES, ids=IDS)
def test_std_of_constant_fibers_has_zero_gradient(kw):
    """Row 0 constant (n = 3 > 1), rows 1 and 2 spread; ``v`` constant (a full reduction);
    ``x[0:1, :]`` a full reduction of a constant row; ``axis=0`` columns, all spread."""
    x = np.array([[2.0, 2.0, 2.0], [1.0, 5.0, 3.0], [-0.5, 0.25, 4.0]])
    v = np.array([7.0, 7.0, 7.0, 7.0])
    value, (gx, gv) = coarsen.differentiate(std_axes, **kw).value_and_grad(x, v)
    assert np.all(np.isfinite(gx)) and np.array_equal(gv, np.zeros(4)), (gx, gv)
    want = np.zeros((3, 3))
    for i, w in ((1, 2.0), (2, 3.0)):
        want[i] += w * _mp_std_grad(x[i])
    for j in range(3):
        want[:, j] += _mp_std_grad(x[:, j])
    np.testing.assert_allclose(gx, want, rtol=1e-14, atol=1e-15)
    if kw.get("target") == "cpu":
        _, ref = coarsen.differentiate(std_axes, target="python").value_and_grad(x, v)
        np.testing.assert_allclose(gx, ref[0], rtol=1e-15, atol=0)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_std_of_constant_fibers_has_zero_tangent(target):
    x = np.array([[2.0, 2.0, 2.0], [1.0, 5.0, 3.0], [-0.5, 0.25, 4.0]])
    v = np.array([7.0, 7.0, 7.0, 7.0])
    tx = np.array([[1.0, -1.0, 0.5], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    value, dot = coarsen.jvp(std_axes, wrt="x", target=target)(x, v, tangents=tx)
    want = np.sum(tx[:, 0] * _mp_std_grad(x[:, 0]) + tx[:, 1] * _mp_std_grad(x[:, 1])
                  + tx[:, 2] * _mp_std_grad(x[:, 2]))
    assert np.isfinite(dot) and dot == pytest.approx(want, rel=1e-14, abs=1e-15)


@pytest.mark.parametrize("kw", MODES, ids=IDS)
def test_var_at_zero_variance_is_finite(kw):
    x = np.array([[2.0, 2.0, 2.0], [1.0, 5.0, 3.0], [-0.5, 0.25, 4.0]])
    _, (grad,) = coarsen.differentiate(var_axes, **kw).value_and_grad(x)
    want = np.zeros((3, 3))
    for i, w in ((1, 2.0), (2, 3.0)):
        want[i] = w * 2.0 * (x[i] - x[i].mean()) / 3
    np.testing.assert_allclose(grad, want, rtol=1e-14, atol=1e-15)
