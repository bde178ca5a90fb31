"""The arrays suite: PolyBench/NPBench-style kernels written as whole-array NumPy code, and loop
programs written as explicit scalar loops (``python -m apps.bench --suite arrays``).

Our own code, written from the kernels' well-known math.  Every kernel is a module
``apps.arrays.<name with '_' for '-'>`` with:

``objective(...)``
    The NumPy code coarsen differentiates, written the way a NumPy user writes it (slices,
    ``@``, ``.T``, ``np.sum(axis=...)``, in-place slice updates, loops over time steps); the
    loop programs use explicit scalar loops.  Returns a float.
``jax_objective(...)``
    An idiomatic JAX version (``jnp``, ``.at[].set``, ``lax.fori_loop``/``scan``); imports JAX
    lazily.
``make_inputs(size, seed=0) -> tuple``
    Arguments at size ``"s"`` (tiny, for tests) or ``"m"`` (the benchmark size); ``SIZES``
    documents the dimensions.
``WRT``
    The names of the differentiated (float) parameters, in gradient order.
``NUMBA_HELPERS`` (optional)
    Names of module-level helpers ``objective`` calls: coarsen inlines them; the Numba primal
    (:func:`numba_primal`) compiles them with ``numba.njit`` too.

This package imports nothing heavy at import time (no Numba, JAX or coarsen).
"""
from __future__ import annotations

import importlib

#: (kernel, group) in report order; group "arrays": whole-array NumPy code, "loops": explicit
#: scalar loops
KERNELS = (
    ("gemm", "arrays"),
    ("gemver", "arrays"),
    ("gesummv", "arrays"),
    ("atax", "arrays"),
    ("bicg", "arrays"),
    ("mvt", "arrays"),
    ("syrk", "arrays"),
    ("covariance", "arrays"),
    ("correlation", "arrays"),
    ("softmax", "arrays"),
    ("jacobi-1d", "arrays"),
    ("jacobi-2d", "arrays"),
    ("heat-3d", "arrays"),
    ("fdtd-2d", "arrays"),
    ("floyd-warshall", "arrays"),
    ("durbin", "arrays"),
    ("trisolv", "arrays"),
    ("arc-distance", "arrays"),
    ("seidel-2d", "arrays"),
    ("heat-loop", "loops"),
    ("wave", "loops"),
    ("huber", "loops"),
    ("svm", "loops"),
    ("trapezoid", "loops"),
    ("sir", "loops"),
)
KERNEL_NAMES = tuple(k for k, _ in KERNELS)
GROUPS = ("arrays", "loops")
GROUP_OF = dict(KERNELS)
SIZES = ("s", "m")


def canonical(name: str) -> str:
    """The kernel name for ``name`` (``jacobi_1d`` and ``jacobi-1d`` are the same kernel)."""
    n = name.strip().replace("_", "-")
    if n not in GROUP_OF:
        raise KeyError(f"unknown kernel {name!r}; known: {', '.join(KERNEL_NAMES)}")
    return n


def module_name(name: str) -> str:
    return "apps.arrays." + canonical(name).replace("-", "_")


def load(name: str):
    """Import and return the kernel's module."""
    return importlib.import_module(module_name(name))


def numba_primal(mod):
    """``numba.njit(objective)``; a kernel that calls helpers (``NUMBA_HELPERS``) gets them
    compiled with ``numba.njit`` too, in a copy of the objective's globals.  A kernel whose
    objective Numba cannot compile as written (softmax's ``np.max(X, axis=1)``: Numba has no
    ``axis=``) gives the same computation for Numba as ``numba_objective``, which is used
    instead."""
    import types

    import numba

    helpers = getattr(mod, "NUMBA_HELPERS", ())
    fn = getattr(mod, "numba_objective", mod.objective)
    if helpers:
        glb = dict(fn.__globals__)
        for h in helpers:
            glb[h] = numba.njit(glb[h])
        fn = types.FunctionType(fn.__code__, glb, fn.__name__, fn.__defaults__)
    return numba.njit(fn)
