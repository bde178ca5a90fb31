"""covariance: the sample covariance of the columns of ``data``, loss ``sum(W * cov)``."""
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
    cov = d.T @ d / (n - 1.0)
    return np.sum(W * cov)


def jax_objective(data, W):
    import jax.numpy as jnp

    n = data.shape[0]
    d = data - jnp.mean(data, axis=0)
    cov = d.T @ d / (n - 1.0)
    return jnp.sum(W * cov)


def make_inputs(size="s", seed=0):
    n, m = check_size(size, SIZES)
    r = rng(seed)
    return r.standard_normal((n, m)) + 0.5, r.standard_normal((m, m))
