"""PolyBench's ``gemver``: rank-2 update of a matrix, then two matrix-vector products.

``A = A + outer(u1, v1) + outer(u2, v2)``, ``x = x + beta A^T y + z``, ``w = w + alpha A x``,
written with NumPy array operations (``np.outer``, ``@``, ``.T``), and the loss
``1/2 ||w||^2``.  Differentiated w.r.t. the matrix, ``u1``, ``v1``, ``y``, ``z`` and both
scalars.
"""
from __future__ import annotations

import numba
import numpy as np

from apps._common import check_size, rng

WRT = ("A", "u1", "v1", "y", "z", "alpha", "beta")

#: size -> n (A is n x n)
SIZES = {"s": 4, "m": 400, "l": 2000}


def objective(A, u1, v1, u2, v2, x, y, z, w, alpha, beta):
    A = A + np.outer(u1, v1) + np.outer(u2, v2)
    x = x + beta * A.T @ y + z
    w = w + alpha * A @ x
    return 0.5 * np.sum(w * w)


primal_numba = numba.njit(objective)


@numba.njit
def handwritten_grad(A, u1, v1, u2, v2, x, y, z, w, alpha, beta):
    """The forward sweep with loops (the updated matrix kept), then its adjoint:
    ``wb = w``, ``xb = alpha Ah^T wb``, ``Ahb = alpha wb x^T + beta y xb^T``."""
    n = A.shape[0]
    Ah = np.empty_like(A)
    for i in range(n):
        for j in range(n):
            Ah[i, j] = A[i, j] + u1[i] * v1[j] + u2[i] * v2[j]
    aty = np.zeros(n)                 # Ah^T y
    for i in range(n):
        yi = y[i]
        for j in range(n):
            aty[j] += Ah[i, j] * yi
    xh = x + beta * aty + z
    ax = np.zeros(n)                  # Ah x
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += Ah[i, j] * xh[j]
        ax[i] = s
    wh = w + alpha * ax
    # reverse
    galpha = 0.0
    for i in range(n):
        galpha += wh[i] * ax[i]
    xb = np.zeros(n)                  # alpha Ah^T wh
    for i in range(n):
        awi = alpha * wh[i]
        for j in range(n):
            xb[j] += Ah[i, j] * awi
    gbeta = 0.0
    for j in range(n):
        gbeta += xb[j] * aty[j]
    gy = np.zeros(n)                  # beta Ah xb
    gA = np.empty_like(A)
    gu1 = np.zeros(n)
    gv1 = np.zeros(n)
    for i in range(n):
        awi = alpha * wh[i]
        byi = beta * y[i]
        s = 0.0
        g1 = 0.0
        for j in range(n):
            s += Ah[i, j] * xb[j]
            gij = awi * xh[j] + byi * xb[j]
            gA[i, j] = gij
            g1 += gij * v1[j]
            gv1[j] += gij * u1[i]
        gy[i] = beta * s
        gu1[i] = g1
    return gA, gu1, gv1, gy, xb.copy(), galpha, gbeta


def xp_objective(xp, A, u1, v1, u2, v2, x, y, z, w, alpha, beta):
    A = A + xp.outer(u1, v1) + xp.outer(u2, v2)
    x = x + beta * (A.T @ y) + z
    w = w + alpha * (A @ x)
    return 0.5 * xp.sum(w * w)


def jax_objective(A, u1, v1, u2, v2, x, y, z, w, alpha, beta):
    import jax.numpy as jnp

    A = A + jnp.outer(u1, v1) + jnp.outer(u2, v2)
    x = x + beta * A.T @ y + z
    w = w + alpha * A @ x
    return 0.5 * jnp.sum(w * w)


def make_inputs(size="s", seed=0):
    n = check_size(size, SIZES)
    r = rng(seed)
    s = 1.0 / np.sqrt(n)
    A = s * r.standard_normal((n, n))
    u1, v1, u2, v2, x, y, z, w = (r.standard_normal(n) for _ in range(8))
    return A, u1, s * v1, u2, s * v2, x, s * y, z, w, 0.7, 1.3
