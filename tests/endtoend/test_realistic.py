"""Realistic programs (``tests/zoo/realistic.py``) against the extended-precision oracle.

Logistic regression with explicit loops, RK4 on Lotka-Volterra (scalar and array forms), the
explicit heat equation (scalar loops and slices), Gauss-Seidel in place, Doolittle LU with
slices and ``@``, Lennard-Jones pair energy, Newton iterations in ``while`` loops, softmax
cross-entropy.  Same checks as the zoo (``tests/zoo/harness.py``), both targets, coarse and
fine.
"""
import math

import numpy as np
import pytest

from tests.oracle import fd_grad, resolve_wrt
from tests.zoo import case_ids
from tests.zoo.harness import check_gradient, check_value_and_grad
from tests.zoo.realistic import CASES

IDS = case_ids(CASES)
TARGETS = ["cpu", "python"]
MODES = [pytest.param(True, id="coarse"), pytest.param(False, id="fine")]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_realistic_case_is_valid(case):
    fn, factory, wrt = case
    v = getattr(fn, "py_func", fn)(*factory())
    assert np.ndim(v) == 0 and isinstance(v, (float, np.floating)) and math.isfinite(v)
    pos, _ = resolve_wrt(fn, factory(), wrt)
    fd_grad(fn, factory(), pos)


@pytest.mark.parametrize("coarse", MODES)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradient(case, target, coarse):
    fn, factory, wrt = case
    label = f"{IDS[CASES.index(case)]} target={target} coarsen={coarse}"
    check_gradient(fn, factory, wrt, target, coarse, label)


@pytest.mark.parametrize("coarse", MODES)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_value_and_grad(case, target, coarse):
    fn, factory, wrt = case
    label = f"{IDS[CASES.index(case)]} target={target} coarsen={coarse}"
    check_value_and_grad(fn, factory, wrt, target, coarse, label)


def test_coarse_and_fine_agree_closely():
    """coarsen=True and coarsen=False compute the same gradient: beyond both matching the
    oracle at 1e-8, they agree with each other at 1e-10 on the heat and RK4 programs."""
    import coarsen
    for fn, factory, wrt in (CASES[2], CASES[7]):
        gc = coarsen.differentiate(fn, wrt, coarsen=True, target="python")
        gf = coarsen.differentiate(fn, wrt, coarsen=False, target="python")
        for a, b in zip(gc(*factory()), gf(*factory())):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=0)
