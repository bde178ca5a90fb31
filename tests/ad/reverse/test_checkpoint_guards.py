"""``coarsen.ad.reverse.checkpoint``: the preconditions the mutation run
(``python -m tests.mutation coarsen/ad/reverse/checkpoint.py``) checks, pinned fast.

Unit level: ``budget_error`` answers only the budget's ``MemoryError`` and says which of its
three cases happened; ``budget_check``'s statements; what ``_is_push``, ``_subscript_stores``
and ``exposed_reads`` see in emitted code; a loop's note is the first one given.  Program
level (python target, gradients equal to the unbudgeted gradient bit for bit, and to the
finite-difference oracle): a parameter as the loop's state, an array read in the loop and
overwritten after it, a loop with a start and a step, an integer scalar in the state, trips
that tape more after the first two (the compile-time bound, not the probe, sets the stride),
revolve; loops refused with their reasons (elements of an integer array written, a view
assigned); the report says how the tape per trip was found.
"""
import ast
import io
import math
import types

import gast
import numpy as np
import pytest

import coarsen
from coarsen import CoarsenError
from coarsen.ad.reverse.checkpoint import (BUDGET_MARK, PEAK_UNCHECKED, CheckpointMixin,
                                           _is_push, _subscript_stores, budget_check,
                                           budget_error, exposed_reads)
from tests.oracle import assert_grad_close, fd_grad

# ---------------------------------------------------------------------------- budget_error


def _budget(*args):
    return budget_error(MemoryError(*args), 1000)


def test_budget_error_answers_only_the_budget_mark():
    assert budget_error(ValueError(BUDGET_MARK, "f.py:3", 100, 50), 50) is None
    assert budget_error(MemoryError("other", "f.py:3", 100, 50), 50) is None
    assert budget_error(MemoryError(BUDGET_MARK), 50) is None
    assert budget_error(MemoryError(BUDGET_MARK, "f.py:3", 100), 50) is None
    assert budget_error(MemoryError(BUDGET_MARK, "f.py:3", 100, 50, "peak", 0), 50) is None
    assert budget_error(MemoryError("coarsen: the tape would exceed 8 GiB"), 50) is None
    assert isinstance(_budget(BUDGET_MARK, "f.py:3", 100, 50), CoarsenError)


def test_budget_error_names_the_line():
    line = 2       # this file's second line
    err = _budget(BUDGET_MARK, f"{__file__}:{line}", 100, 1000)
    assert err.lineno == line and err.filename == __file__
    assert err.source_line is not None and "checkpoint" in err.source_line
    err = _budget(BUDGET_MARK, "f.py:x", 100, 1000)
    assert err.lineno is None and err.source_line is None


def test_budget_error_three_cases():
    need = _budget(BUDGET_MARK, "f.py:3", 120, 1000)
    assert "f.py:3 needs at least 120 bytes" in need.problem and "max_tape_bytes=120" in need.hint
    none = _budget(BUDGET_MARK, "f.py:3", 120, 1000, PEAK_UNCHECKED)
    assert "tapes reached 120 bytes" in none.problem
    assert "no loop of the function is checkpointed" in none.problem
    assert "needs at least" not in none.problem
    two = _budget(BUDGET_MARK, "f.py:3", 120, 1000, "peak:12,30")
    assert "the loops at lines 12, 30 of f.py" in two.problem
    assert "no loop of the function" not in two.problem
    one = _budget(BUDGET_MARK, "f.py:3", 120, 1000, "peak:12")
    assert "the checkpoint strides of the loop at f.py:12 are" in one.problem
    bare = _budget(BUDGET_MARK, "f.py:3", 120, 1000, "peak")
    assert "the checkpoint strides of the loop at f.py:3 are" in bare.problem


# ---------------------------------------------------------------------------- budget_check


def _text(stmts):
    module = ast.fix_missing_locations(gast.gast_to_ast(gast.Module(body=stmts, type_ignores=[])))
    return ast.unparse(module)


def _em(ks, f, i, notes=()):
    return types.SimpleNamespace(checkpoint_ks=ks, uses_ftape=f, uses_itape=i,
                                 checkpoint_notes=list(notes), max_tape_bytes=1000)


FN = types.SimpleNamespace(body=[], filename="f.py")


