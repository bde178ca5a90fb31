"""Realistic programs, written the way numerical Python is written in the wild.

``CASES`` has the same format as the zoo: ``(fn, args_factory, wrt)``.
"""
import math

import numpy as np


def _rng(seed):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------- logistic regression

def logreg_loss(w, b, X, y, lam):
    """Mean logistic loss with explicit loops over samples and features; int labels."""
    n, d = X.shape
    loss = 0.0
    for i in range(n):
        z = b
        for j in range(d):
            z += X[i, j] * w[j]
        if y[i] == 1:
            loss += math.log1p(math.exp(-z))
        else:
            loss += math.log1p(math.exp(z))
    reg = 0.0
    for j in range(d):
        reg += w[j] * w[j]
    return loss / n + 0.5 * lam * reg


def _logreg_args():
    r = _rng(101)
    X = r.normal(size=(8, 3))
    y = (r.uniform(size=8) > 0.5).astype(np.int64)
    return r.normal(size=3), 0.2, X, y, 0.1


# ---------------------------------------------------------------- RK4, Lotka-Volterra

def rk4_lotka_volterra(a, b, c, d, x0, y0, dt, n):
    """Scalar-form RK4 of dx = a x - b x y, dy = d x y - c y; terminal loss."""
    x = x0
    y = y0
    for k in range(n):
        k1x = a * x - b * x * y
        k1y = d * x * y - c * y
        x2 = x + 0.5 * dt * k1x
        y2 = y + 0.5 * dt * k1y
        k2x = a * x2 - b * x2 * y2
        k2y = d * x2 * y2 - c * y2
        x3 = x + 0.5 * dt * k2x
        y3 = y + 0.5 * dt * k2y
        k3x = a * x3 - b * x3 * y3
        k3y = d * x3 * y3 - c * y3
        x4 = x + dt * k3x
        y4 = y + dt * k3y
        k4x = a * x4 - b * x4 * y4
        k4y = d * x4 * y4 - c * y4
        x = x + dt / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x)
        y = y + dt / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y)
    return (x - 1.0) ** 2 + (y - 0.5) ** 2


def _lv_rhs(u, p):
    f = np.empty(2)
    f[0] = p[0] * u[0] - p[1] * u[0] * u[1]
    f[1] = p[3] * u[0] * u[1] - p[2] * u[1]
    return f


def rk4_lotka_volterra_array(p, u0, dt, n):
    """Array-form RK4: state vector u, parameter vector p, right-hand side in a helper."""
    u = u0.copy()
    for k in range(n):
        k1 = _lv_rhs(u, p)
        k2 = _lv_rhs(u + 0.5 * dt * k1, p)
        k3 = _lv_rhs(u + 0.5 * dt * k2, p)
        k4 = _lv_rhs(u + dt * k3, p)
        u = u + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    return (u[0] - 1.0) ** 2 + (u[1] - 0.5) ** 2


# ---------------------------------------------------------------- heat equation

def heat_loops(u0, kappa, dt, dx, nsteps, target):
    """Explicit heat equation with scalar loops, fixed ends, terminal least squares."""
    n = u0.shape[0]
    u = u0.copy()
    r = kappa * dt / (dx * dx)
    un = np.empty(n)
    for t in range(nsteps):
        for i in range(1, n - 1):
            un[i] = u[i] + r * (u[i + 1] - 2.0 * u[i] + u[i - 1])
        un[0] = u[0]
        un[n - 1] = u[n - 1]
        for i in range(n):
            u[i] = un[i]
    loss = 0.0
    for i in range(n):
        loss += (u[i] - target[i]) ** 2
    return loss


def heat_slices(u0, kappa, dt, dx, nsteps, target):
    """The same explicit heat equation with slices."""
    u = u0.copy()
    r = kappa * dt / (dx * dx)
    for t in range(nsteps):
        u[1:-1] = u[1:-1] + r * (u[2:] - 2.0 * u[1:-1] + u[:-2])
    return np.sum((u - target) ** 2)


def _heat_args():
    r = _rng(102)
    return r.normal(size=8), 0.8, 0.01, 0.2, 20, r.normal(size=8) * 0.3


# ---------------------------------------------------------------- Gauss-Seidel

def gauss_seidel(U0, f, h, sweeps):
    """Gauss-Seidel sweeps for -Laplace(U) = f on a copy updated in place."""
    U = U0.copy()
    m, n = U.shape
    for s in range(sweeps):
        for i in range(1, m - 1):
            for j in range(1, n - 1):
                U[i, j] = 0.25 * (U[i - 1, j] + U[i + 1, j] + U[i, j - 1] + U[i, j + 1]
                                  + h * h * f[i, j])
    return np.sum(U * U)


def gauss_seidel_inplace(U, f, h, sweeps):
    """The same, updating the caller's array: the gradient is w.r.t. U's entry values."""
    m, n = U.shape
    for s in range(sweeps):
        for i in range(1, m - 1):
            for j in range(1, n - 1):
                U[i, j] = 0.25 * (U[i - 1, j] + U[i + 1, j] + U[i, j - 1] + U[i, j + 1]
                                  + h * h * f[i, j])
    return np.sum(U * U * f)


