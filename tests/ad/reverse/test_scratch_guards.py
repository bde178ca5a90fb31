"""``coarsen.ad.reverse.scratch``: the preconditions the mutation run
(``python -m tests.mutation coarsen/ad/reverse/scratch.py``) found unpinned.

A first write decided at run time (``np.empty(S) if c else np.zeros(S)``) comes from the tape
too, with the same values either way; an allocation whose shape is neither ``Y.shape`` nor a
non-empty tuple, and allocations followed by an array push onto the tape, are left alone.
Pass-level, on hand-written reverse sweeps (``tests.helpers_passes.rewrite``).
"""
import numpy as np
import pytest

from coarsen.ad.reverse.scratch import scratch_arrays
from coarsen.codegen import runtime
from tests.helpers_passes import rewrite

HELPERS = {"np": np}
exec(runtime.helper_source(["_scratch_zeros", "_scratch_empty", "_reserve", "_push_array"]),  # noqa: S102
     HELPERS)

MADE = {"u_bar", "w_bar", "out_bar"}

SWEEP = """
def f(u, w, c, _ftape):
    _fpos = 0
    n = u.shape[0]
    _ftape = _reserve(_ftape, n)
    for i in range(n):
        _ftape[_fpos] = u[i]
        _fpos += 1
    u_bar = np.zeros(u.shape)
    w_bar = np.empty((n, 2)) if c else np.zeros((n, 2))
    out_bar = np.zeros(u.shape)
    for i in range(n - 1, -1, -1):
        _fpos -= 1
        x = _ftape[_fpos]
        u_bar[i] += x * w[i]
        if c:
            w_bar[i, 0] = x
        w_bar[i, 1] = 2.0 * x
        out_bar[i] = u_bar[i] + w_bar[i, 1] + w_bar[i, 0]
    return out_bar, _ftape
"""


def _rewrite(src):
    used = set()

    def run(body, made):
        out, u = scratch_arrays(body, made, ranks={"u": 1, "w": 1})
        used.update(u)
        return out
    before, after, text = rewrite(src, run, MADE, HELPERS)
    return before, after, text, used


def test_a_first_write_decided_at_run_time_comes_from_the_tape():
    before, after, text, used = _rewrite(SWEEP)
    assert used == {"_scratch_zeros", "_scratch_empty"}
    assert ("_ftape, w_bar, _wtop = _scratch_empty(_ftape, _wtop, (n, 2), n * 2) if c else "
            "_scratch_zeros(_ftape, _wtop, (n, 2), n * 2)") in text, text
    rng = np.random.default_rng(4)
    for n in (1, 6):
        for c in (True, False):
            u, w = rng.standard_normal(n), rng.standard_normal(n)
            ref = before(u, w, c, np.empty(4))
            got = after(u, w, c, np.full(4 * n + 8, 1e300))   # garbage above the entries
            assert np.array_equal(ref[0], got[0]), (n, c)


@pytest.mark.parametrize("shape", ["n", "()", "2 * n"])
def test_other_shapes_are_left_alone(shape):
    src = SWEEP.replace("    out_bar = np.zeros(u.shape)\n",
                        f"    out_bar = np.zeros(u.shape)\n    v_bar = np.zeros({shape})\n", 1)

    def run(body, made):
        return scratch_arrays(body, made | {"v_bar"}, ranks={"u": 1, "w": 1})[0]
    _, _, text = rewrite(src, run, MADE, HELPERS)
    assert f"v_bar = np.zeros({shape})" in text and "_scratch_zeros(_ftape, _wtop, u.shape" in text, text


def test_left_alone_where_an_array_is_pushed_afterwards():
    src = SWEEP.replace("    for i in range(n - 1, -1, -1):\n",
                        "    _ftape, _fpos = _push_array(_ftape, _fpos, w)\n"
                        "    _fpos -= n\n"
                        "    for i in range(n - 1, -1, -1):\n", 1)
    _, _, text, used = _rewrite(src)
    assert not used and "_scratch" not in text, text


# ---------------------------------------------------------------------------- sampled mutants


def test_a_read_with_more_indices_than_the_rank_is_a_view_and_left_alone():
    """``u_bar[0, None]`` of the rank-1 ``u_bar`` indexes more axes than it has: a one-element
    view, here returned.  Carved from the kept tape, the next call's arrays would overwrite the
    value the first call returned."""
    src = SWEEP.replace("    return out_bar, _ftape\n", "    return out_bar, u_bar[0, None], _ftape\n", 1)
    before, after, text, used = _rewrite(src)
    assert "u_bar = np.zeros(u.shape)" in text, text
    rng = np.random.default_rng(5)
    tape = np.full(64, 1e300)
    u1, u2, w = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal(3)
    first = after(u1, w, True, tape)
    after(u2, w, True, tape)
    assert np.array_equal(first[1], before(u1, w, True, np.empty(4))[1])


