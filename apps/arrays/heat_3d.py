"""heat-3d: the explicit 3-D heat equation (seven-point stencil) from ``A`` into ``B`` and back,
``tsteps`` times; loss ``sum(W * A^2)``; differentiated w.r.t. the initial grid and ``k``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("A0", "k")
#: size -> (n: the grid is n x n x n, tsteps)
SIZES = {"s": (4, 2), "m": (30, 10)}


def objective(A0, k, W, tsteps):
    A = A0.copy()
    B = A0.copy()
    for t in range(tsteps):
        B[1:-1, 1:-1, 1:-1] = (
            A[1:-1, 1:-1, 1:-1]
            + k * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[:-2, 1:-1, 1:-1])
            + k * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, :-2, 1:-1])
            + k * (A[1:-1, 1:-1, 2:] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, 1:-1, :-2]))
        A[1:-1, 1:-1, 1:-1] = (
            B[1:-1, 1:-1, 1:-1]
            + k * (B[2:, 1:-1, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[:-2, 1:-1, 1:-1])
            + k * (B[1:-1, 2:, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, :-2, 1:-1])
            + k * (B[1:-1, 1:-1, 2:] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, 1:-1, :-2]))
    return np.sum(W * A * A)


def jax_objective(A0, k, W, tsteps):
    import jax
    import jax.numpy as jnp

    def sweep(A):
        c = A[1:-1, 1:-1, 1:-1]
        return A.at[1:-1, 1:-1, 1:-1].set(
            c + k * (A[2:, 1:-1, 1:-1] - 2.0 * c + A[:-2, 1:-1, 1:-1])
            + k * (A[1:-1, 2:, 1:-1] - 2.0 * c + A[1:-1, :-2, 1:-1])
            + k * (A[1:-1, 1:-1, 2:] - 2.0 * c + A[1:-1, 1:-1, :-2]))

    A = jax.lax.fori_loop(0, tsteps, lambda t, A: sweep(sweep(A)), A0)
    return jnp.sum(W * A * A)


def make_inputs(size="s", seed=0):
    n, tsteps = check_size(size, SIZES)
    r = rng(seed)
    return r.standard_normal((n, n, n)), 0.125, r.random((n, n, n)), tsteps
