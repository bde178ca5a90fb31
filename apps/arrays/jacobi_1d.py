"""jacobi-1d: the three-point Jacobi sweep from ``A`` into ``B`` and back, ``tsteps`` times;
loss ``sum(W * A^2)``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("A0",)
#: size -> (n, tsteps)
SIZES = {"s": (7, 3), "m": (2000, 100)}


def objective(A0, W, tsteps):
    A = A0.copy()
    B = A0.copy()
    for t in range(tsteps):
        B[1:-1] = (A[:-2] + A[1:-1] + A[2:]) / 3.0
        A[1:-1] = (B[:-2] + B[1:-1] + B[2:]) / 3.0
    return np.sum(W * A * A)


def jax_objective(A0, W, tsteps):
    import jax
    import jax.numpy as jnp

    def step(t, A):
        B = A.at[1:-1].set((A[:-2] + A[1:-1] + A[2:]) / 3.0)
        return B.at[1:-1].set((B[:-2] + B[1:-1] + B[2:]) / 3.0)

    A = jax.lax.fori_loop(0, tsteps, step, A0)
    return jnp.sum(W * A * A)


def make_inputs(size="s", seed=0):
    n, tsteps = check_size(size, SIZES)
    r = rng(seed)
    return r.standard_normal(n), r.random(n), tsteps
