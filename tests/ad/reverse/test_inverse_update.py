"""Integer updates undone in place (``AdjointMixin.inverse_update``).

``idx += 1`` (or ``-= c`` with ``c`` a constant or an integer that never changes) is undone in
the reverse sweep by ``idx -= 1`` instead of saving ``idx`` on the int tape.  The undo reads the
value the update left, so the assignment that resets ``idx`` in the next trip must save it
(GMM's packed-triangle index): a gradient that got this wrong reads the wrong elements.
"""
import numpy as np
import pytest

import coarsen
from tests.zoo.harness import check_value_and_grad


def packed_triangle(L, x):
    """GMM's shape: an index reset per outer trip, advanced in a nested loop."""
    n = x.shape[0]
    s = 0.0
    for r in range(L.shape[0]):
        idx = 0
        for j in range(n):
            for l in range(j + 1, n):  # noqa: E741 (user-style code, as ADBench GMM writes it)
                s += L[r, idx] * x[j] * x[l]
                idx += 1
    return s


def strided_walk(a, step):
    k = a.shape[0] - 1
    s = 0.0
    while k >= 0:
        s += a[k] * a[k] * (k + 1)
        k -= step
    return s


def varying_step(a):
    # the step changes each trip: the update is not undone in place, it is taped
    k = 0
    d = 1
    s = 0.0
    for t in range(3):
        s += a[k] * a[k]
        k = k + d
        d = d + 1
    return s


def _tri():
    r = np.random.default_rng(5)
    return (r.standard_normal((3, 6)), r.standard_normal(4))


CASES = [(packed_triangle, _tri),
         (strided_walk, lambda: (np.array([0.3, -1.2, 0.8, 0.5, 1.1, -0.4, 0.9]), 2)),
         (varying_step, lambda: (np.array([0.3, -1.2, 0.8, 0.5, 1.1, -0.4, 0.9]),))]


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn,factory", CASES, ids=[c[0].__name__ for c in CASES])
def test_against_the_oracle(fn, factory, target, coarse):
    check_value_and_grad(fn, factory, None, target, coarse, f"{fn.__name__}-{target}-{coarse}")


def test_the_increment_is_not_taped():
    g = coarsen.differentiate(packed_triangle, wrt="L", target="python")
    g(*_tri())
    assert "idx = idx - 1" in g.source
    # only the reset per outer trip saves idx (3 ints), not each of the 3 * 6 increments
    assert g.tape_bytes <= 8 * 3
