"""Reads of one element shared in a segment (``coarsen.ad.lift.same_element_reads``) only with a
read the segment itself uses.

Found by ``tests/fuzz_soak.py`` (seed 11000219, minimized below): ``a[0]`` is read three times
before a helper updates ``a`` in place, so all three reads ride at the front of the segment of
``(a[0] + a[0]) * a[1]``; the first one is used only after the segment.  Lifting the other two
as the first one's symbol gave the segment's step a partial with respect to a set-once
temporary, whose adjoint its one use assigns: the step overwrote that use's contribution, and
``d/da[0]`` came out half of what it is, in coarse mode only (fine was right).
"""
import numpy as np
import pytest

import coarsen
from tests.oracle import check_against_oracle


def _bump(p, c):
    p[1:] += 0.5
    return c


def shared(a):
    return a[0] * _bump(a, (a[0] + a[0]) * a[1])


def shared_renamed(_t1):
    """The compiler's names as the user's, the helper written out."""
    _t2 = _t1[0]
    _t3 = (_t1[0] + _t1[0]) * _t1[1]
    _t1[1:] += 0.5
    return _t2 * _t3


def shared_reordered(a):
    """The operands in another order."""
    c = a[1] * (a[0] + a[0])
    first = a[0]
    a[1:] += 0.5
    return c * first


@pytest.mark.parametrize("fn", [shared, shared_renamed, shared_reordered],
                         ids=["helper", "renamed", "reordered"])
@pytest.mark.parametrize("target", ["python", "cpu"])
def test_the_gradient_is_2_a0_squared_a1s(fn, target):
    a = np.array([-0.916, 0.32, 0.7])
    for coarse in (True, False):
        g = coarsen.differentiate(fn, wrt=0, coarsen=coarse, target=target)
        got = g(a.copy())
        np.testing.assert_allclose(got, [4 * a[0] * a[1], 2 * a[0] ** 2, 0.0], rtol=1e-15, atol=0)
    check_against_oracle(fn, (a,), wrt=0, target=target)


def test_float32_input():
    a = np.array([-0.916, 0.32, 0.7], dtype=np.float32)
    got = coarsen.differentiate(shared, wrt=0)(a.copy())
    assert got.dtype == np.float32
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(got, [4 * a64[0] * a64[1], 2 * a64[0] ** 2, 0.0], rtol=1e-6)