def test_budget_check_statements():
    notes = [(12, "checkpointed (two-level ...)"), (30, "not checkpointed: a while loop"),
             (40, "checkpointed (two-level ...)")]
    text = _text(budget_check(_em(["_ckk", "_ckrv"], True, True, notes), FN))
    assert "_tape_floats = max(_peakf, _fpos)" in text and "_tape_ints = max(_peaki, _ipos)" in text
    assert "if 8 * (_tape_floats + _tape_ints) > 1000:" in text
    assert "'f.py:40'" in text and "'peak:12,40'" in text
    text = _text(budget_check(_em([], True, False), FN))
    assert "_tape_floats = _fpos" in text and "_tape_ints = 0" in text
    assert "'f.py:0'" in text and repr(PEAK_UNCHECKED) in text
    text = _text(budget_check(_em([], False, True), FN))
    assert "_tape_floats = 0" in text and "_tape_ints = _ipos" in text and "MemoryError" in text
    text = _text(budget_check(_em([], False, False), FN))
    assert text == "_tape_floats = 0\n_tape_ints = 0"


# ---------------------------------------------------------------------------- analysis of code


def _st(code):
    (st,) = gast.parse(code).body
    return st


@pytest.mark.parametrize("code, push", [
    ("_ftape[_fpos] = v", True),
    ("_itape[_ipos] = v.shape[0]", True),
    ("_ftape, _fpos = _push_array(_ftape, _fpos, v)", True),
    ("a[i] = v", False),
    ("o.t[0] = v", False),
    ("_ftape[_fpos] = _itape[_ipos] = v", False),
    ("_ftape[_fpos] += v", False),
    ("f(v)", False),
    ("a = _push_array(_ftape, _fpos, v)", False),
    ("a, b = _push_array(_ftape, _fpos, v)", False),
    ("_ftape, _fpos = _grow(_ftape, _fpos, v)", False),
    ("_ftape, _fpos = h.k(_ftape, _fpos, v)", False),
    ("_ftape, _fpos = 3, 4", False),
])
def test_is_push(code, push):
    assert _is_push(_st(code)) is push


def test_subscript_stores():
    code = gast.parse("a[i] = x\ny = b[i]\nc[i, j] += 1.0\no.t[0] = v\nz = w\n").body
    assert _subscript_stores(code) == {"a", "c"}


@pytest.mark.parametrize("code, pushes, exposed", [
    ("_ftape[_fpos] = a\na = b", True, {"_ftape", "_fpos", "a", "b"}),
    ("_ftape[_fpos] = a\na = b", False, {"b"}),
    ("_ftape, _fpos = _push_array(_ftape, _fpos, a)\na = b", False, {"b"}),
    ("if c:\n    x = 1\nelse:\n    x = 2\ny = x", True, {"c"}),
    ("if c:\n    x = 1\ny = x", True, {"c", "x"}),
    ("if c:\n    x = y\nelse:\n    x = z", True, {"c", "y", "z"}),
    ("for i in range(n):\n    s = s + i", True, {"range", "n", "s"}),
    ("for i in range(n):\n    t = 1\nu = t", True, {"range", "n", "t"}),
    ("while k < n:\n    k = k + 1", True, {"k", "n"}),
    ("s += 1", True, {"s"}),
    ("s = 0\ns += y", True, {"y"}),
    ("a[i] += 1.0", True, {"a"}),
    ("a[j] += 1.0", True, {"a", "j"}),
    ("f(x)\nx = 1", True, {"f", "x"}),
])
def test_exposed_reads(code, pushes, exposed):
    got, defined = exposed_reads(gast.parse(code).body, {"i"}, pushes)
    assert got == exposed


def test_exposed_reads_defines():
    _, defined = exposed_reads(gast.parse("if c:\n    x = 1\n    y = 1\nelse:\n    x = 2\n"
                                          "for j in range(n):\n    z = 1\nw = x").body)
    assert defined == {"x", "w"}


def test_a_loops_note_is_its_first():
    em = types.SimpleNamespace(checkpoint_notes=())
    a, b = (types.SimpleNamespace(loc=types.SimpleNamespace(lineno=n)) for n in (3, 7))
    CheckpointMixin.note_checkpoint(em, a, "first")
    CheckpointMixin.note_checkpoint(em, a, "second")
    CheckpointMixin.note_checkpoint(em, b, "other")
    assert em.checkpoint_notes == [(3, "first"), (7, "other")]


