"""Small programs of our own that coarsen differentiates in the reproduction.

They live in a real file because coarsen reads source with ``inspect``.  Each is plain
Python/NumPy with explicit loops, the way the paper's benchmarks are written.

* ``lin_sum``, ``quad_sum``: loops with exact closed forms (``s += a*i``, ``s += a*i*i + b*i``),
  claim (d);
* ``chain_loop`` (generated in :mod:`paper_repro.chains` for any chain length L) and the
  fixed-length kernels below: scalar-heavy loop bodies, the case coarsening targets, claim (a);
* ``softplus_loss``: a two-branch stable softplus inside a loop (a gamma-phi segment);
* ``poly_horner``: Horner evaluation of a degree-8 polynomial at many points (a chain of
  reused values, like the swell example).
"""
from __future__ import annotations

import math

import numpy as np


def lin_sum(a, n):
    """sum_{i<n} a*i = a n (n-1) / 2."""
    s = 0.0
    for i in range(n):
        s += a * i
    return s


def quad_sum(a, b, n):
    """sum_{i<n} (a i^2 + b i)."""
    s = 0.0
    for i in range(n):
        s += a * i * i + b * i
    return s


def softplus_loss(w, b, xs, ys):
    """Logistic loss of a 1-feature model with the two-branch stable softplus."""
    s = 0.0
    for k in range(xs.shape[0]):
        z = -ys[k] * (w * xs[k] + b)
        if z > 0.0:
            t = z + math.log(1.0 + math.exp(-z))
        else:
            t = math.log(1.0 + math.exp(z))
        s += t
    return s / xs.shape[0]


def poly_horner(c0, c1, c2, c3, c4, c5, c6, c7, c8, xs):
    """sum_k p(x_k)^2 for a degree-8 polynomial p in Horner form."""
    s = 0.0
    for k in range(xs.shape[0]):
        x = xs[k]
        p = c8
        p = p * x + c7
        p = p * x + c6
        p = p * x + c5
        p = p * x + c4
        p = p * x + c3
        p = p * x + c2
        p = p * x + c1
        p = p * x + c0
        s += p * p
    return s


def sin_cos_chain8(xs):
    """The swell chain x = sin(x)*x + cos(x), 8 times, at every element."""
    s = 0.0
    for k in range(xs.shape[0]):
        x = xs[k]
        x = math.sin(x) * x + math.cos(x)
        x = math.sin(x) * x + math.cos(x)
        x = math.sin(x) * x + math.cos(x)
        x = math.sin(x) * x + math.cos(x)
        x = math.sin(x) * x + math.cos(x)
        x = math.sin(x) * x + math.cos(x)
        x = math.sin(x) * x + math.cos(x)
        x = math.sin(x) * x + math.cos(x)
        s += x
    return s


def pendulum(theta0, omega0, g, h, n):
    """Symplectic Euler for a pendulum, loss = final angle^2 + sum of energies."""
    th = theta0
    om = omega0
    e = 0.0
    for i in range(n):
        om = om - h * g * math.sin(th)
        th = th + h * om
        e += 0.5 * om * om + g * (1.0 - math.cos(th))
    return th * th + e / n


# ------------------------------------------------------------------ references (NumPy, exact)

def softplus_loss_ref_inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=n)
    ys = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return 0.7, -0.2, xs, ys


def kernels():
    """name -> (function, {size: args}, differentiated positions); sizes "s" (checked against
    central differences) and "m" (timed)."""
    rng = np.random.default_rng(1)
    xs_m = rng.uniform(-1.0, 1.0, 20000)
    xs_s = xs_m[:50].copy()
    cs = tuple(float(v) for v in rng.normal(size=9))
    return {
        "sin_cos_chain8": (sin_cos_chain8, {"s": (xs_s,), "m": (xs_m,)}, (0,)),
        "poly_horner": (poly_horner, {"s": cs + (xs_s,), "m": cs + (xs_m,)}, tuple(range(9))),
        "softplus_loss": (softplus_loss, {"s": softplus_loss_ref_inputs(50),
                                          "m": softplus_loss_ref_inputs(20000)}, (0, 1)),
        "pendulum": (pendulum, {"s": (0.3, 0.1, 9.81, 0.01, 50),
                                "m": (0.3, 0.1, 9.81, 0.001, 20000)}, (0, 1, 2, 3)),
        "quad_sum": (quad_sum, {"s": (0.5, 1.5, 50), "m": (0.5, 1.5, 20000)}, (0, 1)),
    }
