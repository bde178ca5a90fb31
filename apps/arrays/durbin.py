"""durbin: the Levinson-Durbin recurrence solving the Toeplitz system of autocorrelations ``r``
(loops over ``k`` with slices and reversed slices); loss ``sum(w * y)``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("r",)
#: size -> n
SIZES = {"s": 6, "m": 500}


def objective(r, w):
    n = r.shape[0]
    y = np.zeros(n)
    y[0] = -r[0]
    beta = 1.0
    alpha = -r[0]
    for k in range(1, n):
        beta = (1.0 - alpha * alpha) * beta
        alpha = -(r[k] + r[:k][::-1] @ y[:k]) / beta
        y[:k] = y[:k] + alpha * y[:k][::-1]
        y[k] = alpha
    return np.sum(w * y)


def jax_objective(r, w):
    import jax
    import jax.numpy as jnp

    n = r.shape[0]
    idx = jnp.arange(n)

    def step(k, carry):
        y, alpha, beta = carry
        beta = (1.0 - alpha * alpha) * beta
        mask = idx < k
        rrev = jnp.where(mask, r[jnp.clip(k - 1 - idx, 0, n - 1)], 0.0)   # r[k-1-i], i < k
        yrev = jnp.where(mask, y[jnp.clip(k - 1 - idx, 0, n - 1)], 0.0)
        alpha = -(r[k] + rrev @ y) / beta
        y = jnp.where(mask, y + alpha * yrev, y).at[k].set(alpha)
        return y, alpha, beta

    y0 = jnp.zeros(n).at[0].set(-r[0])
    y, _, _ = jax.lax.fori_loop(1, n, step, (y0, -r[0], 1.0))
    return jnp.sum(w * y)


def make_inputs(size="s", seed=0):
    n = check_size(size, SIZES)
    g = rng(seed)
    # autocorrelations of an AR(1) process, slightly perturbed: a positive definite Toeplitz matrix
    r = 0.5 ** np.arange(1, n + 1) * (1.0 + 0.05 * g.standard_normal(n))
    return r, g.standard_normal(n)
