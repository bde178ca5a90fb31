"""heat-loop: the explicit 1-D heat equation with scalar loops over time steps and points; loss
``sum((u - target)^2)`` of the final state; differentiated w.r.t. ``u0`` and ``kappa``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("u0", "kappa")
#: size -> (nx, nt)
SIZES = {"s": (6, 5), "m": (200, 2000)}


def objective(u0, kappa, target, nt):
    n = u0.shape[0]
    u = u0.copy()
    un = u0.copy()
    for t in range(nt):
        for i in range(1, n - 1):
            un[i] = u[i] + kappa * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        for i in range(1, n - 1):
            u[i] = un[i]
    loss = 0.0
    for i in range(n):
        d = u[i] - target[i]
        loss += d * d
    return loss


def jax_objective(u0, kappa, target, nt):
    import jax
    import jax.numpy as jnp

    def step(t, u):
        return u.at[1:-1].set(u[1:-1] + kappa * (u[:-2] - 2.0 * u[1:-1] + u[2:]))

    u = jax.lax.fori_loop(0, nt, step, u0)
    return jnp.sum((u - target) ** 2)


def make_inputs(size="s", seed=0):
    nx, nt = check_size(size, SIZES)
    r = rng(seed)
    x = np.linspace(0.0, 1.0, nx)
    return np.sin(np.pi * x) + 0.1 * r.standard_normal(nx), 0.2, 0.5 * np.sin(np.pi * x), nt
