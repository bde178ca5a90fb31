"""Real applications for coarsen, and the benchmark harness that compares it with its peers.

Every application is a module ``apps.<name>`` with the same interface:

``objective(...)``
    The function coarsen differentiates, written the way a user writes plain Python/NumPy:
    explicit loops, element reads and writes, ``math`` functions, or (the array-style kernels
    ``jacobi2d``, ``trisolve``, ``gemver``) slices, in-place slice updates, ``@`` and
    ``np.outer``.  It returns a float.
``make_inputs(size, seed=0) -> tuple``
    Arguments for ``objective`` at size ``"s"`` (tiny, for tests), ``"m"`` (the medium benchmark
    size) or ``"l"`` (larger).  ``SIZES`` documents the dimensions of each size.
``WRT``
    The names of the differentiated parameters; gradients are always in this order.
``handwritten_grad(*args) -> tuple``
    A hand-derived gradient compiled with ``numba.njit``, in ``WRT`` order.
``primal_numba``
    ``numba.njit(objective)``: the primal the ratios are measured against.
``jax_objective(*args)``
    An idiomatic JAX version (``lax.scan``/``fori_loop``/vectorized); imports JAX lazily.
``xp_objective(xp, *args)``
    A vectorized array-API version for the operator-overloading peers (``autograd.numpy``,
    the PyTorch shim in :mod:`apps._xp`), without in-place writes.

This package imports nothing heavy at import time: ``import apps`` does not load Numba, JAX or
coarsen, so the harness can configure them first.
"""
from __future__ import annotations

import importlib

#: The applications, in the order the harness reports them.
APP_NAMES = (
    "gmm",
    "ba",
    "logreg",
    "rnn",
    "mc_option",
    "lennard_jones",
    "lotka_volterra",
    "heat",
    "kalman",
    "series",
    "jacobi2d",
    "trisolve",
    "gemver",
)

SIZES = ("s", "m", "l")


def load(name: str):
    """Import and return the application module ``apps.<name>``."""
    if name not in APP_NAMES:
        raise KeyError(f"unknown app {name!r}; known: {', '.join(APP_NAMES)}")
    return importlib.import_module(f"apps.{name}")
