"""coarsen.ad.reverse.adjoint_rows: the adjoint of a history array as a ring of the rows its
reverse time loop reaches.

The pass tests run it on hand-written reverse sweeps (the values compared with the original,
the input unchanged, and the shapes it must leave whole); the end-to-end tests check the
gradients of time loops of one, two and three rows' reach against the extended-precision
oracle, bit for bit against the whole adjoint (the pass switched off), for zero, one and many
trips, under names that look like the compiler's.
"""
import math

import gast
import numpy as np
import pytest

import coarsen
from coarsen.ad.reverse.adjoint_rows import adjoint_rows
from tests.helpers_passes import rewrite
from tests.oracle import check_against_oracle
from tests.analysis.test_history_rows import heat_rows, rnn_rows
from tests.ad.reverse.test_scratch import heat_with_a_helper as heat_in_helpers

SWEEP = """
def sweep(u, kappa, nt, seed):
    m = nt
    x_bar = np.zeros(u.shape)
    for i in range(u.shape[1]):
        x_bar[nt, i] += seed[i]
    for t in range(m - 1, -1, -1):
        for i in range(1, u.shape[1] - 1):
            g = x_bar[t + 1, i]
            x_bar[t, i] += g * (1 - 2 * kappa)
            x_bar[t, i - 1] += g * kappa
            x_bar[t, i + 1] += g * kappa
    out = np.zeros(u.shape[1])
    for i in range(u.shape[1]):
        out[i] = x_bar[0, i] + 0.5 * x_bar[1, i]
    return out
"""


def _rewrite(src, made=("x_bar",), params=("u", "kappa", "nt", "seed")):
    new = set()

    def run(body, made_):
        original = gast.dump(gast.Module(body=body, type_ignores=[]))
        out, n = adjoint_rows(body, made_, {"u": 2}, params=params)
        new.update(n)
        assert gast.dump(gast.Module(body=body, type_ignores=[])) == original   # input unchanged
        return out
    before, after, text = rewrite(src, run, made)
    return before, after, text, new


def _args(nx, nt, seed=0):
    r = np.random.default_rng(seed)
    return (np.zeros((nt + 1, nx)), 0.2 + 0.1 * r.random(), nt, r.standard_normal(nx))


@pytest.mark.parametrize("nt", [0, 1, 2, 7])
def test_the_ring_gives_the_same_values(nt):
    # (no trip: the history has one row, row 1 is not read)
    src = SWEEP if nt else SWEEP.replace(" + 0.5 * x_bar[1, i]", "")
    before, after, text, new = _rewrite(src)
    assert "x_bar = np.zeros((_rows0, _ext0))" in text and "_rows0 = 2 if m - 1 > -1" in text, text
    assert "_ext0 = u.shape[1]" in text and "for _col0 in range(_ext0):" in text, text
    assert "x_bar[_row0, _col0] = 0.0" in text and "x_bar[nt % _rows0, i] += seed[i]" in text, text
    assert "out[i] = x_bar[0, i]" in text, text
    assert {"_rows0", "_ext0", "_row0", "_row1", "_col0"} <= new
    args = _args(6, nt)
    assert np.array_equal(before(*args), after(*args))


def _replaced(old, new):
    assert old in SWEEP
    return SWEEP.replace(old, new)


@pytest.mark.parametrize("src, why", [
    (_replaced("x_bar[0, i] + 0.5 * x_bar[1, i]", "x_bar[0, i] + x_bar[2, i]"),
     "a row after the loop outside its last window"),
    (_replaced("x_bar[nt, i] += seed[i]", "x_bar[nt - 1, i] += seed[i]"),
     "a row before the loop that its first trip clears"),
    (_replaced("x_bar[nt, i] += seed[i]", "x_bar[i, i] += seed[i]"),
     "a row before the loop that is not the first trip's"),
    (_replaced("m = nt\n", "m = nt\n    m = m + 0\n"), "the loop's start assigned twice"),
    (_replaced("g = x_bar[t + 1, i]", "g = x_bar[t + 1, i]\n            if g > 1e300:\n                break"),
     "a break"),
    (_replaced("g = x_bar[t + 1, i]", "g = x_bar[t + 1, i]\n            t = 0"), "the loop variable assigned"),
    (_replaced("g = x_bar[t + 1, i]", "g = x_bar[t + 1, i] + np.sum(x_bar)"), "a whole-array use"),
    (_replaced("g = x_bar[t + 1, i]", "g = x_bar[t + 1, i] + x_bar[i, i]"), "a row not of the loop"),
    (_replaced("out = np.zeros(u.shape[1])", "out = np.zeros(u.shape[1])\n"
               "    for t in range(m - 1, -1, -1):\n        out[0] += x_bar[t, 0]"), "a second loop"),
    (_replaced("for t in range(m - 1, -1, -1):", "for t in range(m - 1, 0, -1):"),
     "row 0 after the loop outside the last window (t = 1: rows 1, 2)"),
    (_replaced("for t in range(m - 1, -1, -1):", "for t in range(m - 1, -2, -1):"),
     "a negative row in the loop"),
    (_replaced("x_bar[t, i] += g * (1 - 2 * kappa)", "x_bar[t - 8, i] += g * (1 - 2 * kappa)"),
     "a window wider than MAX_WINDOW rows"),
], ids=lambda v: v if len(v) < 80 else "")
def test_left_whole(src, why):
    before, after, text, new = _rewrite(src)
    assert "x_bar = np.zeros(u.shape)" in text and not new, why


