"""Tests that kill the sampled (non-guard) mutants of ``coarsen.ir.scalarize`` that the other
scalarize tests let survive (issue 48: ``python -m tests.mutation coarsen/ir/scalarize.py
--sampled-only --sample 30 --seed 1``).

* ``BIG``, the bound that stands for a missing slice end (``x[1:]``), must exceed any length: a
  small one (the mutant's ``2 | 62`` is 62) clips a long array's slice;
* a matrix-vector product is a nest only where its target is assigned once: a product carried
  by a loop (``y = B @ y``) would write ``y`` while the nest still reads it;
* a user's variable rebound by an element-wise expression in a loop becomes a nest whatever
  its name: ``rebindable`` compares the target with the result's name for equality, and a
  mutant's ordering (``<=``) refused names that sort before ``_ret`` (capitals).
"""
import re

import numpy as np
import pytest

from tests.helpers_passes import scalarized_ir
from tests.oracle import check_against_oracle


def long_slices(x):
    # ``x[1:]`` and ``x[:-1]``: a missing end and a missing start, on 80 elements
    return np.sum(x[1:] * x[:-1]) + np.sum(x[2:] ** 2)


def carried_matvec(A, x, w):
    y = (A - 1.0) @ x
    for k in range(2):
        y = (A - 1.0) @ y
    return np.sum(y * w)


def relax_capital(D, w):
    P = D * 1.0
    for k in range(3):
        P = np.minimum(P, P * w + 0.1)
    return np.sum(P)


XL = np.linspace(-1.0, 1.0, 80) + 0.01 * np.arange(80) ** 0.5
M = np.arange(9.0).reshape(3, 3) / 10 + 0.5
V = np.linspace(0.5, 1.5, 3)


def test_a_missing_slice_end_reaches_the_end_of_a_long_array():
    ir = scalarized_ir(long_slices, (XL,))
    assert "4611686018427387904" in ir, ir          # the bound stands for "to the end"


def test_a_matvec_carried_by_a_loop_stays_a_product():
    ir = scalarized_ir(carried_matvec, (M, V, 2.0 * V))
    assert "y: f64[:] = matmul(_t2, y)" in ir, ir


def test_a_capitalized_variable_rebound_in_a_loop_is_a_nest():
    ir = scalarized_ir(relax_capital, (V, 0.5))
    assert ir.count("P: f64[:] = copy(") == 2 and not re.search(r"P: f64\[:\] = minimum\(", ir), ir


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_long_slices_and_a_carried_matvec_match_the_oracle(target):
    check_against_oracle(long_slices, (XL,), target=target)
    check_against_oracle(carried_matvec, (M, V, 2.0 * V), target=target, wrt=("A", "x"))
