"""``g(*args)`` runs the gradient-only entry (the value's slot 0.0: ``artifact.grad_only_source``):
the same gradients as ``value_and_grad``, bit for bit, on every path of the fast path (direct
hits, conversions, written arrays, kept tapes)."""
import math

import numpy as np
import pytest

import coarsen
from coarsen.api import GRAD_ONLY_AFTER
from coarsen.artifact import grad_only_source


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
