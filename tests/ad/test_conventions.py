"""The README's conventions at non-differentiable points, each pinned on both targets, coarse
and fine (tests/frontend/test_bad_input.py::test_kinks_and_ties pins the plain two-operand cases).

JAX's conventions, which coarsen follows (read off jax/_src/lax/lax.py; JAX is not a test
dependency, and where it is installed test_bad_input.py compares against ``jax.grad``):

* ``abs``: the JVP is ``select(x >= 0, g, -g)``, so ``abs'(0) = 1`` and, since ``-0.0 >= 0``,
  ``abs'(-0.0) = 1`` too; ``abs(-x)`` at ``x = 0`` has derivative ``-1`` (``-x`` is ``-0.0``);
* ``maximum``/``minimum`` give half the adjoint to each of two tied operands; ``jnp.clip`` is
  ``minimum(maximum(x, lo), hi)``, so ``x`` at a bound gets one half;
* ``floor``, ``ceil``, ``sign``, comparisons and ``//`` have zero derivative.

Each expected value below is worked out by hand in the comments.
"""
import math

import numpy as np
import pytest

import coarsen

MODES = [pytest.param(True, id="coarse"), pytest.param(False, id="fine")]
TARGETS = ["python", "cpu"]


def abs_forms(x, y, z, w, a, b):
    return (abs(x) * 2.0                    # x = 0.0: +2
            + math.fabs(2.0 - y) * 3.0      # y = 2.0: 2 - y = 0.0, abs' = 1, times -1: -3
            + abs(-z) * 5.0                 # z = 0.0: -z = -0.0, abs' = 1, times -1: -5
            + np.abs(w) * 7.0               # w = -0.0: abs'(-0.0) = 1: +7
            + np.sum(np.abs(b - a)))        # b - a = [0, 0, -1.5]: da = [-1, -1, 1], db = -da


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("coarse", MODES)
def test_abs_at_zero_is_one_as_in_jax(coarse, target):
    g = coarsen.differentiate(abs_forms, coarsen=coarse, target=target)
    a, b = np.array([1.0, -0.0, 0.5]), np.array([1.0, 0.0, -1.0])
    gx, gy, gz, gw, ga, gb = g(0.0, 2.0, 0.0, -0.0, a, b)
    assert (gx, gy, gz, gw) == (2.0, -3.0, -5.0, 7.0)
    assert np.array_equal(ga, [-1.0, -1.0, 1.0]) and np.array_equal(gb, [1.0, 1.0, -1.0])


def ties(x, y, z, u, v, a):
    return (max(x, y, z)                    # max(max(x, y), z): a three-way tie gives 1/4, 1/4, 1/2
            + 2.0 * min(u - v, v - u)       # u = v: both 0.0, half each: 0.5*(1 - 1) = 0 for u and v
            + np.sum(np.clip(a, 0.0, 1.0)))  # at a bound: 1/2; inside: 1; outside: 0


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("coarse", MODES)
def test_ties_split_the_adjoint_evenly_between_two_operands(coarse, target):
    g = coarsen.differentiate(ties, coarsen=coarse, target=target)
    a = np.array([0.0, 1.0, 0.5, 2.0, -1.0])
    gx, gy, gz, gu, gv, ga = g(1.0, 1.0, 1.0, 0.5, 0.5, a)
    assert (gx, gy, gz) == (0.25, 0.25, 0.5)
    assert (gu, gv) == (0.0, 0.0)
    assert np.array_equal(ga, [0.5, 0.5, 1.0, 0.0, 0.0])
    # not tied: all of the adjoint to the larger operand
    gx, gy, gz, *_ = g(1.0, 3.0, 2.0, 0.5, 0.5, a)
    assert (gx, gy, gz) == (0.0, 1.0, 0.0)


def zero_derivative_ops(x, y, a):
    s = math.floor(x) * y + math.ceil(x * 3.0) + (x // y) * 4.0 + x * y
    s += y // 1.0 + float(int(x > y)) * 8.0
    return s + np.sum(np.floor(a) * 2.0 + np.ceil(a) + np.sign(a) * 3.0 + a * a)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("coarse", MODES)
def test_floor_ceil_sign_floordiv_and_comparisons_have_zero_derivative(coarse, target):
    g = coarsen.differentiate(zero_derivative_ops, coarsen=coarse, target=target)
    a = np.array([1.0, -0.5, 0.0, 2.5])
    # x = 2.0 and y = 0.5: floor, ceil, // and x > y all at or near a jump; only x * y and
    # floor(x) * y's factor y carry a derivative: dx = y, dy = floor(x) + x
    for x, y in ((2.0, 0.5), (2.0, 2.0), (1.25, 0.75)):
        gx, gy, ga = g(x, y, a)
        assert (gx, gy) == (y, math.floor(x) + x), (x, y)
        assert np.array_equal(ga, 2.0 * a)
