"""wave: the 1-D wave equation by the leapfrog scheme, scalar loops over time steps and points
(three time levels); loss ``sum((u - target)^2)``; differentiated w.r.t. ``u0`` and ``c2``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("u0", "c2")
#: size -> (nx, nt)
SIZES = {"s": (6, 5), "m": (200, 1000)}


def objective(u0, c2, target, nt):
    n = u0.shape[0]
    prev = u0.copy()
    cur = u0.copy()
    nxt = np.zeros(n)
    for t in range(nt):
        for i in range(1, n - 1):
            nxt[i] = 2.0 * cur[i] - prev[i] + c2 * (cur[i + 1] - 2.0 * cur[i] + cur[i - 1])
        for i in range(n):
            prev[i] = cur[i]
            cur[i] = nxt[i]
    loss = 0.0
    for i in range(n):
        d = cur[i] - target[i]
        loss += d * d
    return loss


def jax_objective(u0, c2, target, nt):
    import jax
    import jax.numpy as jnp

    def step(t, state):
        prev, cur = state
        nxt = jnp.zeros_like(cur).at[1:-1].set(
            2.0 * cur[1:-1] - prev[1:-1] + c2 * (cur[2:] - 2.0 * cur[1:-1] + cur[:-2]))
        return cur, nxt

    _, u = jax.lax.fori_loop(0, nt, step, (u0, u0))
    return jnp.sum((u - target) ** 2)


def make_inputs(size="s", seed=0):
    nx, nt = check_size(size, SIZES)
    r = rng(seed)
    x = np.linspace(0.0, 1.0, nx)
    u0 = np.exp(-50.0 * (x - 0.5) ** 2) + 0.05 * r.standard_normal(nx)
    return u0, 0.25, 0.5 * u0, nt
