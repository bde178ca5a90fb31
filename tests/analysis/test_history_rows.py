"""History arrays filled row by row (``coarsen.analysis.history``): the stores that fill a
row in one trip, read only at rows already written, save nothing; every other shape keeps its
saves.  All agree with the oracle."""
import math

import numpy as np
import pytest

import coarsen
from tests.zoo.harness import check_value_and_grad


def heat_rows(u0, kappa, nt):
    nx = u0.shape[0]
    u = np.zeros((nt + 1, nx))
    for i in range(nx):
        u[0, i] = u0[i]
    for t in range(nt):
        for i in range(1, nx - 1):
            u[t + 1, i] = u[t, i] + kappa * (u[t, i - 1] - 2.0 * u[t, i] + u[t, i + 1])
    s = 0.0
    for i in range(nx):
        s += u[nt, i] * u[nt, i]
    return s


def rnn_rows(W, x0, T):
    H = x0.shape[0]
    h = np.zeros((T + 1, H))
    for i in range(H):
        h[0, i] = x0[i]
    loss = 0.0
    for t in range(T):
        for i in range(H):
            a = 0.0
            for j in range(H):
                a += W[i, j] * h[t, j]
            h[t + 1, i] = math.tanh(a)
        for i in range(H):
            loss += h[t + 1, i] * h[t + 1, i]     # the row just written
    return loss


def read_ahead(u0, kappa, nt):
    # row t + 1 is read before this trip writes it: its old value matters
    nx = u0.shape[0]
    u = np.ones((nt + 1, nx))
    s = 0.0
    for t in range(nt):
        for i in range(nx):
            s += u[t + 1, i] * kappa
            u[t + 1, i] = u[t, i] * kappa + u0[i]
    return s + np.sum(u * u)


def rewritten_by_outer_loop(u0, kappa, nt):
    # the time loop runs twice: the second pass overwrites rows the first pass read
    nx = u0.shape[0]
    u = np.zeros((nt + 1, nx))
    for i in range(nx):
        u[0, i] = u0[i]
    s = 0.0
    for r in range(2):
        for t in range(nt):
            for i in range(nx):
                u[t + 1, i] = math.sin(u[t, i]) * kappa
                s += u[t + 1, i] * u[t, i]
    return s


def _args():
    return (np.array([0.3, -0.5, 0.9, 0.2, -0.1]), 0.4, 3)


def _rnn():
    r = np.random.default_rng(9)
    return (0.5 * r.standard_normal((3, 3)), r.standard_normal(3), 4)


CASES = [(heat_rows, _args), (rnn_rows, _rnn), (read_ahead, _args),
         (rewritten_by_outer_loop, _args)]


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn,factory", CASES, ids=[c[0].__name__ for c in CASES])
def test_against_the_oracle(fn, factory, target, coarse):
    check_value_and_grad(fn, factory, None, target, coarse, f"{fn.__name__}-{target}-{coarse}")


def _tape(fn, args):
    g = coarsen.differentiate(fn, target="python")
    g(*args)
    return g.tape_bytes


def test_rows_filled_once_save_nothing():
    assert _tape(heat_rows, _args()) == 0
    W, x0, T = _rnn()
    # the accumulator before tanh is still taped, once per row element; the rows are not saved
    assert _tape(rnn_rows, (W, x0, T)) <= 8 * T * x0.shape[0]


def test_other_shapes_keep_their_saves():
    assert _tape(read_ahead, _args()) > 0
    assert _tape(rewritten_by_outer_loop, _args()) > 0
