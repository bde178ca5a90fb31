import math
import numpy as np


def r_ifexp_array(a, x):
    b = a * x if x > 1.0 else a + x
    return np.sum(b * b)


def r_ifexp_array_scal(a, x):
    b = a * x if x > 1.0 else a
    b[0] = x
    return np.sum(b * b)


def r_minmax_int_float(x, n):
    return max(n, x) * min(n, 2) + max(1, 2, 3) * x


def r_abs_neg_zero(x):
    y = x - x
    return abs(y) * x + abs(x)


def r_nested_cond_chain(x, y):
    z = x if x < y < 2.0 else (y if y < x < 3.0 else x * y)
    return z * z


def r_while_continue(x, n):
    s = 0.0
    k = 0
    while k < n:
        k += 1
        if k % 2 == 0:
            continue
        s += x ** k
    return s


def r_for_range_step(x):
    s = 0.0
    for i in range(10, 0, -3):
        s += x * i
        if i < 5:
            s *= x
    return s
