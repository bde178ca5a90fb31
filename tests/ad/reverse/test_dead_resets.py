"""Dead adjoint resets (coarsen.ad.reverse.dead_resets): removed only where no one reads the
element again; the gradients they touch stay exact."""
import gast
import numpy as np
import pytest

from coarsen.ad.reverse.dead_resets import drop_dead_resets

from tests.oracle import check_against_oracle
from tests.analysis.test_history_rows import heat_rows


def _run(src, made):
    body = gast.parse(src).body
    before = gast.dump(gast.Module(body=body, type_ignores=[]))
    out = drop_dead_resets(body, made)
    # the input is not modified
    assert gast.dump(gast.Module(body=body, type_ignores=[])) == before
    return gast.unparse(gast.Module(body=out, type_ignores=[])) if hasattr(gast, "unparse") \
        else __import__("ast").unparse(gast.gast_to_ast(gast.Module(body=out, type_ignores=[])))


# the history rows of the second rule (below), without the last reset
HISTORY_SRC = """
u_bar = np.zeros((nt + 1, nx))
for t in range(nt - 1, -1, -1):
    for i in range(1, nx - 1):
        g = u_bar[t + 1, i]
        u_bar[t + 1, i] = 0.0
        u_bar[t, i - 1] += g
        u_bar[t, i] += g
        u_bar[t, i + 1] += g
for i in range(nx):
    s = u_bar[0, i]
"""

LAST_READ = """
A_bar = np.zeros((n, m))
for i in range(n - 1, -1, -1):
    for j in range(m - 1, -1, -1):
        t = A_bar[i, j]
        A_bar[i, j] = 0.0
        B_bar[i, j] += t
"""


def test_the_reset_after_the_last_read_goes():
    out = _run(LAST_READ, {"A_bar", "B_bar", "t"})
    assert "A_bar[i, j] = 0.0" not in out
    assert "B_bar[i, j] += t" in out


@pytest.mark.parametrize("src, why", [
    (LAST_READ + "y = A_bar[0, 0]\n", "read afterwards"),
    (LAST_READ.replace("A_bar[i, j] = 0.0", "A_bar[j, i] = 0.0"), "another index than the read"),
    (LAST_READ.replace("for j in range(m - 1, -1, -1):\n        t = A_bar[i, j]\n        A_bar[i, j] = 0.0",
                       "for j in range(m - 1, -1, -1):\n        t = A_bar[i, 0]\n        A_bar[i, 0] = 0.0"),
     "the same element in every trip of j"),
    (LAST_READ.replace("B_bar[i, j] += t", "B_bar[i, j] += A_bar[i, j]"), "read after the reset"),
    (LAST_READ.replace("A_bar = np.zeros((n, m))", "A_bar = C_bar"), "an alias"),
    ("A_bar = np.zeros(n)\nfor i in range(n):\n    t = A_bar[i] + A_bar[i - 1]\n    A_bar[i] = 0.0\n",
     "a neighbour read (a stencil: the next trip reads it)"),
    ("A_bar = np.zeros(n)\nfor i in range(n):\n    t = A_bar[i]\n    A_bar[i] = 0.0\n    i = 0\n",
     "the loop variable reassigned"),
    ("A_bar = np.zeros(n)\nfor i in range(n):\n    t = A_bar[i]\n    A_bar[i] = 0.0\nfor i in range(n):\n    s = A_bar[i]\n",
     "a later loop reads it"),
    ("A_bar = np.zeros(n)\nfor i in range(-1, 1):\n    t = A_bar[i]\n    A_bar[i] = 0.0\n    B_bar[i] += t\n",
     "trips from a negative index (A_bar[-1] is A_bar[0] when n is 1)"),
    ("A_bar = np.zeros(n)\nfor i in range(k, n):\n    t = A_bar[i]\n    A_bar[i] = 0.0\n    B_bar[i] += t\n",
     "trips from a start of unknown sign"),
])
def test_kept_where_it_is_read_again(src, why):
    out = _run(src, {"A_bar", "B_bar", "C_bar", "t", "s"})
    assert "= 0.0" in out, why


