"""Dead adjoint resets (coarsen.ad.reverse.dead_resets): the guards the mutation run
(``python -m tests.mutation coarsen/ad/reverse/dead_resets.py``) found unpinned.  Each program
reads a reset element again, or names it in a way the rules do not follow; the pass must keep
the reset, and the function must compute what it computed before the pass."""
import types

import numpy as np
import pytest

from coarsen.ad.reverse.dead_resets import drop_dead_resets

from tests.helpers_passes import rewrite

MADE = {"A_bar", "B_bar", "u_bar", "g", "acc"}

# the first rule (a reset no later statement reads)
FIRST = {
    "in a while loop: the next trip of the while reads the element again": """
def f(n, m):
    A_bar = np.zeros(n)
    B_bar = np.zeros(n)
    k = 0
    while k < m:
        for i in range(n):
            A_bar[i] += 1.0
        for j in range(n):
            B_bar[j] += A_bar[j]
            A_bar[j] = 0.0
        k += 1
    return B_bar
""",
    "in a loop over a list, not a range: its next trip reads the element again": """
def f(n, m):
    A_bar = np.zeros(n)
    B_bar = np.zeros(n)
    for k in [0, 1, 2]:
        for i in range(n):
            A_bar[i] += 1.0
        for j in range(n):
            B_bar[j] += A_bar[j]
            A_bar[j] = 0.0
    return B_bar
""",
    "in a loop whose variable is an attribute: its next trip reads the element again": """
def f(n, m):
    A_bar = np.zeros(n)
    B_bar = np.zeros(n)
    for o.k in range(3):
        for i in range(n):
            A_bar[i] += 1.0
        for j in range(n):
            B_bar[j] += A_bar[j]
            A_bar[j] = 0.0
    return B_bar
""",
    "the whole array updated before the reset, the element read after it": """
def f(n, m):
    A_bar = np.zeros(n)
    B_bar = np.zeros(n)
    for i in range(n):
        A_bar += 1.0
        A_bar[i] = 0.0
        B_bar[i] += A_bar[i]
    return B_bar
""",
}

# the second rule (history rows, in a loop that runs down)
SECOND = {
    "another loop of the trip reads every row (u_bar[s, 1], s no offset of t)": """
def f(n, m):
    u_bar = np.zeros((n + 1, 3))
    for i in range(3):
        u_bar[n, i] += 1.0
    acc = 0.0
    for t in range(n - 1, -1, -1):
        for i in range(1, 2):
            g = u_bar[t + 1, i]
            u_bar[t + 1, i] = 0.0
            u_bar[t, i] += 2.0 * g
        for s in range(n + 1):
            acc += u_bar[s, 1]
    for i in range(3):
        acc += u_bar[0, i]
    return acc
""",
    "an inner loop over a list that repeats an index: its next trip reads the row again": """
def f(n, m):
    u_bar = np.zeros((n + 1, 3))
    for i in range(3):
        u_bar[n, i] += 1.0
    acc = 0.0
    for t in range(n - 1, -1, -1):
        for i in [1, 1]:
            g = u_bar[t + 1, i]
            u_bar[t + 1, i] = 0.0
            u_bar[t, i] += g
    for i in range(3):
        acc += u_bar[0, i]
    return acc
""",
    "a reset row that is no constant offset of t (2 * t)": """
def f(n, m):
    u_bar = np.zeros((2 * n + 1, 3))
    for i in range(3):
        u_bar[2 * n, i] += 1.0
    acc = 0.0
    for t in range(n, -1, -1):
        for i in range(1, 2):
            g = u_bar[2 * t, i]
            u_bar[2 * t, i] = 0.0
            u_bar[t, i] += g
    for i in range(3):
        acc += u_bar[0, i]
    return acc
""",
}


@pytest.mark.parametrize("why", list(FIRST) + list(SECOND))
def test_kept_and_the_same_values(why):
    src = {**FIRST, **SECOND}[why]
    before, after, out = rewrite(src, drop_dead_resets, MADE,
                                 scope={"o": types.SimpleNamespace(k=0)})
    for n, m in ((4, 3), (1, 2)):
        np.testing.assert_array_equal(after(n, m), before(n, m), err_msg=why)
    assert "= 0.0" in out, why


def test_the_reset_goes_where_other_names_are_known_nonnegative_too():
    # the first rule asks that the index's names be among those known never negative, not
    # that they be all of them: k (an int constant >= 0) and the loops' i, j are known
    from tests.ad.reverse.test_dead_resets import LAST_READ, _run
    src = "k = 0\n" + LAST_READ.replace("range(n - 1, -1, -1)", "range(n)") \
        .replace("range(m - 1, -1, -1)", "range(m)") + "C_bar[k] += 1.0\n"
    out = _run(src, {"A_bar", "B_bar", "C_bar", "t"})
    assert "A_bar[i, j] = 0.0" not in out and "B_bar[i, j] += t" in out, out


def test_a_history_reset_goes_beside_another_array_indexed_at_its_row():
    # the reset's row t + 1 is asked of the reset's own array only: another array's element
    # at that row, after the reset, reads nothing it cleared
    from tests.ad.reverse.test_dead_resets import HISTORY, _run
    src = HISTORY.replace("        u_bar[t, i] += g\n", "        u_bar[t, i] += g\n        a_bar[t + 1, i] += g\n")
    out = _run(src, {"u_bar", "a_bar", "g", "s"})
    assert "u_bar[t + 1, i] = 0.0" not in out and "a_bar[t + 1, i] += g" in out, out


@pytest.mark.parametrize("other", ["a_bar", "w_bar"])
def test_a_history_reset_goes_beside_another_array_at_its_row_in_the_loop(other):
    # also where the other array's element at row t + 1 is in the loop's body but not in the
    # reset's block (names both before and after u_bar's)
    from tests.ad.reverse.test_dead_resets import HISTORY, _run
    src = HISTORY.replace("    for i in range(1, nx - 1):\n",
                          f"    for i in range(nx):\n        {other}[t + 1, i] += 1.0\n"
                          "    for i in range(1, nx - 1):\n", 1)
    out = _run(src, {"u_bar", other, "g", "s"})
    assert "u_bar[t + 1, i] = 0.0" not in out and f"{other}[t + 1, i] += 1.0" in out, out


def test_a_top_level_reset_is_kept():
    # (a reset that is itself a top-level statement: no loop around it, nothing to prove)
    from tests.ad.reverse.test_dead_resets import _run
    out = _run("A_bar = np.zeros(n)\nt = A_bar[0]\nA_bar[0] = 0.0\nB_bar[0] += t\n", {"A_bar", "B_bar", "t"})
    assert "A_bar[0] = 0.0" in out, out
