"""Tape traffic: the tape bytes per source line of ``g.report(*args, tape_lines=True)``
(``coarsen.transforms.tape_lines``), and one tape reservation per loop nest whose trip counts are known
before it runs (``coarsen.ad.reverse.tapes.nest_plan``).

The python target runs the generated code on NumPy tapes: a reservation short of the pushes
raises IndexError there, so the oracle checks on it also check that every nest's reservation
covers its pushes."""
import ast
import math

import numpy as np
import pytest

import coarsen
from tests.oracle import check_against_oracle


# ------------------------------------------------------------------ programs
def loop2(x, n):
    s = 0.0
    for i in range(n):
        s = s * x + 1.0
        s = math.sin(s)
    return s


def nest3(x, n, m):
    s = 0.0
    for i in range(n):
        s = s * x + 0.5
        for j in range(1, m - 1):
            s = s * x + 1.0
            for k in range(3):
                s = s * s * 0.1 + x
    return s


def while_in_loop(x, n):
    s = 0.0
    for i in range(n):
        k = 0
        while s < 2.0 + i:
            s = s * x + 0.5
            k += 1
    return s


def triangular(x, n):
    s = 0.0
    for i in range(n):
        s = s * x + 0.25
        for j in range(i):
            s = s * x + 0.5 * math.sin(s)
    return s


def data_bound(x, counts):
    s = 0.0
    for i in range(counts.shape[0]):
        c = counts[i]
        for j in range(c):
            s = s * x + math.cos(s)
    return s


def nest_in_while(x, n, m):
    s = 0.0
    t = 0
    while s < 3.0:
        for i in range(n):
            for j in range(m):
                s = s * x + 0.1 + 0.01 * math.sin(s + t)
        t += 1
    return s


def grid(u0, kappa, nt):
    nx = u0.shape[0]
    u = np.zeros((nt + 1, nx))
    for i in range(nx):
        u[0, i] = u0[i]
    for t in range(nt):
        for i in range(1, nx - 1):
            u[t + 1, i] = u[t, i] + kappa * (u[t, i - 1] - 2.0 * u[t, i] + u[t, i + 1])
    loss = 0.0
    for i in range(nx):
        loss += math.sin(u[nt, i]) * u[nt, i]
    return loss


def scratch_reduction(w, x):
    # GMM's shape: a reduction over data points whose trips overwrite a scratch array in a
    # loop over components, with a triangular nest (its trip counts vary) that pushes nothing
    K = w.shape[0]
    d = w.shape[1]
    q = np.zeros(d)
    total = 0.0
    for i in range(x.shape[0]):
        acc = 0.0
        for k in range(K):
            for j in range(d):
                q[j] = math.sin(w[k, j] * x[i, j])
            for j in range(d):
                for l in range(j + 1, d):  # noqa: E741 (a user-style name)
                    q[l] += w[k, l] * x[i, j]
            for j in range(d):
                acc += q[j] * q[j]
        total += math.log(1.0 + acc)
    return total


def _line(fn, text):
    """The file line of the statement ``text`` in ``fn``'s source."""
    import inspect
    lines, first = inspect.getsourcelines(fn)
    hits = [first + k for k, ln in enumerate(lines) if ln.strip() == text]
    assert len(hits) == 1, (text, hits)
    return hits[0]


def _by_line(rep):
    return {t.lineno: (t.float_bytes, t.int_bytes) for t in rep.tape_lines.lines}


def _reserve_depths(src, tape="_ftape"):
    """The loop depth of each ``_reserve(tape, ...)`` in the taped entry of ``src``."""
    out = []

    def visit(node, depth):
        for ch in ast.iter_child_nodes(node):
            d = depth + isinstance(ch, (ast.For, ast.While))
            if isinstance(ch, ast.Call) and getattr(ch.func, "id", None) == "_reserve" \
                    and getattr(ch.args[0], "id", None) == tape:
                out.append(depth)
            visit(ch, d)
    for f in ast.parse(src).body:
        if isinstance(f, ast.FunctionDef) and f.name.endswith("_taped"):
            visit(f, 0)
    return out


