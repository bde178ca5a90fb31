"""``math.floor`` and ``math.ceil`` return ints, as in Python and Numba (``np.floor`` a float).

``k = math.floor(t); x[k]`` was refused ("array indices must be integers"; found by a probe of
user-style programs): the frontend now lowers ``math.floor(t)`` as ``int(floor(t))``.
"""
import math

import numpy as np
import pytest

import coarsen


def interp(x, t):
    k = math.floor(t)
    w = t - k
    return (1.0 - w) * x[k] + w * x[k + 1]


def mixed(a, t):
    return a * math.ceil(t) + math.floor(a * t) + np.floor(a) * a


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_math_rounding_gives_ints(target):
    x = np.array([1.0, 4.0, 9.0, 16.0])
    value, (gx, gt) = coarsen.differentiate(interp, target=target).value_and_grad(x, 1.25)
    assert value == interp(x, 1.25) and list(gx) == [0.0, 0.75, 0.25, 0.0] and gt == 5.0
    value, grad = coarsen.differentiate(mixed, target=target).value_and_grad(1.5, 2.3)
    assert value == mixed(1.5, 2.3) and grad == (3.0 + 1.0, 0.0)
