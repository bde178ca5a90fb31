"""bicg: the BiCG sub-kernel ``s = A^T r``, ``q = A p``; loss ``1/2 (||s||^2 + ||q||^2)``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("A", "p", "r")
#: size -> (m, n): A is m x n
SIZES = {"s": (4, 5), "m": (420, 380)}


def objective(A, p, r):
    s = r @ A
    q = A @ p
    return 0.5 * (np.sum(s * s) + np.sum(q * q))


def jax_objective(A, p, r):
    import jax.numpy as jnp

    s = r @ A
    q = A @ p
    return 0.5 * (jnp.sum(s * s) + jnp.sum(q * q))


def make_inputs(size="s", seed=0):
    m, n = check_size(size, SIZES)
    g = rng(seed)
    return (g.standard_normal((m, n)) / np.sqrt(max(m, n)), g.standard_normal(n),
            g.standard_normal(m))
