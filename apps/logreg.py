"""L2-regularized logistic regression, mean negative log-likelihood, with explicit loops.

``objective(w, b, X, y, lam) = 1/n sum_i [softplus(z_i) - y_i z_i] + lam/2 ||w||^2`` with
``z_i = b + X_i . w``; the softplus is written in its overflow-free two-branch form, so the
gradient goes through a data-dependent ``if``.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from apps._common import check_size, rng

WRT = ("w", "b")

#: size -> (n samples, d features)
SIZES = {"s": (8, 3), "m": (2000, 20), "l": (20000, 50)}


def objective(w, b, X, y, lam):
    n = X.shape[0]
    d = X.shape[1]
    loss = 0.0
    for i in range(n):
        z = b
        for j in range(d):
            z += X[i, j] * w[j]
        if z > 0.0:
            loss += z + math.log1p(math.exp(-z)) - y[i] * z
        else:
            loss += math.log1p(math.exp(z)) - y[i] * z
    reg = 0.0
    for j in range(d):
        reg += w[j] * w[j]
    return loss / n + 0.5 * lam * reg


primal_numba = numba.njit(objective)


@numba.njit
def handwritten_grad(w, b, X, y, lam):
    n, d = X.shape
    gw = lam * w
    gb = 0.0
    for i in range(n):
        z = b
        for j in range(d):
            z += X[i, j] * w[j]
        if z > 0.0:
            s = 1.0 / (1.0 + math.exp(-z))
        else:
            ez = math.exp(z)
            s = ez / (1.0 + ez)
        r = (s - y[i]) / n
        gb += r
        for j in range(d):
            gw[j] += r * X[i, j]
    return gw, gb


def xp_objective(xp, w, b, X, y, lam):
    z = X @ w + b
    loss = xp.maximum(z, 0.0 * z) + xp.log1p(xp.exp(-xp.abs(z))) - y * z
    return xp.mean(loss) + 0.5 * lam * xp.sum(w * w)


def jax_objective(w, b, X, y, lam):
    import jax.numpy as jnp

    z = X @ w + b
    return jnp.mean(jnp.logaddexp(0.0, z) - y * z) + 0.5 * lam * jnp.sum(w * w)


def make_inputs(size="s", seed=0):
    n, d = check_size(size, SIZES)
    r = rng(seed)
    X = r.standard_normal((n, d))
    w_true = r.standard_normal(d)
    y = (X @ w_true + 0.5 * r.standard_normal(n) > 0).astype(np.float64)
    w = 0.1 * r.standard_normal(d)
    return w, 0.1, X, y, 0.01
