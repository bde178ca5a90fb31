"""Helpers called from zoo functions in other modules (cross-module, differentiated on demand)."""
import math

import numpy as np


def smooth_abs(x):
    return math.sqrt(x * x + 1e-2)


def softplus(x):
    return math.log1p(math.exp(x))


def helper_calls_helper(x):
    # a helper that itself calls helpers of its own module
    return softplus(smooth_abs(x)) * x


def weighted_norm2(a, w):
    s = 0.0
    for i in range(a.shape[0]):
        s += w[i] * a[i] * a[i]
    return s


def np_logsumexp(v):
    m = np.max(v)
    return m + np.log(np.sum(np.exp(v - m)))