def test_an_unresolved_start_with_nothing_before_the_loop():
    # (an RNN's state history: no row before the loop, so its start need not be resolved)
    src = _replaced("    for i in range(u.shape[1]):\n        x_bar[nt, i] += seed[i]\n", "") \
        .replace("for t in range(m - 1, -1, -1):", "for t in range(u.shape[0] - 2, -1, -1):")
    before, after, text, new = _rewrite(src)
    assert "_rows0 = 2 if u.shape[0] - 2 > -1 else u.shape[0]" in text, text
    for nt in (1, 2, 7):
        args = _args(6, nt)
        assert np.array_equal(before(*args), after(*args))


def test_not_compiler_made_left_whole():
    _, _, text, new = _rewrite(SWEEP, made=())
    assert "x_bar = np.zeros(u.shape)" in text and not new


def test_a_start_that_is_a_reassigned_parameter_is_left_whole():
    src = _replaced("m = nt\n", "m = nt\n    nt = nt + 0\n")
    _, _, text, new = _rewrite(src)
    assert "x_bar = np.zeros(u.shape)" in text and not new


# end to end: time loops whose reverse reaches one, two and three rows


def heat_shifted(u0, kappa, nt):
    # the same stencil written from the row it fills: u[t] from u[t - 1], t from 1
    nx = u0.shape[0]
    u = np.zeros((nt + 1, nx))
    for i in range(nx):
        u[0, i] = u0[i]
    for t in range(1, nt + 1):
        for i in range(1, nx - 1):
            u[t, i] = u[t - 1, i] + kappa * (u[t - 1, i - 1] - 2.0 * u[t - 1, i] + u[t - 1, i + 1])
    s = 0.0
    for i in range(nx):
        s += math.sin(u[nt, i])
    return s


def wave(u0, v0, c, nt):
    # a second-order scheme: row t + 2 from rows t + 1 and t (a window of three rows)
    nx = u0.shape[0]
    u = np.zeros((nt + 2, nx))
    for i in range(nx):
        u[0, i] = u0[i]
        u[1, i] = u0[i] + v0[i]
    for t in range(nt):
        for i in range(1, nx - 1):
            u[t + 2, i] = 2.0 * u[t + 1, i] - u[t, i] + c * (u[t + 1, i - 1] - 2.0 * u[t + 1, i]
                                                            + u[t + 1, i + 1])
    s = 0.0
    for i in range(nx):
        s += math.sin(u[nt + 1, i]) * u[nt, i]
    return s


def scalar_history(x0, a, nt):
    # a history of one axis: a ring of two numbers
    x = np.zeros(nt + 1)
    x[0] = x0
    for t in range(nt):
        x[t + 1] = math.sin(x[t]) * a + 0.1 * x[t]
    return x[nt] * x[nt]


def every_row_read(u0, kappa, nt):
    # the loss reads every row: the history's adjoint stays whole
    nx = u0.shape[0]
    u = np.zeros((nt + 1, nx))
    for i in range(nx):
        u[0, i] = u0[i]
    for t in range(nt):
        for i in range(1, nx - 1):
            u[t + 1, i] = u[t, i] + kappa * (u[t, i - 1] - 2.0 * u[t, i] + u[t, i + 1])
    s = 0.0
    for t in range(nt + 1):
        for i in range(nx):
            s += u[t, i] * u[t, i] * (t + 1)
    return s


