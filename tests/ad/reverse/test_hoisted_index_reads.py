"""A segment's reverse step that reads a recomputable integer hoisted before an enclosing
loop's reverse (``Emitter.hoisted``) does not make the forward sweep tape it
(``coarsen.ad.reverse.steps``: the step's reads are recorded with ``control.loads``, as every
other statement's are).

A scalarized 3-D stencil computes the index temporaries of its outer nest loops
(``_t71 = 2 + _i1``) once per trip; the reverse sweep assigns them again before the inner
loops' reverse.  The segment's reads of those names were recorded as reads of the forward's
values, so every outer trip pushed each of them on the int tape and popped it back, values
no reverse statement read (heat-3d: 32 pushes in the code, 665 lines against 487).  Checked:
no int-tape push in the cpu code of two stencils (a renamed variant with the statements of
its step reordered among them), gradients against the extended-precision oracle on both
targets, and the same bits from the two variants.
"""
import numpy as np
import pytest

import coarsen
from tests.oracle import check_against_oracle


def smooth3(G0, c, V, steps):
    G = G0.copy()
    H = G0.copy()
    for s in range(steps):
        H[1:-1, 1:-1, 1:-1] = G[1:-1, 1:-1, 1:-1] + c * (G[2:, 1:-1, 1:-1] - G[:-2, 1:-1, 1:-1]) \
            + c * c * (G[1:-1, 1:-1, 2:] + G[1:-1, 1:-1, :-2])
        G[1:-1, 1:-1, 1:-1] = 0.5 * H[1:-1, 1:-1, 1:-1] + c * H[1:-1, 2:, 1:-1]
    return np.sum(V * G * G)


def smooth3_renamed(start, rate, weight, nsteps):
    # the same program, other names, and the two addends of the first store swapped
    cur = start.copy()
    nxt = start.copy()
    for step in range(nsteps):
        nxt[1:-1, 1:-1, 1:-1] = cur[1:-1, 1:-1, 1:-1] \
            + rate * rate * (cur[1:-1, 1:-1, 2:] + cur[1:-1, 1:-1, :-2]) * 1.0 \
            + rate * (cur[2:, 1:-1, 1:-1] - cur[:-2, 1:-1, 1:-1]) * 1.0
        cur[1:-1, 1:-1, 1:-1] = 0.5 * nxt[1:-1, 1:-1, 1:-1] + rate * nxt[1:-1, 2:, 1:-1]
    return np.sum(weight * cur * cur)


def _inputs(shape=(5, 4, 6), seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape), 0.3, rng.standard_normal(shape), 3


@pytest.mark.parametrize("fn", [smooth3, smooth3_renamed])
def test_no_int_tape_pushes_for_hoisted_indices(fn):
    src = coarsen.differentiate(fn, wrt=(0, 1), target="cpu").source_for(*_inputs())
    assert "_itape[_ipos] =" not in src, "an index temporary is taped"


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_stencil_gradient_against_oracle(target):
    check_against_oracle(smooth3, _inputs(shape=(4, 5, 4), seed=1), target=target, wrt=(0, 1))


def test_renamed_reordered_variant_agrees():
    args = _inputs(shape=(6, 5, 5), seed=2)
    v1, g1 = coarsen.differentiate(smooth3, wrt=(0, 1), target="cpu").value_and_grad(*args)
    v2, g2 = coarsen.differentiate(smooth3_renamed, wrt=(0, 1), target="cpu").value_and_grad(*args)
    assert np.isclose(v1, v2, rtol=1e-14)
    np.testing.assert_allclose(g1[0], g2[0], rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(g1[1], g2[1], rtol=1e-13)
