"""sir: an SIR epidemic model integrated with classic RK4 (a helper for the right-hand side);
loss: squared distance of the infected fraction to observations after every step;
differentiated w.r.t. the rates and the initial state."""
from __future__ import annotations

import numpy as np

from apps._common import check_size, rng

WRT = ("beta", "gamma", "S0", "I0")
#: size -> number of RK4 steps
SIZES = {"s": 8, "m": 2000}
#: helpers ``objective`` calls: plain Python, inlined by coarsen; compiled with the primal
NUMBA_HELPERS = ("rhs",)


def rhs(S, I, beta, gamma):
    infect = beta * S * I
    recover = gamma * I
    return -infect, infect - recover


def objective(beta, gamma, S0, I0, obs, dt):
    S = S0
    I = I0
    loss = 0.0
    for k in range(obs.shape[0]):
        k1s, k1i = rhs(S, I, beta, gamma)
        k2s, k2i = rhs(S + 0.5 * dt * k1s, I + 0.5 * dt * k1i, beta, gamma)
        k3s, k3i = rhs(S + 0.5 * dt * k2s, I + 0.5 * dt * k2i, beta, gamma)
        k4s, k4i = rhs(S + dt * k3s, I + dt * k3i, beta, gamma)
        S = S + dt / 6.0 * (k1s + 2.0 * k2s + 2.0 * k3s + k4s)
        I = I + dt / 6.0 * (k1i + 2.0 * k2i + 2.0 * k3i + k4i)
        e = I - obs[k]
        loss += e * e
    return loss


def jax_objective(beta, gamma, S0, I0, obs, dt):
    import jax
    import jax.numpy as jnp

    def f(u):
        infect = beta * u[0] * u[1]
        return jnp.stack([-infect, infect - gamma * u[1]])

    def step(u, o):
        k1 = f(u)
        k2 = f(u + 0.5 * dt * k1)
        k3 = f(u + 0.5 * dt * k2)
        k4 = f(u + dt * k3)
        u = u + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        return u, (u[1] - o) ** 2

    _, err = jax.lax.scan(step, jnp.stack([S0, I0]), obs)
    return jnp.sum(err)


def make_inputs(size="s", seed=0):
    steps = check_size(size, SIZES)
    r = rng(seed)
    dt = 20.0 / steps if size != "s" else 0.5
    obs = 0.1 * np.abs(np.sin(np.linspace(0.0, 3.0, steps))) + 0.01 * r.random(steps)
    return 0.5, 0.1, 0.99, 0.01, obs, dt
