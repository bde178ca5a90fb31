"""atax: ``y = A^T (A x)``, loss ``1/2 ||y||^2``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("A", "x")
#: size -> (m, n): A is m x n
SIZES = {"s": (4, 5), "m": (380, 420)}


def objective(A, x):
    y = A.T @ (A @ x)
    return 0.5 * np.sum(y * y)


def jax_objective(A, x):
    import jax.numpy as jnp

    y = A.T @ (A @ x)
    return 0.5 * jnp.sum(y * y)


def make_inputs(size="s", seed=0):
    m, n = check_size(size, SIZES)
    r = rng(seed)
    return r.standard_normal((m, n)) / np.sqrt(m), r.standard_normal(n) / np.sqrt(n)
