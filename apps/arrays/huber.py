"""huber: Huber-loss linear regression with explicit loops and one branch per example; plus
an L2 penalty; differentiated w.r.t. the weights."""
from __future__ import annotations

from apps._common import check_size, rng

WRT = ("w",)
#: size -> (n examples, d features)
SIZES = {"s": (8, 3), "m": (5000, 20)}


def objective(w, X, y, delta, lam):
    n = X.shape[0]
    d = X.shape[1]
    loss = 0.0
    for i in range(n):
        r = y[i]
        for j in range(d):
            r -= X[i, j] * w[j]
        if abs(r) <= delta:
            loss += 0.5 * r * r
        else:
            loss += delta * (abs(r) - 0.5 * delta)
    reg = 0.0
    for j in range(d):
        reg += w[j] * w[j]
    return loss / n + lam * reg


def jax_objective(w, X, y, delta, lam):
    import jax.numpy as jnp

    r = y - X @ w
    a = jnp.abs(r)
    per = jnp.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))
    return jnp.mean(per) + lam * jnp.sum(w * w)


def make_inputs(size="s", seed=0):
    n, d = check_size(size, SIZES)
    r = rng(seed)
    X = r.standard_normal((n, d))
    y = X @ r.standard_normal(d) + r.standard_normal(n)
    return 0.3 * r.standard_normal(d), X, y, 1.0, 0.01