def heat_named_like_the_ring(_rows0, _row0, _col0):
    # the user's names are the ring's own
    _row1 = _rows0.shape[0]
    _rows1 = np.zeros((_col0 + 1, _row1))
    for i in range(_row1):
        _rows1[0, i] = _rows0[i]
    for t in range(_col0):
        for i in range(1, _row1 - 1):
            _rows1[t + 1, i] = _rows1[t, i] + _row0 * (_rows1[t, i - 1] - 2.0 * _rows1[t, i]
                                                       + _rows1[t, i + 1])
    s = 0.0
    for i in range(_row1):
        s += _rows1[_col0, i] * _rows1[_col0, i]
    return s


def _heat_args(nx, nt, seed=0):
    r = np.random.default_rng(seed)
    return (r.standard_normal(nx), 0.1 + 0.3 * r.random(), nt)


def _wave_args(nx, nt, seed=0):
    r = np.random.default_rng(seed)
    return (r.standard_normal(nx), 0.1 * r.standard_normal(nx), 0.2, nt)


CASES = [
    (heat_rows, _heat_args, "_rows0 = 2 if"),
    (heat_shifted, _heat_args, "_rows0 = 2 if"),
    (heat_in_helpers, _heat_args, "_rows0 = 2 if"),
    (wave, _wave_args, "_rows0 = 3 if"),
    (scalar_history, lambda nx, nt, seed=0: (0.3 + 0.1 * seed, 0.9, nt), "_rows0 = 2 if"),
    (rnn_rows, lambda nx, nt, seed=0: (0.5 * np.random.default_rng(seed).standard_normal((4, 4)),
                                       np.random.default_rng(seed + 1).standard_normal(4), nt),
     "_rows0 = 2 if"),
    (every_row_read, _heat_args, None),
    # (the user's names that begin with ``_`` are escaped: ``u_rows0``)
    (heat_named_like_the_ring, _heat_args, "_rows0 = 2 if u_col0 - 1 > -1 else u_rows1.shape[0]"),
]


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn, factory, ring", CASES, ids=[c[0].__name__ for c in CASES])
def test_against_the_oracle(fn, factory, ring, coarse, target):
    g, _, _ = check_against_oracle(fn, factory(7, 5), target=target, coarse=coarse)
    if ring is None:
        assert "_rows0 = " not in g.source
    else:
        assert ring in g.source, g.source


# the gradients without this pass: the whole adjoint (Options.disable)
WHOLE = {"adjoint_rows"}


RINGS = [c for c in CASES if c[2] is not None]


