"""coarsen.ad.reverse.invariant_reads: each precondition pinned (issue 48's mutation run).

Each refusal here is a program the pass would get wrong without it: run before and after the
pass, the two functions give other numbers (or the new one raises); each rewrite that must
happen is one a broken guard would stop."""
import copy
import math
import re

import numpy as np
import pytest

from coarsen.ad.reverse.invariant_reads import invariant_reads
from tests.helpers_passes import rewrite

TAPES = ("_ftape", "_itape")


def _rewrite(src, scope=None):
    return rewrite(src, lambda body, made: invariant_reads(body, made, TAPES), (),
                   {"math": math, **(scope or {})})


def _same(before, after, *args):
    # (fresh copies for each: a function may store into its arguments, the tape)
    got = [f(*copy.deepcopy(args)) for f in (before, after)]
    for a, b in zip(np.atleast_1d(got[0]), np.atleast_1d(got[1])):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), args


# the loop stores into P (a local array: no other name reaches it), then reads what it stored
# through s in a later trip: s must be computed in every trip
STORES_INTO_WHAT_IT_READS = {
    # P read element by element
    "element": "s = P[0] + Y[0]\n            P[l] += 1.0 + l\n            A[l] = s",
    # P read whole (a NumPy operand): the bug issue 48's run found, hoisted before the fix
    "whole": "s = Y[0] + P\n            P[l] = 1.0 + l\n            A[l] = s[0]",
}


@pytest.mark.parametrize("case", sorted(STORES_INTO_WHAT_IT_READS))
def test_a_read_of_an_array_the_loop_stores_into_stays(case):
    body = STORES_INTO_WHAT_IT_READS[case]
    src = f"""
    def f(Y, n):
        P = np.zeros(n)
        A = np.zeros(n)
        for l in range(n):
            {body}
        return A
    """
    before, after, text = _rewrite(src)
    # (Y[0] is read once, before the loop; the read of P stays in every trip)
    head, loop = text.split("for l in")
    assert not re.search(r"\bP\b", head.split("A = np.zeros(n)")[1]), text
    assert "P[0]" in loop or "+ P" in loop, text
    Y = np.array([0.5, 2.0])
    assert before(Y, 3)[1] != before(Y, 3)[0]      # a later trip sees the store
    _same(before, after, Y, 3)


# W is a view of the float tape (bound by a tuple assignment, as scratch arrays are), which the
# loop stores into: a read of W in any form must be made in every trip
READS_OF_A_TAPE_VIEW = {
    # W read whole (the bug's second form)
    "whole": "s = Z[0] + W\n            _ftape[0] = l + 1.0\n            A[l] = s[0]",
    # an attribute other than .shape is not a pure read
    "attribute": "s = Z[0] + W.T\n            _ftape[0] = l + 1.0\n            A[l] = s[0]",
    # an element of W.T: a subscript of something other than a name
    "view element": "s = Z[0] + W.T[0]\n            _ftape[0] = l + 1.0\n            A[l] = s",
    # a conditional expression is not among the pure forms (nor what it holds)
    "conditional": "s = Z[0] + (W.T[0] if n > 0 else 0.0)\n            _ftape[0] = l + 1.0\n"
                   "            A[l] = s",
}


@pytest.mark.parametrize("case", sorted(READS_OF_A_TAPE_VIEW))
def test_a_read_of_a_tape_view_where_the_loop_stores_into_the_tape_stays(case):
    body = READS_OF_A_TAPE_VIEW[case]
    src = f"""
    def f(_ftape, Z, n):
        _ftape, W, _wtop = h(_ftape, n)
        A = np.zeros(n)
        for l in range(n):
            {body}
        return A
    """
    before, after, text = _rewrite(src, {"h": lambda t, n: (t, t[:1], 0)})
    # (Z[0] may be read once, before the loop; no read of W may)
    head, loop = text.split("for l in")
    assert not re.search(r"\bW\b", head.split("A = np.zeros(n)")[1]), text
    assert re.search(r"\bW\b", loop), text
    Z = np.array([0.25])
    assert before(np.zeros(4), Z, 3)[1] != before(np.zeros(4), Z, 3)[0]
    _same(before, after, np.zeros(4), Z, 3)


def test_pure_calls_shapes_and_a_chain_move():
    # a math function, a .shape, and a statement that reads only one moved before it
    src = """
    def f(Y, Z, n, k):
        A = np.zeros(n)
        for l in range(n):
            s = math.sin(Y[k]) * (Y.shape == Z.shape)
            u = s * 2.0
            A[l] += u + l
        return A
    """
    before, after, text = _rewrite(src)
    head = text.split("for l in")[0]
    assert "if n > 0:" in head and "s = math.sin(Y[k])" in head and "u = s * 2.0" in head, text
    Y, Z = np.array([0.3, 1.7]), np.zeros(2)
    for n in (3, 0):
        _same(before, after, Y, Z, n, 1)


def test_a_loop_whose_trips_cannot_be_counted_is_left_alone():
    # step 2: no test of "the loop runs" to put the moved read under
    src = """
    def f(Y, n):
        A = np.zeros(n)
        for l in range(0, n, 2):
            s = Y[0]
            A[l] += s
        return A
    """
    before, after, text = _rewrite(src)
    assert "if " not in text, text
    _same(before, after, np.array([1.5]), 5)


