"""Python's semantics where Numba's differ, on both targets (a semantics probe's findings).

* ``a // b`` and ``a % b`` of ints raise ``ZeroDivisionError`` at ``b == 0``, as Python does:
  Numba's numpy error model gave 0 on the cpu target, a wrong int with no error (through it a
  wrong index or trip count);
* the derivative of ``x % d`` in ``d`` is ``-(x // d)``, Python's quotient, the one the value
  uses: ``-floor(x / d)`` gave -10 at ``(1.0, 0.1)``, where ``1.0 // 0.1`` is 9.0 and the slope
  of ``x % d`` is -9 (the extended-precision finite difference);
* a bool constant used as a number (``float(True)``, ``True / 2``) compiles on the cpu target
  (Numba has no ``float`` of a bool literal: a TypingError);
* ``max(x, y)`` is ``y`` where ``y > x`` and ``x`` otherwise (``max(1.0, nan)`` is 1.0), and its
  partials follow the same test: they were 0 and 0 there (neither ``x > y`` nor ``y > x``).
"""
import math

import mpmath
import pytest

import coarsen


def int_division(x, k):
    return (7 // k) * x + (7 % k) * x


def mod_by_param(x, d):
    return x % d + 0.5 * x


def bool_constants(x):
    return float(True) * x + True / 2 * x + (True + 1) * x


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_int_division_by_zero_raises_as_python_does(target):
    g = coarsen.differentiate(int_division, wrt="x", target=target)
    assert g.value_and_grad(1.5, 2) == (int_division(1.5, 2), 4.0)
    assert g.value_and_grad(1.5, -3) == (int_division(1.5, -3), -5.0)
    with pytest.raises(ZeroDivisionError):
        int_division(1.5, 0)
    with pytest.raises(ZeroDivisionError):
        g(1.5, 0)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_the_divisors_derivative_of_mod_uses_pythons_quotient(target):
    mpmath.mp.dps = 40
    for x, d in ((1.0, 0.1), (0.7, 0.1), (-1.3, 0.25), (2.9, -0.7)):
        X, D, h = mpmath.mpf(x), mpmath.mpf(d), mpmath.mpf("1e-25")

        def pymod(dd):          # Python's x % d, exactly: the divisor's sign
            return X - mpmath.floor(X / dd) * dd
        exact = (pymod(D + h) - pymod(D - h)) / (2 * h)
        value, (gx, gd) = coarsen.differentiate(mod_by_param, target=target).value_and_grad(x, d)
        assert value == mod_by_param(x, d)
        assert (gx, gd) == (1.5, -(x // d))
        assert gd == float(exact), (x, d, gd, exact)
        _, t = coarsen.jvp(mod_by_param, wrt="d", target=target)(x, d, tangents=1.0)
        assert t == gd


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_bool_constants_as_numbers(target):
    g = coarsen.differentiate(bool_constants, target=target)
    assert g.value_and_grad(1.5) == (bool_constants(1.5), (3.5,))


def max_min(x, y):
    return max(x, y) + 2.0 * min(x, y)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_max_and_min_partials_follow_the_value_at_nan(target):
    nan = math.nan
    for coarse in (True, False):
        g = coarsen.differentiate(max_min, target=target, coarsen=coarse)
        assert g.value_and_grad(1.0, nan) == (3.0, (3.0, 0.0))     # Python: max and min are x
        v, (gx, gy) = g.value_and_grad(nan, 1.0)                    # Python: both are nan
        assert math.isnan(v) and (gx, gy) == (3.0, 0.0)
        assert g.value_and_grad(1.0, 2.0) == (max_min(1.0, 2.0), (2.0, 1.0))
        assert g.value_and_grad(2.0, 2.0) == (6.0, (1.5, 1.5))     # a tie: half to each
    assert coarsen.jvp(max_min, wrt="x", target=target)(1.0, nan, tangents=1.0) == (3.0, 3.0)
