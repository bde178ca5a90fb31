"""arc-distance: great-circle distances by the haversine formula over arrays of point pairs;
loss: their sum."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("theta_1", "phi_1", "theta_2", "phi_2")
#: size -> number of point pairs
SIZES = {"s": 6, "m": 50000}


def objective(theta_1, phi_1, theta_2, phi_2):
    temp = (np.sin((theta_2 - theta_1) / 2) ** 2
            + np.cos(theta_1) * np.cos(theta_2) * np.sin((phi_2 - phi_1) / 2) ** 2)
    d = 2 * np.arctan2(np.sqrt(temp), np.sqrt(1 - temp))
    return np.sum(d)


def jax_objective(theta_1, phi_1, theta_2, phi_2):
    import jax.numpy as jnp

    temp = (jnp.sin((theta_2 - theta_1) / 2) ** 2
            + jnp.cos(theta_1) * jnp.cos(theta_2) * jnp.sin((phi_2 - phi_1) / 2) ** 2)
    return jnp.sum(2 * jnp.arctan2(jnp.sqrt(temp), jnp.sqrt(1 - temp)))


def make_inputs(size="s", seed=0):
    n = check_size(size, SIZES)
    r = rng(seed)
    lat = lambda: r.uniform(-1.4, 1.4, n)       # noqa: E731
    lon = lambda: r.uniform(-3.0, 3.0, n)       # noqa: E731
    return lat(), lon(), lat(), lon()
