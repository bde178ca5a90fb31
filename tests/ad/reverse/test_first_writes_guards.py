"""coarsen.ad.reverse.first_writes: each precondition pinned (issue 48's mutation run).

Each case is a nest that does not write every element of the allocation exactly once (or whose
extents the rule cannot prove): ``np.empty`` there would leave elements uninitialized, so the
allocation must stay ``np.zeros`` and the nest keep its ``+=``."""
import ast

import gast
import numpy as np
import pytest

from coarsen.ad.reverse.first_writes import first_writes
from tests.ad.reverse.test_first_writes import MADE, NEST, STRIDED, _exec, _run, _run_guarded


def _chain(k):
    """``n0`` resolved through ``k`` copies (``c1 = Y.shape[0] - 1``, ``c2 = c1``, ...)."""
    lines = ["c1 = Y.shape[0] - 1"] + [f"c{j + 1} = c{j}" for j in range(1, k)]
    return "\n".join(lines) + f"\nn0 = c{k}\n"


KEPT = [
    # a chain of copies deeper than _is_dim follows: no proof (here it is not the extent)
    (NEST.replace("n0 = Y.shape[0]\n", _chain(10)), "a chain of ten copies"),
    # np.zeros(Y.size): not Y's shape
    ("Y = f(a)\nn0 = Y.shape[0]\nX = np.zeros(Y.size)\nfor i in range(n0):\n    X[i] += b[i]\n"
     "out = X\n", "another shape"),
    # a loop over a list, not a range
    (NEST.replace("for i in range(n0 - 1, -1, -1):", "for i in idx:"), "not a range"),
    # range(n0 - 1, 0, -1) misses i = 0
    (NEST.replace("for i in range(n0 - 1, -1, -1):", "for i in range(n0 - 1, 0, -1):"),
     "stops at 1"),
    # range(n0 - 1, n0): one trip
    (NEST.replace("for i in range(n0 - 1, -1, -1):", "for i in range(n0 - 1, n0):"), "one trip"),
    # Y assigned again in a compound statement: the range reads the new shape
    (NEST.replace("X = np.zeros(Y.shape)\n", "X = np.zeros(Y.shape)\nif c:\n    Y = f(b)\n")
         .replace("for i in range(n0 - 1, -1, -1):", "for i in range(Y.shape[0] - 1, -1, -1):"),
     "Y assigned in an if"),
    # Y assigned again after X's initialization, at the top level: the range reads the new Y
    (NEST.replace("X = np.zeros(Y.shape)\n", "X = np.zeros(Y.shape)\nY = f(b)\n")
         .replace("for i in range(n0 - 1, -1, -1):", "for i in range(Y.shape[0] - 1, -1, -1):")
         .replace("for j in range(n1 - 1, -1, -1):", "for j in range(Y.shape[1] - 1, -1, -1):"),
     "Y assigned again between"),
]


@pytest.mark.parametrize("src, why", KEPT, ids=[k[1] for k in KEPT])
def test_kept(src, why):
    out = _run(src)
    assert "X = np.zeros(" in out and "X = np.empty(" not in out, (why, out)


def test_a_copy_of_the_extent_is_followed():
    # (the chain above is refused for its depth: a short chain of the extent itself is followed)
    out = _run(NEST.replace("n0 = Y.shape[0]\n", _chain(1).replace(" - 1", "")))
    assert "X = np.empty(Y.shape)" in out, out


def test_a_range_built_with_constant_minus_ones():
    # the compiler builds range(E - 1, -1, -1) with Constant(-1), not -(1) as parsed source
    body = gast.parse(NEST).body
    for n in gast.walk(gast.Module(body=body, type_ignores=[])):
        if isinstance(n, gast.UnaryOp) and isinstance(n.op, gast.USub) and \
                isinstance(n.operand, gast.Constant) and n.operand.value == 1:
            n.op, n.operand = gast.UAdd(), gast.Constant(value=-1, kind=None)
    # (+(-1): rebuilt below as plain constants)
    for n in gast.walk(gast.Module(body=body, type_ignores=[])):
        if isinstance(n, gast.Call) and isinstance(n.func, gast.Name) and n.func.id == "range":
            n.args = [a.operand if isinstance(a, gast.UnaryOp) and isinstance(a.op, gast.UAdd)
                      else a for a in n.args]
    assert sum(isinstance(n, gast.Constant) and n.value == -1
               for n in gast.walk(gast.Module(body=body, type_ignores=[]))) == 4
    out = first_writes(body, MADE)
    text = ast.unparse(ast.fix_missing_locations(gast.gast_to_ast(gast.Module(body=out, type_ignores=[]))))
    assert "X = np.empty(Y.shape)" in text and "X[i, j] = t * b[j]" in text, text


