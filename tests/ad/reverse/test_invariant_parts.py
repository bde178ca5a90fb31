"""coarsen.ad.reverse.invariant_reads: invariant parts of a statement's value, read once.

A part of a value that no trip changes (``1.0 / t[k]`` in ``A[l] = g[l] * (1.0 / t[k])``) gets a
name before its statement and moves before the loop; each condition that keeps a part in the
loop is pinned by a program the rewrite would get wrong (or a form it must leave), and the
compiled programs keep their bits.
"""
import copy
import re

import numpy as np
import pytest

import coarsen
from coarsen.ad.reverse.invariant_reads import invariant_reads
from tests.helpers_passes import rewrite
from tests.oracle import check_against_oracle

TAPES = ("_ftape", "_itape")


def _rewrite(src, scope=None):
    return rewrite(src, lambda body, made: invariant_reads(body, made, TAPES), (), scope)


def _split(text):
    head, loop = text.split("for l in")
    return head, loop


def _same(before, after, *args):
    # (fresh copies for each: a function may store into its arguments, the tape)
    got = [f(*copy.deepcopy(args)) for f in (before, after)]
    for a, b in zip(np.atleast_1d(got[0]), np.atleast_1d(got[1])):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), args


def test_a_part_moves_under_the_loops_test_and_keeps_the_bits():
    src = """
    def f(g, t, n, k):
        A = np.zeros(n)
        for l in range(n):
            A[l] = g[l] * (1.0 / t[k]) - t[k] * g[l]
        return A
    """
    before, after, text = _rewrite(src)
    head, loop = _split(text)
    # one name for the division, one for the read (the same part twice: one name)
    assert "if n > 0:" in head and "_inv1 = 1.0 / t[k]" in head and "_inv2 = t[k]" in head, text
    assert "A[l] = g[l] * _inv1 - _inv2 * g[l]" in loop, text
    r = np.random.default_rng(1)
    g, t = r.standard_normal(5), r.standard_normal(3)
    for n in (5, 1, 0):
        _same(before, after, g, t, n, 2)


def test_a_part_reading_what_the_trip_assigns_stays_and_its_invariant_piece_moves():
    src = """
    def f(g, t, n, k):
        A = np.zeros(n)
        for l in range(n):
            c = g[l] * 2.0
            A[l] = (t[k] + c) * 3.0
        return A
    """
    before, after, text = _rewrite(src)
    head, loop = _split(text)
    assert "_inv1 = t[k]" in head and "A[l] = (_inv1 + c) * 3.0" in loop, text
    r = np.random.default_rng(2)
    _same(before, after, r.standard_normal(4), r.standard_normal(3), 4, 1)


#: each keeps every part in the loop: after the rewrite no ``_inv`` name exists
KEPT = {
    # the array is stored into by the loop: a later trip reads what an earlier one stored
    "stored": ("A[l] = g[l] * (1.0 / P[0])\n            P[0] = P[0] + 1.0", "P"),
    # evaluated on one path only: 1.0 / t[k] would divide by zero where the test is false
    "conditional": ("A[l] = g[l] * (1.0 / t[k] if t[k] != 0.0 else 0.0)", None),
    "and/or": ("A[l] = g[l] * float(t[k] != 0.0 and 1.0 / t[k] > 0.5)", None),
    # a check of the array before the statement: the read may not run before it
    "checked": ("if k >= t.shape[0]:\n                raise IndexError('k')\n"
                "            A[l] = g[l] * (1.0 / t[k])", None),
    # the index is the loop's variable
    "trip index": ("A[l] = g[l] * (1.0 / t[l % 3])", None),
}


@pytest.mark.parametrize("case", sorted(KEPT))
def test_a_part_that_may_change_or_may_not_run_stays(case):
    body, stored = KEPT[case]
    src = f"""
    def f(g, t, n, k):
        A = np.zeros(n)
        P = np.ones(1)
        for l in range(n):
            {body}
        return A
    """
    before, after, text = _rewrite(src)
    assert "_inv" not in text, text
    r = np.random.default_rng(3)
    t = np.array([2.0, 0.0, 4.0])
    for k in (0, 1):
        _same(before, after, r.standard_normal(4), t, 4, k)
    if stored:
        # the control: the store matters (a moved read would give other numbers)
        assert not np.all(before(np.ones(4), t, 4, 0) == before(np.ones(4), t, 4, 0)[0])