def _gs_args():
    r = _rng(103)
    return r.normal(size=(5, 6)), r.normal(size=(5, 6)), 0.3, 3


# ---------------------------------------------------------------- LU

def lu_sum(A):
    """Doolittle LU without pivoting, with row/column slices and @, then a sum."""
    n = A.shape[0]
    L = np.eye(n)
    U = np.zeros((n, n))
    for i in range(n):
        U[i, i:] = A[i, i:] - L[i, :i] @ U[:i, i:]
        L[i + 1:, i] = (A[i + 1:, i] - L[i + 1:, :i] @ U[:i, i]) / U[i, i]
    return np.sum(U) + np.sum(L * L)


def _lu_args():
    r = _rng(104)
    A = r.normal(size=(5, 5))
    A += np.diag(np.sum(np.abs(A), axis=1) + 1.0)
    return (A,)


# ---------------------------------------------------------------- Lennard-Jones

def lennard_jones(pos, eps, sigma):
    """Lennard-Jones energy over all particle pairs."""
    n = pos.shape[0]
    e = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            r2 = 0.0
            for k in range(3):
                d = pos[i, k] - pos[j, k]
                r2 += d * d
            s6 = (sigma * sigma / r2) ** 3
            e += 4.0 * eps * (s6 * s6 - s6)
    return e


def _lj_args():
    base = np.array([[0.0, 0.0, 0.0], [1.1, 0.0, 0.0], [0.0, 1.1, 0.0], [0.0, 0.0, 1.1],
                     [1.1, 1.1, 0.1]])
    return base + 0.05 * _rng(105).normal(size=base.shape), 1.0, 1.0


# ---------------------------------------------------------------- Newton

def newton_cbrt(a, x0):
    """Newton's iteration for x**3 = a in a while loop with a data-dependent trip count."""
    x = x0
    it = 0
    while abs(x * x * x - a) > 1e-12 and it < 50:
        x = x - (x * x * x - a) / (3.0 * x * x)
        it += 1
    return x * x + a


def newton_sqrt(a):
    """Heron's iteration for sqrt(a); the result is sqrt(a) to rounding."""
    x = a if a > 1.0 else 1.0
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


# ---------------------------------------------------------------- softmax cross-entropy

def softmax_xent(logits, labels):
    """Softmax cross-entropy, stabilized, with axis=-1 and keepdims=True."""
    m = np.max(logits, axis=-1, keepdims=True)
    z = logits - m
    lse = np.log(np.sum(np.exp(z), axis=-1, keepdims=True))
    logp = z - lse
    return -np.mean(np.sum(labels * logp, axis=-1))


def softmax_regression(W, b, X, Y):
    """A linear classifier's softmax cross-entropy: logits = X @ W + b."""
    logits = X @ W + b
    m = np.max(logits, axis=-1, keepdims=True)
    z = logits - m
    lse = np.log(np.sum(np.exp(z), axis=-1, keepdims=True))
    return -np.sum(Y * (z - lse)) / X.shape[0]


def _onehot(r, n, k):
    Y = np.zeros((n, k))
    Y[np.arange(n), r.integers(0, k, size=n)] = 1.0
    return Y


CASES = [
    (logreg_loss, _logreg_args, ("w", "b")),
    (logreg_loss, _logreg_args, None),
    (rk4_lotka_volterra, lambda: (1.1, 0.4, 0.9, 0.3, 1.2, 0.8, 0.05, 30),
     ("a", "b", "c", "d")),
    (rk4_lotka_volterra, lambda: (1.1, 0.4, 0.9, 0.3, 1.2, 0.8, 0.05, 30), None),
    (rk4_lotka_volterra_array, lambda: (np.array([1.1, 0.4, 0.9, 0.3]), np.array([1.2, 0.8]),
                                        0.05, 30), None),
    (heat_loops, _heat_args, ("u0", "kappa")),
    (heat_loops, _heat_args, None),
    (heat_slices, _heat_args, ("u0", "kappa")),
    (heat_slices, _heat_args, None),
    (gauss_seidel, _gs_args, None),
    (gauss_seidel_inplace, _gs_args, None),
    (lu_sum, _lu_args, None),
    (lennard_jones, _lj_args, None),
    (newton_cbrt, lambda: (2.7, 1.0), "a"),
    (newton_cbrt, lambda: (2.7, 1.0), None),
    (newton_sqrt, lambda: (7.3,), None),
    (newton_sqrt, lambda: (0.41,), None),
    (softmax_xent, lambda: (_rng(106).normal(size=(4, 5)), _onehot(_rng(107), 4, 5)),
     "logits"),
    (softmax_regression, lambda: (_rng(108).normal(size=(3, 4)), _rng(109).normal(size=4),
                                  _rng(110).normal(size=(6, 3)), _onehot(_rng(111), 6, 4)),
     ("W", "b")),
]