def test_the_reset_goes_in_ascending_loops():
    # the first rule alone (the second takes only loops that run down)
    src = LAST_READ.replace("range(n - 1, -1, -1)", "range(n)").replace("range(m - 1, -1, -1)",
                                                                        "range(m)")
    out = _run(src, {"A_bar", "B_bar", "t"})
    assert "A_bar[i, j] = 0.0" not in out and "B_bar[i, j] += t" in out
    # the reset last in its block
    out = _run(src.replace("        B_bar[i, j] += t\n", ""), {"A_bar", "B_bar", "t"})
    assert "A_bar[i, j] = 0.0" not in out and "t = A_bar[i, j]" in out


@pytest.mark.parametrize("src, why", [
    (HISTORY_SRC.replace("u_bar[t + 1, i] = 0.0", "u_bar[1, i] = 0.0"),
     "a constant row, reset in every trip and read by the trip t = 0"),
    ("u_bar = np.zeros(n)\nif c:\n    g = u_bar[0]\n    u_bar[0] = 0.0\ns = u_bar[0]\n",
     "in an if, read afterwards"),
    (HISTORY_SRC.replace("        u_bar[t, i + 1] += g\n", "        u_bar[t, i + 1] += g\n"
                         "    for j in range(nx):\n        h = u_bar[t + 1, j]\n"),
     "its row read by another loop of the same trip"),
    (HISTORY_SRC.replace("        u_bar[t, i + 1] += g\n", "        u_bar[t, i + 1] += g\n"
                         "    u_bar += 1.0\n"),
     "the whole array updated in the loop"),
    ("A_bar = np.zeros(n)\nfor i in range(n):\n    for j in range(m):\n        t = A_bar[i]\n"
     "        A_bar[i] = 0.0\n        B_bar[i, j] += t\n",
     "the same element in every trip of an inner loop"),
])
def test_kept_by_both_rules(src, why):
    out = _run(src, {"u_bar", "g", "s", "h", "A_bar", "B_bar", "t"})
    assert "= 0.0" in out, why


def test_not_compiler_made_kept():
    out = _run(LAST_READ, {"B_bar", "t"})
    assert "A_bar[i, j] = 0.0" in out


def gemver_like(A, u, v, x, y, beta):
    A = A + np.outer(u, v)
    x = x + beta * A.T @ y
    w = A @ x
    return 0.5 * np.sum(w * w)


def overwrite_twice(a, b):
    y = np.zeros(a.shape[0])
    for i in range(a.shape[0]):
        y[i] = a[i] * b
    s = 0.0
    for i in range(a.shape[0]):
        s += y[i] * y[i]
        y[i] = np.sin(a[i]) * s
    return np.sum(y * y) + s


def test_gradients_exact_where_resets_go():
    rng = np.random.default_rng(3)
    n = 5
    args = (rng.standard_normal((n, n)), rng.standard_normal(n), rng.standard_normal(n),
            rng.standard_normal(n), rng.standard_normal(n), 1.3)
    g, _, _ = check_against_oracle(gemver_like, args, target="cpu")
    src = g.source_for(*args)
    # the matrix adjoint's reset in the reverse of the rank-1 update is gone
    assert "_bar[_i1, _i2] = 0.0" not in src


@pytest.mark.parametrize("coarse", [True, False])
def test_gradients_exact_where_an_element_is_written_twice(coarse):
    rng = np.random.default_rng(4)
    args = (rng.standard_normal(6), 0.7)
    g, _, _ = check_against_oracle(overwrite_twice, args, target="cpu", coarse=coarse)
    # y_bar's reset in the reverse of the second loop is followed by accumulations into the
    # same element (and read by the first loop's reverse): kept
    import re
    assert re.search(r"y_bar\[\w+\] = 0\.0", g.source_for(*args))


