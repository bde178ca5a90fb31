"""Small example functions that ship with coarsen (used by ``python -m coarsen demo``, the
batching tests and ``scripts/gpu_check.py``).

They live in a real file so that ``inspect.getsource`` finds them, and they are written the way
numerical Python is written in the wild: explicit loops, ``math`` functions, scalars and arrays.
"""
import math

import numpy as np


def logistic_map(r, x0, n):
    """The logistic map iterated ``n`` times from ``x0``; a loop without a closed form."""
    x = x0
    for k in range(n):
        x = r * x * (1.0 - x)
    return x


def black_scholes_call(s, k, t, sigma, rate):
    """The Black-Scholes price of a European call (spot, strike, maturity, volatility, rate)."""
    sq = math.sqrt(t)
    d1 = (math.log(s / k) + (rate + 0.5 * sigma * sigma) * t) / (sigma * sq)
    d2 = d1 - sigma * sq
    nd1 = 0.5 * (1.0 + math.erf(d1 / math.sqrt(2.0)))
    nd2 = 0.5 * (1.0 + math.erf(d2 / math.sqrt(2.0)))
    return s * nd1 - k * math.exp(-rate * t) * nd2


def damped_pendulum(theta0, omega0, damping, dt, n):
    """Semi-implicit Euler steps of a damped pendulum; an energy-like objective at the end.
    Two coupled recurrences; the tape grows with ``n``."""
    theta = theta0
    omega = omega0
    for i in range(n):
        omega = omega - dt * (math.sin(theta) + damping * omega)
        theta = theta + dt * omega
    return theta * theta + 0.5 * omega * omega


def newton_sqrt(a, tol):
    """Newton's iteration for sqrt(a) until the residual is below ``tol``: a ``while`` loop
    whose trip count (and tape length) depends on the argument."""
    y = a
    while abs(y * y - a) > tol:
        y = 0.5 * (y + a / y)
    return y


def ridge_loss(w, X, y, lam):
    """Squared loss of a linear model plus an L2 penalty, with explicit loops."""
    n, d = X.shape
    loss = 0.0
    for i in range(n):
        z = 0.0
        for j in range(d):
            z += X[i, j] * w[j]
        r = z - y[i]
        loss += r * r
    reg = 0.0
    for j in range(d):
        reg += w[j] * w[j]
    return loss / n + lam * reg


def softplus_energy(x, scale):
    """An array function with a NumPy reduction: sum(log(1 + exp(scale * x))) / len(x)."""
    return np.sum(np.log1p(np.exp(scale * x))) / x.shape[0]
