"""What users' code keeps reaching for beyond the core list of DESIGN.md's input language.

DESIGN.md ends the language with "and whatever else users' code keeps reaching for"; these
are such constructs: module-level constants (a float and a NumPy array), keyword arguments to
a helper, ``.ndim``/``.size``, a helper that fills an array passed to it, ``np.linalg.norm``
and the ``.dot`` method.  They are tested exactly like the rest of the zoo (a refusal is a
failing test here, to be decided on by the core's owner; a wrong gradient is never
acceptable).
"""
import math

import numpy as np


def _rng(seed):
    return np.random.default_rng(seed)


SCALE = 2.5
WEIGHTS = np.array([0.5, -1.0, 2.0, 0.25])


def global_constants(a, x):
    # module-level float and array constants, math.pi
    return SCALE * np.sum(WEIGHTS * a) * x + math.pi * x * x


def _scaled(t, scale=1.0, shift=0.0):
    return t * scale + shift


def keyword_helper_call(x, y):
    return _scaled(x, scale=y) * _scaled(y, shift=0.5) + _scaled(x * y)


def size_ndim_norm(a, B):
    nrm = np.sqrt(np.sum(a * a))
    s = nrm * a.size + B.ndim * np.sum(B ** 2)
    return s + np.sum(np.abs(B) ** 1.5)


def _fill_squares(out, v):
    for i in range(v.shape[0]):
        out[i] = v[i] * v[i]


def mutating_helper(a):
    out = np.zeros(a.shape[0])
    _fill_squares(out, a)
    return np.sum(out * a)


def linalg_norm(a, B):
    return np.linalg.norm(a) * np.sum(B) + np.linalg.norm(B @ a)


def dot_method(a, B):
    return a.dot(a) + np.sum(B.dot(a) * 2.0)


CASES = [
    (global_constants, lambda: (_rng(76).normal(size=4), 0.7), None),
    (keyword_helper_call, lambda: (0.6, 1.4), None),
    (size_ndim_norm, lambda: (_rng(77).normal(size=4), _rng(78).normal(size=(2, 3))), None),
    (mutating_helper, lambda: (_rng(79).normal(size=4),), None),
    (linalg_norm, lambda: (_rng(80).normal(size=3), _rng(81).normal(size=(2, 3))), None),
    (dot_method, lambda: (_rng(82).normal(size=3), _rng(83).normal(size=(2, 3))), None),
]
