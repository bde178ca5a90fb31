"""gemm: ``C = alpha A B + beta C``, loss ``1/2 ||C||^2``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("alpha", "beta", "C", "A", "B")
#: size -> (ni, nj, nk): C is ni x nj, A ni x nk, B nk x nj
SIZES = {"s": (4, 5, 3), "m": (300, 320, 280)}


def objective(alpha, beta, C, A, B):
    C = alpha * A @ B + beta * C
    return 0.5 * np.sum(C * C)


def jax_objective(alpha, beta, C, A, B):
    import jax.numpy as jnp

    C = alpha * A @ B + beta * C
    return 0.5 * jnp.sum(C * C)


def make_inputs(size="s", seed=0):
    ni, nj, nk = check_size(size, SIZES)
    r = rng(seed)
    return (1.5, 1.2, r.standard_normal((ni, nj)), r.standard_normal((ni, nk)) / np.sqrt(nk),
            r.standard_normal((nk, nj)))
