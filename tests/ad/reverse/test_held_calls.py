"""Preaccumulated partials read the calls the primal already made (``segment_code.held_calls``).

A segment whose partials are evaluated in the forward sweep, right after its statements
(``plan="preaccumulate"``), read ``exp``, ``sin``... from the primal's temporaries that hold
them instead of calling them again: the composite trapezoid rule's helper
``a * exp(-b x^2) * sin(3x) + b x`` evaluated ``exp`` and ``sin`` twice per node (auto 14%
slower than fine-grained AD, in one process), now once.  Checked: one call of each per trip in
the generated code, gradients against the extended-precision oracle on both targets, the same
bits as fine-grained AD (which multiplies the primal's values too) on a renamed variant with
its helper inlined by hand, and a call whose argument the primal rounds otherwise.
"""
import math
import re

import numpy as np
import pytest

import coarsen
from apps.arrays import trapezoid
from tests.oracle import assert_grad_close, check_against_oracle, fd_grad


rule = trapezoid.objective      # the arrays suite's composite trapezoid rule


def rule_inlined(amp, rate, left, right, m):
    # trapezoid's sum, other names, the helper written out in the loop
    step = (right - left) / m
    total = 0.5 * (amp * math.exp(-rate * left * left) * math.sin(3.0 * left) + rate * left
                   + amp * math.exp(-rate * right * right) * math.sin(3.0 * right) + rate * right)
    for k in range(1, m):
        t = left + k * step
        total += amp * math.exp(-rate * t * t) * math.sin(3.0 * t) + rate * t
    return total * step


ARGS = (1.3, 0.7, 0.0, 2.0, 40)


def _loop_body(src):
    body = src[src.index("for i in range(1, n):"):]
    body = body[:body.index("# reverse sweep")]
    # the code, not its comments (the source lines and the segments' formulas)
    return "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("#"))


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_partials_call_exp_and_sin_once_per_trip(target):
    g = coarsen.differentiate(rule, wrt=("a", "b"), target=target, plan="preaccumulate")
    body = _loop_body(g.source_for(*ARGS))
    assert "_pa" in body         # a partial kept by the forward sweep
    # exp once, as math.exp or (vector_exp, where its loop vectorizes) the helper _exp
    assert len(re.findall(r"(math\.|\b_)exp\(", body)) == 1 and body.count("math.sin(") == 1, body


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_rule_against_oracle(target):
    check_against_oracle(rule, ARGS, target=target, wrt=("a", "b"))
    g = coarsen.differentiate(rule, wrt=("a", "b"), target=target, plan="preaccumulate")
    assert_grad_close(g.value_and_grad(*ARGS)[1], fd_grad(rule, list(ARGS), [0, 1]), err_msg="rule")


def test_same_bits_as_fine_grained():
    pre = coarsen.differentiate(rule_inlined, wrt=(0, 1), target="cpu", plan="preaccumulate")
    fine = coarsen.differentiate(rule_inlined, wrt=(0, 1), target="cpu", coarsen=False)
    v1, g1 = pre.value_and_grad(*ARGS)
    v2, g2 = fine.value_and_grad(*ARGS)
    assert v1 == v2
    # d/d amp multiplies the primal's exp and sin in both
    assert g1[0] == g2[0]
    assert np.isclose(g1[1], g2[1], rtol=1e-14)


def shifted_exp(x, c):
    # the primal rounds exp's argument as (c * x) * x; the lifted partial as c * x**2: held
    # means "the variable holds this value symbolically", the primal's rounding is kept
    s = 0.0
    for i in range(x.shape[0]):
        s += math.exp(c * x[i] * x[i]) * x[i]
    return s


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_exp_of_rounded_argument_against_oracle(target):
    x = np.linspace(-1.5, 2.0, 9)
    check_against_oracle(shifted_exp, (x, -0.4), target=target, wrt=(0, 1))
