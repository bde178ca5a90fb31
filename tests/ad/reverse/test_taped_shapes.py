"""Shapes taped for the reverse sweep come back to the operand they belong to.

Where an operand of a broadcasting statement is a variable that a later trip overwrites, the
reverse sweep cannot read its shape from the variable: ``shape_of`` (``coarsen.ad.reverse.tapes``)
pushes it on the int tape before the statement and pops it at the start of its adjoint.  With
two such operands in one statement the pops must come in the opposite order of the pushes (the
tape is last in, first out); they once came in the same order, so ``a[:, None] + b[None, :]``
in a loop summed each adjoint to the other operand's shape (floyd-warshall's relaxation gave a
gradient off by its own size).  The programs here tape two or three shapes per statement, of
lengths that change from trip to trip, on both targets, against the extended-precision oracle;
the operands written in the other order must give the same bits.
"""
import numpy as np
import pytest

import coarsen
from tests.oracle import assert_grad_close, fd_grad


def relax(d, c):
    """Floyd-Warshall's min-plus relaxation through every vertex."""
    p = d.copy()
    for k in range(p.shape[0]):
        p = np.minimum(p, p[:, k][:, None] + p[k, :][None, :])
    return np.sum(c * p)


def relax_swapped(d, c):
    p = d.copy()
    for k in range(p.shape[0]):
        p = np.minimum(p[k, :][None, :] + p[:, k][:, None], p)
    return np.sum(c * p)


def growing(x, y):
    """Operands whose lengths change per trip: each trip's shapes must come back to it."""
    s = 0.0
    for k in range(1, x.shape[0]):
        a = x[:k]
        b = y[k - 1:]
        t = np.sin(a[:, None] * 0.3 + b[None, :])
        s += np.sum(t * t) * k
    return s


def three(x, y, z):
    """Three taped shapes in one expression chain: (n,1) + (1,m) then + (1,1)."""
    s = 0.0
    for k in range(1, x.shape[0]):
        u = x[:k][:, None] + y[k:][None, :]
        v = u * z[k - 1:k][:, None]
        s += np.sum(np.tanh(v))
    return s


R = np.random.default_rng(3)
N = 4
D = 1.0 + 9.0 * R.random((N, N))
np.fill_diagonal(D, 0.1 + 0.4 * R.random(N))     # no ties: the loss is smooth at D
CASES = [
    (relax, (D, R.random((N, N))), [0]),
    (relax_swapped, (D, R.random((N, N))), [0]),
    (growing, (R.uniform(-1, 1, 5), R.uniform(-1, 1, 5)), [0, 1]),
    (three, (R.uniform(-1, 1, 5), R.uniform(-1, 1, 6), R.uniform(0.5, 1, 5)), [0, 1, 2]),
]


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("fn, args, pos", CASES, ids=[c[0].__name__ for c in CASES])
def test_gradient_matches_the_oracle(fn, args, pos, target):
    params = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    g = coarsen.differentiate(fn, tuple(params[p] for p in pos), target=target)
    got = g(*args)
    assert_grad_close(got, fd_grad(fn, args, pos), err_msg=fn.__name__)


def test_operand_order_gives_the_same_bits():
    args = CASES[0][1]
    a = coarsen.differentiate(relax, "d")(*args)
    b = coarsen.differentiate(relax_swapped, "d")(*args)
    np.testing.assert_array_equal(a, b)
