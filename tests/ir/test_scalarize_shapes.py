"""Scalarized nests read arrays of one shape without broadcast strides (coarsen.ir.scalarize:
``shape_roots``, ``same_slice_length``), and keep NumPy's broadcasting everywhere else."""
import itertools

import numpy as np
import pytest

from coarsen.ir import scalar_index as S
from tests.oracle import check_against_oracle

BOUNDS = [None, -4, -3, -2, -1, 0, 1, 2, 3, 4]


def test_same_slice_length_is_exact_for_every_length():
    slices = [slice(a, b) for a, b in itertools.product(BOUNDS, BOUNDS)]
    for a, b in itertools.product(slices, slices):
        truth = all(len(range(n)[a]) == len(range(n)[b]) for n in range(40))
        assert S.same_slice_length(a, b) == truth, (a, b)


def test_other_steps_only_when_identical():
    assert S.same_slice_length(slice(0, None, 2), slice(0, None, 2))
    assert not S.same_slice_length(slice(0, None, 2), slice(1, None, 2))


def stencil(A0, c, steps):
    A = A0.copy()
    B = A0.copy()
    for t in range(steps):
        B[1:-1, 1:-1] = c * (A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = c * (B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])
    return np.sum(A * A)


def row_broadcast(A, r):
    B = r.copy()            # (1, n): broadcast along A's rows
    C = A.copy()
    C[:, :] = C * B + np.sin(B)
    return np.sum(C * C)


def test_stencil_over_copies_has_no_strides_and_is_exact():
    rng = np.random.default_rng(5)
    args = (rng.standard_normal((6, 5)), 0.3, 3)
    g, _, _ = check_against_oracle(stencil, args, target="cpu")
    src = g.source_for(*args)
    body = src[src.index("for t in range"):]
    body = body[:body.index("reverse sweep")]
    assert "_bcast_stride" not in body


@pytest.mark.parametrize("shape_r", [(1, 5), (4, 5), (1, 1)])
def test_broadcast_kept_between_arrays_of_other_shapes(shape_r):
    rng = np.random.default_rng(6)
    args = (rng.standard_normal((4, 5)), rng.standard_normal(shape_r))
    g, _, _ = check_against_oracle(row_broadcast, args, target="cpu")
    assert "_bcast_stride" in g.source_for(*args)


def reassigned(A0, k):
    A = A0.copy()
    if k > 0:
        A = A0[:2].copy()       # two rows: A[1:] is one row, broadcast along B[1:]
    B = A0.copy()
    B[1:, :] = B[1:, :] * A[1:, :]
    return np.sum(B * B)


@pytest.mark.parametrize("k", [0, 1])
def test_an_array_assigned_twice_keeps_its_strides(k):
    rng = np.random.default_rng(7)
    args = (rng.standard_normal((4, 3)), k)
    g, _, _ = check_against_oracle(reassigned, args, target="cpu")
    assert "_bcast_stride" in g.source_for(*args)
