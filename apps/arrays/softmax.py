"""softmax: the row softmax of a matrix (max-shifted), loss ``sum(W * softmax(X))``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("X",)
#: size -> (n, k): X is n x k
SIZES = {"s": (4, 5), "m": (500, 400)}


def objective(X, W):
    m = np.max(X, axis=1)
    e = np.exp(X - m[:, None])
    p = e / np.sum(e, axis=1)[:, None]
    return np.sum(W * p)


def numba_objective(X, W):
    # the Numba primal (``apps.arrays.numba_primal``): Numba's np.max takes no axis, so the row
    # maxima are a loop; the rest is the objective's own code
    m = np.empty(X.shape[0])
    for i in range(X.shape[0]):
        m[i] = np.max(X[i])
    e = np.exp(X - m.reshape((-1, 1)))
    p = e / np.sum(e, axis=1).reshape((-1, 1))
    return np.sum(W * p)


def jax_objective(X, W):
    import jax

    return jax.numpy.sum(W * jax.nn.softmax(X, axis=1))


def make_inputs(size="s", seed=0):
    n, k = check_size(size, SIZES)
    r = rng(seed)
    return 2.0 * r.standard_normal((n, k)), r.standard_normal((n, k))
