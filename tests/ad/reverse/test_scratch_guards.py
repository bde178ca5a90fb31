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
