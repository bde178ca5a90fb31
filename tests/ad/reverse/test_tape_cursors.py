"""Tape cursors (coarsen.ad.reverse.tape_cursors): a loop that only pushes and pops counts its
tape position in an unsigned cursor.

The rewrite on statements: what a loop becomes, both tapes, the outermost loop that qualifies,
and each use of the position that keeps a loop signed.  Then programs through the compiler:
the cursor where the forward sweep's copy loop pushes (heat), conditional pushes of both
tapes, pushes whose count changes from trip to trip; the same bits as without the pass, the
oracle, and variants (renamed, a helper, other sizes, float32 inputs).
"""
import numpy as np
import pytest

import coarsen
from coarsen.ad.reverse.tape_cursors import tape_cursors

from tests.helpers_passes import body_text as _text, parse_body as _parse
from tests.oracle import check_against_oracle


def _run(src):
    body = _parse(src)
    before = _text(body)
    out = tape_cursors(body)
    assert _text(body) == before                    # the input is not modified
    return _text(out)


PUSHES = """
_ftape = _reserve(_ftape, _fpos + n * nt)
for t in range(nt):
    for i in range(n):
        _ftape[_fpos] = u[i]
        _fpos += 1
        u[i] = v[i]
s = _fpos
"""


def test_the_outermost_loop_that_only_pushes_counts_in_a_cursor():
    assert _run(PUSHES) == """_ftape = _reserve(_ftape, _fpos + n * nt)
_tc1 = np.uint64(_fpos)
for t in range(nt):
    for i in range(n):
        _ftape[_tc1] = u[i]
        _tc1 += np.uint64(1)
        u[i] = v[i]
_fpos = np.int64(_tc1)
s = _fpos"""


def test_pops_count_down_in_the_cursor():
    out = _run("""
for i in range(n - 1, -1, -1):
    _fpos -= 2
    u[i] = _ftape[_fpos]
    w = _ftape[_fpos] * 2.0
""")
    assert out == """_tc1 = np.uint64(_fpos)
for i in range(n - 1, -1, -1):
    _tc1 -= np.uint64(2)
    u[i] = _ftape[_tc1]
    w = _ftape[_tc1] * 2.0
_fpos = np.int64(_tc1)"""


def test_both_tapes_and_pushes_under_a_branch():
    out = _run("""
for i in range(n):
    b = x[i] > 0.0
    _itape[_ipos] = b
    _ipos += 1
    if b:
        _ftape[_fpos] = y[i]
        _fpos += 1
        y[i] = 0.0
""")
    assert "_tc1 = np.uint64(_fpos)" in out and "_tc2 = np.uint64(_ipos)" in out
    assert "_itape[_tc2] = b" in out and "_ftape[_tc1] = y[i]" in out
    assert "_fpos = np.int64(_tc1)" in out and "_ipos = np.int64(_tc2)" in out
    assert "_fpos +=" not in out and "_ipos +=" not in out


def test_an_outer_loop_that_reserves_leaves_its_inner_loop_to_count():
    out = _run("""
for t in range(n):
    _ftape = _reserve(_ftape, _fpos + t)
    for i in range(t):
        _ftape[_fpos] = s[i]
        _fpos += 1
        s[i] = 0.0
""")
    assert out == """for t in range(n):
    _ftape = _reserve(_ftape, _fpos + t)
    _tc1 = np.uint64(_fpos)
    for i in range(t):
        _ftape[_tc1] = s[i]
        _tc1 += np.uint64(1)
        s[i] = 0.0
    _fpos = np.int64(_tc1)"""


def test_a_cursor_name_the_function_uses_is_skipped():
    assert "_tc2 = np.uint64(_fpos)" in _run("_tc1 = 0\n" + PUSHES)


