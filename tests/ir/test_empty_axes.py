"""Reductions, cumsum and diff along axes of length 0 or 1 (an array-layout probe's findings).

* ``np.max``/``np.min`` along an empty axis raise NumPy's ``ValueError`` on every target: the
  cpu target read a fiber's first element past the end of the buffer and returned what was
  there (1.4e-309), with no error;
* 2-D ``np.cumsum`` of an array with an empty axis gives the empty result (its helper read and
  wrote one element per column past a zero-length buffer; the python target raised
  ``IndexError``);
* ``np.diff(u, n=k)`` with ``k`` at least the axis length is empty, and its adjoint has the
  argument's shape (the python target raised a broadcasting ``ValueError``).
"""
import numpy as np
import pytest

import coarsen

TARGETS = [dict(target="python"), dict(target="cpu"), dict(target="cpu", scalarize=False)]


def max_axis(A):
    return np.sum(np.max(A, axis=1)) + np.sum(np.min(A, axis=0, keepdims=True) * 2.0)


def cumsum_axes(A):
    return np.sum(np.cumsum(A, axis=0) ** 2) + np.sum(np.cumsum(A, axis=1)) + np.sum(A)


def diff_short(u, A):
    return np.sum(np.diff(u, n=3) ** 2) + np.sum(u) + np.sum(np.diff(A, n=2, axis=0) ** 2) \
        + np.sum(A * A)


@pytest.mark.parametrize("opts", TARGETS, ids=lambda o: "-".join(map(str, o.values())))
def test_max_along_an_empty_axis_raises_as_numpy_does(opts):
    for shape in ((3, 0), (0, 0)):
        A = np.zeros(shape)
        with pytest.raises(ValueError, match="zero-size array"):
            max_axis(A)
        with pytest.raises(ValueError, match="zero-size array"):
            coarsen.differentiate(max_axis, **opts)(A)
    A = np.arange(6.0).reshape(2, 3)
    value, (gA,) = coarsen.differentiate(max_axis, **opts).value_and_grad(A)
    assert value == max_axis(A)
    assert np.array_equal(gA, [[2.0, 2.0, 3.0], [0.0, 0.0, 1.0]])
    if opts["target"] == "python":
        with pytest.raises(ValueError, match="zero-size array"):
            coarsen.jvp(max_axis, wrt="A", **opts)(np.zeros((3, 0)), tangents=np.zeros((3, 0)))


@pytest.mark.parametrize("opts", TARGETS, ids=lambda o: "-".join(map(str, o.values())))
def test_cumsum_and_diff_of_short_axes(opts):
    for shape in ((0, 3), (3, 0)):
        A = np.zeros(shape)
        value, (gA,) = coarsen.differentiate(cumsum_axes, **opts).value_and_grad(A)
        assert value == 0.0 and gA.shape == shape
    for n in (0, 1, 2):
        u, A = np.arange(1.0, 1.0 + min(n, 2)), np.ones((n, 3))
        value, (gu, gA) = coarsen.differentiate(diff_short, **opts).value_and_grad(u, A)
        assert value == diff_short(u, A)
        assert np.array_equal(gu, np.ones_like(u)) and np.array_equal(gA, 2.0 * A)
