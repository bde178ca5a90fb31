"""Local stretch tapes of the CUDA variant (``coarsen/ad/reverse/local_stretch.py``), run on
the CPU: no GPU or simulator needed (the kernel side is in tests/transforms/test_cuda_batch.py).

What is pinned: the workspace variant built with ``local_tape=(floats, ints)`` takes the two
local arrays after ``_status`` and gives the CPU gradient bit for bit (plain Python, and its
``@numba.njit`` twin, ``lowering.cuda.cpu_twin_source``), for trip counts around the stride;
its global tape holds one checkpoint per stretch; the stride is the most trips the local tapes
hold; loops where it would not lower the global traffic, or whose trip does not fit, are left
on the global tape with the reason in the notes; the kernel allocates the local arrays.
"""
import math

import numpy as np
import pytest

import coarsen
from coarsen import examples as ex
from coarsen import lowering
from coarsen.transforms.batching.cuda import loop_notes


def run(ws, args, local, nf=512, ni=64):
    """The workspace variant's entry (or a function of the same parameters) on one set."""
    entry = getattr(ws, "entry", ws)
    status = np.zeros(1, np.int64)
    out = entry(*args, np.zeros(nf), np.zeros(ni, np.int64), status,
                   np.zeros(local[0]), np.zeros(local[1], np.int64))
    assert status[0] == 0
    return out


def same(got, want):
    return got[0] == want[0] and all(float(a) == float(b) for a, b in zip(got[1], want[1]))


@pytest.fixture(scope="module")
def logistic():
    g = coarsen.differentiate(ex.logistic_map, wrt=("r", "x0"))
    types, sig = g.signature_of((3.1, 0.3, 20))
    return g, g.specialization(types, sig, workspace=True, local_tape=(8, 4))


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 16, 37])
def test_logistic_bit_for_bit(logistic, n):
    g, ws = logistic
    got = run(ws, (3.1, 0.3, n), (8, 4))
    assert same(got, g.value_and_grad(3.1, 0.3, n))
    assert got[2] == (math.ceil(n / 8), 0)          # one float checkpoint a stretch of 8


def test_logistic_notes_and_twin(logistic):
    g, ws = logistic
    ((line, how),) = loop_notes(ws)
    assert line == 15 and how.startswith("in local stretches: k = 8 trips a stretch")
    assert "a checkpoint of 1 entries a stretch on the global tape instead of 8" in how
    assert f"def {ws.entry_name}(r, x0, n, _ftape, _itape, _status, _lftape, _litape):" in ws.source
    twin = lowering.build(lowering.cuda.cpu_twin_source(ws.source), name="logistic_twin", target="cpu")
    for n in (0, 9, 37):
        assert same(run(getattr(twin, ws.entry_name), (3.1, 0.3, n), (8, 4)), g.value_and_grad(3.1, 0.3, n))


def test_pendulum_two_state_bit_for_bit():
    g = coarsen.differentiate(ex.damped_pendulum)
    args = (0.4, -0.2, 0.3, 0.05)
    types, sig = g.signature_of(args + (25,))
    ws = g.specialization(types, sig, workspace=True, local_tape=(16, 4))
    ((_, how),) = loop_notes(ws)
    assert how.startswith("in local stretches")
    for n in (0, 1, 5, 25, 61):
        assert same(run(ws, args + (n,), (16, 4)), g.value_and_grad(*args, n))


def coupled(a, b, n):
    """Two floats of state, two taped a trip."""
    x = a
    y = b
    for i in range(n):
        x = x + 0.1 * y
        y = math.sin(x)
    return x * y


def test_loops_left_on_the_global_tape():
    g = coarsen.differentiate(ex.damped_pendulum)
    args = (0.4, -0.2, 0.3, 0.05, 9)
    types, sig = g.signature_of(args)
    # a local tape smaller than one trip's
    ws = g.specialization(types, sig, workspace=True, local_tape=(1, 1))
    ((_, how),) = loop_notes(ws)
    assert how.startswith("not in local stretches: one trip tapes")
    assert same(run(ws, args, (1, 1)), g.value_and_grad(*args))
    # a stretch (of one trip) tapes no more than the checkpoint of the two-float state
    g = coarsen.differentiate(coupled)
    types, sig = g.signature_of((0.3, 0.2, 9))
    ws = g.specialization(types, sig, workspace=True, local_tape=(2, 1))
    ((_, how),) = loop_notes(ws)
    assert how.startswith("not in local stretches: a checkpoint (2 entries) is no smaller"), how
    assert same(run(ws, (0.3, 0.2, 9), (2, 1)), g.value_and_grad(0.3, 0.2, 9))
    ws = g.specialization(types, sig, workspace=True, local_tape=(8, 1))    # 4 trips: it gains
    assert loop_notes(ws)[0][1].startswith("in local stretches: k = 4")
    assert same(run(ws, (0.3, 0.2, 9), (8, 1)), g.value_and_grad(0.3, 0.2, 9))


def test_kernel_allocates_the_local_tapes():
    dev = "def f(a, _ftape, _itape, _status, _lftape, _litape):\n    return (a, (1.0,), (0, 0))\n"
    src = lowering.cuda_batch_source("f", [("a", "float64")], [True], wrt=["a"], device_source=dev,
                                     local_tape=(16, 4))
    assert "cuda.local.array(16, numba.float64)" in src and "cuda.local.array(4, numba.int64)" in src
    assert ", lftape, litape)" in src
    for bad in ((0, 4), (16,), (1.5, 2)):
        with pytest.raises(lowering.LoweringError, match="local_tape"):
            lowering.cuda_batch_source("f", [("a", "float64")], [True], wrt=["a"], device_source=dev,
                                       local_tape=bad)
