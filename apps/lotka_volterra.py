"""Parameter sensitivity of the Lotka-Volterra equations integrated with classic RK4.

``x' = a x - b x y``, ``y' = c x y - g y`` with ``theta = (a, b, c, g)`` and initial state
``u0 = (x0, y0)``; the loss is the squared distance of the RK4 trajectory to observations ``obs``
(steps, 2) after every step.  The gradient is the discrete adjoint of the scheme.
"""
from __future__ import annotations

import numba
import numpy as np

from apps._common import check_size, rng

WRT = ("theta", "u0")

#: size -> number of RK4 steps (dt = 0.01)
SIZES = {"s": 10, "m": 1000, "l": 20000}


def objective(theta, u0, obs, dt):
    a = theta[0]
    b = theta[1]
    c = theta[2]
    g = theta[3]
    x = u0[0]
    y = u0[1]
    loss = 0.0
    for k in range(obs.shape[0]):
        k1x = a * x - b * x * y
        k1y = c * x * y - g * y
        x2 = x + 0.5 * dt * k1x
        y2 = y + 0.5 * dt * k1y
        k2x = a * x2 - b * x2 * y2
        k2y = c * x2 * y2 - g * y2
        x3 = x + 0.5 * dt * k2x
        y3 = y + 0.5 * dt * k2y
        k3x = a * x3 - b * x3 * y3
        k3y = c * x3 * y3 - g * y3
        x4 = x + dt * k3x
        y4 = y + dt * k3y
        k4x = a * x4 - b * x4 * y4
        k4y = c * x4 * y4 - g * y4
        x = x + dt / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x)
        y = y + dt / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y)
        ex = x - obs[k, 0]
        ey = y - obs[k, 1]
        loss += ex * ex + ey * ey
    return loss


primal_numba = numba.njit(objective)


@numba.njit(inline="always")
def _vjp(x, y, a, b, c, g, v0, v1):
    """v^T df/d(x, y) and v^T df/d(a, b, c, g) for f = (a x - b x y, c x y - g y)."""
    return ((a - b * y) * v0 + c * y * v1, -b * x * v0 + (c * x - g) * v1,
            x * v0, -x * y * v0, x * y * v1, -y * v1)


@numba.njit
def handwritten_grad(theta, u0, obs, dt):
    """The discrete adjoint of RK4 by hand: a forward sweep storing the states, then a reverse
    sweep that recomputes each step's stages and pulls the adjoint back through them."""
    a, b, c, g = theta[0], theta[1], theta[2], theta[3]
    n = obs.shape[0]
    h = dt
    xs = np.empty(n + 1)
    ys = np.empty(n + 1)
    xs[0] = u0[0]
    ys[0] = u0[1]
    for k in range(n):
        x, y = xs[k], ys[k]
        k1x, k1y = a * x - b * x * y, c * x * y - g * y
        x2, y2 = x + 0.5 * h * k1x, y + 0.5 * h * k1y
        k2x, k2y = a * x2 - b * x2 * y2, c * x2 * y2 - g * y2
        x3, y3 = x + 0.5 * h * k2x, y + 0.5 * h * k2y
        k3x, k3y = a * x3 - b * x3 * y3, c * x3 * y3 - g * y3
        x4, y4 = x + h * k3x, y + h * k3y
        k4x, k4y = a * x4 - b * x4 * y4, c * x4 * y4 - g * y4
        xs[k + 1] = x + h / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x)
        ys[k + 1] = y + h / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y)
    ga = gb = gc = gg = 0.0
    lx = ly = 0.0
    for k in range(n - 1, -1, -1):
        lx += 2.0 * (xs[k + 1] - obs[k, 0])
        ly += 2.0 * (ys[k + 1] - obs[k, 1])
        x, y = xs[k], ys[k]
        k1x, k1y = a * x - b * x * y, c * x * y - g * y
        x2, y2 = x + 0.5 * h * k1x, y + 0.5 * h * k1y
        k2x, k2y = a * x2 - b * x2 * y2, c * x2 * y2 - g * y2
        x3, y3 = x + 0.5 * h * k2x, y + 0.5 * h * k2y
        k3x, k3y = a * x3 - b * x3 * y3, c * x3 * y3 - g * y3
        x4, y4 = x + h * k3x, y + h * k3y
        # new = s + h/6 (k1 + 2 k2 + 2 k3 + k4)
        k3bx, k3by = h / 3.0 * lx, h / 3.0 * ly
        k2bx, k2by = h / 3.0 * lx, h / 3.0 * ly
        k1bx, k1by = h / 6.0 * lx, h / 6.0 * ly
        sx, sy, da, db, dc, dg = _vjp(x4, y4, a, b, c, g, h / 6.0 * lx, h / 6.0 * ly)
        ga += da
        gb += db
        gc += dc
        gg += dg
        lx += sx
        ly += sy
        k3bx += h * sx
        k3by += h * sy
        sx, sy, da, db, dc, dg = _vjp(x3, y3, a, b, c, g, k3bx, k3by)
        ga += da
        gb += db
        gc += dc
        gg += dg
        lx += sx
        ly += sy
        k2bx += 0.5 * h * sx
        k2by += 0.5 * h * sy
        sx, sy, da, db, dc, dg = _vjp(x2, y2, a, b, c, g, k2bx, k2by)
        ga += da
        gb += db
        gc += dc
        gg += dg
        lx += sx
        ly += sy
        k1bx += 0.5 * h * sx
        k1by += 0.5 * h * sy
        sx, sy, da, db, dc, dg = _vjp(x, y, a, b, c, g, k1bx, k1by)
        ga += da
        gb += db
        gc += dc
        gg += dg
        lx += sx
        ly += sy
    return np.array([ga, gb, gc, gg]), np.array([lx, ly])


