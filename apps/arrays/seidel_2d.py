"""seidel-2d: Gauss-Seidel sweeps of the nine-point average, in place, with loops over ``i``
and ``j`` (each point reads its already updated neighbours); loss ``sum(W * A^2)``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("A0",)
#: size -> (n: the grid is n x n, tsteps)
SIZES = {"s": (5, 2), "m": (120, 8)}


def objective(A0, W, tsteps):
    A = A0.copy()
    n = A.shape[0]
    for t in range(tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1]
                           + A[i, j - 1] + A[i, j] + A[i, j + 1]
                           + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0
    return np.sum(W * A * A)


def jax_objective(A0, W, tsteps):
    import jax
    import jax.numpy as jnp

    n = A0.shape[0]

    def point(i, j, A):
        blk = jax.lax.dynamic_slice(A, (i - 1, j - 1), (3, 3))
        return A.at[i, j].set(jnp.sum(blk) / 9.0)

    def row(i, A):
        return jax.lax.fori_loop(1, n - 1, lambda j, A: point(i, j, A), A)

    def sweep(t, A):
        return jax.lax.fori_loop(1, n - 1, row, A)

    A = jax.lax.fori_loop(0, tsteps, sweep, A0)
    return jnp.sum(W * A * A)


def make_inputs(size="s", seed=0):
    n, tsteps = check_size(size, SIZES)
    r = rng(seed)
    return r.standard_normal((n, n)), r.random((n, n)), tsteps
