"""Powers at base 0: ``c[k] * x**k`` at ``x = 0`` and variable exponents.

The partials of ``x**y`` are ``y x**(y-1)`` and ``log(x) x**y``; at ``x = 0`` the first made
``0 * inf`` for ``y = 0`` and SymPy's ``y*x**y/x`` a nan for every ``y``; the second
``-inf * 0`` (the python target raised ``ZeroDivisionError``/``ValueError``; found by a probe
of user-style programs).  Now the fine rule selects 0 for ``y == 0`` (``x**0`` is constant)
and for ``x == 0`` in the exponent's partial (JAX's convention), a constant exponent 0 has
partial 0, and a segment with a variable exponent stays fine-grained
(``coarsen.ad.lift._variable_power``).  Checked against hand derivatives, coarse and fine, on
both targets, in reverse and forward mode.
"""
import math

import numpy as np
import pytest

import coarsen


def poly_eval(c, x):
    s = 0.0
    for k in range(c.shape[0]):
        s += c[k] * x ** k
    return s


def int_pow(x, n):
    return x ** n + 3.0 * x


def squared_base(p, x):
    return (x * x) ** p


def array_pow(x, p):
    return np.sum(x ** p)


def constant_zero_powers(x, p):
    return x ** 0 + (x * 0.0) ** 0 + x ** p * 0.0 ** p + abs(-2) * x + min(2, x)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # np.where evaluates both sides
@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False])
def test_zero_base(target, coarse):
    def grad(fn, *args):
        return coarsen.differentiate(fn, target=target, coarsen=coarse)(*args)

    c = np.array([1.0, 2.0, 3.0])
    dc, dx = grad(poly_eval, c, 0.0)
    assert list(dc) == [1.0, 0.0, 0.0] and dx == 2.0
    assert [grad(int_pow, 0.0, n)[0] for n in (0, 1, 2)] == [3.0, 4.0, 3.0]
    assert grad(int_pow, 2.0, 3) == (15.0,)
    assert grad(squared_base, 2.0, 0.0) == (0.0, 0.0)
    dp, dx = grad(squared_base, 2.0, 1.5)
    assert dp == pytest.approx(np.log(2.25) * 2.25 ** 2, rel=1e-14) and dx == pytest.approx(13.5)
    gx, gp = grad(array_pow, np.array([0.0, 1.5]), 0.0)
    assert list(gx) == [0.0, 0.0] and gp == pytest.approx(np.log(1.5), rel=1e-14)
    gx, gp = grad(array_pow, np.array([0.0, 1.5]), 2.0)
    assert list(gx) == [0.0, 3.0] and gp == pytest.approx(np.log(1.5) * 2.25, rel=1e-14)
    assert grad(constant_zero_powers, 1.7, 2.0) == (3.0, 0.0)
    j = coarsen.jvp(poly_eval, wrt="x", target=target, coarsen=coarse)
    assert j(c, 0.0, tangents=1.0) == (1.0, 2.0)


def _inverse_squares(x, n):
    s = 0.0
    for k in range(1, n):
        s += k ** -2 * x
    return s


def _int_powers(x, n, e):
    s = 0.0
    for k in range(1, n):
        s += k ** e * x + 2 ** (k - 3) * x
    return s


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False])
def test_int_to_negative_int_power_is_a_float(target, coarse):
    # Python's 2 ** -2 is 0.25; Numba's int power gave 0 (d/dx 1.0 for 1.4236; found by a probe)
    g = coarsen.differentiate(_inverse_squares, wrt="x", target=target, coarsen=coarse)
    v, d = g.value_and_grad(0.7, 5)
    assert v == pytest.approx(_inverse_squares(0.7, 5), rel=1e-15)
    assert d == pytest.approx(sum(k ** -2 for k in range(1, 5)), rel=1e-15)
    g = coarsen.differentiate(_int_powers, wrt="x", target=target, coarsen=coarse)
    v, d = g.value_and_grad(0.7, 6, -1)
    assert v == pytest.approx(_int_powers(0.7, 6, -1), rel=1e-15)
    assert d == pytest.approx(sum(k ** -1 + 2 ** (k - 3) for k in range(1, 6)), rel=1e-15)


def _scaled_power(x, k):
    return x * 2 ** (k - 5) / 3.0


def _power_sum(x, n):
    s = 0.0
    for k in range(n):
        s += x * 2 ** (k - 5) / 3.0 + x * 10 ** (k % 30) / 1e20
    return s


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False])
def test_int_powers_in_preaccumulated_partials(target, coarse):
    # the partial of a lifted segment printed 2 ** _t1 with an int _t1: Numba's int power gave
    # 0 for a negative exponent and wrapped around past 2**63 (found by a probe)
    g = coarsen.differentiate(_scaled_power, wrt="x", target=target, coarsen=coarse)
    for k, want in ((2, 2.0 ** -3 / 3.0), (-3, 2.0 ** -8 / 3.0), (75, 2.0 ** 70 / 3.0)):
        assert g(0.7, k) == pytest.approx(want, rel=1e-15)
    g = coarsen.differentiate(_power_sum, wrt="x", target=target, coarsen=coarse)
    want = sum(2.0 ** (k - 5) / 3.0 + 10.0 ** (k % 30) / 1e20 for k in range(40))
    assert g(0.7, 40) == pytest.approx(want, rel=1e-14)


def neg_base(x, y):
    return math.pow(x, y) + x ** y + x ** 2.0


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("co", [True, False])
def test_forward_mode_along_the_base_at_a_negative_base(target, co):
    # (-2)**3 is defined; its partial in y, log(-2) (-2)**3, is not (nan on the cpu target,
    # a ValueError from math.log on the python target). Along (1, 0) the JVP was nan (0 * nan)
    # on the cpu target and raised on the python target, where reverse mode gives x's 20.0
    j = coarsen.jvp(neg_base, target=target, coarsen=co)
    assert j(-2.0, 3.0, tangents=(1.0, 0.0)) == (-12.0, 20.0)
    v, t = j(2.0, 3.0, tangents=(0.5, 0.25))
    assert t == pytest.approx(0.5 * 28.0 + 0.25 * 16.0 * math.log(2.0), rel=1e-15)
    assert coarsen.jacobian(neg_base, wrt="x", mode="forward", target=target)(-2.0, 3.0) == 20.0


def power(x, y):
    return x ** y + math.pow(x, y)


@pytest.mark.parametrize("method", ["auto", "reverse-over-forward"])
def test_the_hessian_at_a_zero_exponent_is_symmetric(method):
    """The partial in x was ``0 if y == 0 else y x**(y-1)``: right, but its derivative in y
    (the mixed second derivative, 1/x) was 0 there, and the Hessian asymmetric
    ([[0, 0], [1.0, 0.96]] at (2, 0)). Only x = y = 0 is guarded now."""
    H = coarsen.hessian(power, target="python", method=method)(2.0, 0.0)
    exact = [[0.0, 1.0], [1.0, 2.0 * math.log(2.0) ** 2]]
    assert np.allclose(np.array(H, dtype=float), exact, rtol=1e-14, atol=0.0)
    assert coarsen.hvp(power, target="python")(2.0, 0.0, (1.0, 0.0)) == (0.0, 1.0)
    # the conventions at x = 0 stand
    assert coarsen.differentiate(power, target="python")(0.0, 0.0) == (0.0, 0.0)
