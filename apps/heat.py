"""Explicit finite-difference heat equation in 1-D with a terminal loss.

``u[t+1, i] = u[t, i] + kappa (u[t, i-1] - 2 u[t, i] + u[t, i+1])`` on the interior, zero
Dirichlet boundaries, ``nt`` steps from the initial profile ``u0``; the loss is the squared
distance of the final profile to ``target``.  Differentiated w.r.t. the initial condition and the
diffusion number ``kappa`` (kappa < 1/2 for stability).  The whole history ``u`` (nt+1, nx) is
kept, as a user writing the plain stencil would.
"""
from __future__ import annotations

import numba
import numpy as np

from apps._common import check_size, rng

WRT = ("u0", "kappa")

#: size -> (nx, nt)
SIZES = {"s": (6, 5), "m": (100, 500), "l": (400, 4000)}


def objective(u0, kappa, target, nt):
    nx = u0.shape[0]
    u = np.zeros((nt + 1, nx))
    for i in range(nx):
        u[0, i] = u0[i]
    for t in range(nt):
        for i in range(1, nx - 1):
            u[t + 1, i] = u[t, i] + kappa * (u[t, i - 1] - 2.0 * u[t, i] + u[t, i + 1])
    loss = 0.0
    for i in range(nx):
        e = u[nt, i] - target[i]
        loss += e * e
    return loss


primal_numba = numba.njit(objective)


@numba.njit
def handwritten_grad(u0, kappa, target, nt):
    """The adjoint stencil, run backwards over the stored history."""
    nx = u0.shape[0]
    u = np.zeros((nt + 1, nx))
    u[0] = u0
    for t in range(nt):
        for i in range(1, nx - 1):
            u[t + 1, i] = u[t, i] + kappa * (u[t, i - 1] - 2.0 * u[t, i] + u[t, i + 1])
    lam = 2.0 * (u[nt] - target)
    prev = np.zeros(nx)
    gk = 0.0
    for t in range(nt - 1, -1, -1):
        prev[:] = 0.0
        for i in range(1, nx - 1):
            li = lam[i]
            gk += li * (u[t, i - 1] - 2.0 * u[t, i] + u[t, i + 1])
            prev[i] += li * (1.0 - 2.0 * kappa)
            prev[i - 1] += li * kappa
            prev[i + 1] += li * kappa
        lam, prev = prev, lam
    return lam.copy(), gk


def xp_objective(xp, u0, kappa, target, nt):
    u = u0
    z = xp.zeros(1)
    for t in range(nt):
        inner = u[1:-1] + kappa * (u[:-2] - 2.0 * u[1:-1] + u[2:])
        u = xp.concatenate([z, inner, z])
    e = u - target
    return xp.sum(e * e)


def jax_objective(u0, kappa, target, nt):
    """``lax.fori_loop`` over time with a vectorized stencil."""
    import jax.numpy as jnp
    from jax import lax

    def step(t, u):
        inner = u[1:-1] + kappa * (u[:-2] - 2.0 * u[1:-1] + u[2:])
        return jnp.zeros_like(u).at[1:-1].set(inner)

    u = lax.fori_loop(0, nt, step, u0)
    return jnp.sum((u - target) ** 2)


def make_inputs(size="s", seed=0):
    nx, nt = check_size(size, SIZES)
    r = rng(seed)
    xg = np.linspace(0.0, 1.0, nx)
    u0 = np.sin(np.pi * xg) + 0.1 * r.standard_normal(nx)
    target = 0.5 * np.sin(np.pi * xg)
    return u0, 0.2, target, nt