#: loops that mention the position otherwise: each keeps its signed position
REFUSED = {
    "reservation": "for i in range(n):\n    _ftape = _reserve(_ftape, _fpos + 1)\n"
                   "    _ftape[_fpos] = u[i]\n    _fpos += 1",
    "set": "for i in range(n):\n    _ftape[_fpos] = u[i]\n    _fpos = 0",
    "slice": "for i in range(n):\n    _ftape[_fpos:_fpos + 2] = u[i]\n    _fpos += 2",
    "offset index": "for i in range(n):\n    _ftape[_fpos + 1] = u[i]\n    _fpos += 1",
    "other tape": "for i in range(n):\n    _itape[_fpos] = 1\n    _fpos += 1",
    "step by a name": "for i in range(n):\n    _ftape[_fpos] = u[i]\n    _fpos += k",
    "step by 0": "for i in range(n):\n    _ftape[_fpos] = u[i]\n    _fpos += 0",
    "step by a float": "for i in range(n):\n    _ftape[_fpos] = u[i]\n    _fpos += 1.0",
    "multiplied": "for i in range(n):\n    _ftape[_fpos] = u[i]\n    _fpos *= 2",
    "read": "for i in range(n):\n    _ftape[_fpos] = u[i]\n    _fpos += 1\n    k = _fpos",
    "passed": "for i in range(n):\n    _ftape[_fpos] = u[i]\n    _fpos += 1\n    f(_fpos)",
    "tape assigned": "for i in range(n):\n    _ftape[_fpos] = u[i]\n    _fpos += 1\n"
                     "    _ftape = other",
    "else": "for i in range(n):\n    _ftape[_fpos] = u[i]\n    _fpos += 1\nelse:\n    pass",
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused(case):
    src = REFUSED[case]
    assert _run(src) == _text(_parse(src))


def test_a_while_loop_keeps_its_position_but_its_for_loops_count():
    out = _run("while k > 0:\n    k -= 1\n    _ftape[_fpos] = u[k]\n    _fpos += 1\n"
               "    for i in range(n):\n        _ftape[_fpos] = u[i]\n        _fpos += 1")
    assert out.startswith("while k > 0:\n    k -= 1\n    _ftape[_fpos] = u[k]\n    _fpos += 1\n")
    assert "_tc1 = np.uint64(_fpos)" in out


# programs through the compiler

def heat(u0, kappa, nt):
    n = u0.shape[0]
    u = u0.copy()
    un = u0.copy()
    for t in range(nt):
        for i in range(1, n - 1):
            un[i] = u[i] + kappa * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        for i in range(1, n - 1):
            u[i] = un[i]
    return np.sum(u * u)


def heat_renamed(state0, k, steps):
    m = state0.shape[0]
    cur = state0.copy()
    nxt = state0.copy()
    for s in range(steps):
        for j in range(1, m - 1):
            nxt[j] = cur[j] + k * (cur[j - 1] - 2.0 * cur[j] + cur[j + 1])
        for j in range(1, m - 1):
            cur[j] = nxt[j]
    return np.sum(cur * cur)


def _step(u, un, kappa):
    n = u.shape[0]
    for i in range(1, n - 1):
        un[i] = u[i] + kappa * (u[i - 1] - 2.0 * u[i] + u[i + 1])
    for i in range(1, n - 1):
        u[i] = un[i]


def heat_helper(u0, kappa, nt):
    u = u0.copy()
    un = u0.copy()
    for t in range(nt):
        _step(u, un, kappa)
    return np.sum(u * u)


def branchy(x, a, nt):
    y = x.copy()
    for t in range(nt):
        for i in range(y.shape[0]):
            if y[i] > 0.0:
                y[i] = y[i] * a
            else:
                y[i] = y[i] + a * y[i] * y[i]
    return np.sum(y)


def triangle(x, c):
    n = x.shape[0]
    s = np.zeros(n)
    for t in range(n):
        for i in range(t):
            s[i] = s[i] * c + x[t] * s[i]
        s[t] = x[t]
    return np.sum(s * s)


PROGRAMS = {
    heat: (np.linspace(0.0, 1.0, 9) ** 2, 0.2, 7),
    heat_renamed: (np.linspace(0.0, 1.0, 9) ** 2, 0.2, 7),
    heat_helper: (np.linspace(0.0, 1.0, 9) ** 2, 0.2, 7),
    branchy: (np.linspace(-0.9, 1.1, 7), 0.7, 3),
    triangle: (np.linspace(0.1, 1.0, 6), 0.5),
}


def _grad(fn, args, disable=()):
    g = coarsen.differentiate(fn, wrt=(0, 1), target="cpu", disable=set(disable))
    return g, g.value_and_grad(*args)


@pytest.mark.parametrize("fn", list(PROGRAMS), ids=lambda f: f.__name__)
def test_the_cursor_is_used_and_the_bits_are_those_without_it(fn):
    args = PROGRAMS[fn]
    g, (v1, g1) = _grad(fn, args)
    off, (v2, g2) = _grad(fn, args, disable={"tape_cursors"})
    src, off_src = g.source_for(*args), off.source_for(*args)
    assert "np.uint64(_fpos)" in src and "_tc" not in off_src
    assert v1 == v2
    for a, b in zip(g1, g2):
        assert np.array_equal(a, b), fn.__name__


def test_conditional_pushes_count_both_tapes():
    src = coarsen.differentiate(branchy, wrt=(0, 1), target="cpu").source_for(*PROGRAMS[branchy])
    assert "np.uint64(_ipos)" in src and "_itape[_tc" in src and "_ftape[_tc" in src


@pytest.mark.parametrize("target", ["cpu", "python"])
@pytest.mark.parametrize("fn", list(PROGRAMS), ids=lambda f: f.__name__)
def test_programs_against_the_oracle(fn, target):
    check_against_oracle(fn, PROGRAMS[fn], target=target, wrt=(0, 1))


@pytest.mark.parametrize("n, nt", [(3, 1), (3, 0), (17, 11), (64, 40)])
def test_other_sizes_and_float32(n, nt):
    u0 = np.cos(np.linspace(0.0, 3.0, n))
    check_against_oracle(heat, (u0, 0.2, nt), target="cpu", wrt=(0, 1))
    g = coarsen.differentiate(heat, wrt=(0, 1), target="cpu")
    v64, g64 = g.value_and_grad(u0.astype(np.float32).astype(np.float64), 0.2, nt)
    v32, g32 = g.value_and_grad(u0.astype(np.float32), 0.2, nt)
    assert v32 == v64 and g32[0].dtype == np.float32
    assert np.array_equal(g32[0], g64[0].astype(np.float32))


def test_a_second_call_on_the_grown_tape():
    # the cursor starts where the position stands: a call after one that grew the tape
    g = coarsen.differentiate(heat, wrt=(0, 1), target="cpu")
    small, big = (np.linspace(0.0, 1.0, 5), 0.2, 2), (np.linspace(0.0, 1.0, 40), 0.2, 30)
    first = g.value_and_grad(*small)
    g.value_and_grad(*big)
    again = g.value_and_grad(*small)
    assert first[0] == again[0] and all(np.array_equal(a, b) for a, b in zip(first[1], again[1]))
