"""``g(*args)`` runs the gradient-only entry (the value's slot 0.0: ``artifact.grad_only_source``):
the same gradients as ``value_and_grad``, bit for bit, on every path of the fast path (direct
hits, conversions, written arrays, kept tapes)."""
import math

import numpy as np
import pytest

import coarsen
from coarsen.transforms import direct_call
from coarsen.transforms.tiers import GRAD_ONLY_AFTER
from coarsen.transforms.artifact import grad_only_source


def loss(w, X, y):
    s = 0.0
    for i in range(X.shape[0]):
        z = 0.0
        for j in range(X.shape[1]):
            z += X[i, j] * w[j]
        s += math.log1p(math.exp(-y[i] * z))
    return s / X.shape[0]


def pendulum(theta, omega, k, n):
    for t in range(n):
        omega = omega - 0.01 * k * math.sin(theta)
        theta = theta + 0.01 * omega
    return theta * theta + omega


def writes(a, c):
    for i in range(a.shape[0]):
        a[i] = math.sin(a[i]) * c
    return np.sum(a * a)


@pytest.fixture(autouse=True)
def _tiers_only(monkeypatch):
    """These tests read the tiers' hits (``tiers.Tiers``); direct mode's offer, counted after
    the gradient-only tier, would hold its closure in the slot (``test_direct_call``)."""
    monkeypatch.setattr(direct_call, "ENABLED", False)


def _same(x, y):
    xs = x if isinstance(x, tuple) else (x,)
    ys = y if isinstance(y, tuple) else (y,)
    return len(xs) == len(ys) and all(
        np.asarray(p).dtype == np.asarray(q).dtype and np.array_equal(np.asarray(p), np.asarray(q))
        for p, q in zip(xs, ys))


def _copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _check(g, args):
    """The full entry's gradients, then the gradient-only entry's (from the
    GRAD_ONLY_AFTER-th call of g on), bit for bit the same as value_and_grad's."""
    value, want = g.value_and_grad(*_copies(args))
    for k in range(GRAD_ONLY_AFTER + 3):
        assert _same(g(*_copies(args)), want), k
    assert _same(g.value_and_grad(*_copies(args))[1], want)
    return g


RNG = np.random.default_rng(11)
X = RNG.standard_normal((30, 4))
Y = np.sign(RNG.standard_normal(30))
W = RNG.standard_normal(4)


def test_source_keeps_everything_but_the_value():
    src = "def f(a):\n    _value = 1.0\n    return (_value, (a,), (0, 0))\n"
    assert grad_only_source(src) == "def f(a):\n    _value = 1.0\n    return (0.0, (a,), (0, 0))\n"


@pytest.mark.parametrize("target", ["cpu", "python"])
def test_direct_hits_and_conversions(target):
    g = coarsen.differentiate(loss, wrt="w", target=target)
    _check(g, (W, X, Y))
    _check(g, (W.astype(np.float32), X, Y))          # converted arguments and results
    art = g.specialize((W, X, Y))
    if target == "cpu":
        assert art.grad_entry is not art.entry
        # the direct hit now holds the gradient-only entry, which has been compiled
        assert any(type(h) is tuple and h[2] is art.grad_entry for h in g._fast_arrays.values())
        assert art.grad_entry.signatures
    else:
        assert art.grad_entry is art.entry


def test_written_arrays_and_the_value_still_right():
    g = coarsen.differentiate(writes, wrt=("a", "c"))
    a = RNG.standard_normal(6)
    _check(g, (a, 0.7))
    value, _ = g.value_and_grad(a.copy(), 0.7)
    assert value == pytest.approx(writes(a.copy(), 0.7), rel=1e-14)


def test_kept_tapes():
    g = coarsen.differentiate(pendulum, wrt=("theta", "omega", "k"), coarsen=False)
    _check(g, (0.3, 0.1, 2.0, 5000))                 # tapes above KEEP_TAPES_ABOVE: kept
    assert g.kept_tape_bytes > 8 * 2048
    assert g.specialize((0.3, 0.1, 2.0, 5000)).grad_taped_entry.signatures


def test_scalar_direct_hits():
    g = coarsen.differentiate(pendulum, wrt=("theta", "omega", "k"))
    _check(g, (0.3, 0.1, 2.0, 10))
    art = g.specialize((0.3, 0.1, 2.0, 10))
    assert any(type(h) is tuple and h[2] is art.grad_entry for h in g._fast.values())



def _hot_pendulum(theta, omega, k, n):
    for t in range(n):
        omega = omega - 0.02 * k * math.sin(theta)
        theta = theta + 0.02 * omega
    return theta * omega


def _hot_loss(w, X, y):
    s = 0.0
    for i in range(X.shape[0]):
        z = 0.0
        for j in range(X.shape[1]):
            z = math.tanh(z + X[i, j] * w[j])        # overwritten in the loop: taped
        s += math.log1p(math.exp(-y[i] * z)) * z
    return s


def test_plain_entry_compiled_only_for_a_hot_kind():
    """Where the code tapes, the first ``PLAIN_AFTER`` calls of a kind run the taped entry on
    fresh tapes and only then the plain entry, which Numba compiles then: a kind called a few
    times compiles the taped entry alone.  The numbers are the same, bit for bit, before and
    after the switch, and after it the direct hit holds Numba's entries themselves.  (Functions
    of this test only: no other test compiles their entries.)"""
    from coarsen.transforms.tiers import PLAIN_AFTER

    g = coarsen.differentiate(_hot_pendulum, wrt=("theta", "omega", "k"), coarsen=False)
    small = (0.3, 0.1, 2.0, 20)                     # tapes below KEEP_TAPES_ABOVE
    art = g.specialize(small)
    assert art.taped_entry is not None
    first = g.value_and_grad(*small)
    assert _same(g(*small), first[1])
    assert art.taped_entry.signatures and not art.entry.signatures
    for k in range(PLAIN_AFTER + GRAD_ONLY_AFTER + 2):
        assert g.value_and_grad(*small) == first, k
        assert _same(g(*small), first[1]), k
    assert art.entry.signatures and art.grad_entry.signatures
    hit = next(h for h in g._fast.values() if type(h) is tuple)
    assert hit[1] is art.entry and hit[2] is art.grad_entry
    # the same through a runner (arguments that need conversion)
    g2 = coarsen.differentiate(_hot_loss, wrt="w", coarsen=False)
    args = (W.astype(np.float32), X, Y)
    art2 = g2.specialize(args)
    assert art2.taped_entry is not None
    value, want = g2.value_and_grad(*_copies(args))
    assert _same(g2(*_copies(args)), want)
    assert art2.taped_entry.signatures and not art2.entry.signatures
    for k in range(PLAIN_AFTER + 2):
        assert _same(g2.value_and_grad(*_copies(args))[1], want), k
    assert art2.entry.signatures
