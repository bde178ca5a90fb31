"""Lennard-Jones energy of N particles over all pairs; its gradient is minus the forces.

``E = sum_{i<j} 4 eps ((sigma/r_ij)^12 - (sigma/r_ij)^6)``, no cut-off, no periodic images.
"""
from __future__ import annotations

import numba
import numpy as np

from apps._common import check_size, rng

WRT = ("pos",)

#: size -> number of particles
SIZES = {"s": 5, "m": 200, "l": 1000}


def objective(pos, eps, sigma):
    N = pos.shape[0]
    energy = 0.0
    for i in range(N):
        for j in range(i + 1, N):
            dx = pos[i, 0] - pos[j, 0]
            dy = pos[i, 1] - pos[j, 1]
            dz = pos[i, 2] - pos[j, 2]
            r2 = dx * dx + dy * dy + dz * dz
            s6 = (sigma * sigma / r2) ** 3
            energy += 4.0 * eps * (s6 * s6 - s6)
    return energy


primal_numba = numba.njit(objective)


@numba.njit
def handwritten_grad(pos, eps, sigma):
    """Minus the forces: dE/dr2 = -12 eps s6 (2 s6 - 1) / r2 and d r2 / d pos_i = 2 (pos_i - pos_j)."""
    N = pos.shape[0]
    g = np.zeros_like(pos)
    s2 = sigma * sigma
    for i in range(N):
        for j in range(i + 1, N):
            dx = pos[i, 0] - pos[j, 0]
            dy = pos[i, 1] - pos[j, 1]
            dz = pos[i, 2] - pos[j, 2]
            r2 = dx * dx + dy * dy + dz * dz
            t = s2 / r2
            s6 = t * t * t
            c = -24.0 * eps * s6 * (2.0 * s6 - 1.0) / r2
            g[i, 0] += c * dx
            g[i, 1] += c * dy
            g[i, 2] += c * dz
            g[j, 0] -= c * dx
            g[j, 1] -= c * dy
            g[j, 2] -= c * dz
    return (g,)


def xp_objective(xp, pos, eps, sigma):
    iu, ju = np.triu_indices(pos.shape[0], 1)
    d = pos[iu] - pos[ju]
    r2 = xp.sum(d * d, axis=1)
    s6 = (sigma * sigma / r2) ** 3
    return xp.sum(4.0 * eps * (s6 * s6 - s6))


def jax_objective(pos, eps, sigma):
    import jax.numpy as jnp

    iu, ju = np.triu_indices(pos.shape[0], 1)
    d = pos[iu] - pos[ju]
    s6 = (sigma ** 2 / jnp.sum(d * d, axis=1)) ** 3
    return jnp.sum(4.0 * eps * (s6 * s6 - s6))


def make_inputs(size="s", seed=0):
    """A jittered cubic lattice with spacing 1.2 sigma (no overlapping pairs)."""
    N = check_size(size, SIZES)
    side = int(np.ceil(N ** (1.0 / 3.0)))
    grid = np.array([(i, j, k) for i in range(side) for j in range(side) for k in range(side)],
                    dtype=np.float64)[:N]
    pos = 1.2 * grid + 0.05 * rng(seed).standard_normal((N, 3))
    return pos, 1.0, 1.0
