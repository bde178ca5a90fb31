"""mvt: ``x1 = x1 + A y1``, ``x2 = x2 + A^T y2``; loss ``1/2 (||x1||^2 + ||x2||^2)``."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("A", "x1", "x2", "y1", "y2")
#: size -> n (A is n x n)
SIZES = {"s": 5, "m": 500}


def objective(A, x1, x2, y1, y2):
    x1 = x1 + A @ y1
    x2 = x2 + A.T @ y2
    return 0.5 * (x1 @ x1 + x2 @ x2)


def jax_objective(A, x1, x2, y1, y2):
    x1 = x1 + A @ y1
    x2 = x2 + A.T @ y2
    return 0.5 * (x1 @ x1 + x2 @ x2)


def make_inputs(size="s", seed=0):
    n = check_size(size, SIZES)
    r = rng(seed)
    return (r.standard_normal((n, n)) / np.sqrt(n),) + tuple(r.standard_normal(n)
                                                            for _ in range(4))
