"""Cheap float temporaries the reverse sweep evaluates again instead of taping them
(``recording.find_cheap_recomputable``).

A temporary of one cheap operation (``beta * A[p, i]``, a five-point sum) on element reads and
values that never change is re-evaluated in the reverse sweep where it would otherwise be
taped: the tape shrinks, and the gradient agrees with the oracle.  Where an element it reads
is written (or an index reassigned) between the assignment and a use, re-evaluating would
read another value: then it is taped as before, and the gradient stays right.
"""
import numpy as np
import pytest

import coarsen
from tests.zoo.harness import check_value_and_grad


def scaled_transpose_matvec(A, y, beta):
    n = A.shape[1]
    out = np.empty(n)
    for i in range(n):
        acc = 0.0
        for p in range(A.shape[0]):
            acc = acc + (beta * A[p, i]) * y[p]
        out[i] = acc
    return 0.5 * np.sum(out * out)


def five_point(A0, c, steps):
    A = A0.copy()
    B = A0.copy()
    for t in range(steps):
        for i in range(1, A.shape[0] - 1):
            for j in range(1, A.shape[1] - 1):
                B[i, j] = c * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i - 1, j] + A[i + 1, j])
        for i in range(1, A.shape[0] - 1):
            for j in range(1, A.shape[1] - 1):
                A[i, j] = c * (B[i, j] + B[i, j - 1] + B[i, j + 1] + B[i - 1, j] + B[i + 1, j])
    return np.sum(A * A)


def written_between(a, x):
    # t = x * a[k] is used after a[k] is overwritten: re-reading a[k] there would be wrong
    s = 0.0
    for k in range(a.shape[0]):
        t = x * a[k]
        a[k] = a[k] * t + 1.0
        s = s + t * t * a[k]
    return s


def index_reassigned(a, x):
    s = 0.0
    k = 0
    for r in range(a.shape[0] - 1):
        t = x * a[k]
        k = k + 1
        s = s + t * t * a[k]
    return s


def _mv_args():
    r = np.random.default_rng(3)
    return (r.standard_normal((5, 4)), r.standard_normal(5), 1.3)


def _fp_args():
    r = np.random.default_rng(4)
    return (r.standard_normal((5, 6)), 0.2, 2)


def _a_args():
    return (np.array([0.4, -0.7, 1.1, 0.3]), 0.9)


CASES = [(scaled_transpose_matvec, _mv_args), (five_point, _fp_args),
         (written_between, _a_args), (index_reassigned, _a_args)]


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn,factory", CASES, ids=[c[0].__name__ for c in CASES])
def test_against_the_oracle(fn, factory, target, coarse):
    check_value_and_grad(fn, factory, None, target, coarse, f"{fn.__name__}-{target}-{coarse}")


def test_nothing_taped_for_a_scaled_element():
    g = coarsen.differentiate(scaled_transpose_matvec, wrt=("A", "y", "beta"), target="python")
    g(*_mv_args())
    assert g.tape_bytes == 0
    assert "(beta * A[p, i])" in g.source


def test_five_point_sum_evaluated_again():
    """Each grid point's sum is read again from the (restored) grid, not taped: one float per
    point and step remains, the element the store overwrites."""
    g = coarsen.differentiate(five_point, wrt=("A0", "c"), target="python")
    A0, c, steps = _fp_args()
    g(A0, c, steps)
    interior = (A0.shape[0] - 2) * (A0.shape[1] - 2)
    assert g.tape_bytes <= 8 * (2 * steps * interior + 16)


def test_taped_where_the_element_changes():
    g = coarsen.differentiate(written_between, target="python")
    g(*_a_args())
    assert g.tape_bytes > 0
