"""``a, b = b.copy(), a * 0.5 + b`` in a loop, then ``a[i] += ...``: each value is made in a
temporary and moved into its target, which owns the array. Before, the target was taken for a
view of the temporary and the write was refused ("writing into 'a', which is a view of '_t5'",
naming a compiler variable; found by a probe). A swap of the arrays themselves (``a, b = b,
a``) followed by a write is still refused: the names do share arrays."""
from __future__ import annotations

import numpy as np
import pytest

import coarsen
from tests.oracle import assert_grad_close, fd_grad


def shuffle(x, y):
    a = np.array([x, y, x * y])
    b = np.array([y, x, x + y])
    for i in range(3):
        a, b = b.copy(), a * 0.5 + b
        a[i] += b[0] * b[0]
    return a[0] * b[1] + a[2]


def swap(x, y):
    a = np.array([x, y, x * y])
    b = np.array([y, x, x + y])
    for i in range(3):
        a, b = b, a
        a[i] += b[0] * b[1]
    return a[0] * b[1] + a[2]


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_moved_temporaries_own_their_arrays(target):
    g = coarsen.differentiate(shuffle, target=target)
    value, grads = g.value_and_grad(0.7, 1.3)
    assert value == shuffle(0.7, 1.3)
    assert_grad_close(grads, fd_grad(shuffle, (0.7, 1.3), (0, 1)))
    # 50-digit finite differences (mpmath, by hand): 53.39300623046875, 108.1642636328125
    assert np.allclose(grads, (53.39300623046875, 108.1642636328125), rtol=1e-14, atol=0)


def test_swapped_arrays_written_are_refused():
    with pytest.raises(coarsen.CoarsenError, match="writing into 'a', which is a view of 'b'"):
        coarsen.differentiate(swap)(0.7, 1.3)
