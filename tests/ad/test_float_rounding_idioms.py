"""Code that relies on float64 rounding is differentiated as it computes, not as exact algebra.

``(x*0.5 + C) - C`` with ``C = 1.5 * 2**52`` rounds to an integer, ``(x + 1.0) - 1.0`` drops a
tiny ``x``, Kahan's ``(t - s) - y`` is the rounding error of ``t = s + y``. SymPy's sums are
exact, so lifting folded them (to ``0.5*x``, ``x``, ``0``): a closed-form loop then gave
another value than the loop (``quant_decay(7.0, 0.25, 6)``: 0.3619 for 1.5625; found by a
probe), and a recomputed segment differentiated at the folded value (``plan="recompute"``:
d/dx 11.20 for 18.47). A float sum in which a term cancels now keeps its segment
fine-grained (``coarsen.ad.float_algebra``), and two float constants fold as
float64 folds them.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import coarsen

C = 6755399441055744.0      # 1.5 * 2**52


def quant_decay(x, w, n):
    for i in range(n):
        x = (x * 0.5 + C) - C
        x = x + w
    return x * x


def roundtrip(x, n):
    for i in range(n):
        x = (x + 1.0) - 1.0
    return x * 3.0


def kahan(a, n):
    s = 0.0
    c = 0.0
    for i in range(n):
        y = a / (i + 1) - c
        t = s + y
        c = (t - s) - y
        s = t
    return s


def rounded_exp(x, y):
    r = (x * 0.5 + C) - C
    z = math.exp(r) * y + r * r
    return z * math.sin(x)


def folded_constant(x):
    r = (3.3 + C) - C           # 3.0 in float64
    return x * r


def d_rounded_exp(x, y):
    """By hand: r is piecewise constant, so dr/dx = 0 almost everywhere... but fine AD (and
    JAX) give d/dx (x*0.5 + C - C) = 0.5; coarsen follows the code's operations."""
    r = (x * 0.5 + C) - C
    z = math.exp(r) * y + r * r
    dz = (math.exp(r) * y + 2 * r) * 0.5
    return dz * math.sin(x) + z * math.cos(x), math.exp(r) * math.sin(x)


PLANS = ["auto", "recompute", "cut", "preaccumulate", "fine"]


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_closed_form_is_not_taken_for_a_rounding_loop(target):
    for fn, args in ((quant_decay, (7.0, 0.25, 6)), (roundtrip, (1e-17, 5))):
        fine = coarsen.differentiate(fn, coarsen=False, target="python").value_and_grad(*args)
        g = coarsen.differentiate(fn, target=target)
        value, grad = g.value_and_grad(*args)
        assert value == fn(*args)
        assert value == fine[0]
        assert np.allclose(grad, fine[1], rtol=1e-14, atol=0)
    assert coarsen.differentiate(quant_decay, target=target).value_and_grad(7.0, 0.25, 6)[0] == 1.5625


@pytest.mark.parametrize("plan", PLANS)
def test_recomputed_segments_see_the_rounded_value(plan):
    g = coarsen.differentiate(rounded_exp, plan=plan, target="python")
    value, (dx, dy) = g.value_and_grad(3.0, 1.2)
    assert value == rounded_exp(3.0, 1.2)
    ex, ey = d_rounded_exp(3.0, 1.2)
    assert dx == pytest.approx(ex, rel=1e-14) and dy == pytest.approx(ey, rel=1e-14)
    assert "cancels" in " ".join(str(r) for r in g.report(file=open("/dev/null", "w")))


def test_kahan_keeps_its_compensation():
    args = (0.1, 2000)
    fine = coarsen.differentiate(kahan, wrt="a", coarsen=False).value_and_grad(*args)
    value, da = coarsen.differentiate(kahan, wrt="a").value_and_grad(*args)
    assert value == kahan(*args)
    assert da == fine[1]


