"""A store's restore in the reverse sweep reads its index where the trip's index was.

Found by ``tests/fuzz_soak.py`` (program 12000096, below as generated; pinned as a strict xfail
in the stop before this fix).  A store ``a[k] += c`` into a recorded array saves the element it
overwrites, and the reverse sweep writes it back at ``a[k]``.  That write-back was not counted
as a read of ``k`` (``ControlMixin.record_reads`` skipped the whole restore, meant to skip only
the array), so ``k`` was never taped: in a ``while`` loop, where the reverse trip cannot
recompute ``i1 % m`` from a loop index, every reverse trip restored the *last* trip's element.
The other elements kept the values of later trips, and a read of ``a[-1]`` (element 4, written by
``a[i1 % m]`` at trip 4) in the reverse sweep saw the wrong value: d/dy came out -3.79 where the
extended-precision oracle gives -1.19, in fine and coarse mode alike.

The minimized program and its metamorphic variants (the compiler's names as the user's, the
counter in a ``for`` loop, a helper, the statements reordered, a 2-D array, float32) are each
held to the oracle on both targets and in both modes.
"""
import math

import numpy as np
import pytest

import coarsen
from tests.oracle import check_against_oracle


def minimized(y, a, n):
    m = a.shape[0]
    s0 = y
    i1 = 0
    while i1 < n:
        i1 += 1
        s0 = s0 * a[-1]
        a[i1 % m] += 0.25
    return s0


def renamed(_t1, _ftape, _fpos):
    """The compiler's names (temporaries, tapes, their position) as the user's."""
    m = _ftape.shape[0]
    _t3 = _t1
    _trips2 = 0
    while _trips2 < _fpos:
        _trips2 += 1
        _t3 = _t3 * _ftape[-1]
        _ftape[_trips2 % m] += 0.25
    return _t3


def counter_in_for(y, a, n):
    """A counter that is not the loop's index: the reverse loop cannot recompute it either."""
    m = a.shape[0]
    s0 = y
    k = 0
    for _ in range(n):
        k += 1
        s0 = s0 * a[m - 1]
        a[k % m] += 0.25
    return s0


def _bump(a, k):
    a[k % a.shape[0]] += 0.25
    return 0.0


def with_helper(y, a, n):
    """The store in a helper."""
    s0 = y
    i1 = 0
    while i1 < n:
        i1 += 1
        s0 = s0 * a[-1] + _bump(a, i1)
    return s0


def reordered(y, a, n):
    """The counter's update after the store, the product after both."""
    m = a.shape[0]
    s0 = y
    i1 = 1
    while i1 <= n:
        a[i1 % m] += 0.25
        i1 += 1
        s0 = s0 * a[-1]
    return s0


def in_2d(y, a, n):
    """A computed index pair into a 2-D array."""
    s0 = y
    i1 = 0
    while i1 < n:
        i1 += 1
        s0 = s0 * a[1, -1]
        a[i1 % 2, i1 % a.shape[1]] += 0.25 * s0
    return s0


A = np.array([0.951, 0.256, -0.773, -0.975, -1.189])
CASES = {
    "minimized": (minimized, (-0.662, A, 5)),
    "renamed": (renamed, (-0.662, A, 5)),
    "counter_in_for": (counter_in_for, (-0.662, A, 5)),
    "with_helper": (with_helper, (-0.662, A, 5)),
    "in_2d": (in_2d, (-0.662, np.array([[0.951, 0.256, -0.773], [-0.975, -1.189, 0.4]]), 5)),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
def test_the_gradient_matches_the_oracle(name, target, coarse):
    fn, args = CASES[name]
    check_against_oracle(fn, args, wrt=(0, 1), target=target, coarse=coarse)


def test_reordered_matches_the_oracle():
    check_against_oracle(reordered, (-0.662, A, 5), wrt=(0, 1), target="python")


def test_all_variants_agree():
    """The same program in five spellings: the same gradient, to rounding."""
    ref = coarsen.differentiate(minimized, wrt=(0, 1))(-0.662, A.copy(), 5)
    for fn in (renamed, counter_in_for, with_helper):
        got = coarsen.differentiate(fn, wrt=(0, 1))(-0.662, A.copy(), 5)
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-14)
        np.testing.assert_allclose(got[1], ref[1], rtol=1e-14)


def test_float32():
    a = A.astype(np.float32)
    dy, da = coarsen.differentiate(minimized, wrt=(0, 1))(np.float32(-0.662), a.copy(), 5)
    assert da.dtype == np.float32
    ref = coarsen.differentiate(minimized, wrt=(0, 1))(float(np.float32(-0.662)), a.astype(np.float64), 5)
    np.testing.assert_allclose(dy, ref[0], rtol=1e-5)
    np.testing.assert_allclose(da, ref[1], rtol=1e-5, atol=1e-6 * np.abs(ref[1]).max())


def fuzz_12000096(x, y, a, n):
    m = a.shape[0]
    s0 = y
    a[-1] += y + y + a[m - 1]
    i1 = 0
    while i1 < n:
        i1 += 1
        for i2 in range(m - 1, 0, -2):
            if i2 != 1:
                a[i2] -= a[0] / (1.0 + y * y) * math.sqrt(1.0 + s0 * s0)
                s0 -= s0 / (1.0 + a[-1] * a[-1])
                a[i1 % m] += 0.25 * i2
    i3 = 0
    while i3 < 2:
        i3 += 1
        if s0 * -0.3 > s0:
            for i4 in range(n, 0, -1):
                s0 = math.sin(x) * 0.9
                if min(2.0, a[(i3 + 1) % m]) >= a[i4 % m]:
                    if i4 != 1:
                        if i3 >= 1:
                            s0 = math.sin(s0) * s0 + math.cos(s0)
                            s0 = math.sin(s0) * s0 + math.cos(s0)
                        elif math.sin((i3 + 0.5)) >= -1.1 * i3 * 1.0:
                            a[(2 * i4 + 1) % m] += (i4 + 0.5) * y - min(a[0], -0.3)
                        else:
                            s0 = (a[i3 % m] * a[i3 % m] if math.cos(s0) < max(y, y) else (1.3 + x) * 0.9)
                    else:
                        s0 = y * s0 + -s0
                else:
                    t1 = y + -s0  # noqa: F841 - the fuzz program as generated
        elif s0 * x > 1.5 + 1.5:
            if i3 != 1:
                s0 *= 0.95 + 0.1 * math.sin(s0)
            else:
                a[(i3 + 1) % m] += (min(a[-1], s0) if x * y <= (i3 + 0.5) else (i3 + 0.5) - x)
        elif i3 % 2 == 0:
            s0 -= 0.5
        else:
            for i5 in range(n, 0, -1):
                if x < (a[(2 * i5 + 1) % m] + a[(i3 + 1) % m]) * x:
                    s0 += a[m - 1]
                elif -0.7 <= math.log(1.0 + x * x):
                    s0 -= math.sqrt(1.0 + -0.7 * -0.7)
                elif 1.5 - 0.25 * i5 >= math.log(1.0 + s0 * s0):
                    s0 = min(y + x, math.cos(s0))
    return s0 + np.sum(a)


FUZZ_ARGS = (-0.554, -0.662, np.array([0.951, 0.256, -0.773, -0.975, -1.189]), 4)


@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
def test_fuzz_12000096_matches_the_oracle(coarse):
    """Under the tests' cost weights (``COARSEN_COST_WEIGHTS=default``) both modes gave the
    wrong d/dy before the fix."""
    check_against_oracle(fuzz_12000096, FUZZ_ARGS, wrt=(0, 1, 2), target="python", coarse=coarse)
