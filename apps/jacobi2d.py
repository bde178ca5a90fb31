"""PolyBench's 2-D Jacobi stencil, written with NumPy slices, and a weighted terminal loss.

Each of the ``tsteps`` steps averages the five-point neighbourhood twice, from ``A`` into ``B``
and back (``B[1:-1, 1:-1] = c * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] +
A[:-2, 1:-1])``, PolyBench's ``kernel_jacobi_2d`` with ``c = 0.2``); the boundary stays as in
the initial grid.  The loss is ``sum(W * (A - target)^2)`` of the final grid.  Differentiated
w.r.t. the initial grid ``A0`` and the coefficient ``c``.
"""
from __future__ import annotations

import numba
import numpy as np

from apps._common import check_size, rng

WRT = ("A0", "c")

#: size -> (n: the grid is n x n, tsteps)
SIZES = {"s": (5, 2), "m": (100, 20), "l": (400, 100)}


def objective(A0, c, W, target, tsteps):
    A = A0.copy()
    B = A0.copy()
    for t in range(tsteps):
        B[1:-1, 1:-1] = c * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1]
                             + A[:-2, 1:-1])
        A[1:-1, 1:-1] = c * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1]
                             + B[:-2, 1:-1])
    e = A - target
    return np.sum(W * e * e)


primal_numba = numba.njit(objective)


@numba.njit
def _sweep(dst, src, c):
    """``dst[1:-1, 1:-1] = c * (five-point sum of src)`` with loops."""
    n, m = src.shape
    for i in range(1, n - 1):
        for j in range(1, m - 1):
            dst[i, j] = c * (src[i, j] + src[i, j - 1] + src[i, j + 1] + src[i + 1, j]
                             + src[i - 1, j])


@numba.njit
def _sweep_adjoint(a_dst, a_src, src, c):
    """Reverse of ``_sweep(dst, src, c)``: the adjoint of the interior of ``dst`` goes to the
    five neighbours in ``a_src`` and is then cleared (the write overwrote it); returns the
    contribution to the adjoint of ``c``."""
    n, m = src.shape
    gc = 0.0
    for i in range(1, n - 1):
        for j in range(1, m - 1):
            a = a_dst[i, j]
            gc += a * (src[i, j] + src[i, j - 1] + src[i, j + 1] + src[i + 1, j]
                       + src[i - 1, j])
            ca = c * a
            a_src[i, j] += ca
            a_src[i, j - 1] += ca
            a_src[i, j + 1] += ca
            a_src[i + 1, j] += ca
            a_src[i - 1, j] += ca
            a_dst[i, j] = 0.0
    return gc


@numba.njit
def handwritten_grad(A0, c, W, target, tsteps):
    """Forward sweeps storing every grid, then the adjoint sweeps backwards."""
    n, m = A0.shape
    # hist[2t] = A before step t, hist[2t+1] = B after its update in step t
    hist = np.empty((2 * tsteps + 1, n, m))
    A = A0.copy()
    B = A0.copy()
    for t in range(tsteps):
        hist[2 * t] = A
        _sweep(B, A, c)
        hist[2 * t + 1] = B
        _sweep(A, B, c)
    aA = 2.0 * W * (A - target)
    aB = np.zeros((n, m))
    gc = 0.0
    for t in range(tsteps - 1, -1, -1):
        gc += _sweep_adjoint(aA, aB, hist[2 * t + 1], c)
        gc += _sweep_adjoint(aB, aA, hist[2 * t], c)
    # A = A0.copy() and B = A0.copy()
    return aA + aB, gc


def _step_xp(xp, X, c):
    """The interior replaced by ``c * (five-point sum)``, boundary kept, without writes."""
    inner = c * (X[1:-1, 1:-1] + X[1:-1, :-2] + X[1:-1, 2:] + X[2:, 1:-1] + X[:-2, 1:-1])
    mid = xp.concatenate([X[1:-1, :1], inner, X[1:-1, -1:]], axis=1)
    return xp.concatenate([X[:1, :], mid, X[-1:, :]], axis=0)


def xp_objective(xp, A0, c, W, target, tsteps):
    # B starts as a copy of A0, so both grids always share A0's boundary
    A = A0
    for t in range(tsteps):
        A = _step_xp(xp, _step_xp(xp, A, c), c)
    e = A - target
    return xp.sum(W * e * e)


def jax_objective(A0, c, W, target, tsteps):
    """``lax.fori_loop`` over the steps, each half-step a vectorized ``.at[].set``."""
    import jax.numpy as jnp
    from jax import lax

    def half(X):
        inner = c * (X[1:-1, 1:-1] + X[1:-1, :-2] + X[1:-1, 2:] + X[2:, 1:-1] + X[:-2, 1:-1])
        return X.at[1:-1, 1:-1].set(inner)

    A = lax.fori_loop(0, tsteps, lambda t, X: half(half(X)), jnp.asarray(A0))
    e = A - target
    return jnp.sum(W * e * e)


def make_inputs(size="s", seed=0):
    n, tsteps = check_size(size, SIZES)
    r = rng(seed)
    xg = np.linspace(0.0, 1.0, n)
    A0 = np.outer(np.sin(np.pi * xg), np.cos(0.5 * np.pi * xg)) + 0.1 * r.standard_normal((n, n))
    W = 1.0 + r.random((n, n))
    target = 0.25 * np.outer(xg, 1.0 - xg)
    return A0, 0.2, W, target, tsteps