# ------------------------------------------------------------------ history rows (second rule)
HISTORY = HISTORY_SRC + "    u_bar[0, i] = 0.0\n"


def test_the_reset_of_a_history_row_goes():
    out = _run(HISTORY, {"u_bar", "g", "s"})
    assert "u_bar[t + 1, i] = 0.0" not in out
    assert "u_bar[t, i - 1] += g" in out


@pytest.mark.parametrize("src, why", [
    (HISTORY.replace("u_bar[t, i + 1] += g", "u_bar[t + 2, i + 1] += g"),
     "a row above the reset's is reached: the next trip's reset row"),
    (HISTORY.replace("range(nt - 1, -1, -1)", "range(nt)"), "the loop runs up"),
    (HISTORY.replace("s = u_bar[0, i]", "s = u_bar[1, i]"), "a later read of a reset row"),
    (HISTORY.replace("s = u_bar[0, i]", "s = u_bar[nt, i]"), "a later read of an unknown row"),
    (HISTORY + "w = u_bar\n", "the whole array later"),
    (HISTORY.replace("        u_bar[t, i] += g\n", "        u_bar[t, i] += g\n        h = u_bar[t + 1, i]\n"),
     "its row read after the reset"),
    (HISTORY.replace("        u_bar[t, i] += g\n", "        u_bar[t, i] += g\n        h = u_bar[t + 1, 0]\n"),
     "its row read at another column"),
    (HISTORY.replace("range(nt - 1, -1, -1)", "range(nt - 1, k, -1)"), "a stop that is not a constant"),
    (HISTORY.replace("for i in range(1, nx - 1):\n", "for i in range(1, nx - 1):\n        i = 2\n"),
     "the inner loop variable reassigned"),
])
def test_a_history_reset_is_kept_where_its_row_is_read_again(src, why):
    out = _run(src, {"u_bar", "g", "s", "h", "w"})
    assert "u_bar[t + 1, i] = 0.0" in out, why


def recurrence_history(x0, a, T):
    h = np.zeros((T + 1, x0.shape[0]))
    for j in range(x0.shape[0]):
        h[0, j] = x0[j]
    for t in range(T):
        for j in range(x0.shape[0]):
            h[t + 1, j] = np.tanh(a * h[t, j]) + 0.1 * h[t, j]
    s = 0.0
    for j in range(x0.shape[0]):
        s += h[T, j] + h[T - 1, j] * h[2, j]
    return s


def lookahead(u0, kappa, nt):
    """Reads a row the loop has not written yet (zero): its adjoint row is reached again."""
    nx = u0.shape[0]
    u = np.zeros((nt + 2, nx))
    for i in range(nx):
        u[0, i] = u0[i]
    for t in range(nt):
        for i in range(nx):
            u[t + 1, i] = u[t, i] * kappa + 0.5 * u[t + 2, i] + 0.01 * u[t + 1, i]
        for i in range(nx):
            u[t + 2, i] = u[t + 1, i] * 0.3
    return np.sum(u * u)


@pytest.mark.parametrize("fn, args, removed", [
    (heat_rows, (np.array([0.1, 0.5, -0.3, 0.8, 0.2]), 0.3, 6), True),
    (recurrence_history, (np.array([0.3, -0.6, 0.9]), 0.8, 5), True),
    (lookahead, (np.array([0.1, 0.5, -0.3]), 0.7, 4), False),
])
@pytest.mark.parametrize("target", ["cpu", "python"])
def test_gradients_exact_with_history_arrays(fn, args, removed, target):
    import re
    g, _, _ = check_against_oracle(fn, args, target=target)
    resets = re.findall(r"\w+_bar\[t \+ 1, \w+\] = 0\.0", g.source_for(*args))
    assert (not resets) == removed, resets
