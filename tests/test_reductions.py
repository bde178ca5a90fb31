"""Reduction loops reversed trip by trip, and integer scalars recomputed instead of taped.

``coarsen.analysis.reductions`` finds loops whose trips interact only through one
accumulation; ``coarsen.ad.reverse.fused`` reverses each trip right after it runs.
``coarsen.analysis.recording.find_int_recomputable`` names the index arithmetic the reverse
sweep evaluates again.  Every program here is checked against the extended-precision oracle
on both targets; the near misses (a second accumulator, a value read after the loop, a
scratch array read before it is written, an input read at a fixed row, an accumulator the
reverse sweep reads before the loop) must be found *not* to qualify and still be right.
"""
import math

import numpy as np
import pytest

import coarsen
from tests.zoo.harness import check_value_and_grad


def mixture(a, mu, x):
    """GMM-shaped: scratch arrays written in full, then read; a max and a log-sum-exp."""
    K = mu.shape[0]
    d = mu.shape[1]
    term = np.zeros(K)
    q = np.zeros(d)
    total = 0.0
    for i in range(x.shape[0]):
        for k in range(K):
            for j in range(d):
                q[j] = math.exp(a[k]) * (x[i, j] - mu[k, j])
            for j in range(1, d):
                q[j] += 0.5 * q[j - 1]
            s = 0.0
            for j in range(d):
                s += q[j] * q[j]
            term[k] = a[k] - 0.5 * s
        m = term[0]
        for k in range(1, K):
            if term[k] > m:
                m = term[k]
        e = 0.0
        for k in range(K):
            e += math.exp(term[k] - m)
        total += m + math.log(e)
    return total


def hinge_sub(w, b, X):
    """Branches in the trip; the accumulator decreases."""
    loss = 1.0
    for i in range(X.shape[0]):
        z = b
        for j in range(X.shape[1]):
            z += X[i, j] * w[j]
        if z > 0.1:
            loss -= z * z
        else:
            loss -= math.sin(z)
    return loss


def pairs(p, c):
    """Pairs i < j; an accumulation inside a branch at the top level."""
    n = p.shape[0]
    acc = 0.0
    if c > 0.0:
        for i in range(n):
            for j in range(i + 1, n):
                r = p[i] - p[j]
                acc += c * r * r / (1.0 + r * r)
    return acc * c


def two_accumulators(x, y):
    s = 0.0
    t = 0.0
    for i in range(x.shape[0]):
        s += x[i] * y
        t += math.cos(x[i]) * s
    return s + t


def read_after(x, y):
    s = 0.0
    v = 0.0
    for i in range(x.shape[0]):
        v = x[i] * y
        s += v * v
    return s + v


def scratch_read_first(x, y):
    buf = np.zeros(x.shape[0])
    s = 0.0
    for i in range(x.shape[0]):
        s += buf[i] * y
        for j in range(x.shape[0]):
            buf[j] = x[j] * y + i
    return s


def fixed_row(u, y):
    last = u.shape[0] - 1
    s = 0.0
    for i in range(u.shape[1]):
        s += u[last, i] * y
    return s


def accumulator_read_before(x, y):
    s = x[0] * y
    w = s * s
    for i in range(x.shape[0]):
        s += math.exp(x[i] * y)
    return s + w


def counter_after(x, y):
    s = 0.0
    c = 0
    for i in range(x.shape[0]):
        if x[i] > 0.5:
            c += 1
        s += x[i] * y * c
    return s + c * y


def index_arithmetic(x, y):
    """Shifted and modular indices, parity tests, a while loop: integer scalars the reverse
    sweep recomputes instead of taping."""
    n = x.shape[0]
    out = np.zeros(n)
    for i in range(1, n):
        j = (3 * i + 1) % n
        if i % 2 == 0:
            out[i] = out[i - 1] * 0.5 + x[j] * y
        else:
            out[i] = out[i - 1] - math.sin(x[n - 1 - i]) * y
    k = 0
    s = 0.0
    while k < n - 1:
        s += out[k + 1] * x[k]
        k += 2
    return s + out[n - 1]


