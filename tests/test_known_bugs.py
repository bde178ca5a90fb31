"""Known wrong answers, pinned until they are fixed (``xfail(strict=True)``: a fix makes the
test pass, and strict mode then fails it, so the marker is removed with the fix).

``fuzz_12000096``: ``tests/fuzz_soak.py --one 12000096`` (found 2026-12-02, present at
``20e36a4`` and before).  Fine mode (``coarsen=False``), and coarse mode under the tests'
default cost weights, give d/dy = -3.79 where the extended-precision oracle gives -1.19 (a[0]
and a[4] are off too); coarse mode under this machine's calibrated weights gave -1.19.  Not
minimized yet (the minimizer ran 15 minutes without a smaller failing program).
"""
import math

import numpy as np
import pytest

from tests.oracle import check_against_oracle


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



ARGS = (-0.554, -0.662, np.array([0.951, 0.256, -0.773, -0.975, -1.189]), 4)


@pytest.mark.xfail(strict=True, reason="the gradient of fuzz program 12000096 is wrong")
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
def test_the_gradient_matches_the_oracle(coarse):
    """Under the tests' cost weights (``COARSEN_COST_WEIGHTS=default``) both modes give the wrong
    d/dy; with this machine's calibrated weights coarse mode happened to plan around it."""
    check_against_oracle(fuzz_12000096, ARGS, wrt=(0, 1, 2), target="python", coarse=coarse)
