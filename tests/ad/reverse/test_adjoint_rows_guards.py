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


AFTER = "out[i] = x_bar[0, i] + 0.5 * x_bar[1, i]"


def _reading_after(loop_and_read):
    """SWEEP with the rows after the loop read by ``loop_and_read`` (in the loop over i)."""
    return _replaced(AFTER, loop_and_read)


RING = {
    # the rows after the loop read by a loop over them (a scheme of several steps)
    "a loop over rows 0, 1": "for k in range(0, 2):\n            out[i] += x_bar[k, i]",
    "a loop down over rows 1, 0": "for k in range(1, -1, -1):\n            out[i] += x_bar[k, i]",
    "a loop over row 1": "for k in range(1, 2):\n            out[i] += x_bar[k, i]",
    "a loop over rows 0, 1 by range(2)": "for k in range(2):\n            out[i] += x_bar[k, i]",
    "a loop over rows 0, 1 with step 1": "for k in range(0, 2, 1):\n            out[i] += x_bar[k, i]",
}


@pytest.mark.parametrize("case", sorted(RING))
def test_rows_after_the_loop_read_in_a_loop_get_the_ring(case):
    before, after, text, new = _rewrite(_reading_after(RING[case]))
    assert "x_bar = np.zeros((_rows0, _ext0))" in text, text
    # (rows 0 and 1 are their own slots: no modulo where the loop's variable reads them)
    assert "out[i] += x_bar[k, i]" in text, text
    for nt in (1, 2, 5):
        _same(before, after, *_args(6, nt))


WHOLE = {
    # row 2 is not in the last window (rows 0 and 1)
    "a loop over rows 0, 1, 2": "for k in range(0, 3):\n            out[i] += x_bar[k, i]",
    "a loop down over rows 2, 1, 0": "for k in range(2, -1, -1):\n            out[i] += x_bar[k, i]",
    # step 2: the rule knows steps 1 and -1 only
    "a loop by twos": "for k in range(0, 4, 2):\n            out[i] += x_bar[k, i]",
    # k assigned again in the statement: not the loop's values only
    "k assigned again": "for k in range(0, 2):\n            out[i] += x_bar[k, i]\n"
                        "        k = 3\n        out[i] += x_bar[k, i]",
    # a loop without trips leaves k as it was (here: unbound, then 2)
    "a loop without trips": "k = 2\n        for k in range(1, 1):\n            pass\n"
                            "        out[i] += x_bar[k, i]",
    # a row index that is not a constant or such a loop's variable
    "a row index computed": "out[i] = x_bar[i % 2, i]",
}


@pytest.mark.parametrize("case", sorted(WHOLE))
def test_rows_after_the_loop_outside_the_last_window_keep_it_whole(case):
    before, after, text, new = _rewrite(_reading_after(WHOLE[case]))
    assert "x_bar = np.zeros(u.shape)" in text and not new, text
    for nt in (3, 5):       # (rows up to 3 read after the loop)
        _same(before, after, *_args(6, nt))


def test_a_loop_that_stops_at_1_keeps_row_2_in_the_ring():
    # t runs down to 1: the last window is rows 1, 2; row 2 is slot 2 % 2, not index 2
    src = _replaced("for t in range(m - 1, -1, -1):", "for t in range(m - 1, 0, -1):") \
        .replace(AFTER, "out[i] = x_bar[1, i] + 0.5 * x_bar[2, i]")
    before, after, text, new = _rewrite(src)
    assert "x_bar = np.zeros((_rows0, _ext0))" in text and "x_bar[2 % _rows0, i]" in text, text
    for nt in (2, 3, 6):
        _same(before, after, *_args(6, nt))


def test_a_row_before_the_loop_indexed_by_a_call_keeps_it_whole():
    src = _replaced("x_bar[nt, i] += seed[i]", "x_bar[int(nt), i] += seed[i]")
    before, after, text, new = _rewrite(src)
    assert "x_bar = np.zeros(u.shape)" in text and not new, text



def test_a_statement_that_names_only_the_adjoint_is_mapped_too():
    # x_bar[2, 0] += 1.0 names nothing else: its row is still a slot of the ring (t runs down
    # to 1: the last window is rows 1, 2, and row 2 is slot 0)
    src = _replaced("for t in range(m - 1, -1, -1):", "for t in range(m - 1, 0, -1):") \
        .replace("    out = np.zeros(u.shape[1])\n", "    x_bar[2, 0] += 1.0\n    out = np.zeros(u.shape[1])\n") \
        .replace(AFTER, "out[i] = x_bar[1, i] + 0.5 * x_bar[2, i]")
    before, after, text, new = _rewrite(src)
    assert "x_bar[2 % _rows0, 0] += 1.0" in text, text
    for nt in (2, 3, 6):
        _same(before, after, *_args(6, nt))


def test_a_window_wider_than_max_window_alone_keeps_it_whole():
    # rows t .. t + 9: ten rows, none negative
    src = _replaced("g = x_bar[t + 1, i]", "g = x_bar[t + 1, i] + x_bar[t + 9, i]")
    _, _, text, new = _rewrite(src)
    assert "x_bar = np.zeros(u.shape)" in text and not new, text


def test_a_negative_row_alone_keeps_it_whole():
    # t runs down to -1: row -1 is Python's last row, which a ring cannot hold
    src = _replaced("for t in range(m - 1, -1, -1):", "for t in range(m - 1, -2, -1):") \
        .replace(AFTER, "out[i] = x_bar[0, i]")
    before, after, text, new = _rewrite(src)
    assert "x_bar = np.zeros(u.shape)" in text and not new, text
    for nt in (1, 3):
        _same(before, after, *_args(6, nt))


def test_the_whole_allocation_is_replaced_not_kept_beside_the_ring():
    # (SWEEP allocates x_bar second, at an odd position: the statements after it are rewritten
    # from the next one on, the allocation itself not copied among them)
    from tests.ad.reverse.test_adjoint_rows import SWEEP
    before, after, text, new = _rewrite(SWEEP)
    assert text.count("x_bar = np.zeros(") == 1 and "x_bar = np.zeros((_rows0, _ext0))" in text, text
    for nt in (1, 3):
        _same(before, after, *_args(6, nt))


SWEEP3 = """
def sweep(u, kappa, nt, seed):
    m = nt
    x_bar = np.zeros((nt + 1, 2, 3))
    for j in range(2):
        for i in range(3):
            x_bar[nt, j, i] += seed[i] + j
    for t in range(m - 1, -1, -1):
        for j in range(2):
            for i in range(3):
                g = x_bar[t + 1, j, i]
                x_bar[t, j, i] += g * kappa + 1.0
    out = np.zeros(3)
    for i in range(3):
        out[i] = x_bar[0, 0, i] + x_bar[0, 1, i] + 0.5 * x_bar[1, 1, i]
    return out
"""


def test_a_ring_of_rank_three_zeroes_each_axis_to_its_own_extent():
    # axes 1 and 2 of different lengths (2, 3): the zeroing loops of a trip run over each
    before, after, text, new = _rewrite(SWEEP3)
    assert "x_bar = np.zeros((_rows0, _ext0, _ext1))" in text, text
    assert "in range(_ext0)" in text and "in range(_ext1)" in text, text
    for nt in (1, 2, 5):
        _same(before, after, *_args(6, nt))
