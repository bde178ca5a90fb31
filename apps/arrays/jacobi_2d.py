"""jacobi-2d: the five-point Jacobi sweep from ``A`` into ``B`` and back, ``tsteps`` times;
loss ``sum(W * A^2)``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("A0",)
#: size -> (n: the grid is n x n, tsteps)
SIZES = {"s": (5, 2), "m": (150, 20)}


def objective(A0, W, tsteps):
    A = A0.copy()
    B = A0.copy()
    for t in range(tsteps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1]
                               + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1]
                               + B[:-2, 1:-1])
    return np.sum(W * A * A)


def jax_objective(A0, W, tsteps):
    import jax
    import jax.numpy as jnp

    def sweep(A):
        return A.at[1:-1, 1:-1].set(0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:]
                                           + A[2:, 1:-1] + A[:-2, 1:-1]))

    A = jax.lax.fori_loop(0, tsteps, lambda t, A: sweep(sweep(A)), A0)
    return jnp.sum(W * A * A)


def make_inputs(size="s", seed=0):
    n, tsteps = check_size(size, SIZES)
    r = rng(seed)
    return r.standard_normal((n, n)), r.random((n, n)), tsteps