@pytest.mark.parametrize("plan", PLANS)
def test_float_constants_fold_as_float64(plan):
    g = coarsen.differentiate(folded_constant, plan=plan, target="python")
    assert g.value_and_grad(2.0) == (6.0, (3.0,))


def test_forward_mode_sees_the_rounded_values():
    value, tangent = coarsen.jvp(quant_decay, wrt=("x", "w"))(7.0, 0.25, 6, tangents=(1.0, 0.0))
    fine = coarsen.jvp(quant_decay, wrt=("x", "w"), coarsen=False)(7.0, 0.25, 6, tangents=(1.0, 0.0))
    assert value == quant_decay(7.0, 0.25, 6) == fine[0]
    assert tangent == pytest.approx(fine[1], rel=1e-14)


def mul_roundtrip(x, n):
    for i in range(n):
        x = x * 1024.0
        x = x / 1024.0
    return x


def const_products(x):
    t = x * 0.1
    z = t * 10.0
    return (z - x) * 1e20 + x


def hyp(x, y):
    return math.hypot(x, y) * 2.0 + x


def expm1_sum(x, n):
    s = 0.0
    for i in range(n):
        s = s + math.expm1(x)
    return s


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_products_that_cancel_are_not_folded(target):
    with np.errstate(over="ignore"):
        want = mul_roundtrip(1e306, 5)
    assert want == math.inf
    g = coarsen.differentiate(mul_roundtrip, wrt="x", target=target)
    with np.errstate(over="ignore", invalid="ignore"):
        assert g.value_and_grad(1e306, 5)[0] == math.inf
    assert g.value_and_grad(3.0, 5) == (3.0, 1.0)


@pytest.mark.parametrize("plan", PLANS)
def test_float_constants_of_different_statements_are_not_folded(plan):
    fine = coarsen.differentiate(const_products, coarsen=False).value_and_grad(3.0)
    got = coarsen.differentiate(const_products, plan=plan).value_and_grad(3.0)
    assert got == fine and got[0] == const_products(3.0)


@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize("scale", [1e200, 1e-200, 1.0])
def test_hypot_partials_do_not_overflow(plan, scale):
    g = coarsen.differentiate(hyp, plan=plan)
    value, (dx, dy) = g.value_and_grad(3.0 * scale, 4.0 * scale)
    assert value == hyp(3.0 * scale, 4.0 * scale)
    assert dx == pytest.approx(2.2, rel=1e-15) and dy == pytest.approx(1.6, rel=1e-15)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_expm1_keeps_its_digits_in_a_closed_form(target):
    g = coarsen.differentiate(expm1_sum, wrt="x", target=target)
    for x in (1e-10, 1e-20, 0.5):
        value, dx = g.value_and_grad(x, 5)
        assert value == pytest.approx(expm1_sum(x, 5), rel=1e-15)
        assert dx == pytest.approx(5 * math.exp(x), rel=1e-15)


def _round_half(x_bar):
    return (x_bar * 0.5 + C) - C


def quant_decay_renamed(_t1, u_y, _acc2):
    # metamorphic: compiler-like names, the rounding step in a helper, statements reordered
    for _near1 in range(_acc2):
        _t1 = _round_half(_t1)
        _t1 = _t1 + u_y
    return _t1 * _t1


def kahan_renamed(x_bar, _trips):
    _cut1 = 0.0
    _t2 = 0.0
    for _i in range(_trips):
        u_y = x_bar / (_i + 1) - _t2
        _t3 = _cut1 + u_y
        _t2 = (_t3 - _cut1) - u_y
        _cut1 = _t3
    return _cut1


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_renamed_and_split_rounding_idioms_give_the_same_bits(target):
    for fn, ref, args in ((quant_decay_renamed, quant_decay, (7.0, 0.25, 6)),
                          (kahan_renamed, kahan, (0.1, 2000))):
        got = coarsen.differentiate(fn, wrt=0, target=target).value_and_grad(*args)
        want = coarsen.differentiate(ref, wrt=0, target=target).value_and_grad(*args)
        assert got == want and got[0] == ref(*args)