def _scratch(tape, top, shape, size):
    return tape, tape[top:top + size].reshape(shape), top + size


SCRATCH = """
def f(_ftape, g, t, n, k):
    _ftape, X, _wtop = _scratch_empty(_ftape, 0, (n,), n)
    {bind}
    for l in range(n):
        X[l] = g[l] * (1.0 / t[k]){extra}
    return X.copy()
"""


def test_a_loop_storing_into_a_scratch_array_still_moves_other_reads():
    src = SCRATCH.format(bind="", extra="")
    before, after, text = _rewrite(src, {"_scratch_empty": _scratch})
    assert "_inv1 = 1.0 / t[k]" in _split(text)[0], text
    r = np.random.default_rng(4)
    g, t = r.standard_normal(4), r.standard_normal(3)
    _same(before, after, np.zeros(8), g, t, 4, 1)


@pytest.mark.parametrize("bind, extra", [
    # another name bound to the scratch array: a store through X changes what V reads
    ("V = X", " + V[0]"),
    # a view of the tape read: the loop's stores change it
    ("", " + _ftape[0]"),
])
def test_a_read_that_the_scratch_stores_reach_stays(bind, extra):
    src = SCRATCH.format(bind=bind, extra=extra)
    before, after, text = _rewrite(src, {"_scratch_empty": _scratch})
    assert not re.search(r"_inv\d+ = .*(V|_ftape)\[0\]", text), text
    r = np.random.default_rng(5)
    g, t = r.standard_normal(4), r.standard_normal(3)
    _same(before, after, np.zeros(8), g, t, 4, 1)


# ------------------------------------------------------------------ programs


def softmax_loss(X, W):
    m = np.max(X, axis=1)
    e = np.exp(X - m[:, None])
    p = e / np.sum(e, axis=1)[:, None]
    return np.sum(W * p)


def softmax_renamed(B, Z):
    # ``softmax_loss`` renamed, its arguments swapped: the same operations, the same bits
    top = np.max(Z, axis=1)
    ex = np.exp(Z - top[:, None])
    q = ex / np.sum(ex, axis=1)[:, None]
    return np.sum(B * q)


def _shift(X):
    return X - np.max(X, axis=1)[:, None]


def softmax_helper(X, W):
    # split into a helper, the product's operands swapped: other roundings
    e = np.exp(_shift(X))
    s = np.sum(e, axis=1)
    return np.sum((e / s[:, None]) * W)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_softmax_programs_match_the_oracle(target):
    r = np.random.default_rng(6)
    for shape in ((3, 4), (1, 5), (4, 1)):
        X, W = r.standard_normal(shape), r.standard_normal(shape)
        check_against_oracle(softmax_loss, (X, W), target=target, wrt=("X",))
        check_against_oracle(softmax_helper, (X, W), target=target, wrt=("X", "W"))


def test_the_parts_keep_the_bits_of_the_code_without_the_pass():
    r = np.random.default_rng(7)
    on = coarsen.differentiate(softmax_loss, wrt=("X", "W"), target="cpu")
    off = coarsen.differentiate(softmax_loss, wrt=("X", "W"), target="cpu", disable={"invariant_reads"})
    renamed = coarsen.differentiate(softmax_renamed, wrt=("Z", "B"), target="cpu")
    for shape in ((3, 4), (6, 9)):
        X, W = r.standard_normal(shape), r.standard_normal(shape)
        v1, g1 = on.value_and_grad(X, W)
        v0, g0 = off.value_and_grad(X, W)
        v2, g2 = renamed.value_and_grad(W, X)
        assert v1 == v0 == v2
        assert all(np.array_equal(a, b) and np.array_equal(a, c) for a, b, c in zip(g1, g0, g2))
    assert "_inv1 = 1.0 / " in on.source_for(X, W)


