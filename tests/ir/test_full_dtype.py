"""``np.full(shape, v)`` without a dtype has NumPy's dtype of ``v``.

``y = np.full(3, 2); y[0] = x`` makes an int array in NumPy, so the store truncates ``x``;
coarsen typed it float64 and differentiated through the store (d/dx of ``y[0] * x`` gave 2.7
for 1.0 at ``x = 1.7``, on every target and transform; found by a probe). Now the array is
int64, and the float store is refused as for every other int array; a float or int fill gives
NumPy's values and derivatives.
"""
from __future__ import annotations

import numpy as np
import pytest

import coarsen


def int_fill_store(x):
    y = np.full(3, 2)
    y[0] = x
    return y[0] * x


def int_fill_param(x, i):
    y = np.full((2, 2), i)
    return np.sum(y) * x + y[1, 1]


def float_fill(x):
    y = np.full(3, 2.0)
    y[0] = x
    return y[0] * x + np.sum(np.full(2, x))


def bool_fill(x):
    y = np.full(3, True)
    return x * y[0]


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_int_fill_is_an_int_array(target):
    with pytest.raises(coarsen.CoarsenError, match="i64 array"):
        coarsen.differentiate(int_fill_store, target=target)(1.7)
    v, g = coarsen.differentiate(int_fill_param, wrt="x", target=target).value_and_grad(1.7, 3)
    assert v == int_fill_param(1.7, 3) and g == 12.0
    assert coarsen.differentiate(int_fill_param, wrt="x", target=target).specialize([1.7, 3])


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_float_fill_and_bool_fill(target):
    v, g = coarsen.differentiate(float_fill, wrt="x", target=target).value_and_grad(1.7)
    assert v == float_fill(1.7) and g == pytest.approx(2 * 1.7 + 2.0, rel=1e-15)
    with pytest.raises(coarsen.CoarsenError, match="bool fill value"):
        coarsen.differentiate(bool_fill, target=target)(1.7)
    assert np.full(3, 2).dtype == np.int64        # the NumPy behaviour this follows
