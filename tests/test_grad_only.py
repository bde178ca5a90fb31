"""``g(*args)`` runs the gradient-only entry (the value's slot 0.0: ``artifact.grad_only_source``):
the same gradients as ``value_and_grad``, bit for bit, on every path of the fast path (direct
hits, conversions, written arrays, kept tapes)."""
import math

import numpy as np
import pytest

import coarsen
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


def _check(g, args, calls=2):
    for _ in range(calls):
        got = g(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        value, want = g.value_and_grad(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        assert _same(got, want)
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
    _check(g, (0.3, 0.1, 2.0, 5000), calls=3)        # tapes above KEEP_TAPES_ABOVE: kept
    assert g.kept_tape_bytes > 8 * 2048
    first = g(0.3, 0.1, 2.0, 5000)
    assert _same(first, g.value_and_grad(0.3, 0.1, 2.0, 5000)[1])