def test_guarded_kept_where_the_array_is_assigned_in_an_if():
    # A assigned again in a compound statement after X's initialization: the range that reads
    # A.shape[1] there proves nothing about X's extent
    src = STRIDED.replace("X = np.zeros(A.shape)\n", "X = np.zeros(A.shape)\nif c[0] > 1e300:\n"
                          "    A = np.zeros((1, 1))\n") \
        .replace("for j in range(n1):", "for j in range(A.shape[1]):")
    text, new = _run_guarded(src)
    assert not new and "X = np.zeros(A.shape)" in text, text
    rng = np.random.default_rng(2)
    A, B = np.zeros((3, 4)), np.zeros((3, 4))
    b, c = rng.standard_normal(4), rng.standard_normal(3)
    assert np.array_equal(_exec(src, A, B, b, c), _exec(text, A, B, b, c))


def test_guarded_leaves_a_nest_with_nothing_to_test_to_the_rule():
    # every index is its loop variable and every extent is proven: first_writes' case, no test
    text, new = _run_guarded(NEST, made=MADE)
    assert not new and "_fw" not in text and "X = np.zeros(Y.shape)" in text, text


def test_guarded_tests_only_the_strides_where_the_extents_are_proven():
    src = STRIDED.replace("n1 = B.shape[1]", "n1 = A.shape[1]")
    text, new = _run_guarded(src)
    assert new == {"_fw0"} and "_fw0 = s0 == 1 and s1 == 1\n" in text, text
    rng = np.random.default_rng(5)
    for shape in ((3, 4), (1, 4), (3, 1)):
        A, B = np.zeros(shape), np.zeros((3, 4))
        b, c = rng.standard_normal(shape[1]), rng.standard_normal(shape[0])
        assert np.array_equal(_exec(src, A, B, b, c), _exec(text, A, B, b, c))


def test_guarded_kept_where_the_index_has_fewer_axes_than_the_nest():
    # X[r] is a row: each trip of j adds into all of it
    src = STRIDED.replace("X[r, s1 * j] += t * b[j]", "X[r] += t * b[j]")
    text, new = _run_guarded(src)
    assert not new and "X = np.zeros(A.shape)" in text, text


def test_guarded_tests_an_extent_it_cannot_prove_without_strides():
    src = STRIDED.replace("X[r, s1 * j] += t * b[j]", "X[i, j] += t * b[j]")
    text, new = _run_guarded(src)
    assert new == {"_fw0"} and "_fw0 = n1 == A.shape[1]\n" in text, text
    rng = np.random.default_rng(6)
    for shape in ((3, 4), (3, 5)):
        A, B = np.zeros(shape), np.zeros((3, 4))
        b, c = rng.standard_normal(4), rng.standard_normal(3)
        assert np.array_equal(_exec(src, A, B, b, c), _exec(text, A, B, b, c))


def test_guarded_a_statement_other_than_an_assignment_before_the_inner_loop():
    # (a pass before the inner loop: not one of the names assigned in the nest)
    src = STRIDED.replace("    t = c[i]\n", "    t = c[i]\n    pass\n")
    text, new = _run_guarded(src)
    assert new == {"_fw0"} and "X[i, j] = t * b[j]" in text, text


def test_guarded_kept_where_the_array_is_assigned_again_between():
    # A assigned again at the top level after X's initialization: A.shape[0] in the range is
    # the new A's
    src = STRIDED.replace("X = np.zeros(A.shape)\n", "X = np.zeros(A.shape)\nA = np.zeros((1, 1))\n") \
        .replace("for i in range(n0 - 1, -1, -1):", "for i in range(A.shape[0] - 1, -1, -1):")
    text, new = _run_guarded(src)
    assert not new and "X = np.zeros(A.shape)" in text, text


def test_guarded_a_statement_between_that_does_not_name_the_array():
    # the first statement after the initialization that names X is the nest
    src = STRIDED.replace("X = np.zeros(A.shape)\n", "X = np.zeros(A.shape)\nq = 2.0\n")
    text, new = _run_guarded(src)
    assert new == {"_fw0"} and "X[i, j] = t * b[j]" in text, text


def test_guarded_kept_where_an_index_is_assigned_in_an_outer_trip():
    # q = s1 * j before the loop over j: the j of an earlier trip, not this one's
    src = STRIDED.replace("    t = c[i]\n", "    t = c[i]\n    q = s1 * j\n") \
        .replace("X[r, s1 * j] += t * b[j]", "X[r, q] += t * b[j]")
    text, new = _run_guarded(src)
    assert not new and "X = np.zeros(A.shape)" in text, text


