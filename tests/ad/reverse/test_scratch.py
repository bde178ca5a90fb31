"""coarsen.ad.reverse.scratch: the reverse sweep's own arrays carved from the kept float tape.

The pass tests run it on hand-written reverse sweeps (values compared with the original, and
the cases it must leave alone); the end-to-end tests check gradients against the oracle, the
same bits as without the pass, and calls that reuse a tape holding an earlier call's arrays.
"""
import numpy as np
import pytest

import coarsen
from coarsen.codegen import runtime
from coarsen.ad.reverse.scratch import scratch_arrays
from tests.helpers_passes import rewrite
from tests.oracle import check_against_oracle
from tests.analysis.test_history_rows import heat_rows

HELPERS = {"np": np}
exec(runtime.helper_source(["_scratch_zeros", "_scratch_empty", "_reserve"]), HELPERS)  # noqa: S102


def _rewrite(src, made):
    used = set()

    def run(body, made_):
        out, u = scratch_arrays(body, made_, ranks={"u": 1, "w": 1})
        used.update(u)
        return out
    before, after, text = rewrite(src, run, made, HELPERS)
    return before, after, text, used


# a reverse sweep's shape: the forward pushes, the adjoints are allocated, the reverse pops
SWEEP = """
def f(u, w, _ftape):
    _fpos = 0
    n = u.shape[0]
    _ftape = _reserve(_ftape, n)
    for i in range(n):
        _ftape[_fpos] = u[i]
        _fpos += 1
    u_bar = np.zeros(u.shape)
    w_bar = np.empty((n, 2))
    out_bar = np.zeros(u.shape)
    for i in range(n - 1, -1, -1):
        _fpos -= 1
        x = _ftape[_fpos]
        u_bar[i] += x * w[i]
        w_bar[i, 0] = x
        w_bar[i, 1] = 2.0 * x
        out_bar[i] = u_bar[i] + w_bar[i, 1]
    return out_bar, _ftape
"""


def test_adjoints_come_from_the_tape_with_the_same_values():
    before, after, text, used = _rewrite(SWEEP, {"u_bar", "w_bar", "out_bar"})
    assert used == {"_scratch_zeros", "_scratch_empty"}
    assert "_ftape, u_bar, _wtop = _scratch_zeros(_ftape, _wtop, u.shape, u.size)" in text, text
    assert "_ftape, w_bar, _wtop = _scratch_empty(_ftape, _wtop, (n, 2), n * 2)" in text, text
    assert "out_bar = np.zeros(u.shape)" in text, text        # returned: its own array
    assert text.index("_wtop = _fpos") < text.index("_scratch_zeros"), text
    rng = np.random.default_rng(3)
    for n in (0, 1, 5, 300):
        u, w = rng.standard_normal(n), rng.standard_normal(n)
        ref = before(u, w, np.empty(4))
        # a tape that already holds garbage (an earlier call's arrays) must not leak into zeros
        tape = np.full(4 * n + 8, 1e300)
        got = after(u, w, tape)
        assert np.array_equal(ref[0], got[0])
        # the tape's own entries (the forward's pushes) were kept where it grew
        got2 = after(u, w, np.empty(1))
        assert np.array_equal(ref[0], got2[0])


@pytest.mark.parametrize("later, why", [
    ("    _ftape = _reserve(_ftape, 2 * n)\n", "the tape grows after the allocations"),
    ("    _ftape[_fpos] = 1.0\n", "the tape is written above its entries"),
    ("    _fpos += 1\n", "a push after the allocations"),
])
def test_left_alone_where_the_tape_is_written_afterwards(later, why):
    src = SWEEP.replace("    for i in range(n - 1, -1, -1):\n", later + "    for i in range(n - 1, -1, -1):\n", 1)
    _, _, text, used = _rewrite(src, {"u_bar", "w_bar", "out_bar"})
    assert not used and "_scratch" not in text, why


@pytest.mark.parametrize("use, why", [
    ("    v = u_bar[1:]\n", "a slice is a view that could outlive the tape's use"),
    ("    v = u_bar\n", "an alias"),
    ("    u_bar = np.zeros(u.shape)\n", "assigned twice"),
])
def test_left_alone_where_the_array_escapes(use, why):
    src = SWEEP.replace("    return out_bar", use + "    return out_bar", 1)
    _, _, text, _ = _rewrite(src, {"u_bar", "w_bar", "out_bar"})
    assert "u_bar = np.zeros(u.shape)" in text and "_scratch_zeros" not in text, why


