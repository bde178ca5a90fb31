"""A tanh recurrent network over a sequence with a linear read-out and squared loss.

``h_{t+1} = tanh(Wx x_t + Wh h_t + bh)``, ``out_t = wo . h_{t+1}``, loss = mean_t (out_t - y_t)^2,
written with explicit loops and the hidden states stored in an array ``hs`` (T+1, H).
"""
from __future__ import annotations

import math

import numba
import numpy as np

from apps._common import check_size, rng

WRT = ("Wx", "Wh", "bh", "wo")

#: size -> (T steps, H hidden, D inputs)
SIZES = {"s": (5, 3, 2), "m": (100, 16, 8), "l": (400, 64, 32)}


def objective(Wx, Wh, bh, wo, xs, ys):
    T = xs.shape[0]
    D = xs.shape[1]
    H = Wh.shape[0]
    hs = np.zeros((T + 1, H))
    loss = 0.0
    for t in range(T):
        for i in range(H):
            a = bh[i]
            for j in range(D):
                a += Wx[i, j] * xs[t, j]
            for j in range(H):
                a += Wh[i, j] * hs[t, j]
            hs[t + 1, i] = math.tanh(a)
        out = 0.0
        for i in range(H):
            out += wo[i] * hs[t + 1, i]
        err = out - ys[t]
        loss += err * err
    return loss / T


primal_numba = numba.njit(objective)


@numba.njit
def handwritten_grad(Wx, Wh, bh, wo, xs, ys):
    """Backpropagation through time, in loops."""
    T, D = xs.shape
    H = Wh.shape[0]
    hs = np.zeros((T + 1, H))
    errs = np.zeros(T)
    for t in range(T):
        for i in range(H):
            a = bh[i]
            for j in range(D):
                a += Wx[i, j] * xs[t, j]
            for j in range(H):
                a += Wh[i, j] * hs[t, j]
            hs[t + 1, i] = math.tanh(a)
        out = 0.0
        for i in range(H):
            out += wo[i] * hs[t + 1, i]
        errs[t] = out - ys[t]
    gWx = np.zeros_like(Wx)
    gWh = np.zeros_like(Wh)
    gbh = np.zeros_like(bh)
    gwo = np.zeros_like(wo)
    hbar = np.zeros(H)
    abar = np.zeros(H)
    for t in range(T - 1, -1, -1):
        ob = 2.0 * errs[t] / T
        for i in range(H):
            hi = hs[t + 1, i]
            gwo[i] += ob * hi
            abar[i] = (hbar[i] + ob * wo[i]) * (1.0 - hi * hi)
            gbh[i] += abar[i]
            for j in range(D):
                gWx[i, j] += abar[i] * xs[t, j]
            for j in range(H):
                gWh[i, j] += abar[i] * hs[t, j]
        for j in range(H):
            s = 0.0
            for i in range(H):
                s += Wh[i, j] * abar[i]
            hbar[j] = s
    return gWx, gWh, gbh, gwo


def xp_objective(xp, Wx, Wh, bh, wo, xs, ys):
    T = xs.shape[0]
    h = 0.0 * bh
    loss = 0.0
    for t in range(T):
        h = xp.tanh(Wx @ xs[t] + Wh @ h + bh)
        err = xp.sum(wo * h) - ys[t]
        loss = loss + err * err
    return loss / T


def jax_objective(Wx, Wh, bh, wo, xs, ys):
    """``lax.scan`` over time."""
    import jax.numpy as jnp
    from jax import lax

    def step(h, xy):
        x, y = xy
        h = jnp.tanh(Wx @ x + Wh @ h + bh)
        return h, (wo @ h - y) ** 2

    _, sq = lax.scan(step, jnp.zeros_like(bh), (xs, ys))
    return jnp.mean(sq)


def make_inputs(size="s", seed=0):
    T, H, D = check_size(size, SIZES)
    r = rng(seed)
    Wx = r.standard_normal((H, D)) / math.sqrt(D)
    Wh = 0.9 * r.standard_normal((H, H)) / math.sqrt(H)
    bh = 0.1 * r.standard_normal(H)
    wo = r.standard_normal(H) / math.sqrt(H)
    xs = r.standard_normal((T, D))
    ys = np.sin(np.arange(T) * 0.3)
    return Wx, Wh, bh, wo, xs, ys
