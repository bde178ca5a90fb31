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


# guarded_first_writes: the proof as a runtime test (broadcast strides, extents)

STRIDED = """
n0 = A.shape[0]
n1 = B.shape[1]
s0 = _bcast_stride(A.shape[0], n0)
s1 = _bcast_stride(A.shape[1], n1)
X = np.zeros(A.shape)
for i in range(n0 - 1, -1, -1):
    r = s0 * i
    t = c[i]
    for j in range(n1):
        X[r, s1 * j] += t * b[j]
out = X
"""


def _bcast_stride(e, n):
    return 1 if e == n else 0


def _run_guarded(src, made=("X", "r", "t", "n0", "n1", "s0", "s1")):
    from coarsen.ad.reverse.first_writes import guarded_first_writes
    body = gast.parse(src).body
    before = gast.dump(gast.Module(body=body, type_ignores=[]))
    out, new = guarded_first_writes(body, set(made))
    assert gast.dump(gast.Module(body=body, type_ignores=[])) == before     # input unchanged
    text = ast.unparse(ast.fix_missing_locations(gast.gast_to_ast(gast.Module(body=out, type_ignores=[]))))
    return text, new


def _exec(text, A, B, b, c):
    scope = {"np": np, "_bcast_stride": _bcast_stride, "A": A, "B": B, "b": b, "c": c}
    exec(text, scope)       # noqa: S102 - the test's own text
    return scope["out"]


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((1, 4), (3, 4)), ((3, 1), (3, 4)),
                                    ((1, 1), (3, 4))], ids=["same", "row", "column", "one"])
def test_a_strided_nest_is_versioned(shapes):
    text, new = _run_guarded(STRIDED)
    assert new == {"_fw0"}
    # (n0 is A.shape[0] by construction: no test of it)
    assert "_fw0 = s0 == 1 and s1 == 1 and (n1 == A.shape[1])" in text, text
    assert "X = np.empty(A.shape) if _fw0 else np.zeros(A.shape)" in text, text
    assert "X[i, j] = t * b[j]" in text and "X[r, s1 * j] += t * b[j]" in text, text
    rng = np.random.default_rng(1)
    A, B = np.zeros(shapes[0]), np.zeros(shapes[1])
    b, c = rng.standard_normal(shapes[1][1]), rng.standard_normal(shapes[1][0])
    before = _exec(STRIDED, A, B, b, c)
    assert np.array_equal(before, _exec(text, A, B, b, c))


@pytest.mark.parametrize("change", [
    ("s0 = _bcast_stride(A.shape[0], n0)\n", "s0 = _bcast_stride(A.shape[0], n0)\ns0 = s0 + 0\n"),  # twice
    ("X = np.zeros(A.shape)\n", "X = np.zeros(A.shape)\nn1 = n1 + 0\n"),       # an extent after X
    ("X[r, s1 * j] += t * b[j]", "X[r, s1 * j] += t * X[0, 0]"),               # reads X
    ("X[r, s1 * j] += t * b[j]", "X[r, s1 * i] += t * b[j]"),                  # another variable
    ("X[r, s1 * j] += t * b[j]", "X[r, s1 * j + 1] += t * b[j]"),              # not a stride
    ("    r = s0 * i\n", "    r = s0 * i\n    r = r + 0\n"),                   # assigned twice
    ("    t = c[i]\n", "    t = c[i]\n    if t > 0:\n        continue\n"),     # skips trips
    ("for j in range(n1):", "for j in range(n1 - 1):"),                          # not every j
])
def test_left_alone(change):
    assert change[0] in STRIDED
    text, new = _run_guarded(STRIDED.replace(*change))
    assert not new and "X = np.zeros(A.shape)" in text, text


def test_a_vector_is_left_alone():
    src = "n0 = A.shape[0]\ns0 = _bcast_stride(A.shape[0], n0)\nX = np.zeros(A.shape)\n" \
          "for i in range(n0):\n    X[s0 * i] += c[i]\n"
    text, new = _run_guarded(src)
    assert not new and "X = np.zeros(A.shape)" in text


def rank_two_update(A, u, v, x, y):
    # gemver's first statement, on an internal matrix: its adjoint is the compiler's and lies
    # on the float tape (scratch), chosen at runtime between a first write and zeros
    M = np.sin(A)
    B = M + np.outer(u, v)
    w = y + B @ x
    return 0.5 * np.sum(w * w)


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("shape", [(5, 4), (1, 4), (5, 1)], ids=["same", "row", "column"])
def test_a_broadcast_operand_against_the_oracle(shape, target):
    rng = np.random.default_rng(3)
    args = (rng.standard_normal(shape), rng.standard_normal(5), rng.standard_normal(4),
            rng.standard_normal(4), rng.standard_normal(5))
    g, _, _ = check_against_oracle(rank_two_update, args, target=target)
    if target == "cpu":     # (the python target runs array code as NumPy calls)
        rev = g.source_for(*args).split("reverse sweep")[1]
        assert "_fw0 = " in rev and "_scratch_empty(_ftape, _wtop, M.shape, M.size) if _fw0" in rev, rev


def test_the_same_bits_as_without_the_runtime_test():
    import coarsen
    rng = np.random.default_rng(4)
    cases = [(rng.standard_normal(shape), rng.standard_normal(5), rng.standard_normal(4),
              rng.standard_normal(4), rng.standard_normal(5))
             for shape in ((5, 4), (1, 4), (5, 1), (5, 4), (1, 1))]
    g = coarsen.differentiate(rank_two_update)
    got = [g.value_and_grad(*c) for c in cases]
    plain = coarsen.differentiate(rank_two_update, disable={"guarded_first_writes"})
    for c, (v, gs) in zip(cases, got):
        rv, rgs = plain.value_and_grad(*c)
        assert v == rv and all(np.array_equal(a, b) for a, b in zip(gs, rgs))
    assert "_fw0" in g.source and "_fw0" not in plain.source
