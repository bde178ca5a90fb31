"""Forward substitution ``L x = b`` written with row operations, and a least-squares loss.

``x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]`` for ``i = 0 .. n-1`` (PolyBench's ``trisolv``
with NumPy slices), then ``1/2 ||x - target||^2``.  Only the lower triangle of ``L`` is read, so
the gradient w.r.t. ``L`` is zero above the diagonal.  Differentiated w.r.t. ``L`` and ``b``:
with ``L^T lam = x - target``, ``d/db = lam`` and ``d/dL = -tril(lam x^T)``.
"""
from __future__ import annotations

import numba
import numpy as np

from apps._common import check_size, rng

WRT = ("L", "b")

#: size -> n
SIZES = {"s": 5, "m": 1000, "l": 3000}


def objective(L, b, target):
    n = b.shape[0]
    x = np.zeros(n)
    for i in range(n):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    e = x - target
    return 0.5 * (e @ e)


primal_numba = numba.njit(objective)


@numba.njit
def handwritten_grad(L, b, target):
    """Forward substitution, then the transposed (backward) substitution for the adjoint."""
    n = b.shape[0]
    x = np.zeros(n)
    for i in range(n):
        s = b[i]
        for j in range(i):
            s -= L[i, j] * x[j]
        x[i] = s / L[i, i]
    # adjoint of x, accumulated as the rows are undone from the last one up
    xb = x - target
    gb = np.zeros(n)
    gL = np.zeros_like(L)
    for i in range(n - 1, -1, -1):
        lam = xb[i] / L[i, i]          # the adjoint of the numerator b[i] - L[i, :i] @ x[:i]
        gb[i] = lam
        gL[i, i] = -lam * x[i]
        for j in range(i):
            gL[i, j] = -lam * x[j]
            xb[j] -= lam * L[i, j]
    return gL, gb


def xp_objective(xp, L, b, target):
    # row by row without writes: x is the list of solved entries
    xs = [b[0] / L[0, 0]]
    for i in range(1, b.shape[0]):
        xs.append((b[i] - xp.sum(L[i, :i] * xp.stack(xs))) / L[i, i])
    e = xp.stack(xs) - target
    return 0.5 * xp.sum(e * e)


def jax_objective(L, b, target):
    """``jax.scipy.linalg.solve_triangular`` on the lower triangle."""
    import jax.numpy as jnp
    from jax.scipy.linalg import solve_triangular

    x = solve_triangular(jnp.tril(L), b, lower=True)
    e = x - target
    return 0.5 * jnp.sum(e * e)


def make_inputs(size="s", seed=0):
    n = check_size(size, SIZES)
    r = rng(seed)
    # a well-conditioned lower triangle: off-diagonal entries of size 1/sqrt(n), diagonal >= 2;
    # the upper triangle holds values too (it is never read)
    L = r.standard_normal((n, n)) / np.sqrt(n)
    L[np.diag_indices(n)] = 2.0 + r.random(n)
    b = r.standard_normal(n)
    target = 0.1 * r.standard_normal(n)
    return L, b, target