def test_user_arrays_are_left_alone():
    _, _, text, used = _rewrite(SWEEP, {"w_bar"})
    assert "u_bar = np.zeros(u.shape)" in text and used == {"_scratch_empty"}, text


# the heat stencil with its whole history (the adjoint of the history is the scratch array)
heat = heat_rows


# heat's history adjoint as large as the history: ``adjoint_rows`` keeps only the two rows
# its reverse loop reaches (tests/ad/reverse/test_adjoint_rows.py), which leaves the tests of large
# scratch arrays nothing large (Options.disable)
WHOLE = frozenset({"adjoint_rows"})


@pytest.mark.parametrize("target", ["cpu", "python"])
def test_heat_gradient_uses_the_tape_and_matches_the_oracle(target):
    rng = np.random.default_rng(0)
    u0 = rng.standard_normal(9)
    g = coarsen.differentiate(heat, wrt=("u0", "kappa"), target=target)
    g(u0, 0.2, 6)
    # the history's adjoint is a ring of two rows (coarsen.ad.reverse.adjoint_rows)
    assert "_scratch_zeros(_ftape, _wtop, (_rows0, _ext0), _rows0 * _ext0)" in g.source
    check_against_oracle(heat, (u0, 0.2, 6), wrt=("u0", "kappa"), target=target)


def test_the_same_bits_as_without_the_pass_over_calls_that_reuse_the_tape(monkeypatch):
    rng = np.random.default_rng(1)
    cases = [(rng.standard_normal(nx), 0.1 + 0.3 * rng.random(), nt)
             for nx, nt in ((40, 30), (7, 3), (60, 50), (40, 30), (3, 0))]
    # kept from the first call on: later calls find the earlier calls' adjoints on the tape
    monkeypatch.setattr(coarsen.transforms.gradient, "KEEP_SCRATCH_ABOVE", 1000)
    g = coarsen.differentiate(heat, wrt=("u0", "kappa"), disable=WHOLE)
    got = [g.value_and_grad(*c) for c in cases for _ in range(2)]
    assert g.kept_tape_bytes >= 8 * 51 * 60         # u_bar of (nx, nt) = (60, 50)
    ref_g = coarsen.differentiate(heat, wrt=("u0", "kappa"), disable=WHOLE | {"scratch_arrays"})
    ref_g(*cases[0])
    assert "_scratch_zeros" not in ref_g.source
    for k, c in enumerate(cases):
        v, (gu, gk) = ref_g.value_and_grad(*c)
        for v2, (gu2, gk2) in got[2 * k:2 * k + 2]:
            assert v == v2 and gk == gk2 and np.array_equal(gu, gu2), c[2]


def test_a_first_call_with_large_scratch_arrays_keeps_its_tapes():
    rng = np.random.default_rng(2)
    small = (rng.standard_normal(8), 0.2, 4)
    large = (rng.standard_normal(300), 0.2, 500)       # u_bar: 501 x 300 > 2**17 floats
    g = coarsen.differentiate(heat, wrt=("u0", "kappa"), disable=WHOLE)
    g(*small)
    assert g.kept_tape_bytes < 8 * coarsen.transforms.gradient.KEEP_SCRATCH_ABOVE
    g2 = coarsen.differentiate(heat, wrt=("u0", "kappa"), disable=WHOLE)
    first = g2(*large)
    assert g2.kept_tape_bytes >= 8 * 501 * 300
    again = g2(*large)
    assert np.array_equal(first[0], again[0]) and first[1] == again[1]


@pytest.mark.parametrize("warm", [1, 70])
def test_a_later_call_with_large_scratch_arrays_keeps_its_tapes(warm):
    """A kind first called small, then large (more time steps): the large calls keep their
    tapes too (before, only a first call that large did, and every later call allocated,
    page-faulted and freed its reverse sweep's arrays: 5x slower at nt = 2000).  ``warm``
    = 70 small calls first: past ``GRAD_ONLY_AFTER``, where ``g(...)`` runs the gradient-only
    entry.  Results are bit for bit those of a gradient called large from the start."""
    from coarsen.transforms.tiers import GRAD_ONLY_AFTER
    assert 70 > GRAD_ONLY_AFTER
    rng = np.random.default_rng(3)
    small = (rng.standard_normal(8), 0.2, 4)
    large = (rng.standard_normal(300), 0.2, 500)       # u_bar: 501 x 300 > 2**17 floats
    g = coarsen.differentiate(heat, wrt=("u0", "kappa"), disable=WHOLE)
    for _ in range(warm):
        g(*small)
    assert g.kept_tape_bytes < 8 * coarsen.transforms.gradient.KEEP_SCRATCH_ABOVE
    got = [g(*large), g(*large), g.value_and_grad(*large)]
    assert g.kept_tape_bytes >= 8 * 501 * 300
    ref = coarsen.differentiate(heat, wrt=("u0", "kappa"), disable=WHOLE).value_and_grad(*large)
    for gu, gk in (got[0], got[1], got[2][1]):
        assert np.array_equal(gu, ref[1][0]) and gk == ref[1][1]
    assert got[2][0] == ref[0]
    small_again = g(*small)
    assert np.array_equal(small_again[0],
                          coarsen.differentiate(heat, wrt=("u0", "kappa"), disable=WHOLE)(*small)[0])


