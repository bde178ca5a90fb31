"""A loop with a closed form: a polynomial sum plus a geometric series.

``s = sum_{i<n} (a i^2 + x r^i)``, written as users write it, with the power carried by
``p *= r``.  Symbolic loop closed forms (``sum i^2 = (n-1) n (2n-1)/6``, the geometric sum)
remove the loop from the derivative, so its cost stops growing with ``n``.
"""
from __future__ import annotations

import numba

from apps._common import check_size

WRT = ("a", "r", "x")

#: size -> trip count n
SIZES = {"s": 7, "m": 10000, "l": 1000000}


def objective(a, r, x, n):
    s = 0.0
    p = 1.0
    for i in range(n):
        s += a * i * i + x * p
        p *= r
    return s


primal_numba = numba.njit(objective)


@numba.njit
def handwritten_grad(a, r, x, n):
    """Closed forms: d/da = (n-1) n (2n-1)/6, d/dx = (1 - r^n)/(1 - r),
    d/dr = x d/dr[(1 - r^n)/(1 - r)] (the r = 1 limits guarded)."""
    ga = (n - 1) * n * (2 * n - 1) / 6.0
    if r == 1.0:
        gx = float(n)
        dgeo = n * (n - 1) / 2.0
    else:
        rn = r ** n
        gx = (1.0 - rn) / (1.0 - r)
        rn1 = r ** (n - 1) if n >= 1 else 0.0
        dgeo = ((1.0 - rn) - n * rn1 * (1.0 - r)) / ((1.0 - r) * (1.0 - r))
    return ga, x * dgeo, gx


def xp_objective(xp, a, r, x, n):
    i = xp.arange(n)
    return xp.sum(a * i * i + x * r ** i)


def jax_objective(a, r, x, n):
    import jax.numpy as jnp

    i = jnp.arange(n, dtype=jnp.float64)
    return jnp.sum(a * i * i + x * r ** i)


def make_inputs(size="s", seed=0):
    n = check_size(size, SIZES)
    return 0.5 + 0.01 * seed, 0.9 if size == "s" else 0.999, 1.5, n
