"""Module-level constants read as ``module_consts.NAME`` by ``tests/frontend/test_module_attributes.py``."""
import numpy as np

COEF = np.array([1.0, -2.0, 0.5])
WEIGHTS = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
SCALE = 2.5
DOUBLE = True