def _step(a, b, c, g, x, y, dt):
    k1x, k1y = a * x - b * x * y, c * x * y - g * y
    x2, y2 = x + 0.5 * dt * k1x, y + 0.5 * dt * k1y
    k2x, k2y = a * x2 - b * x2 * y2, c * x2 * y2 - g * y2
    x3, y3 = x + 0.5 * dt * k2x, y + 0.5 * dt * k2y
    k3x, k3y = a * x3 - b * x3 * y3, c * x3 * y3 - g * y3
    x4, y4 = x + dt * k3x, y + dt * k3y
    k4x, k4y = a * x4 - b * x4 * y4, c * x4 * y4 - g * y4
    return (x + dt / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x),
            y + dt / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y))


def xp_objective(xp, theta, u0, obs, dt):
    a, b, c, g = theta[0], theta[1], theta[2], theta[3]
    x, y = u0[0], u0[1]
    loss = 0.0
    for k in range(obs.shape[0]):
        x, y = _step(a, b, c, g, x, y, dt)
        loss = loss + (x - obs[k, 0]) ** 2 + (y - obs[k, 1]) ** 2
    return loss


def jax_objective(theta, u0, obs, dt):
    """``lax.scan`` over the RK4 steps."""
    import jax.numpy as jnp
    from jax import lax

    def f(u):
        x, y = u[0], u[1]
        return jnp.stack([theta[0] * x - theta[1] * x * y, theta[2] * x * y - theta[3] * y])

    def step(u, o):
        k1 = f(u)
        k2 = f(u + 0.5 * dt * k1)
        k3 = f(u + 0.5 * dt * k2)
        k4 = f(u + dt * k3)
        u = u + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        return u, jnp.sum((u - o) ** 2)

    _, sq = lax.scan(step, u0, obs)
    return jnp.sum(sq)


def make_inputs(size="s", seed=0):
    """Observations from the true parameters (1.1, 0.4, 0.1, 0.4), u0 = (10, 5), plus noise;
    the differentiated parameters are perturbed from the truth."""
    n = check_size(size, SIZES)
    dt = 0.01
    r = rng(seed)
    x, y = 10.0, 5.0
    obs = np.zeros((n, 2))
    for k in range(n):
        x, y = _step(1.1, 0.4, 0.1, 0.4, x, y, dt)
        obs[k] = (x, y)
    obs += 0.1 * r.standard_normal((n, 2))
    theta = np.array([1.1, 0.4, 0.1, 0.4]) * (1.0 + 0.05 * r.standard_normal(4))
    u0 = np.array([10.0, 5.0]) + 0.1 * r.standard_normal(2)
    return theta, u0, obs, dt