def test_a_read_of_fewer_axes_than_the_rank_is_a_view_and_is_left_alone():
    src = SWEEP.replace("    return out_bar", "    row = w_bar[0]\n    return out_bar", 1)
    _, _, text, used = _rewrite(src, {"u_bar", "w_bar", "out_bar"})
    assert "w_bar = np.empty((n, 2))" in text and used == {"_scratch_zeros"}, text


def test_an_array_of_unknown_rank_is_left_alone():
    def run(body, made):
        return scratch_arrays(body, made, ranks={})[0]
    _, _, text = rewrite(SWEEP, run, {"u_bar", "w_bar", "out_bar"}, HELPERS)
    assert "u_bar = np.zeros(u.shape)" in text and "_scratch_empty(_ftape, _wtop, (n, 2)" in text, text


# metamorphic variants of the heat stencil: the compiler's own names as the user's, the step in
# a helper, the statements of the loss split; each gives the same bits as heat itself
def heat_named_like_the_compiler(_wtop, _ftape, u_bar):
    _fpos = _wtop.shape[0]
    _scratch_zeros = np.zeros((u_bar + 1, _fpos))
    for i in range(_fpos):
        _scratch_zeros[0, i] = _wtop[i]
    for t in range(u_bar):
        for i in range(1, _fpos - 1):
            _scratch_zeros[t + 1, i] = _scratch_zeros[t, i] + _ftape * (
                _scratch_zeros[t, i - 1] - 2.0 * _scratch_zeros[t, i] + _scratch_zeros[t, i + 1])
    s = 0.0
    for i in range(_fpos):
        s += _scratch_zeros[u_bar, i] * _scratch_zeros[u_bar, i]
    return s


def _step(u, t, i, kappa):
    return u[t, i] + kappa * (u[t, i - 1] - 2.0 * u[t, i] + u[t, i + 1])


def heat_with_a_helper(u0, kappa, nt):
    nx = u0.shape[0]
    u = np.zeros((nt + 1, nx))
    for i in range(nx):
        u[0, i] = u0[i]
    for t in range(nt):
        for i in range(1, nx - 1):
            u[t + 1, i] = _step(u, t, i, kappa)
    s = 0.0
    for i in range(nx):
        last = u[nt, i]
        s += last * last
    return s


@pytest.mark.parametrize("variant", [heat_named_like_the_compiler, heat_with_a_helper],
                         ids=["compiler_names", "helper"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_renamed_and_split_variants(variant, dtype):
    """Each variant uses the tape for its history's adjoint and agrees with heat to rounding
    (the helper's inlined statements are planned apart, which may change the last bit, with or
    without this pass), and gives the same bits as itself without the pass."""
    rng = np.random.default_rng(5)
    u0 = rng.standard_normal(30).astype(dtype)
    ref = coarsen.differentiate(heat, wrt=(0, 1)).value_and_grad(u0, 0.2, 40)
    g = coarsen.differentiate(variant, wrt=(0, 1))
    got = g.value_and_grad(u0, 0.2, 40)
    assert "_scratch_zeros(_ftape, _wtop" in g.source
    assert got[1][0].dtype == dtype
    assert got[0] == ref[0]
    np.testing.assert_allclose(got[1][0], ref[1][0], rtol=1e-13, atol=0)
    np.testing.assert_allclose(got[1][1], ref[1][1], rtol=1e-13, atol=0)
    plain = coarsen.differentiate(variant, wrt=(0, 1), disable={"scratch_arrays"})
    same = plain.value_and_grad(u0, 0.2, 40)
    assert " = _scratch_zeros(" not in plain.source       # (the user's own is escaped: u_scratch_zeros)
    assert same[0] == got[0] and same[1][1] == got[1][1] and np.array_equal(same[1][0], got[1][0])
