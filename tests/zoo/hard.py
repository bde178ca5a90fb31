"""Harder zoo cases: combinations that stress phis, tapes, closed forms and their guards."""
import math

import numpy as np


def _rng(seed):
    return np.random.default_rng(seed)


def power_series(x, n):
    # geometric series in x: a closed form must guard x == 1 exactly
    s = 0.0
    for k in range(n):
        s += x ** k
    return s


def weighted_power_sum(x, n):
    s = 0.0
    for k in range(n):
        s += x ** k / (k + 1.0)
    return s


def neg_base_int_pow(x, n):
    # x < 0 with an int exponent: a derivative through log(x) would be NaN
    return x ** n + x ** 3 - (x - 1.0) ** 2


def inner_break(A, thr):
    s = 0.0
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            if A[i, j] > thr:
                break
            s += A[i, j] * (j + 1)
        s = s * 0.9
    return s


def while_in_for(a):
    s = 0.0
    for i in range(a.shape[0]):
        t = a[i] * a[i] + 1.0
        while t > 0.2:
            t = t * 0.6
            s += t * a[i]
    return s


def while_continue(a):
    s = 0.0
    i = 0
    while i < a.shape[0]:
        i += 1
        if a[i - 1] < 0.0:
            continue
        s = s * 0.5 + math.exp(a[i - 1])
    return s


def return_in_nested_loop(A, thr):
    s = 0.0
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            s += A[i, j] * A[i, j]
            if s > thr:
                return s * A[i, j]
    return -s


def data_dependent_branch_in_loop(x, n):
    # the branch taken depends on the loop-carried float
    y = x
    for k in range(n):
        if y > 1.0:
            y = y * 0.5 + 0.1
        else:
            y = y * y + 0.7
    return y


def element_swap(a):
    b = a.copy()
    n = b.shape[0]
    for i in range(n // 2):
        b[i], b[n - 1 - i] = b[n - 1 - i] * 2.0, b[i]
    return np.sum(b * np.flip(a)) + b[-1] * a[-2]


def chained_compare(x, y):
    if 0.0 < x < 1.0:
        r = x * y
    else:
        r = x + y
    if -1.0 <= y <= 0.0:
        r = r * 3.0
    return r


def prefix_scan(a):
    b = np.empty(a.shape[0])
    b[0] = a[0]
    for i in range(1, a.shape[0]):
        b[i] = b[i - 1] * 0.9 + a[i] * a[i]
    return np.sum(np.sqrt(b))


def repeated_index_accumulate(a):
    acc = np.zeros(2)
    for i in range(a.shape[0]):
        acc[i % 2] += a[i] * acc[(i + 1) % 2] + a[i]
        acc[i % 2] *= 0.9
    return acc[0] * acc[1]


def row_ops_inplace(A):
    # Gaussian elimination row operations on a copy: A[i, k:] -= f * A[k, k:]
    B = A.copy()
    n = B.shape[0]
    for k in range(n - 1):
        for i in range(k + 1, n):
            f = B[i, k] / B[k, k]
            B[i, k:] -= f * B[k, k:]
    s = 0.0
    for i in range(n):
        s += math.log(abs(B[i, i]))
    return s


def negative_indices(a):
    s = 0.0
    n = a.shape[0]
    for i in range(n):
        s += a[-i - 1] * a[i] * (i + 1)
    return s + a[-1] * a[-2]


def cond_expr_in_loop(a, b):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i] if a[i] > b[i] else math.sin(a[i] - b[i])
    return s


def where_scalar_branches(a):
    return np.sum(np.where(a > 0.0, a * a, 0.5) + np.where(a < 0.3, 1.0, np.sqrt(np.abs(a))))


def reassigned_param_array(a, x):
    a = a * x
    a = np.tanh(a) + a
    return np.sum(a * a)


def unary_ops_and_casts(x, n):
    y = -x
    z = +y
    k = n // 2
    return z * float(n) + k * x - (-(x * x)) + (not (x > 2.0)) * x


def _clipped_step(t, lo):
    if t < lo:
        return lo * t
    t2 = t * t
    if t2 > 1.0:
        return 1.0 + math.log(t2)
    return t2


def helper_with_returns_in_loop(a):
    s = 0.0
    for i in range(a.shape[0]):
        s += _clipped_step(a[i], 0.1) * (i + 1)
    return s


CASES = [
    (power_series, lambda: (0.8, 6), None),
    (power_series, lambda: (1.0, 6), None),       # ratio exactly 1
    (power_series, lambda: (-1.3, 5), None),
    (weighted_power_sum, lambda: (0.7, 7), None),
    (neg_base_int_pow, lambda: (-1.4, 3), None),
    (neg_base_int_pow, lambda: (-0.6, 4), None),
    (inner_break, lambda: (np.array([[0.3, 0.5, 1.4, 0.2], [0.9, 1.6, 0.1, 0.4],
                                     [0.2, 0.1, 0.3, 0.6]]), 1.0), None),
    (while_in_for, lambda: (np.array([0.5, -1.3, 2.0, 0.1]),), None),
    (while_continue, lambda: (np.array([0.4, -0.3, 0.8, -1.1, 0.2]),), None),
    (return_in_nested_loop, lambda: (np.array([[0.5, 0.8], [1.1, 0.3], [0.9, 0.7]]), 2.0),
     None),
    (return_in_nested_loop, lambda: (np.array([[0.5, 0.8], [1.1, 0.3], [0.9, 0.7]]), 9.0),
     None),
    (data_dependent_branch_in_loop, lambda: (0.55, 8), None),
    (element_swap, lambda: (_rng(70).normal(size=5),), None),
    (chained_compare, lambda: (0.4, -0.5), None),
    (chained_compare, lambda: (1.5, 0.5), None),
    (prefix_scan, lambda: (_rng(71).normal(size=6),), None),
    (repeated_index_accumulate, lambda: (_rng(72).normal(size=7),), None),
    (row_ops_inplace, lambda: (_rng(73).normal(size=(4, 4)) + 4.0 * np.eye(4),), None),
    (negative_indices, lambda: (_rng(74).normal(size=5),), None),
    (cond_expr_in_loop, lambda: (np.array([0.5, -0.2, 0.9, 0.1]),
                                 np.array([0.1, 0.3, 1.4, -0.6])), None),
    (where_scalar_branches, lambda: (np.array([0.5, -0.2, 0.9, 0.1, -1.2]),), None),
    (reassigned_param_array, lambda: (_rng(75).normal(size=4), 0.8), None),
    (unary_ops_and_casts, lambda: (0.8, 5), None),
    (unary_ops_and_casts, lambda: (2.6, 5), None),
    (helper_with_returns_in_loop, lambda: (np.array([0.05, -0.4, 0.6, 1.3, 2.2]),), None),
]
