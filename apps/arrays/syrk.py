"""syrk: symmetric rank-k update ``C = alpha A A^T + beta C``, loss ``1/2 ||C||^2``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("alpha", "beta", "C", "A")
#: size -> (n, m): C is n x n, A n x m
SIZES = {"s": (4, 3), "m": (240, 200)}


def objective(alpha, beta, C, A):
    C = alpha * A @ A.T + beta * C
    return 0.5 * np.sum(C * C)


def jax_objective(alpha, beta, C, A):
    import jax.numpy as jnp

    C = alpha * A @ A.T + beta * C
    return 0.5 * jnp.sum(C * C)


def make_inputs(size="s", seed=0):
    n, m = check_size(size, SIZES)
    r = rng(seed)
    C = r.standard_normal((n, n))
    return 1.5, 1.2, C + C.T, r.standard_normal((n, m)) / np.sqrt(m)
