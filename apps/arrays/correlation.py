"""correlation: the correlation matrix of the columns of ``data``, loss ``sum(W * corr)``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("data",)
#: size -> (n, m): n samples of m variables
SIZES = {"s": (6, 4), "m": (500, 300)}


def objective(data, W):
    n = data.shape[0]
    mean = np.sum(data, axis=0) / n
    d = data - mean
    std = np.sqrt(np.sum(d * d, axis=0) / n)
    z = d / (np.sqrt(n) * std)
    corr = z.T @ z
    return np.sum(W * corr)


def jax_objective(data, W):
    import jax.numpy as jnp

    n = data.shape[0]
    d = data - jnp.mean(data, axis=0)
    z = d / (jnp.sqrt(n) * jnp.std(data, axis=0))
    return jnp.sum(W * (z.T @ z))


def make_inputs(size="s", seed=0):
    n, m = check_size(size, SIZES)
    r = rng(seed)
    return r.standard_normal((n, m)) + 0.5, r.standard_normal((m, m))
