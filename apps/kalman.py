"""Negative log-likelihood of a 1-D linear Gaussian state-space model, by the Kalman filter.

``x_t = phi x_{t-1} + N(0, q)``, ``y_t = x_t + N(0, r)``, ``q = exp(log_q)``, ``r = exp(log_r)``,
prior ``x_0 ~ N(0, 1)``; the prediction-error decomposition gives
``nll = sum_t 1/2 (log(2 pi S_t) + e_t^2 / S_t)``.  Scalar loops only.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from apps._common import check_size, rng

WRT = ("phi", "log_q", "log_r")

#: size -> number of observations
SIZES = {"s": 6, "m": 1000, "l": 100000}


def objective(phi, log_q, log_r, ys):
    q = math.exp(log_q)
    r = math.exp(log_r)
    m = 0.0
    P = 1.0
    nll = 0.0
    for t in range(ys.shape[0]):
        m = phi * m
        P = phi * phi * P + q
        S = P + r
        e = ys[t] - m
        nll += 0.5 * (math.log(2.0 * math.pi * S) + e * e / S)
        gain = P / S
        m = m + gain * e
        P = (1.0 - gain) * P
    return nll


primal_numba = numba.njit(objective)


@numba.njit
def handwritten_grad(phi, log_q, log_r, ys):
    """Forward sensitivities of (m, P) w.r.t. (phi, log_q, log_r), by hand, in scalars."""
    q = math.exp(log_q)
    r = math.exp(log_r)
    m = 0.0
    P = 1.0
    m0 = m1 = m2 = 0.0  # dm / d(phi, log_q, log_r)
    P0 = P1 = P2 = 0.0  # dP / d(...)
    g0 = g1 = g2 = 0.0
    for t in range(ys.shape[0]):
        # predict: m = phi m, P = phi^2 P + q
        m0 = phi * m0 + m
        m1 = phi * m1
        m2 = phi * m2
        m = phi * m
        P0 = phi * phi * P0 + 2.0 * phi * P
        P1 = phi * phi * P1 + q
        P2 = phi * phi * P2
        P = phi * phi * P + q
        # S = P + r, e = y - m
        S = P + r
        S0, S1, S2 = P0, P1, P2 + r
        e = ys[t] - m
        inv = 1.0 / S
        a = 0.5 * inv * (1.0 - e * e * inv)  # d nll_t / dS
        b = e * inv                          # -d nll_t / dm
        g0 += a * S0 - b * m0
        g1 += a * S1 - b * m1
        g2 += a * S2 - b * m2
        # update: gain = P/S, m += gain e, P = (1 - gain) P
        gain = P * inv
        k0 = (P0 - gain * S0) * inv
        k1 = (P1 - gain * S1) * inv
        k2 = (P2 - gain * S2) * inv
        m0 = m0 + k0 * e - gain * m0
        m1 = m1 + k1 * e - gain * m1
        m2 = m2 + k2 * e - gain * m2
        m = m + gain * e
        P0 = (1.0 - gain) * P0 - k0 * P
        P1 = (1.0 - gain) * P1 - k1 * P
        P2 = (1.0 - gain) * P2 - k2 * P
        P = (1.0 - gain) * P
    return g0, g1, g2


def xp_objective(xp, phi, log_q, log_r, ys):
    q = xp.exp(log_q)
    r = xp.exp(log_r)
    m = 0.0
    P = 1.0
    nll = 0.0
    for t in range(ys.shape[0]):
        m = phi * m
        P = phi * phi * P + q
        S = P + r
        e = ys[t] - m
        nll = nll + 0.5 * (xp.log(2.0 * math.pi * S) + e * e / S)
        gain = P / S
        m = m + gain * e
        P = (1.0 - gain) * P
    return nll


def jax_objective(phi, log_q, log_r, ys):
    """``lax.scan`` over the observations."""
    import jax.numpy as jnp
    from jax import lax

    q, r = jnp.exp(log_q), jnp.exp(log_r)

    def step(carry, y):
        m, P = carry
        m = phi * m
        P = phi * phi * P + q
        S = P + r
        e = y - m
        gain = P / S
        return (m + gain * e, (1.0 - gain) * P), 0.5 * (jnp.log(2.0 * jnp.pi * S) + e * e / S)

    _, terms = lax.scan(step, (jnp.zeros(()), jnp.ones(())), ys)
    return jnp.sum(terms)


def make_inputs(size="s", seed=0):
    T = check_size(size, SIZES)
    r = rng(seed)
    x = 0.0
    ys = np.zeros(T)
    for t in range(T):
        x = 0.9 * x + math.sqrt(0.5) * r.standard_normal()
        ys[t] = x + math.sqrt(0.3) * r.standard_normal()
    return 0.8, math.log(0.4), math.log(0.35), ys