@pytest.mark.parametrize("fn, factory, ring", RINGS, ids=[c[0].__name__ for c in RINGS])
def test_the_same_bits_as_the_whole_adjoint(fn, factory, ring):
    """Zero, one, two and many trips, and a large call after small ones (the ring on the kept
    tape), against the whole adjoint."""
    cases = [factory(nx, nt, seed) for seed, (nx, nt) in enumerate(
        ((6, 0), (6, 1), (5, 2), (9, 13), (40, 60), (3, 1)))]
    g = coarsen.differentiate(fn)
    got = [g.value_and_grad(*c) for c in cases]
    assert ring in g.source
    whole = coarsen.differentiate(fn, disable=WHOLE)
    ref = [whole.value_and_grad(*c) for c in cases]
    assert "_rows0 = " not in whole.source
    for (v, gs), (rv, rgs) in zip(got, ref):
        assert v == rv
        for a, b in zip(gs, rgs):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("variant", [heat_named_like_the_ring, heat_in_helpers],
                         ids=["renamed", "helpers"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_variants_agree_with_heat(variant, dtype):
    """The renamed stencil gives heat's bits; the one split into helpers
    (``tests.ad.reverse.test_scratch``) agrees to rounding (its inlined statements are planned apart);
    both keep the ring, in float32 too."""
    u0, kappa, nt = _heat_args(11, 9)
    args = (u0.astype(dtype), kappa, nt)
    ref = coarsen.differentiate(heat_rows).value_and_grad(*args)
    g = coarsen.differentiate(variant)
    got = g.value_and_grad(*args)
    assert "_rows0 = 2 if" in g.source and got[1][0].dtype == dtype
    if variant is heat_named_like_the_ring:
        assert got[0] == ref[0] and np.array_equal(got[1][0], ref[1][0]) and got[1][1] == ref[1][1]
    else:
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-13)
        np.testing.assert_allclose(got[1][0], ref[1][0], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(got[1][1], ref[1][1], rtol=1e-12)


# generated time loops: random reach (one to three rows), shifted loop bounds, rows read
# before the loop inside or outside the last window, one or two axes


def _generated(seed):
    """The source of a random history loop and the ring it should (or should not) get."""
    r = np.random.default_rng(seed)
    reach = int(r.integers(1, 4))              # rows t .. t + reach - 1 read, t + reach written
    shift = int(r.integers(0, 2))              # range(nt) or range(shift, nt + shift)
    two_d = bool(r.integers(0, 2))
    f = ["math.sin", "math.tanh", ""][int(r.integers(0, 3))]
    coef = [round(float(c), 3) for c in r.uniform(-0.6, 0.6, reach)]
    loss_rows = sorted({int(c) for c in r.integers(0, reach + 2, 2)})   # rows nt + reach - c
    el = (lambda row: f"u[{row}, i]") if two_d else (lambda row: f"u[{row}]")
    lo = "t - " + str(shift) if shift else "t"
    terms = " + ".join(f"{c} * {f}({el(f'{lo} + {k}' if k else lo)})" for k, c in enumerate(coef))
    body = f"u[{lo} + {reach}, i] = {terms}" if two_d else f"u[{lo} + {reach}] = {terms}"
    loop = f"for t in range({shift}, nt + {shift}):" if shift else "for t in range(nt):"
    loss = " + ".join(f"{el(f'nt + {reach - c}')} * {el(f'nt + {reach - c}')}" for c in loss_rows)
    if two_d:
        src = (f"def gen(u0, nt):\n    nx = u0.shape[0]\n    u = np.zeros((nt + {reach + 1}, nx))\n"
               f"    for k in range({reach}):\n        for i in range(nx):\n"
               f"            u[k, i] = u0[i] * (1.0 + 0.5 * k)\n"
               f"    {loop}\n        for i in range(nx):\n            {body}\n"
               f"    s = 0.0\n    for i in range(nx):\n        s += {loss}\n    return s\n")
    else:
        src = (f"def gen(u0, nt):\n    u = np.zeros(nt + {reach + 1})\n"
               f"    for k in range({reach}):\n        u[k] = u0[k]\n"
               f"    {loop}\n        {body}\n    return {loss}\n")
    # the ring where every row the loss reads is one the first reverse trip reaches and does
    # not clear: rows nt .. nt + reach - 1 (row nt + reach is never written; the initial rows
    # 0 .. reach - 1 lie in the last trip's window)
    ring = all(1 <= c <= reach for c in loss_rows)
    return src, ring, reach, two_d


SEEDS = range(12)


def _load(src, path, name):
    """The generated function ``gen`` of ``src``, from a module file (the oracle clones it)."""
    import importlib.util
    path.write_text("import math\nimport numpy as np\n\n\n" + src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.gen


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_history_loops(seed, tmp_path):
    src, ring, reach, two_d = _generated(seed)
    gen = _load(src, tmp_path / f"gen_{seed}.py", f"gen_{seed}")
    r = np.random.default_rng(100 + seed)
    u0 = 0.5 * r.standard_normal(5 if two_d else reach)
    cases = [(u0, nt) for nt in (0, 1, 2, 9)]
    g = coarsen.differentiate(gen, wrt="u0")
    got = [g.value_and_grad(*c) for c in cases]
    # the ring exactly where every row the loss reads lies in the first window
    assert (f"_rows0 = {reach + 1} if" in g.source) == ring, (src, g.source)
    check_against_oracle(gen, cases[-1], wrt="u0", target="cpu")
    whole = coarsen.differentiate(gen, wrt="u0", disable=WHOLE)
    for c, (v, gr) in zip(cases, got):
        rv, rgr = whole.value_and_grad(*c)
        assert v == rv and np.array_equal(gr, rgr), (src, c[1])


@pytest.mark.parametrize("seed", [s for s in range(12, 24) if _generated(s)[1]])
def test_generated_history_loops_get_their_ring(seed, tmp_path):
    """More generated loops whose loss reads rows of the first window only (seeds past
    ``SEEDS``, on the python target): each gets the ring.  Two fixes made the two-axis ones
    among them get it: a loss loop reading two rows, ``u[nt + 1, i]`` and ``u[nt, i]``, had
    become a reduction loop with an accumulator as large as the history (``u_bar += s_bar *
    _acc1``; ``coarsen.analysis.reductions._trip_varying``), and the reverse of the loop that
    sets the first rows, ``for k in range(1, -1, -1)``, was taken for a second time loop."""
    src, _, reach, _ = _generated(seed)
    gen = _load(src, tmp_path / f"gen_{seed}.py", f"gen_ring_{seed}")
    g = coarsen.differentiate(gen, wrt="u0", target="python")
    g(0.5 * np.ones(5 if "nx" in src else reach), 3)
    assert f"_rows0 = {reach + 1} if" in g.source, (src, g.source)
