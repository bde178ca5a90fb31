"""coarsen.ad.reverse.adjoint_rows: each precondition pinned (issue 48's mutation run).

The hand-written reverse sweep of ``test_adjoint_rows`` (heat's stencil), changed so that one
precondition fails: the pass must leave the adjoint whole, and the function compute what it did;
or changed so that a rule must still give the ring."""
import numpy as np
import pytest

from tests.ad.reverse.test_adjoint_rows import _args, _replaced, _rewrite


def _same(before, after, *args):
    assert np.array_equal(before(*args), after(*args)), args


def test_an_allocation_with_a_tuple_shape_gets_the_ring():
    src = _replaced("x_bar = np.zeros(u.shape)", "x_bar = np.zeros((nt + 1, u.shape[1]))")
    before, after, text, new = _rewrite(src)
    assert "x_bar = np.zeros((_rows0, _ext0))" in text and "_ext0 = u.shape[1]" in text, text
    for nt in (1, 2, 5):
        _same(before, after, *_args(6, nt))


def test_an_allocation_of_an_array_of_unknown_rank_is_left_whole():
    # (the ranks know u only)
    src = _replaced("x_bar = np.zeros(u.shape)", "w = u\n    x_bar = np.zeros(w.shape)")
    _, _, text, new = _rewrite(src)
    assert "x_bar = np.zeros(w.shape)" in text and not new, text


def test_a_row_view_before_the_loop_is_left_whole():
    # v = x_bar[nt] is a view of row nt: in a ring its slot is given to another row while v
    # still reads it
    src = _replaced("    for i in range(u.shape[1]):\n        x_bar[nt, i] += seed[i]\n",
                    "    v = x_bar[nt]\n    for i in range(u.shape[1]):\n        v[i] += seed[i]\n") \
        .replace("out[i] = x_bar[0, i] + 0.5 * x_bar[1, i]", "out[i] = x_bar[0, i] + v[i]")
    before, after, text, new = _rewrite(src)
    assert "x_bar = np.zeros(u.shape)" in text and not new, text
    for nt in (1, 2, 5):
        _same(before, after, *_args(6, nt))
