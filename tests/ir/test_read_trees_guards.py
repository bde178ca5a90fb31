"""``coarsen.ir.scalarize``: which trees of element reads become loop nests (the rule the
mutation run, ``python -m tests.mutation coarsen/ir/scalarize.py``, found unpinned).

A sum of element reads alone (no element-wise operation in its tree) stays a call, as does a
matrix-vector product whose tree only transposes (the transpose is the call's strides); the
product of a sliced matrix becomes a nest.  The values are the same either way: the
scalarized IR is what is pinned (``tests.helpers_passes.scalarized_ir``).
"""
import numpy as np

from tests.helpers_passes import scalarized_ir


def reads_sum(A):
    return A[-1][1:][::-1].sum()


def transposed_matvec(A, x):
    return np.sum(A.T @ x)


def sliced_matvec(A, x):
    return np.sum(A[1:] @ x)


def test_a_sum_of_reads_alone_stays_a_call():
    ir = scalarized_ir(reads_sum, (np.ones((4, 5)),))
    assert "= sum(_t3, axis=None, keepdims=False)" in ir and "for " not in ir, ir


def test_a_matvec_that_only_transposes_stays_a_call():
    ir = scalarized_ir(transposed_matvec, (np.ones((5, 5)), np.ones(5)))
    assert "= matmul(_t1, x)" in ir and "for " not in ir, ir


def test_a_matvec_of_a_sliced_matrix_is_a_nest():
    ir = scalarized_ir(sliced_matvec, (np.ones((6, 5)), np.ones(5)))
    assert "matmul" not in ir and "for " in ir, ir
