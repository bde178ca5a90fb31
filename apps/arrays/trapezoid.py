"""trapezoid: the composite trapezoid rule on ``n`` intervals, calling a small helper ``f`` at
every node; differentiated w.r.t. the integrand's parameters ``a`` and ``b``."""
from __future__ import annotations

import math

from apps._common import check_size

WRT = ("a", "b")
#: size -> n intervals
SIZES = {"s": 10, "m": 200000}
#: helpers ``objective`` calls: plain Python, inlined by coarsen; compiled with the primal
NUMBA_HELPERS = ("f",)


def f(x, a, b):
    return a * math.exp(-b * x * x) * math.sin(3.0 * x) + b * x


def objective(a, b, lo, hi, n):
    h = (hi - lo) / n
    s = 0.5 * (f(lo, a, b) + f(hi, a, b))
    for i in range(1, n):
        s += f(lo + i * h, a, b)
    return s * h


def jax_objective(a, b, lo, hi, n):
    import jax.numpy as jnp

    x = jnp.linspace(lo, hi, n + 1)
    y = a * jnp.exp(-b * x * x) * jnp.sin(3.0 * x) + b * x
    return jnp.trapezoid(y, x)


def make_inputs(size="s", seed=0):
    n = check_size(size, SIZES)
    return 1.3, 0.7, 0.0, 2.0, n