# ---------------------------------------------------------------------------- programs


def same(a, b):
    (va, ga), (vb, gb) = a, b
    return va == vb and len(ga) == len(gb) and all(
        np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(ga, gb))


def _copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def budgeted(fn, wrt, args, budget, *, oracle=True):
    """The budgeted gradient of ``fn`` at ``args``, checked bit for bit against the plain
    one (and the oracle); the report's text."""
    plain = coarsen.differentiate(fn, wrt=wrt, target="python")
    g = coarsen.differentiate(fn, wrt=wrt, target="python", max_tape_bytes=budget)
    single = isinstance(wrt, str)
    want = plain.value_and_grad(*_copies(args))
    got = g.value_and_grad(*_copies(args))
    if single:
        want, got = (want[0], (want[1],)), (got[0], (got[1],))
    assert same(got, want), (got, want)
    assert g.tape_bytes <= budget
    if oracle:
        pos = [i for i, a in enumerate(args) if not isinstance(a, int)]
        assert_grad_close(list(got[1]), fd_grad(fn, _copies(args), pos), err_msg=fn.__name__)
    return g, g.report(file=io.StringIO()), plain.tape_bytes


def param_state(x, c, n):
    for i in range(n):
        a = math.sin(x) * c
        x = a + 0.1 * x
    return x * x


@pytest.mark.parametrize("n", [0, 1, 2, 5, 60])
def test_a_parameter_as_the_state(n):
    g, rep, plain = budgeted(param_state, ("x", "c"), (0.4, 1.3, n), 200)
    if n == 60:
        (k,) = rep.strides
        assert 1 <= k < n and plain > 200 and rep.snapshots == (0,)
        assert "tape per trip counted at compile time" in rep.format()


def read_then_overwritten(x, v, n):
    w = v.copy()
    s = x
    for i in range(n):
        s = math.sin(s * w[0]) + w[1] * s
    w[0] = 3.0 * s
    w[1] = w[1] * s
    return s + np.sum(w * w)


def test_an_array_read_in_the_loop_and_overwritten_after_it():
    """The stretches run again in the reverse sweep read ``w`` as the loop saw it."""
    _, rep, plain = budgeted(read_then_overwritten, ("x", "v"),
                             (0.3, np.array([0.9, 0.4, 0.2]), 50), 160)
    (k,) = rep.strides
    assert k < 50 and plain > 160


def strided(x, c, n):
    s = x
    for i in range(3, n, 2):
        s = math.sin(s + 0.01 * i) * c + 0.2
    return s * s


@pytest.mark.parametrize("n", [3, 4, 9, 101])
def test_a_loop_with_a_start_and_a_step(n):
    _, rep, plain = budgeted(strided, ("x", "c"), (0.5, 0.9, n), 120)
    if n == 101:
        (k,) = rep.strides
        assert k < 49 and plain > 120


def int_state(x, c, n):
    s = x
    t = 0.5
    j = 1
    for i in range(n):
        j = (j * 5 + 3) % 11
        s = math.sin(s * t) * c + 0.01 * j
        t = t + 0.01 * s
    return s + t


def test_an_integer_in_the_state():
    _, rep, plain = budgeted(int_state, ("x", "c"), (0.5, 0.6, 80), 400)
    (k,) = rep.strides
    assert k < 80 and plain > 400
    assert "state: " in rep.format() and "j" in rep.format().split("state: ")[1]


def late_branch(x, c, n):
    s = x
    for i in range(n):
        if i >= 2:
            s = math.sin(s) * c + 0.1
        else:
            s = s + c
    return s


def test_trips_that_tape_more_after_the_probe():
    """The stride comes from the compile-time bound of a trip's tape, not from the first two
    trips (which tape less here): with their count the stretches would not fit."""
    _, rep, plain = budgeted(late_branch, ("x", "c"), (0.5, 0.9, 200), 600)
    (k,) = rep.strides
    assert k < 200 and plain > 600


def nested(x0, w, n):
    x = x0.copy()
    m = x.shape[0]
    for i in range(n):
        for j in range(m):
            x[j] = x[j] + 0.01 * math.sin(w[j] * x[j])
    return np.sum(x * x)


