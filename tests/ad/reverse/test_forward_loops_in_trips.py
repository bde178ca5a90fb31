"""Forward-mode loops in a reduction loop's trip (``coarsen.analysis.forward_loops``,
``ForwardLoop.in_trip``): a Monte Carlo path's recurrence runs with tangent lanes inside the
trip, whose reverse reads them right after it; where the reduction loop is reversed as usual
(its accumulator read before it, or in parallel), the loop is emitted in reverse mode.
Gradients against the extended-precision oracle on both targets, the same code under other
names, in a helper and in float32, and the fallbacks."""
import math

import numpy as np
import pytest

import coarsen
from tests.oracle import check_against_oracle


def paths(S0, sigma, r, Z):
    # apps/mc_option.py's shape: a sum over paths of a recurrence along each path
    n = Z.shape[1]
    dt = 1.0 / n
    drift = (r - 0.5 * sigma * sigma) * dt
    vol = sigma * math.sqrt(dt)
    total = 0.0
    for p in range(Z.shape[0]):
        S = S0
        for k in range(n):
            S = S * math.exp(drift + vol * Z[p, k])
        if S > 0.9:
            total += S - 0.9
    return total / Z.shape[0]


def paths_renamed(S_dot0_, drift_dot1_, _entry1, Z):
    # the lanes' and the kept entry's names taken by the user's variables
    n = Z.shape[1]
    dt = 1.0 / n
    drift = (_entry1 - 0.5 * drift_dot1_ * drift_dot1_) * dt
    vol = drift_dot1_ * math.sqrt(dt)
    total = 0.0
    for p in range(Z.shape[0]):
        S = S_dot0_
        for k in range(n):
            S = S * math.exp(drift + vol * Z[p, k])
        if S > 0.9:
            total += S - 0.9
    return total / Z.shape[0]


def _path(S0, drift, vol, Z, p):
    S = S0
    for k in range(Z.shape[1]):
        S = S * math.exp(drift + vol * Z[p, k])
    return S


def paths_in_a_helper(S0, sigma, r, Z):
    n = Z.shape[1]
    dt = 1.0 / n
    vol = sigma * math.sqrt(dt)
    drift = (r - 0.5 * sigma * sigma) * dt
    total = 0.0
    for p in range(Z.shape[0]):
        S = _path(S0, drift, vol, Z, p)
        if S > 0.9:
            total += S - 0.9
    return total / Z.shape[0]


def read_before(S0, sigma, r, Z):
    # the accumulator is read before the loop: the loop is reversed as usual, and the path's
    # recurrence with it
    total = S0 * sigma
    w = total * total
    for p in range(Z.shape[0]):
        S = S0
        for k in range(Z.shape[1]):
            S = S * math.exp(r + sigma * Z[p, k])
        total += S
    return total + w


def _z(dtype=np.float64):
    return 0.3 * np.random.default_rng(7).standard_normal((6, 5)).astype(dtype)


CASES = [paths, paths_renamed, paths_in_a_helper]


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_against_the_oracle(fn, target):
    g, _, _ = check_against_oracle(fn, (1.0, 0.3, 0.05, _z()), target=target, wrt=(0, 1, 2))
    src = g.source_for(1.0, 0.3, 0.05, _z())
    fwd = src.split("reverse sweep")[0]
    # forward mode inside the reduction loop's trip: nothing taped
    assert "each trip is reversed right after it runs" in fwd and "by forward mode" in fwd, src
    assert "_ftape" not in fwd.split("a reduction loop into")[1], src


def test_the_variants_agree():
    args = (1.0, 0.3, 0.05, _z())
    ref = coarsen.differentiate(paths, wrt=(0, 1, 2)).value_and_grad(*args)
    for fn in (paths_renamed, paths_in_a_helper):
        got = coarsen.differentiate(fn, wrt=(0, 1, 2)).value_and_grad(*args)
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-14)
        np.testing.assert_allclose(got[1], ref[1], rtol=1e-12)


def test_float32_paths():
    # float32 draws times float64 scalars compute in float64, as Numba does (NumPy 2 keeps
    # float32 for a Python float times a float32 scalar): the float64 copy's gradient
    Z = _z(np.float32)
    g = coarsen.differentiate(paths, wrt=(0, 1, 2))
    got = g.value_and_grad(1.0, 0.3, 0.05, Z)
    ref = g.value_and_grad(1.0, 0.3, 0.05, Z.astype(np.float64))
    assert "by forward mode" in g.source_for(1.0, 0.3, 0.05, Z)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-15)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-14)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_a_loop_reversed_as_usual_keeps_reverse_mode(target):
    args = (1.0, 0.3, 0.05, _z())
    g, _, _ = check_against_oracle(read_before, args, target=target, wrt=(0, 1, 2))
    src = g.source_for(*args)
    assert "each trip is reversed right after it runs" not in src and "by forward mode" not in src


def test_in_parallel_keeps_reverse_mode():
    args = (1.0, 0.3, 0.05, _z())
    g = coarsen.differentiate(paths, wrt=(0, 1, 2), parallel=True)
    value, grads = g.value_and_grad(*args)
    ref = coarsen.differentiate(paths, wrt=(0, 1, 2)).value_and_grad(*args)
    np.testing.assert_allclose(value, ref[0], rtol=1e-14)
    np.testing.assert_allclose(grads, ref[1], rtol=1e-12)
    check_against_oracle(paths, args, target="cpu", wrt=(0, 1, 2))