def test_a_view_read_spelled_by_another_string_object_is_left_alone():
    """The compiler builds names with f-strings: two ``Name`` nodes of one array need not hold
    the same ``str`` object, and ``w_bar[i]`` (a row of the rank-2 ``w_bar``) is a view
    whichever object spells it."""
    import gast

    src = SWEEP.replace("        out_bar[i] = u_bar[i] + w_bar[i, 1] + w_bar[i, 0]\n",
                        "        out_bar[i] = u_bar[i] + w_bar[i, 1] + w_bar[i, 0]\n"
                        "        r = w_bar[i]\n        out_bar[i] += r[0]\n", 1)

    def run(body, made):
        for st in body:
            for n in gast.walk(st):
                if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name) and \
                        n.value.id == "w_bar" and isinstance(n.slice, gast.Name):
                    n.value.id = "".join(["w_", "bar"])      # equal, not the same object
        return scratch_arrays(body, made, ranks={"u": 1, "w": 1})[0]
    _, _, text = rewrite(src, run, MADE, HELPERS)
    assert "w_bar = np.empty((n, 2)) if c else np.zeros((n, 2))" in text, text
    assert "_scratch_zeros(_ftape, _wtop, u.shape, u.size)" in text, text


def test_allocations_after_many_statements():
    """The first rewritten allocation is the 301st statement: ``_wtop`` is set before it (a
    position compared by value, not by identity: ints above 256 are distinct objects)."""
    filler = "".join(f"    d{k} = {k}\n" for k in range(300))
    src = SWEEP.replace("    _fpos = 0\n", "    _fpos = 0\n" + filler, 1)
    before, after, text, used = _rewrite(src)
    assert text.index("_wtop = _fpos") < text.index("_scratch_zeros"), text
    rng = np.random.default_rng(6)
    u, w = rng.standard_normal(4), rng.standard_normal(4)
    assert np.array_equal(before(u, w, False, np.empty(4))[0], after(u, w, False, np.full(40, 1e300))[0])


def test_a_pop_spelled_by_another_string_object_is_a_pop():
    """``_fpos -= 1`` whose ``Name`` holds an equal but distinct ``str`` (names built by the
    compiler) is still a pop: the pass applies."""
    import gast

    def run(body, made):
        for st in body:
            for n in gast.walk(st):
                if isinstance(n, gast.AugAssign) and isinstance(n.target, gast.Name) and \
                        n.target.id == "_fpos" and isinstance(n.op, gast.Sub):
                    n.target.id = "".join(["_f", "pos"])
        return scratch_arrays(body, made, ranks={"u": 1, "w": 1})[0]
    _, _, text = rewrite(SWEEP, run, MADE, HELPERS)
    assert "_ftape, u_bar, _wtop = _scratch_zeros(_ftape, _wtop, u.shape, u.size)" in text, text


def test_a_size_is_no_shape():
    """``np.zeros(u.size)``: an attribute other than ``.shape`` is left alone."""
    src = SWEEP.replace("    out_bar = np.zeros(u.shape)\n",
                        "    out_bar = np.zeros(u.shape)\n    v_bar = np.zeros(u.size)\n", 1)

    def run(body, made):
        return scratch_arrays(body, made | {"v_bar"}, ranks={"u": 1, "w": 1})[0]
    _, _, text = rewrite(src, run, MADE, HELPERS)
    assert "v_bar = np.zeros(u.size)" in text and "_scratch_zeros(_ftape, _wtop, u.shape" in text, text


def test_the_tape_written_between_two_allocations():
    """A store into the tape after ``u_bar``'s allocation and before ``w_bar``'s: ``u_bar``
    (which the store would overwrite) is left alone, ``w_bar`` comes from the tape."""
    src = SWEEP.replace("    u_bar = np.zeros(u.shape)\n",
                        "    u_bar = np.zeros(u.shape)\n    _ftape[_fpos:_fpos + 16] = 7.0\n", 1)
    before, after, text, used = _rewrite(src)
    assert "u_bar = np.zeros(u.shape)" in text, text
    assert "_scratch_empty(_ftape, _wtop, (n, 2), n * 2) if c" in text, text
    assert text.index("_ftape[_fpos:_fpos + 16] = 7.0") < text.index("_wtop = _fpos"), text
    rng = np.random.default_rng(7)
    u, w = rng.standard_normal(12), rng.standard_normal(12)
    assert np.array_equal(before(u, w, True, np.zeros(200))[0], after(u, w, True, np.zeros(200))[0])
