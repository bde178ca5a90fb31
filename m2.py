import math
import numpy as np


def boom(a, r, n):
    s = 0.0
    for i in range(n):
        s = s + r * a[i] * a[i]
    return s


def divz(x, k, m):
    s = x
    for i in range(m):
        s = s * x + (i // k) * 0.5
    return s


def emptymax(a, r):
    return r * np.max(a) + np.sum(a * a)


def grow(a, r, n):
    # loop trip count from n, a tape of n trips
    x = a[0]
    for i in range(n):
        x = r * x * (1.0 - x)
        if x > 0.5:
            x = x - 0.01 * a[i % len(a)]
    return x


def chk(a, r):
    if r > 10.0:
        raise ValueError("too big")
    return np.sum(a * r)


def vecloop(a, r, n):
    b = a.copy()
    for t in range(n):
        for i in range(1, len(b) - 1):
            b[i] = b[i] + r * (b[i - 1] - 2.0 * b[i] + b[i + 1])
    return np.sum(b * b)
