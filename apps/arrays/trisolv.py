"""trisolv: forward substitution ``x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]``; loss
``1/2 ||x - target||^2``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("L", "b")
#: size -> n
SIZES = {"s": 5, "m": 500}


def objective(L, b, target):
    n = b.shape[0]
    x = np.zeros(n)
    for i in range(n):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    e = x - target
    return 0.5 * np.sum(e * e)


def jax_objective(L, b, target):
    import jax
    import jax.numpy as jnp

    x = jax.scipy.linalg.solve_triangular(jnp.tril(L), b, lower=True)
    e = x - target
    return 0.5 * jnp.sum(e * e)


def make_inputs(size="s", seed=0):
    n = check_size(size, SIZES)
    r = rng(seed)
    L = np.tril(r.standard_normal((n, n))) / np.sqrt(n)
    L[np.diag_indices(n)] = 1.0 + r.random(n)
    return L, r.standard_normal(n), r.standard_normal(n)
