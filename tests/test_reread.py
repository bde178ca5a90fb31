"""Primal re-emission edge cases.

Element reads the reverse sweep re-reads instead of taping (``Emitter.find_recomputable``)
must see the value that was read: not when a later loop both uses the value and writes the
array, since a later trip's use follows an earlier trip's write (soak seed 21001631).
``float(bool)`` must compile on the cpu target.
"""
import math

import numpy as np
import pytest

from tests.zoo.harness import check_value_and_grad


def _grow(p, q, x):
    for k in range(p.shape[0]):
        p[k] += 0.1 * math.tanh(q) * k * x


def read_then_loop_writes(x, a):
    for i in range(a.shape[0]):
        _grow(a, a[i], x)
    return 0.5 * a[-1] + x


def read_then_while_writes(x, a):
    t = a[1]
    j = 0
    s = 0.0
    while j < a.shape[0]:
        s += math.sin(t) * a[j] * x
        a[j] = a[j] * 0.5 + x
        j += 1
    return s + np.sum(a * a)


def _args():
    return (0.705, np.array([0.743, 1.084, 0.739]))


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn", [read_then_loop_writes, read_then_while_writes],
                         ids=lambda f: f.__name__)
def test_reread_after_loop_write(fn, target, coarse):
    check_value_and_grad(fn, _args, None, target, coarse, f"{fn.__name__}-{target}-{coarse}")


def float_of_comparison(x, y):
    return float(x < y) * 5.0 * x + float(x > 2.0 * y) * y * y


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
def test_float_of_a_comparison(target, coarse):
    """float(bool) works on every target (Numba has no float(bool); the code says float(int(.)))."""
    check_value_and_grad(float_of_comparison, lambda: (0.3, 0.7), None, target, coarse,
                         f"float_of_comparison-{target}-{coarse}")
