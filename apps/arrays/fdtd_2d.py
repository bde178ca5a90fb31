"""fdtd-2d: the 2-D finite-difference time-domain kernel (``ex``, ``ey``, ``hz`` updated in place
with slices, the source ``fict[t]`` on the first row of ``ey``); loss: the field energy."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("ex0", "ey0", "hz0", "fict")
#: size -> (nx, ny, tmax)
SIZES = {"s": (4, 5, 3), "m": (200, 240, 20)}


def objective(ex0, ey0, hz0, fict):
    ex = ex0.copy()
    ey = ey0.copy()
    hz = hz0.copy()
    for t in range(fict.shape[0]):
        ey[0, :] = fict[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return 0.5 * (np.sum(ex * ex) + np.sum(ey * ey)) + np.sum(hz * hz)


def jax_objective(ex0, ey0, hz0, fict):
    import jax
    import jax.numpy as jnp

    def step(fields, f):
        ex, ey, hz = fields
        ey = ey.at[0, :].set(f)
        ey = ey.at[1:, :].add(-0.5 * (hz[1:, :] - hz[:-1, :]))
        ex = ex.at[:, 1:].add(-0.5 * (hz[:, 1:] - hz[:, :-1]))
        hz = hz.at[:-1, :-1].add(-0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1]
                                         - ey[:-1, :-1]))
        return (ex, ey, hz), None

    (ex, ey, hz), _ = jax.lax.scan(step, (ex0, ey0, hz0), fict)
    return 0.5 * (jnp.sum(ex * ex) + jnp.sum(ey * ey)) + jnp.sum(hz * hz)


def make_inputs(size="s", seed=0):
    nx, ny, tmax = check_size(size, SIZES)
    r = rng(seed)
    return (r.standard_normal((nx, ny)), r.standard_normal((nx, ny)),
            r.standard_normal((nx, ny)), r.standard_normal(tmax))
