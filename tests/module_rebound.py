"""Module-level arrays that ``tests/frontend/test_module_rebound.py`` rebinds (its own module: no other
test reads these names)."""
import numpy as np

W = np.array([1.0, 2.0, 3.0])
V = np.array([0.5, -1.0, 2.0])


def weighted(a):
    return np.sum(a * a * W)

