"""gesummv: ``y = alpha A x + beta B x``, loss ``1/2 ||y||^2``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("alpha", "beta", "A", "B", "x")
#: size -> n (A and B are n x n)
SIZES = {"s": 5, "m": 500}


def objective(alpha, beta, A, B, x):
    y = alpha * A @ x + beta * B @ x
    return 0.5 * np.sum(y * y)


def jax_objective(alpha, beta, A, B, x):
    import jax.numpy as jnp

    y = alpha * A @ x + beta * B @ x
    return 0.5 * jnp.sum(y * y)


def make_inputs(size="s", seed=0):
    n = check_size(size, SIZES)
    r = rng(seed)
    s = 1.0 / np.sqrt(n)
    return (1.5, 1.2, s * r.standard_normal((n, n)), s * r.standard_normal((n, n)),
            r.standard_normal(n))
