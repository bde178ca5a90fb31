"""Reductions along the only axis of a 1-D array (``np.sum(a, axis=0)``, ``axis=-1``, ``np.mean``,
``np.var``, ``np.std``, with and without ``keepdims``, and ``np.sum(np.sum(A, axis=1), axis=0)``).

Their result is a number, so the adjoint broadcasts over the operand as it is: the reverse
sweep once put the reduced axis back with ``np.expand_dims`` of that number, which NumPy
accepts and Numba does not (a TypingError on the cpu target).  Values and gradients are
checked against central differences and the python target on both targets, coarse and fine
(``scalarize=False`` failed alike and takes the same rule; left out for the CI's time); the JVP and the Hessian (forward over the generated gradient, which reads
the python gradient back) against the same differences.  One function holds every case, so
that each configuration compiles once.
"""
import numpy as np
import pytest

import coarsen


def reduce_1d(a, A):
    s = np.sum(a, axis=0) + 2.0 * np.sum(np.sin(a), axis=-1)
    m = np.mean(np.exp(a), axis=0) * np.mean(a, axis=-1)
    v = np.var(np.cos(a), axis=0) + np.std(a, axis=-1)
    k = (np.sum(np.sum(a, axis=0, keepdims=True) * np.var(a, axis=-1, keepdims=True))
         + np.sum(np.std(np.sin(a), axis=0, keepdims=True))
         + np.sum(np.mean(a, axis=-1, keepdims=True)))
    n = (np.sum(np.sum(A * A, axis=1), axis=0) + np.mean(np.mean(np.sin(A), axis=0), axis=-1)
         + np.var(np.sum(A, axis=1), axis=0))
    return s + m + v * k + n


def smooth_1d(a):
    """No array products: its gradient is plain code that forward mode reads back."""
    return (np.sum(np.exp(a), axis=0) * np.mean(np.sin(a), axis=-1) + np.var(np.exp(a), axis=0)
            + np.std(np.cos(a), axis=-1))


A0 = np.array([0.1, 0.5, 0.9, -0.3])
M0 = np.array([[0.2, -0.4, 0.7], [1.1, 0.3, -0.6]])


def _fd_grad(f, args, h=1e-6):
    out = []
    for p, x in enumerate(args):
        g = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            up, dn = [y.copy() for y in args], [y.copy() for y in args]
            up[p][i] += h
            dn[p][i] -= h
            g[i] = (f(*up) - f(*dn)) / (2 * h)
        out.append(g)
    return out


@pytest.mark.parametrize("kw", [dict(target="python"), dict(target="cpu"),
                                dict(target="cpu", coarsen=False)],
                         ids=["python", "cpu", "cpu-fine"])
def test_value_and_grad(kw):
    value, grads = coarsen.differentiate(reduce_1d, **kw).value_and_grad(A0, M0)
    assert value == pytest.approx(reduce_1d(A0, M0), rel=1e-12)
    for got, want in zip(grads, _fd_grad(reduce_1d, (A0, M0))):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    if kw["target"] == "cpu":
        _, ref = coarsen.differentiate(reduce_1d, target="python").value_and_grad(A0, M0)
        for got, want in zip(grads, ref):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_jvp():
    t = (np.cos(np.arange(4.0)), np.sin(np.arange(6.0)).reshape(2, 3))
    value, dot = coarsen.jvp(reduce_1d, target="cpu")(A0, M0, tangents=t)
    assert value == pytest.approx(reduce_1d(A0, M0), rel=1e-12)
    want = sum(np.sum(g * d) for g, d in zip(_fd_grad(reduce_1d, (A0, M0)), t))
    assert dot == pytest.approx(want, rel=1e-6, abs=1e-7)


def test_hessian_forward_over_reverse():
    H = coarsen.hessian(smooth_1d, wrt="a", target="cpu", method="forward-over-reverse")(A0)
    h = 1e-4
    want = np.array([(_fd_grad(smooth_1d, (A0 + h * e,))[0] - _fd_grad(smooth_1d, (A0 - h * e,))[0])
                     / (2 * h) for e in np.eye(A0.size)])
    np.testing.assert_allclose(H, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(H, H.T, rtol=1e-12, atol=1e-12)
