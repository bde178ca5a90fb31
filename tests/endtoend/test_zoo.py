"""The zoo against the extended-precision oracle, on both targets, coarse and fine.

Every case of ``tests/zoo`` (scalar, loops, arrays) is differentiated with
``coarsen.differentiate(fn, wrt, coarsen=..., target=...)`` for target in ("cpu", "python")
and coarsen in (True, False); see ``tests/zoo/harness.py`` for exactly what is checked.  Each
gradient object is built once and cached, so the whole module costs one compile per
(function, wrt, target, coarsen).
"""
import math
import os

import numpy as np
import pytest

from tests.oracle import fd_grad, resolve_wrt
from tests.zoo import all_zoo_cases, case_ids
from tests.zoo.harness import check_gradient, check_value_and_grad

CASES = all_zoo_cases()
IDS = case_ids(CASES)
TARGETS = ["cpu", "python"]
MODES = [pytest.param(True, id="coarse"), pytest.param(False, id="fine")]

# CI budget: every case runs coarse and fine on the python target and coarse (the default) on
# the cpu target; fine-grained AD on the cpu target, which needs one more Numba compile per
# case, runs on every third case.  COARSEN_FULL_MATRIX=1 runs all four combinations everywhere.
FULL = os.environ.get("COARSEN_FULL_MATRIX") == "1"


def _combos():
    out = []
    for k, case in enumerate(CASES):
        for target in TARGETS:
            for coarse in (True, False):
                if target == "cpu" and not coarse and not FULL and k % 3:
                    continue
                out.append(pytest.param(case, target, coarse,
                                        id=f"{IDS[k]}-{target}-{'coarse' if coarse else 'fine'}"))
    return out


COMBOS = _combos()


def test_zoo_size():
    fns = {getattr(fn, "py_func", fn) for fn, _, _ in CASES}
    assert len(fns) >= 45
    assert len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_zoo_case_is_valid(case):
    """Independent of coarsen: the function runs in plain Python, returns a finite float
    scalar, and the oracle converges at the case's inputs (they are away from branch
    thresholds, kinks and trip-count changes)."""
    fn, factory, wrt = case
    args = factory()
    v = getattr(fn, "py_func", fn)(*args)
    assert np.ndim(v) == 0 and isinstance(v, (float, np.floating)) and math.isfinite(v)
    pos, _ = resolve_wrt(fn, factory(), wrt)
    assert pos
    fd_grad(fn, factory(), pos)


@pytest.mark.parametrize("case,target,coarse", COMBOS)
def test_gradient(case, target, coarse):
    fn, factory, wrt = case
    label = f"{IDS[CASES.index(case)]} target={target} coarsen={coarse}"
    check_gradient(fn, factory, wrt, target, coarse, label)


@pytest.mark.parametrize("case,target,coarse", COMBOS)
def test_value_and_grad(case, target, coarse):
    fn, factory, wrt = case
    label = f"{IDS[CASES.index(case)]} target={target} coarsen={coarse}"
    check_value_and_grad(fn, factory, wrt, target, coarse, label)


@pytest.mark.parametrize("target", TARGETS)
def test_one_specialization_per_signature(target):
    """The same gradient object serves float64 and then float32 arguments (and float64
    again), each call with its own dtypes and the oracle's tolerance for them."""
    from tests.oracle import assert_grad_close, tolerances_for
    from tests.zoo import arrays
    g = coarsen_differentiate(arrays.float32_fn, target=target)
    r = np.random.default_rng(3)
    a64 = r.normal(size=5)
    for a in (a64, a64.astype(np.float32), a64[:3].copy()):
        args = (a, 1.3)
        ga, gx = g(*args)
        assert ga.dtype == a.dtype and ga.shape == a.shape
        rtol, floor = tolerances_for(args)
        assert_grad_close((ga, gx), tuple(fd_grad(arrays.float32_fn, args, [0, 1])),
                          rtol=rtol, floor=floor, err_msg=f"{target} {a.dtype} {a.shape}")


def coarsen_differentiate(fn, **kw):
    import coarsen
    return coarsen.differentiate(fn, **kw)
