"""Loop zoo: ranges of every shape, nesting, break/continue, early return, overwrites,
in-place mutation of inputs, data-dependent ``while`` loops, int index arithmetic."""
import math

import numba
import numpy as np

import tests.zoo.helpers_mod as hm
from tests.zoo.helpers_mod import np_logsumexp, weighted_norm2


def _rng(seed):
    return np.random.default_rng(seed)


def range_start_stop_step(a, n):
    s = 0.0
    for i in range(1, n, 2):
        s += a[i] * a[i - 1]
    return s


def reversed_range(a):
    n = a.shape[0]
    s = 0.0
    for i in range(n - 1, -1, -1):
        s = s * 0.5 + a[i] * (i + 1)
    return s


def range_step3(a, lo, hi):
    s = 1.0
    for i in range(lo, hi, 3):
        s = s * a[i] + math.sin(a[i])
    return s


def negative_step_range(a):
    n = a.shape[0]
    s = 0.0
    for i in range(n - 2, 0, -2):
        s = math.cos(s) + a[i] * a[i + 1]
    return s


def nested3(A, w):
    s = 0.0
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            t = 0.0
            for k in range(A.shape[2]):
                t += A[i, j, k] * w[k]
            s += math.tanh(t) * (i + 1)
    return s


def triangular(A, x):
    n = x.shape[0]
    s = 0.0
    for i in range(n):
        for j in range(i + 1):
            s += A[i, j] * x[i] * x[j]
    return s


def break_continue(a, limit):
    s = 0.0
    for i in range(a.shape[0]):
        if a[i] < 0.0:
            continue
        s += a[i] * a[i]
        if s > limit:
            break
    return s * limit


def early_return_loop(a, thr):
    s = 0.0
    for i in range(len(a)):
        s += a[i] * (i + 1)
        if s > thr:
            return s * thr
    return s - thr


def overwrite_elems(a):
    b = a.copy()
    n = b.shape[0]
    for sweep in range(2):
        for i in range(n):
            b[i] = b[i] * b[i]
            b[(i + 1) % n] = b[(i + 1) % n] + 0.5 * b[i]
    return np.sum(b)


def mutate_input(a, w):
    # mutates the caller's array: the gradient is w.r.t. the values of ``a`` at entry
    for i in range(a.shape[0]):
        a[i] = a[i] * a[i] + w[i]
    a *= 0.5
    a[1:] += a[:-1]
    return np.sum(a * w)


def elem_augassign(a, b):
    c = np.zeros_like(a)
    for i in range(a.shape[0]):
        c[i] += a[i] * b[i]
        c[i] -= 0.5 * b[i]
        c[i] *= a[i]
        c[i] /= 1.0 + b[i] * b[i]
    return np.sum(c)


def elem_augassign_2d(A, x):
    m, n = A.shape
    C = np.ones((m, n))
    for i in range(m):
        for j in range(n):
            C[i, j] += A[i, j] * x[j]
            C[i, j] *= A[i, j] - x[j]
            C[i, j] -= x[j] * x[j]
            C[i, j] /= 2.0 + A[i, j] * A[i, j]
    return np.sum(C * C)


def while_data_dependent(a):
    s = 0.0
    i = 0
    while s < 3.0 and i < 100:
        s += a[i % a.shape[0]] ** 2
        i += 1
    return s * a[0]


def int_div_mod_index(a, k):
    n = a.shape[0]
    s = 0.0
    for i in range(2 * n):
        s += a[(i * k) % n] * a[i // 2]
    return s


def local_array_recurrence(x, n):
    v = np.empty(n)
    v[0] = x
    for i in range(1, n):
        v[i] = math.sin(v[i - 1]) + x * i
    return np.sum(v * v)


def enumerate_zip(a, b):
    s = 0.0
    for i, v in enumerate(a):
        s += v * b[i] * (i + 1)
    for p, q in zip(a, b):
        s += math.sin(p) * q
    return s


@numba.njit
def njit_array(a, b):
    s = 0.0
    for i in range(a.shape[0]):
        s += math.exp(a[i] * b[i]) - a[i]
    return s


@numba.njit
def _njit_helper(t):
    return t * math.tanh(t)


def calls_njit_helper(x, a):
    s = 0.0
    for i in range(a.shape[0]):
        s += _njit_helper(a[i] * x)
    return s


def helpers_arrays(a, w):
    return weighted_norm2(a, w) + np_logsumexp(a * w) + hm.softplus(a[0])


def loop_carried_two(x, y, n):
    # two loop-carried scalars updated from each other (a rotation-like recurrence)
    u = x
    v = y
    for k in range(n):
        u, v = 0.8 * u - 0.3 * v + 0.05 * k, 0.3 * u + 0.8 * v
    return u * u + v


def gather_int_array(a, idx):
    # an int array input: indexes, never differentiated
    s = 0.0
    for i in range(idx.shape[0]):
        s += a[idx[i]] * (i + 1.0) + a[idx[i]] * a[(idx[i] + 1) % a.shape[0]]
    return s


CASES = [
    (range_start_stop_step, lambda: (_rng(1).normal(size=7), 7), None),
    (reversed_range, lambda: (_rng(2).normal(size=6),), None),
    (range_step3, lambda: (_rng(3).uniform(0.5, 1.5, size=8), 1, 8), "a"),
    (negative_step_range, lambda: (_rng(4).normal(size=8),), 0),
    (nested3, lambda: (_rng(5).normal(size=(2, 3, 4)), _rng(6).normal(size=4)), None),
    (triangular, lambda: (_rng(7).normal(size=(5, 5)), _rng(8).normal(size=5)), ("x", "A")),
    (break_continue, lambda: (np.array([0.5, -0.3, 0.9, 1.1, -0.2, 0.7, 1.3]), 1.5), None),
    (break_continue, lambda: (np.array([0.5, -0.3, 0.2, 0.1]), 3.0), None),  # no break
    (early_return_loop, lambda: (np.array([0.3, 0.5, -0.2, 0.9, 0.4]), 1.0), None),
    (early_return_loop, lambda: (np.array([0.3, 0.5, -0.2, 0.9, 0.4]), 9.0), None),
    (overwrite_elems, lambda: (_rng(9).uniform(-0.8, 0.8, size=5),), None),
    (mutate_input, lambda: (_rng(10).normal(size=6), _rng(11).normal(size=6)), None),
    (elem_augassign, lambda: (_rng(12).normal(size=5), _rng(13).normal(size=5)), None),
    (elem_augassign_2d, lambda: (_rng(14).normal(size=(3, 4)), _rng(15).normal(size=4)), None),
    (while_data_dependent, lambda: (np.array([0.7, -0.4, 0.9, 0.3]),), None),
    (int_div_mod_index, lambda: (_rng(16).normal(size=5), 3), None),
    (local_array_recurrence, lambda: (0.7, 6), None),
    (enumerate_zip, lambda: (_rng(17).normal(size=4), _rng(18).normal(size=4)), None),
    (njit_array, lambda: (_rng(19).normal(size=5), _rng(20).normal(size=5)), None),
    (calls_njit_helper, lambda: (0.9, _rng(21).normal(size=4)), None),
    (helpers_arrays, lambda: (_rng(22).normal(size=5), _rng(23).uniform(0.5, 1.0, size=5)),
     None),
    (loop_carried_two, lambda: (0.6, -0.4, 12), [1, 0]),
    (gather_int_array, lambda: (_rng(24).normal(size=5), np.array([3, 0, 3, 4, 1])), None),
]
