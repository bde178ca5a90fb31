"""gemver: rank-2 update ``A + u1 v1^T + u2 v2^T``, then ``x = x + beta A^T y + z`` and
``w = w + alpha A x``; loss ``1/2 ||w||^2``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("alpha", "beta", "A", "u1", "v1", "u2", "v2", "y", "z")
#: size -> n (A is n x n)
SIZES = {"s": 5, "m": 400}


def objective(alpha, beta, A, u1, v1, u2, v2, w, x, y, z):
    A = A + np.outer(u1, v1) + np.outer(u2, v2)
    x = x + beta * A.T @ y + z
    w = w + alpha * A @ x
    return 0.5 * np.sum(w * w)


def jax_objective(alpha, beta, A, u1, v1, u2, v2, w, x, y, z):
    import jax.numpy as jnp

    A = A + jnp.outer(u1, v1) + jnp.outer(u2, v2)
    x = x + beta * A.T @ y + z
    w = w + alpha * A @ x
    return 0.5 * jnp.sum(w * w)


def make_inputs(size="s", seed=0):
    n = check_size(size, SIZES)
    r = rng(seed)
    s = 1.0 / np.sqrt(n)
    A = s * r.standard_normal((n, n))
    u1, v1, u2, v2, w, x, y, z = (r.standard_normal(n) for _ in range(8))
    return 1.5, 1.2, A, u1, s * v1, u2, s * v2, w, x, s * y, z