def test_a_forward_temporarys_row_sums_are_held_in_a_local_with_the_same_bits():
    # invariant_sums takes the forward sweep's temporaries too (``fn.temps``): softmax's row
    # sums ``_t[i] += e[i, j]`` held in a local across each row
    r = np.random.default_rng(9)
    X, W = r.standard_normal((5, 7)), r.standard_normal((5, 7))
    # dot_loops off on both sides: it makes the held row sum one _sum_acc call
    on = coarsen.differentiate(softmax_loss, wrt=("X",), target="cpu", disable={"dot_loops"})
    off = coarsen.differentiate(softmax_loss, wrt=("X",), target="cpu", disable={"invariant_sums", "dot_loops"})
    forward = on.source_for(X, W).split("# reverse sweep")[0]
    assert re.search(r"_sum\d+ \+= ", forward), forward
    assert not re.search(r"_sum\d+ \+= ", off.source_for(X, W).split("# reverse sweep")[0])
    v1, g1 = on.value_and_grad(X, W)
    v0, g0 = off.value_and_grad(X, W)
    assert v1 == v0 and np.array_equal(g1, g0)


def test_a_name_bound_to_a_scratch_array_on_one_path_only_is_no_scratch_array():
    # X is the parameter Y where c is false: the loop's stores into X change Y[0], which must
    # be read in every trip (were X taken for a view of the tape, Y[0] would be read once)
    src = """
    def f(_ftape, Y, g, n, c):
        _ftape, X, _wtop = _scratch_empty(_ftape, 0, (n,), n) if c else (_ftape, Y, 0)
        for l in range(n):
            X[l] = g[l] * Y[0]
        return Y.copy()
    """
    before, after, text = _rewrite(src, {"_scratch_empty": _scratch})
    assert "_inv" not in text, text
    r = np.random.default_rng(10)
    g = r.standard_normal(4)
    for c in (False, True):
        _same(before, after, np.zeros(8), np.ones(4), g, 4, c)


@pytest.mark.parametrize("bind, moved", [
    # a transpose is another view of the same memory: X is no scratch array, nothing moves
    ("V = X.T", False),
    # a shape is no view: X stays a scratch array, t[k] moves
    ("m = X.shape[0]\n        V = np.ones((1, 1))", True),
])
def test_a_scratch_array_read_through_another_name_is_no_scratch_array(bind, moved):
    src = f"""
    def f(_ftape, t, n, k):
        _ftape, X, _wtop = _scratch_empty(_ftape, 0, (n, 1), n)
        {bind}
        for l in range(n):
            X[l, 0] = t[k] + V[0, 0]
        return X.copy()
    """
    before, after, text = _rewrite(src, {"_scratch_empty": _scratch})
    assert ("_inv" in text) == moved, text
    assert "V[0, 0]" in text.split("for l in")[1] or "V" not in bind.split("=")[0], text
    _same(before, after, np.zeros(8), np.array([0.5, 2.0]), 3, 1)


def test_a_value_reading_a_tape_view_where_the_loop_stores_into_the_tape_gives_up_its_other_parts():
    # the whole value reads W (bound by a tuple assignment) while the loop stores into the
    # tape: it stays, and its part 1.0 / t[k] alone moves
    src = """
    def f(_ftape, t, n, k):
        _ftape, W, _wtop = h(_ftape, n)
        A = np.zeros(n)
        for l in range(n):
            A[l] = W[0] * (1.0 / t[k])
            _ftape[1] = l + 1.0
        return A
    """
    before, after, text = _rewrite(src, {"h": lambda t, n: (t, t[:1], 0)})
    head, loop = _split(text)
    assert "_inv1 = 1.0 / t[k]" in head and "A[l] = W[0] * _inv1" in loop, text
    _same(before, after, np.ones(4), np.array([0.5, 2.0]), 3, 1)
