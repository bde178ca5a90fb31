"""svm: a linear support-vector machine's hinge loss with explicit loops (one branch per
example), plus an L2 penalty; differentiated w.r.t. the weights and the bias."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("w", "b")
#: size -> (n examples, d features)
SIZES = {"s": (8, 3), "m": (5000, 20)}


def objective(w, b, X, y, lam):
    n = X.shape[0]
    d = X.shape[1]
    loss = 0.0
    for i in range(n):
        s = b
        for j in range(d):
            s += X[i, j] * w[j]
        margin = y[i] * s
        if margin < 1.0:
            loss += 1.0 - margin
    reg = 0.0
    for j in range(d):
        reg += w[j] * w[j]
    return loss / n + lam * reg


def jax_objective(w, b, X, y, lam):
    import jax.numpy as jnp

    margin = y * (X @ w + b)
    return jnp.mean(jnp.maximum(0.0, 1.0 - margin)) + lam * jnp.sum(w * w)


def make_inputs(size="s", seed=0):
    n, d = check_size(size, SIZES)
    r = rng(seed)
    X = r.standard_normal((n, d))
    y = np.sign(X @ r.standard_normal(d) + 0.5 * r.standard_normal(n))
    return 0.3 * r.standard_normal(d), 0.1, X, y, 0.01