def test_a_nested_loop_measures_the_tape_per_trip():
    _, rep, plain = budgeted(nested, ("x0", "w"), (np.linspace(0.1, 0.5, 4), np.linspace(1.0, 2.0, 4), 40),
                             800)
    (k,) = rep.strides
    assert k < 40 and plain > 800
    text = rep.format()
    assert "tape per trip measured on the first two trips" in text and "checkpointed (two-level" in text


def test_revolve():
    _, rep, plain = budgeted(param_state, ("x", "c"), (0.4, 1.3, 60), 72)
    (k,) = rep.strides
    assert rep.snapshots[0] > 0 and plain > 72


def int_elements(x, n):
    cnt = np.zeros(3, dtype=np.int64)
    s = x
    for i in range(n):
        cnt[i % 3] = cnt[i % 3] + 1
        s = math.sin(s) + 0.01 * cnt[i % 3]
    return s


def test_elements_of_an_integer_array_refuse():
    g, rep, _ = budgeted(int_elements, "x", (0.5, 30), 10_000)
    assert "not checkpointed: it writes elements of 'cnt', which is not a float64 array" in rep.format()


def through_view(A, w, n):
    x = np.zeros(A.shape[1])
    for i in range(n):
        row = A[i % A.shape[0]]
        x = x + np.sin(w * row + x)
    return np.sum(x)


def test_a_view_assigned_in_the_loop_refuses():
    A = np.arange(12.0).reshape(3, 4) / 10
    _, rep, _ = budgeted(through_view, "w", (A, np.linspace(0.5, 1.5, 4), 20), 100_000, oracle=False)
    assert "not checkpointed: it assigns or writes 'row'" in rep.format()


# ---------------------------------------------------------------------------- tape room


def fill_then_loops(x, c, n):
    s = x
    for i in range(n):                 # one int (the branch taken) a trip
        if s > 0.5:
            s = math.sin(s) * c + 0.3
        else:
            s = math.cos(s) * c + 0.3
    u = s
    for i in range(n):                 # the same floats every trip: the float tape ends full
        u = math.sin(u) * c + 0.2
    y = u
    t = 0.5
    j = 1
    for i in range(n):                 # state: two floats and an int
        j = (j * 5 + 3) % 11
        y = math.sin(y * t) * c + 0.01 * j
        t = t + 0.01 * y
    return y + t


def fill_then_stateless(x, c, n):
    u = x
    for i in range(n):                 # the same floats every trip: the float tape ends full
        u = math.sin(u) * c + 0.2
    for i in range(n):                 # no state
        v = math.sin(u * (i + 1)) * c
    return u + v


def test_loops_after_a_loop_that_filled_the_tapes():
    """With a budget every loop fits whole (k = n): each loop's reservation is exactly what it
    pushes, so the next loop starts on full tapes, and every push of its checkpoints and
    of its probe's trips must reserve its room first (an unreserved write raises IndexError
    here, and writes past the tape on the cpu target)."""
    _, rep, _ = budgeted(fill_then_loops, ("x", "c"), (0.4, 0.9, 200), 100_000, oracle=False)
    assert rep.strides == (200, 200, 200) and "state: j, t, y)" in rep.format()
    _, rep, _ = budgeted(fill_then_stateless, ("x", "c"), (0.4, 0.9, 200), 100_000)
    assert rep.strides == (200, 200) and "state: none)" in rep.format()


def long_loop(x, c, n):
    for i in range(n):
        x = math.sin(x) * c + 0.1
    return x


def test_the_tapes_kept_stay_within_the_budget():
    """The room of the checkpoints and of the longest stretch is reserved once: reserving
    it stretch by stretch would grow the float tape by doubling, to about twice the budget.
    (The second call runs on the tapes the first one kept: 64 ints of the int tape besides.)"""
    g = coarsen.differentiate(long_loop, wrt=("x", "c"), target="python", max_tape_bytes=40_000)
    for _ in range(2):
        g.value_and_grad(0.4, 0.9, 20_000)
    (k,) = g.report(file=io.StringIO()).strides
    assert k < 20_000 and g.tape_bytes <= 40_000
    assert 40_000 - 1000 < g.kept_tape_bytes <= 40_000 + 8 * 64
