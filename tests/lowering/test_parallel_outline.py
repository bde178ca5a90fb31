"""Parallel loops outlined into functions of their own (``lowering.outline``).

Numba compiled the whole gradient with ``parallel=True`` when it held a ``prange`` loop; its
array analysis then checked the sizes of the adjoint code's array expressions outside the loop
at run time and rejected valid ones: ``AssertionError: Sizes of A_bar, ... do not match`` for a
``prange`` sum after ``np.sum(A, axis=0)``, and for slice stencils and a softmax differentiated
with ``parallel=True`` (found by a probe; the python target and serial builds were right). Each
parallel loop is now a function of its own, the only one with ``parallel=True``.
"""
from __future__ import annotations

import numpy as np
import pytest
from numba import prange

import coarsen


def axis_sum_then_prange(A):
    s0 = np.sum(A, axis=0)
    t = 0.0
    for i in prange(s0.shape[0]):
        t += s0[i] * s0[i]
    return t


def stencil(u, k):
    for t in range(2):
        u[1:-1] += k * (u[:-2] - u[2:])
    return np.sum(u * u)


def softmax_loss(A, w):
    m = A.max(axis=1)
    Z = A - m[:, np.newaxis]
    e = np.exp(Z)
    p = e / e.sum(axis=1)[:, np.newaxis]
    return np.sum(p * w)


CASES = [
    (axis_sum_then_prange, lambda: (np.arange(12.0).reshape(3, 4) / 7.0,), {}),
    (stencil, lambda: (np.linspace(0.0, 1.0, 7), 0.3), {"parallel": True}),
]
# (a softmax with parallel=True crashed the same way; its case costs 10 s of compiling and
# adds nothing the stencil does not: softmax_loss is kept for a manual check)


@pytest.mark.parametrize("case", range(len(CASES)), ids=lambda i: CASES[i][0].__name__)
def test_parallel_gradients_match_the_python_target(case):
    fn, make, options = CASES[case]
    ref_v, ref_g = coarsen.differentiate(fn, target="python", **options).value_and_grad(*make())
    g = coarsen.differentiate(fn, target="cpu", **options)
    v, grads = g.value_and_grad(*make())
    assert v == pytest.approx(ref_v, rel=1e-13)
    ref_g = ref_g if isinstance(ref_g, tuple) else (ref_g,)
    grads = grads if isinstance(grads, tuple) else (grads,)
    for a, b in zip(grads, ref_g):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_only_the_outlined_loop_is_parallel():
    fn, make, _ = CASES[0]
    g = coarsen.differentiate(fn, target="cpu")
    g(*make())
    src = g.source
    heads = [line for line in src.splitlines() if line.startswith("@numba.njit")]
    assert sum("parallel=True" in h for h in heads) == 1
    par = src.split("parallel=True)\n")[1]
    assert par.startswith("def _parallel0_value_and_grad_axis_sum_then_prange")
    assert "outlined: Numba compiles only this function with parallel=True" in src
