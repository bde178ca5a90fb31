"""Monte-Carlo price of a European call under geometric Brownian motion, and its greeks.

Paths are stepped with the exact log-normal update ``S <- S exp((r - sigma^2/2) dt +
sigma sqrt(dt) Z)`` from a fixed array of standard normal draws ``Z`` (paths, steps), so the
price is a deterministic function of (S0, sigma, r) and its gradient is the pathwise estimator of
delta, vega and rho.  The payoff ``max(S_T - K, 0)`` is a data-dependent ``if``.
"""
from __future__ import annotations

import math

import numba

from apps._common import check_size, rng

WRT = ("S0", "sigma", "r")

#: size -> (paths, time steps)
SIZES = {"s": (8, 4), "m": (2000, 50), "l": (20000, 100)}


def objective(S0, sigma, r, K, T, Z):
    npaths = Z.shape[0]
    nsteps = Z.shape[1]
    dt = T / nsteps
    drift = (r - 0.5 * sigma * sigma) * dt
    vol = sigma * math.sqrt(dt)
    total = 0.0
    for p in range(npaths):
        S = S0
        for k in range(nsteps):
            S = S * math.exp(drift + vol * Z[p, k])
        if S > K:
            total += S - K
    return math.exp(-r * T) * total / npaths


primal_numba = numba.njit(objective)


@numba.njit
def handwritten_grad(S0, sigma, r, K, T, Z):
    """Pathwise greeks: dS_T/dS0 = S_T/S0, dS_T/dsigma = S_T (-sigma T + sqrt(dt) sum Z),
    dS_T/dr = S_T T; the discount factor contributes -T * price to rho."""
    npaths, nsteps = Z.shape
    dt = T / nsteps
    drift = (r - 0.5 * sigma * sigma) * dt
    vol = sigma * math.sqrt(dt)
    disc = math.exp(-r * T)
    total = 0.0
    g_s0 = 0.0
    g_sig = 0.0
    g_r = 0.0
    for p in range(npaths):
        S = S0
        zs = 0.0
        for k in range(nsteps):
            S = S * math.exp(drift + vol * Z[p, k])
            zs += Z[p, k]
        if S > K:
            total += S - K
            g_s0 += S / S0
            g_sig += S * (-sigma * dt * nsteps + math.sqrt(dt) * zs)
            g_r += S * dt * nsteps
    price = disc * total / npaths
    return disc * g_s0 / npaths, disc * g_sig / npaths, disc * g_r / npaths - T * price


def xp_objective(xp, S0, sigma, r, K, T, Z):
    nsteps = Z.shape[1]
    dt = T / nsteps
    incr = xp.exp((r - 0.5 * sigma * sigma) * dt + sigma * math.sqrt(dt) * Z)
    S = S0 * incr[:, 0]
    for k in range(1, nsteps):
        S = S * incr[:, k]
    payoff = xp.maximum(S - K, 0.0 * S)
    return xp.exp(-r * T) * xp.mean(payoff)


def jax_objective(S0, sigma, r, K, T, Z):
    """Vectorized over paths, ``lax.fori_loop`` over time steps."""
    import jax.numpy as jnp
    from jax import lax

    Z = jnp.asarray(Z)
    nsteps = Z.shape[1]
    dt = T / nsteps
    drift = (r - 0.5 * sigma ** 2) * dt
    vol = sigma * jnp.sqrt(dt)
    S = lax.fori_loop(0, nsteps, lambda k, S: S * jnp.exp(drift + vol * Z[:, k]),
                      jnp.full(Z.shape[0], S0))
    return jnp.exp(-r * T) * jnp.mean(jnp.maximum(S - K, 0.0))


def make_inputs(size="s", seed=0):
    npaths, nsteps = check_size(size, SIZES)
    Z = rng(seed).standard_normal((npaths, nsteps))
    return 100.0, 0.2, 0.03, 100.0, 1.0, Z
