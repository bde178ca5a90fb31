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
from tests.oracle import check_against_oracle
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


def fixed_rows_in_the_loop(u, y):
    # the rows' indices are temporaries of each trip (``_t = n - 1``) that hold one value:
    # a per-loop adjoint accumulator as large as ``u`` would cost more than the loop
    n = u.shape[0]
    s = 0.0
    for i in range(u.shape[1]):
        s += u[n - 1, i] * u[n - 1, i] * y + u[n - 2, i] * y
    return s


def fixed_element_in_a_sweep(x, y):
    # x[n - 1] through a per-trip temporary, beside x[i]: the loop sweeps x all the same
    n = x.shape[0]
    s = 0.0
    for i in range(n):
        s += math.sin(x[i] * y) * x[n - 1]
    return s


def induction_index(x, L, y):
    # an index each trip resets and advances (``idx += 1``, ADBench GMM's packed triangle)
    # sweeps the array: fused
    s = 0.0
    for i in range(x.shape[0]):
        idx = 0
        for j in range(L.shape[1] - 1):
            s += math.sin(L[i, idx] * x[i] * y)
            idx += 1
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
    fixed_rows_in_the_loop: lambda: (_vec(12, 14).reshape(3, 4), 0.3),
    fixed_element_in_a_sweep: lambda: (_vec(6, 17), 0.7),
    induction_index: lambda: (_vec(3, 15), _vec(12, 16).reshape(3, 4), 0.6),
    accumulator_read_before: lambda: (_vec(5, 11), 0.8),
    counter_after: lambda: (_vec(6, 12), 0.9),
    index_arithmetic: lambda: (_vec(7, 13), 0.45),
}

#: which of them have a loop reversed trip by trip
FUSED = {mixture, hinge_sub, pairs, induction_index, fixed_element_in_a_sweep}


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
    assert "(3 * i + 1) % _int_divisor(n)" in rev      # n == 0 raises, as in Python
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


# -------------------------------------------------------------------------- metamorphic

def mixture_renamed(u_y, x_bar, _t1):
    """``mixture`` with compiler-looking names (the reduction loop's ``_acc<k>``, adjoints'
    ``_bar``, temporaries' ``_t<k>``): the gradient must be bit-identical."""
    _acc1 = x_bar.shape[0]
    d_bar = x_bar.shape[1]
    _acc2 = np.zeros(_acc1)
    _t2 = np.zeros(d_bar)
    total_bar = 0.0
    for _i in range(_t1.shape[0]):
        for k_bar in range(_acc1):
            for _j in range(d_bar):
                _t2[_j] = math.exp(u_y[k_bar]) * (_t1[_i, _j] - x_bar[k_bar, _j])
            for _j in range(1, d_bar):
                _t2[_j] += 0.5 * _t2[_j - 1]
            _seed = 0.0
            for _j in range(d_bar):
                _seed += _t2[_j] * _t2[_j]
            _acc2[k_bar] = u_y[k_bar] - 0.5 * _seed
        _ftape = _acc2[0]
        for k_bar in range(1, _acc1):
            if _acc2[k_bar] > _ftape:
                _ftape = _acc2[k_bar]
        _fpos = 0.0
        for k_bar in range(_acc1):
            _fpos += math.exp(_acc2[k_bar] - _ftape)
        total_bar += _ftape + math.log(_fpos)
    return total_bar


def _scaled(q, a, mu, x, i, k):
    for j in range(q.shape[0]):
        q[j] = math.exp(a[k]) * (x[i, j] - mu[k, j])
    for j in range(1, q.shape[0]):
        q[j] += 0.5 * q[j - 1]


def _log_sum_exp(term):
    m = term[0]
    for k in range(1, term.shape[0]):
        if term[k] > m:
            m = term[k]
    e = 0.0
    for k in range(term.shape[0]):
        e += math.exp(term[k] - m)
    return m + math.log(e)


def mixture_helpers(a, mu, x):
    """``mixture`` split into helpers (inlined by coarsen)."""
    K = mu.shape[0]
    term = np.zeros(K)
    q = np.zeros(mu.shape[1])
    total = 0.0
    for i in range(x.shape[0]):
        for k in range(K):
            _scaled(q, a, mu, x, i, k)
            s = 0.0
            for j in range(q.shape[0]):
                s += q[j] * q[j]
            term[k] = a[k] - 0.5 * s
        total += _log_sum_exp(term)
    return total


def hinge_reordered(w, b, X):
    """``hinge_sub`` with independent statements swapped and the sum split in two."""
    loss = 1.0
    for i in range(X.shape[0]):
        z2 = 0.0
        z = b
        for j in range(X.shape[1]):
            z2 += w[j] * X[i, j]
        z = z2 + z
        if not z <= 0.1:
            loss = loss - z * z
        else:
            loss -= math.sin(z)
    return loss


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
def test_renamed_mixture_is_bit_identical(target, coarse):
    args = CASES[mixture]()
    v0, g0 = coarsen.differentiate(mixture, target=target, coarsen=coarse).value_and_grad(*args)
    g = coarsen.differentiate(mixture_renamed, target=target, coarsen=coarse)
    v1, g1 = g.value_and_grad(*args)
    assert v0 == v1
    for a, b in zip(g0, g1):
        assert a.tobytes() == b.tobytes()
    assert "each trip is reversed right after it runs" in g.source


@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("pair", [(mixture, mixture_helpers), (hinge_sub, hinge_reordered)],
                         ids=["helpers", "reordered"])
def test_helpers_and_reordering_agree(pair, coarse):
    """The same function split into helpers, or with independent statements reordered, is
    fused the same way and gives the same gradient (to rounding: the operations differ)."""
    base, other = pair
    args = CASES[base]()
    v0, g0 = coarsen.differentiate(base, target="python", coarsen=coarse).value_and_grad(*args)
    g = coarsen.differentiate(other, target="python", coarsen=coarse)
    v1, g1 = g.value_and_grad(*args)
    assert np.isclose(v0, v1, rtol=1e-13, atol=0.0)
    for a, b in zip(g0, g1):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)
    assert "each trip is reversed right after it runs" in g.source
    check_value_and_grad(other, CASES[base], None, "python", coarse, other.__name__)


@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 3, 2), (4, 1, 3), (6, 2, 1)],
                         ids=lambda s: "n%d-K%d-d%d" % s)
def test_other_shapes(shape):
    """One point, one component, one dimension: the scratch arrays' full writes and the
    per-loop accumulators hold at every size."""
    n, K, d = shape

    def factory():
        return (_vec(K, 20 + n), _vec(K * d, 21).reshape(K, d), _vec(n * d, 22).reshape(n, d))
    check_against_oracle(mixture, factory(), "python")


def test_float32_data():
    """float32 arrays: computed in float64, gradients rounded to float32, as everywhere."""
    w, b, X = CASES[hinge_sub]()
    g = coarsen.differentiate(hinge_sub, target="python")
    g32 = g(w.astype(np.float32), b, X.astype(np.float32))
    g64 = g(w.astype(np.float32).astype(np.float64), b, X.astype(np.float32).astype(np.float64))
    assert g32[0].dtype == np.float32
    np.testing.assert_array_equal(g32[0], g64[0].astype(np.float32))
    assert g32[1] == g64[1]
