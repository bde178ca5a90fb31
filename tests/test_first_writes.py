"""First writes of array adjoints (coarsen.ad.reverse.first_writes): ``np.zeros`` then ``+=``
over every element once becomes ``np.empty`` and ``=``, and only there."""
import ast

import gast
import numpy as np
import pytest

from coarsen.ad.reverse.first_writes import first_writes
from tests.oracle import check_against_oracle

MADE = {"X", "e", "n0", "n1", "t"}

NEST = """
Y = np.empty((0, 0))
Y = f(a)
n0 = Y.shape[0]
n1 = _same_len(Y.shape[1], b.shape[0])
X = np.zeros(Y.shape)
for i in range(n0 - 1, -1, -1):
    t = g(i)
    for j in range(n1 - 1, -1, -1):
        X[i, j] += t * b[j]
out = X
"""


def _run(src):
    body = gast.parse(src).body
    before = gast.dump(gast.Module(body=body, type_ignores=[]))
    out = first_writes(body, MADE)
    assert gast.dump(gast.Module(body=body, type_ignores=[])) == before     # input unchanged
    return ast.unparse(ast.fix_missing_locations(gast.gast_to_ast(gast.Module(body=out, type_ignores=[]))))


def test_a_full_nest_assigns():
    out = _run(NEST)
    assert "X = np.empty(Y.shape)" in out and "X[i, j] = t * b[j]" in out


@pytest.mark.parametrize("change", [
    ("for j in range(n1 - 1, -1, -1):", "for j in range(n1 - 2, -1, -1):"),     # not every j
    ("n0 = Y.shape[0]", "n0 = Y.shape[1]"),                                     # another axis
    ("X[i, j] += t * b[j]", "X[j, i] += t * b[j]"),                             # transposed
    ("X[i, j] += t * b[j]", "X[i, j] += t * X[i, 0]"),                          # reads X
    ("X[i, j] += t * b[j]", "X[i, j] += t\n        X[i, j] += b[j]"),          # twice a trip
    ("    t = g(i)\n", "    t = g(i)\n    if t > 0:\n        break\n"),          # stops early
    ("out = X", "Y = f(b)\nout = X"),                                            # Y assigned again later
    ("X = np.zeros(Y.shape)", "X = np.zeros(Y.shape)\nX[0, 0] = 1.0"),          # used before
    ("        X[i, j] += t * b[j]", "        if t:\n            X[i, j] += t * b[j]"),  # one path
])
def test_kept_where_not_every_element_is_written_once(change):
    out = _run(NEST.replace(*change))
    assert "np.zeros" in out


def matvec_loss(A, u, x, y):
    B = A + np.outer(u, u)
    w = B @ x + B.T @ y
    return 0.5 * np.sum(w * w)


def test_gradient_exact_with_first_writes():
    rng = np.random.default_rng(9)
    args = (rng.standard_normal((4, 4)),
            rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal(4))
    g, _, _ = check_against_oracle(matvec_loss, args, target="cpu")
    assert "np.empty(" in g.source_for(*args).split("reverse sweep")[1]
