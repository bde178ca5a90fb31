"""Module-level arrays of other dtypes, read by ``tests/transforms/test_argument_conversion.py``."""
import numpy as np

BIG = np.array([1.0, 2.0, 3.0]).astype(">f8")          # e.g. read from a big-endian file
SINGLE = np.array([1.1, 2.3, 3.7], dtype=np.float32)


def weighted(w):
    s = 0.0
    for j in range(w.shape[0]):
        s += BIG[j] * w[j] * w[j] + SINGLE[j] * SINGLE[j] * w[j] * w[j] * w[j]
    return s