# ------------------------------------------------------------------ tape lines
def test_tape_lines_of_a_loop():
    g = coarsen.differentiate(loop2, target="python", coarsen=False)
    rep = g.report(0.7, 5, tape_lines=True, file=open("/dev/null", "w"))
    lines = _by_line(rep)
    assert lines == {_line(loop2, "s = s * x + 1.0"): (40, 0),
                     _line(loop2, "s = math.sin(s)"): (40, 0)}
    g(0.7, 5)
    assert rep.tape_lines.tape_bytes == g.tape_bytes == 80 and rep.tape_lines.total_matches
    text = rep.format()
    assert "tape by source line" in text and "test_tape_lines.py:" in text
    assert "40 bytes (floats), 0 bytes (ints)  s = math.sin(s)" in text


def test_tape_lines_of_a_nest_sorted_by_bytes():
    g = coarsen.differentiate(nest3, target="python", coarsen=False)
    rep = g.report(0.5, 3, 5, tape_lines=True, file=open("/dev/null", "w"))
    # 3 outer trips, 3 * 3 middle trips, 3 * 3 * 3 inner trips: one float each
    assert [(t.lineno, t.float_bytes, t.int_bytes) for t in rep.tape_lines.lines] == [
        (_line(nest3, "s = s * s * 0.1 + x"), 216, 0),
        (_line(nest3, "s = s * x + 1.0"), 72, 0),
        (_line(nest3, "s = s * x + 0.5"), 24, 0)]
    g(0.5, 3, 5)
    assert g.tape_bytes == 312 and rep.tape_lines.total_matches


def test_tape_lines_of_a_while_loop():
    x, n = 1.3, 3
    trips, s = 0, 0.0          # the while loop's trips, counted by running it
    for i in range(n):
        while s < 2.0 + i:
            s = s * x + 0.5
            trips += 1
    g = coarsen.differentiate(while_in_loop, target="python", coarsen=False)
    rep = g.report(x, n, tape_lines=True, file=open("/dev/null", "w"))
    # each trip saves s; each trip of the for loop saves the while loop's trip counter
    assert _by_line(rep) == {_line(while_in_loop, "s = s * x + 0.5"): (8 * trips, 0),
                             _line(while_in_loop, "while s < 2.0 + i:"): (0, 8 * n)}
    g(x, n)
    assert g.tape_bytes == 8 * (trips + n) and rep.tape_lines.total_matches


def test_tape_lines_on_the_cpu_target_coarse():
    g = coarsen.differentiate(grid, target="cpu")
    u0 = np.linspace(0.1, 0.9, 7)
    rep = g.report(u0, 0.2, 4, tape_lines=True, file=open("/dev/null", "w"))
    g(u0, 0.2, 4)
    assert rep.tape_lines.total_matches and rep.tape_lines.tape_bytes == g.tape_bytes
    assert sum(t.bytes for t in rep.tape_lines.lines) == g.tape_bytes


def test_no_counter_code_unless_asked():
    for fn, args in ((loop2, (0.7, 5)), (nest3, (0.5, 3, 5)), (while_in_loop, (1.3, 3))):
        g = coarsen.differentiate(fn, target="python", coarsen=False)
        g(*args)
        before = g.source
        for name in ("_tlf", "_tli", "_tlmark"):
            assert name not in before
        g.report(*args, tape_lines=True, file=open("/dev/null", "w"))
        assert g.source == before
    with pytest.raises(coarsen.CoarsenError, match="tape_lines=True"):
        g.report(tape_lines=True)