# the sampled mutants of issue 48's run (seed 1)

def test_a_name_checked_against_the_extent_by_same_len_of_itself():
    # n1 = _same_len(n1, Y.shape[1]) (n1 a parameter checked against the shape): the search
    # through n1's own definition ends, and the second operand proves the extent (line 98's
    # depth * 1 recursed without end)
    src = NEST.replace("n1 = _same_len(Y.shape[1], b.shape[0])", "n1 = _same_len(n1, Y.shape[1])")
    out = _run(src)
    assert "X = np.empty(Y.shape)" in out and "X[i, j] = t * b[j]" in out, out


def test_a_name_that_is_its_own_value_proves_nothing_and_ends():
    # n0 = n0: a cycle of copies; the search ends and proves nothing (line 99's depth - 1
    # recursed without end)
    out = _run(NEST.replace("n0 = Y.shape[0]\n", "n0 = n0\n"))
    assert "X = np.zeros(Y.shape)" in out and "X = np.empty(" not in out, out


NEST3 = """
Y = f(a)
n0 = Y.shape[0]
n1 = Y.shape[1]
n2 = Y.shape[2]
X = np.zeros(Y.shape)
for i in range(n0):
    for j in range(n1):
        t = g(i, j)
        for k in range(n2):
            X[i, j, k] += t * b[k]
out = X
"""


def test_a_nest_of_three_loops_assigns():
    # the statement is replaced along the whole path (line 163's loops[k - 1] missed the middle
    # loop of three: np.empty with the += kept)
    out = _run(NEST3)
    assert "X = np.empty(Y.shape)" in out and "X[i, j, k] = t * b[k]" in out \
        and "+=" not in out, out
    rng = np.random.default_rng(3)
    b = rng.standard_normal(4)
    scope = lambda: {"np": np, "a": None, "b": b, "f": lambda a: np.zeros((2, 3, 4)),  # noqa: E731
                     "g": lambda i, j: 1.0 + i - 0.5 * j}
    before, after = scope(), scope()
    exec(NEST3, before)       # noqa: S102 - the test's own text
    exec(out, after)          # noqa: S102
    assert np.array_equal(before["out"], after["out"])


def test_guarded_kept_where_an_index_is_assigned_after_the_inner_loop():
    # q = s0 * i after the loop over j: the index of the inner loop is the previous trip's
    # (line 246's loops[j % 1] took every assignment of the outer body as before the path)
    src = STRIDED.replace("X = np.zeros(A.shape)\n", "q = 0\nX = np.zeros(A.shape)\n") \
        .replace("X[r, s1 * j] += t * b[j]", "X[q, s1 * j] += t * b[j]\n    q = s0 * i")
    assert "    q = s0 * i\nout = X" in src
    text, new = _run_guarded(src, made=("X", "r", "t", "n0", "n1", "s0", "s1", "q"))
    assert not new and "X = np.zeros(A.shape)" in text, text
    rng = np.random.default_rng(4)
    A, B = np.zeros((3, 4)), np.zeros((3, 4))
    b, c = rng.standard_normal(4), rng.standard_normal(3)
    assert np.array_equal(_exec(src, A, B, b, c), _exec(text, A, B, b, c))


def test_guarded_kept_where_a_stride_is_assigned_after_the_initialization():
    # s1 assigned after X's initialization: the runtime test, made before it, cannot read it
    # (line 275's != k took a name assigned after the initialization as stable)
    src = STRIDED.replace("s1 = _bcast_stride(A.shape[1], n1)\nX = np.zeros(A.shape)\n",
                          "X = np.zeros(A.shape)\ns1 = _bcast_stride(A.shape[1], n1)\n")
    assert "X = np.zeros(A.shape)\ns1 =" in src
    text, new = _run_guarded(src)
    assert not new and "X = np.zeros(A.shape)" in text, text
    rng = np.random.default_rng(7)
    A, B = np.zeros((3, 4)), np.zeros((3, 4))
    b, c = rng.standard_normal(4), rng.standard_normal(3)
    assert np.array_equal(_exec(src, A, B, b, c), _exec(text, A, B, b, c))


def test_guarded_goes_on_after_an_allocation_it_leaves_alone():
    # W's first use is not a nest: W is left alone, and X, after it, is still versioned
    # (line 284's break stopped at W)
    src = "W = np.zeros(A.shape)\nw = W\n" + STRIDED.lstrip("\n")
    text, new = _run_guarded(src, made=("X", "r", "t", "n0", "n1", "s0", "s1", "W"))
    assert new == {"_fw0"} and "W = np.zeros(A.shape)" in text \
        and "X = np.empty(A.shape) if _fw0 else np.zeros(A.shape)" in text, text
