"""floyd-warshall: all-pairs shortest paths by min-plus relaxation through every vertex ``k``;
loss ``sum(C * path)``, differentiable w.r.t. the edge weights (almost everywhere;
``np.minimum`` over ``k`` in a Python loop)."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("dist",)
#: size -> n vertices
SIZES = {"s": 5, "m": 150}


def objective(dist, C):
    path = dist.copy()
    for k in range(path.shape[0]):
        path = np.minimum(path, path[:, k][:, None] + path[k, :][None, :])
    return np.sum(C * path)


def jax_objective(dist, C):
    import jax
    import jax.numpy as jnp

    def relax(k, path):
        return jnp.minimum(path, path[:, k][:, None] + path[k, :][None, :])

    path = jax.lax.fori_loop(0, dist.shape[0], relax, dist)
    return jnp.sum(C * path)


def make_inputs(size="s", seed=0):
    n = check_size(size, SIZES)
    r = rng(seed)
    dist = 1.0 + 9.0 * r.random((n, n))
    # positive self-loop weights: no two candidate paths tie, so the loss is differentiable at
    # the inputs (with a zero diagonal every relaxation through k ties at row and column k)
    np.fill_diagonal(dist, 0.1 + 0.4 * r.random(n))
    return dist, r.random((n, n))
