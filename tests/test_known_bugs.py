"""Known wrong gradients, found and not yet fixed: each test is ``xfail(strict=True)``, so it
fails the suite the day the bug is fixed (then drop the marker and keep the test).

* fuzz seed 18000026 (``python tests/fuzz_soak.py --one 18000026``): the coarse gradient
  differs from the fine one and from the oracle (fine agrees with the oracle); also with plain
  names, and already at commit 97fcb9b (before stop 28's changes).
"""
import math

import numpy as np
import pytest

from tests.oracle import check_against_oracle


def h(u, f):
    np = u - f if (f if math.tanh(u) < u + f else u) > f else math.sin(f)
    np = np
    np = min(np, np)
    if 1.3 + u > (np if math.tanh(0.1) <= (np if math.cos(np) < 0.1 * f else u) else np):
        np = np
    else:
        np = f
    return (np + max(1.5, f)) * (np if min(f, np) < max(np, np) else u)


def fuzz_18000026(s0_bar, s0_bar_bar_v, _s0_bar, _s0_bar_bar):
    _g1 = _s0_bar.shape[0]
    s0 = (s0_bar_bar_v + _s0_bar[0]) * s0_bar_bar_v
    s1 = math.tanh(s0_bar)
    s0 = s0_bar
    for _ret_bar in range(_g1):
        _s1 = math.exp(math.tanh(s0_bar))
    _s0_bar[0] -= -s1
    s1 = max(_s0_bar[_g1 - 1] * 0.1, _s0_bar[0])
    s0 *= 0.75 + 0.1 * math.sin(_s0_bar[_g1 - 1])
    s1 -= s0_bar
    if (s0_bar + _s0_bar[_g1 - 1]) * _s0_bar[0] > h(_s0_bar[-1], s0):
        return -0.7 * s0
    s0 = s1 * 1.3 if 1.3 * s0 <= h(s0, s0_bar_bar_v) else s0
    _s0_bar[_g1 - 1] += 0.1 * math.log(1.0 + _s0_bar[0] * _s0_bar[0])
    return 1.5 * s0 + 0.5 * s1 + np.sum(_s0_bar)


@pytest.mark.xfail(strict=True, reason="known wrong coarse gradient (fuzz seed 18000026)")
def test_fuzz_18000026_coarse():
    args = (0.448, 1.211, np.array([-0.136, 0.866, 0.01, 0.889]), 2)
    check_against_oracle(fuzz_18000026, args, wrt=(0, 1, 2), target="python", coarse=True)


def test_fuzz_18000026_fine():
    args = (0.448, 1.211, np.array([-0.136, 0.866, 0.01, 0.889]), 2)
    check_against_oracle(fuzz_18000026, args, wrt=(0, 1, 2), target="python", coarse=False)