# ------------------------------------------------------------------ one reservation per nest
def test_invariant_nest_reserves_once_before_it():
    g, value, grads = check_against_oracle(nest3, (0.5, 4, 6), coarse=False)
    assert _reserve_depths(g.source) == [0, 0]       # the prologue's and the nest's
    g2, _, grads2 = check_against_oracle(nest3, (0.5, 4, 6), coarse=True)
    assert all(d == 0 for d in _reserve_depths(g2.source))


def test_nest_on_the_cpu_target_matches_python_bit_for_bit():
    gp = coarsen.differentiate(nest3, target="python", coarsen=False)
    gc = coarsen.differentiate(nest3, target="cpu", coarsen=False)
    for args in ((0.5, 4, 6), (0.9, 30, 40), (0.3, 0, 5), (0.3, 5, 0), (0.3, 5, 1)):
        vp, dp = gp.value_and_grad(*args)
        vc, dc = gc.value_and_grad(*args)
        assert vp == vc and dp == dc, args


def test_heat_like_nest():
    u0 = np.linspace(0.1, 0.9, 9)
    for coarse in (True, False):
        g, _, _ = check_against_oracle(grid, (u0, 0.2, 5), coarse=coarse)
        assert all(d == 0 for d in _reserve_depths(g.source)), coarse


def test_triangular_nest_keeps_per_trip_reservations():
    for coarse in (True, False):
        g, _, _ = check_against_oracle(triangular, (0.7, 6), coarse=coarse)
        assert any(d > 0 for d in _reserve_depths(g.source)), coarse
    g = coarsen.differentiate(triangular, target="python", coarsen=False)
    rep = g.report(0.7, 6, tape_lines=True, file=open("/dev/null", "w"))
    g(0.7, 6)
    assert rep.tape_lines.total_matches and g.tape_bytes == rep.tape_lines.tape_bytes


def test_data_dependent_inner_bound_keeps_per_trip_reservations():
    counts = np.array([3, 0, 5, 1, 4])
    for coarse, plan in ((True, "recompute"), (False, "auto")):
        g = coarsen.differentiate(data_bound, wrt="x", coarsen=coarse, plan=plan)
        g(0.6, counts)
        assert any(d > 0 for d in _reserve_depths(g.source)), coarse
    # with the cost model's plan the loop (one input, x) runs by forward mode: no tape at all
    g, _, _ = check_against_oracle(data_bound, (0.6, counts), wrt="x", coarse=True)
    assert "by forward mode" in g.source and not _reserve_depths(g.source)


def test_nest_inside_a_while_loop():
    for coarse in (True, False):
        g, _, _ = check_against_oracle(nest_in_while, (1.0, 3, 4), wrt="x", coarse=coarse)
        # one reservation per trip of the while loop, before the nest; none inside the nest
        assert _reserve_depths(g.source) == [0, 1], (coarse, g.source)


def test_reduction_loop_reserves_once_before_it():
    # each trip pops what it pushed: the room of one trip, reserved before the loop, is all
    # it needs (tapes.trip_plan), and nothing is reserved in the trips
    r = np.random.default_rng(3)
    w, x = r.standard_normal((3, 4)), r.standard_normal((5, 4))
    for coarse in (True, False):
        g, _, _ = check_against_oracle(scratch_reduction, (w, x), wrt="w", coarse=coarse)
        assert "a reduction loop into total" in g.source, coarse
        assert _reserve_depths(g.source) and all(d == 0 for d in _reserve_depths(g.source)), coarse
        assert all(d == 0 for d in _reserve_depths(g.source, "_itape")), coarse
        gc = coarsen.differentiate(scratch_reduction, wrt="w", coarsen=coarse)
        gp = coarsen.differentiate(scratch_reduction, wrt="w", coarsen=coarse, target="python")
        for shape in ((3, 4), (1, 1), (2, 0)):
            w2, x2 = r.standard_normal(shape), r.standard_normal((7, shape[1]))
            assert np.array_equal(gc(w2, x2), gp(w2, x2)), (coarse, shape)