def _vec(n, seed):
    return np.random.default_rng(seed).uniform(0.1, 0.9, n)


CASES = {
    mixture: lambda: (_vec(3, 1), _vec(6, 2).reshape(3, 2), _vec(8, 3).reshape(4, 2)),
    hinge_sub: lambda: (_vec(3, 4), 0.2, _vec(12, 5).reshape(4, 3) - 0.3),
    pairs: lambda: (_vec(5, 6), 0.7),
    two_accumulators: lambda: (_vec(5, 7), 0.4),
    read_after: lambda: (_vec(5, 8), 0.4),
    scratch_read_first: lambda: (_vec(4, 9), 0.6),
    fixed_row: lambda: (_vec(8, 10).reshape(2, 4), 0.3),
    accumulator_read_before: lambda: (_vec(5, 11), 0.8),
    counter_after: lambda: (_vec(6, 12), 0.9),
    index_arithmetic: lambda: (_vec(7, 13), 0.45),
}

#: which of them have a loop reversed trip by trip
FUSED = {mixture, hinge_sub, pairs}


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_against_oracle(fn, target, coarse):
    check_value_and_grad(fn, CASES[fn], None, target, coarse, f"{fn.__name__}-{target}-{coarse}")


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_which_loops_are_fused(fn):
    g = coarsen.differentiate(fn, target="python")
    g(*CASES[fn]())
    fused = "each trip is reversed right after it runs" in g.source
    assert fused == (fn in FUSED), fn.__name__


def test_analysis_and_fallback(tmp_path, monkeypatch):
    """The accumulator of ``accumulator_read_before`` qualifies, but the reverse sweep reads
    it before the loop, so the trips would restore it: the loop is reversed as usual."""
    monkeypatch.setenv("COARSEN_CACHE_DIR", str(tmp_path))
    import coarsen.ad.reverse.driver as E
    seen = []
    orig = E.find_reduction_loops

    def spy(f, facts):
        out = orig(f, facts)
        seen.append(out)
        return out
    E.find_reduction_loops = spy
    try:
        g = coarsen.differentiate(accumulator_read_before, target="python")
        g(*CASES[accumulator_read_before]())
    finally:
        E.find_reduction_loops = orig
    assert seen and all(len(found) == 1 for found in seen)
    assert "each trip is reversed right after it runs" not in g.source


def test_fused_trips_leave_no_tape():
    """A loss over data points tapes nothing across trips: the tape is empty after the
    forward sweep, however many points there are."""
    w, b, X = CASES[hinge_sub]()
    g = coarsen.differentiate(hinge_sub, target="python")
    g(w, b, X)
    assert g.tape_bytes == 0
    g(w, b, np.vstack([X] * 5))
    assert g.tape_bytes == 0
    assert "each trip is reversed right after it runs" in g.source


def test_index_arithmetic_is_not_taped():
    """``x[i - 1]``, ``(3 * i + 1) % n`` and ``i % 2 == 0`` are evaluated again in the reverse
    sweep: the int tape holds only the while loop's trip count and the running index."""
    args = CASES[index_arithmetic]()
    g = coarsen.differentiate(index_arithmetic, target="python")
    g(*args)
    rev = g.source.split("# reverse sweep")[1]
    assert "(3 * i + 1) % n" in rev
    assert "_itape[_ipos] = j" not in g.source


def test_find_reduction_loops_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("COARSEN_CACHE_DIR", str(tmp_path))
    import coarsen.ad.reverse.driver as E
    orig = E.find_reduction_loops
    same = []

    def spy(f, facts):
        before = repr(f.body)
        out = orig(f, facts)
        same.append(before == repr(f.body))
        return out
    E.find_reduction_loops = spy
    try:
        coarsen.differentiate(mixture, target="python")(*CASES[mixture]())
    finally:
        E.find_reduction_loops = orig
    assert same and all(same)