def test_inside_another_if_the_read_gets_its_own_guard():
    # the read is out of range exactly when the loop has no trips, and the if around the loop
    # tests something else: the moved read still needs "the loop runs"
    src = """
    def f(Y, n, c):
        A = np.zeros(n + 1)
        for j in range(n - 1, n):
            if c > 0:
                for l in range(j + 1, n):
                    s = Y[j + 1]
                    A[l] += s
        return A
    """
    before, after, text = _rewrite(src)
    assert "if n > j + 1:" in text, text
    _same(before, after, np.arange(3.0), 3, 1)


def test_where_the_loop_stores_into_the_tape_other_reads_still_move():
    # W is a view of the tape (a tuple assignment): its read stays; Z is not: its read moves
    src = """
    def f(_ftape, Z, n):
        _ftape, W, _wtop = h(_ftape, n)
        A = np.zeros(n)
        for l in range(n):
            s = W[0]
            u = Z[0]
            _ftape[l + 1] = s + l
            A[l] += s + u
        return A
    """
    before, after, text = _rewrite(src, {"h": lambda t, n: (t, t[:1], 0)})
    head = text.split("for l in")[0]
    assert "u = Z[0]" in head and "s = W[0]" not in head, text
    _same(before, after, np.arange(5.0), np.array([0.25]), 3)


COMMENTED = """
def f(X, M, n, d):
    A = np.zeros((n, d))
    for i in range(n):
        for l in range(d):
            s = X[i, 0] - M[0, 0]
            u = X[i, 0] * 2.0
            A[i, l] += s * u * X[i, l]
            v = M[0, 0] * 3.0
    return A
"""


def test_the_comments_of_moved_statements_go_to_the_next_kept_one_or_the_first_moved():
    """Two moved statements' comments join the next statement kept in the loop, before its own;
    a moved statement after the last kept one leaves its comment on the first moved one, before
    the note that says why it moved (the sampled mutants of issue 48's run: ``+`` of the texts)."""
    import gast
    from coarsen.ad.reverse.invariant_reads import HOISTED

    fn = gast.parse(COMMENTED.strip()).body[0]
    inner = fn.body[1].body[0]
    for st, text in zip(inner.body, ("line s", "line u", "line A", "line v")):
        st.coarsen_comment = text
    out = invariant_reads(fn.body, set(), TAPES)
    guard = out[1].body[0]
    moved = guard.body[:-1]
    loop = guard.body[-1]
    assert [st.targets[0].id for st in moved] == ["s", "u", "v"]
    assert loop.body[0].coarsen_comment == "line s\nline u\nline A"
    assert moved[0].coarsen_comment == "line v\n" + HOISTED
    assert all(getattr(st, "coarsen_comment", None) is None for st in moved[1:])


def test_an_attribute_other_than_shape_is_not_a_pure_read():
    """``o.view`` is the tape the loop stores into: its read must be made in every trip (the
    sampled mutant of line 70, ``attr >= "shape"``, let any attribute that sorts after
    ``shape`` through)."""
    import types

    src = """
    def f(_ftape, Z, n):
        o = g(_ftape)
        A = np.zeros(n)
        for l in range(n):
            s = Z[0] + o.view
            _ftape[0] = l + 1.0
            A[l] = s[0]
        return A
    """
    before, after, text = _rewrite(src, {"g": lambda t: types.SimpleNamespace(view=t)})
    # (Z[0] may be read once, before the loop: o.view stays in every trip)
    assert "o.view" in text.split("for l in")[1], text
    Z = np.array([0.25])
    assert before(np.zeros(4), Z, 3)[1] != before(np.zeros(4), Z, 3)[0]
    _same(before, after, np.zeros(4), Z, 3)


def test_inside_an_if_whose_test_sorts_after_the_loop_s_the_read_gets_its_own_guard():
    """As above, with the enclosing test ``z > 0``, whose text sorts after ``n > j + 1`` (the
    sampled mutant of line 178, ``guard >= dump(runs)``): an ``if`` that tests something else
    than "the loop runs" does not stand for it."""
    src = """
    def f(Y, n, z):
        A = np.zeros(n + 1)
        for j in range(n - 1, n):
            if z > 0:
                for l in range(j + 1, n):
                    s = Y[j + 1]
                    A[l] += s
        return A
    """
    before, after, text = _rewrite(src)
    assert "if n > j + 1:" in text, text
    _same(before, after, np.arange(3.0), 3, 1)


def test_an_assignment_to_two_names_stays():
    """``s = b = Y[0]``: b is read in the trip before it (the first trip reads b's value from
    before the loop), so the statement cannot move (the sampled mutant of line 183,
    ``len(targets) >= 1``, looked at s alone)."""
    src = """
    def f(Y, n):
        b = 0.5
        A = np.zeros(n)
        for l in range(n):
            A[l] = b + l
            s = b = Y[0]
            A[l] += s
        return A
    """
    before, after, text = _rewrite(src)
    # (the value Y[0] may be read once, before the loop: the assignment stays in every trip)
    assert "s = b = " in text.split("for l in")[1], text
    _same(before, after, np.array([2.0]), 3)
