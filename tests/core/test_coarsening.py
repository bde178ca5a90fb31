"""Coarsening (issue: segments, phi-calculus, combination with reverse mode).

Every check compares numbers: coarse against fine-grained AD (1e-10) and against the
extended-precision finite-difference oracle; the plan's data (closed forms, op counts, tapes)
is asserted where the issue pins it."""
import math

import gast
import numpy as np
import pytest

import coarsen
from coarsen import symbolic as S
from tests.core import chains, programs as P
from tests.oracle import assert_grad_close, fd_grad, float_positions

_CACHE = {}


def grad(fn, coarse=True, target="python", wrt=None):
    key = (fn, coarse, target, wrt)
    if key not in _CACHE:
        # this module checks the recompute step's structure: plan="recompute" (plan="auto"
        # follows the machine's cost weights; tests/analysis/test_strategies.py covers the others)
        _CACHE[key] = coarsen.differentiate(fn, wrt=wrt, coarsen=coarse, target=target,
                                            plan="recompute")
    return _CACHE[key]


def check(fn, args, wrt_pos, target="python", oracle=True):
    gc, gf = grad(fn, True, target), grad(fn, False, target)
    vc, dc = gc.value_and_grad(*args)
    vf, df = gf.value_and_grad(*args)
    fresh = [a.copy() if isinstance(a, np.ndarray) else a for a in args]   # fn may write its inputs
    assert vc == pytest.approx(fn(*fresh), rel=1e-12, abs=1e-300)
    for a, b in zip(dc, df):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-300)
    if oracle:
        assert_grad_close(list(dc), fd_grad(fn, args, wrt_pos))
    return gc


def loops_in(source, name):
    fn = [n for n in gast.parse(source).body if isinstance(n, gast.FunctionDef) and n.name == name][0]
    return [n for n in gast.walk(fn) if isinstance(n, (gast.For, gast.While))]


@pytest.mark.parametrize("a,n", [(1.3, 7), (1.0, 5), (-0.4, 1), (2.0, 0), (0.7, -3)])
def test_closed_form_sum_has_no_loop(a, n):
    g = check(P.arith, (a, n), [0])
    assert loops_in(g.source, "value_and_grad_arith") == []
    rep = g.report(file=open("/dev/null", "w"))
    # the trip count is "trips", never the user's n (the report said "where n = Max(0, n)")
    assert rep[0]["kind"] == "loop" and "trips*(trips - 1)/2" in rep[0]["closed_form"]
    assert rep[0]["closed_form"].endswith("where trips = Max(0, n)")


def test_closed_form_sum_of_squares_and_time_is_flat():
    g = check(P.arith_sq, (0.3, 1.5, 9), [0, 1])
    assert loops_in(g.source, "value_and_grad_arith_sq") == []
    # exact at a large trip count, no loop executed: d/da = b * sum(i^2)
    # and d/db = d/db [(b + a*sum(i^2)) * b] = 2*b + a*sum(i^2)
    n = 10 ** 6
    s2 = (n - 1) * n * (2 * n - 1) // 6          # exact integer sum of squares
    da, db = g(0.3, 1.5, n)
    assert da == pytest.approx(1.5 * s2, rel=1e-12)
    assert db == pytest.approx(2 * 1.5 + 0.3 * s2, rel=1e-12)


@pytest.mark.parametrize("lo,hi,step", [(2, 17, 3), (10, -4, -2), (5, 5, 1), (3, 9, -1), (-6, 7, 4)])
def test_closed_form_stepped_and_negative_ranges(lo, hi, step):
    g = check(P.stepped, (0.8, lo, hi, step), [0])
    assert loops_in(g.source, "value_and_grad_stepped") == []


@pytest.mark.parametrize("a", [0.5, 1.0, -1.0, 0.0, 1.7])
def test_affine_and_power_recurrences(a):
    # a is differentiated: the closed form's a == 1 guard has no derivative there, so coarsen
    # keeps the loop with one coarse step per trip; the numbers must be right at a = 1, a = 0
    check(P.affine, (a, 0.3, 0.9, 6), [0, 1, 2])
    check(P.power, (0.9, a, 5), [0, 1])


def test_affine_closed_form_when_ratio_is_not_differentiated():
    g = coarsen.differentiate(P.affine, wrt=("b", "x0"), target="python")
    for a in (1.0, 0.5, -2.0):
        for n in (0, 1, 6):
            got = g(a, 0.3, 0.9, n)
            exp = fd_grad(P.affine, (a, 0.3, 0.9, n), [1, 2])
            assert_grad_close(list(got), exp)
    # the closed form replaces the loop; the loop stays only as the path of the guard's
    # neighbourhood of a == 1, where (a**n - 1)/(a - 1) cancels in the value even though a is
    # not differentiated (tests/ad/test_closed_form_ranges.py)
    src = g.source
    assert "loop (line" in src and "in closed form" in src
    assert "exact closed form, except at its singular points (the loop)" in src
    lines = src.splitlines()
    at = next(i for i, line in enumerate(lines) if "except at its singular points" in line)
    guard = lines[at + 1].strip()
    assert guard.startswith("if "), guard
    test = guard[3:-1]
    if test.isidentifier():
        # a guard long enough to be held in a flag (the underflow check of
        # coarsen/ad/power_guard.py makes it so): the flag's assignment holds the test
        # (not its prologue's ``= False``)
        test = next(line.strip() for line in lines if line.strip().startswith(test + " = ")
                    and line.strip() != test + " = False")
    assert "* max(1, " in test and "<= 1" in test, test


def test_logistic_map_coarse_step_tapes_one_value_per_trip():
    n = 50
    gc = check(P.logistic_map, (3.1, 0.3, n), [0, 1])
    gf = grad(P.logistic_map, False)
    gc(3.1, 0.3, n)
    gf(3.1, 0.3, n)
    # exactly one float per trip: x before its update
    assert gc.tape_bytes == 8 * n
    assert gf.tape_bytes > gc.tape_bytes
    rep = gc.report(3.1, 0.3, n, file=open("/dev/null", "w"))
    assert rep[0]["ops_after"] < rep[0]["ops_before"]


def test_logistic_loss_is_p_minus_y():
    g = check(P.logistic_loss, (0.37, 1.0), [0, 1])
    check(P.logistic_loss, (-1.2, 0.0), [0, 1])
    rep = g.report(0.37, 1.0, file=open("/dev/null", "w"))
    (seg,) = rep.segments
    # the whole loss is one segment whose derivative is a handful of operations
    assert seg["ops_after"] <= 14 < seg["ops_before"]
    # the symbolic stage itself gives dL/dz = p - y on the canonical form
    z, y, p, L = (S.sympy if hasattr(S, "sympy") else __import__("sympy")).symbols("z y p L", real=True)
    import sympy
    jac = S.derivatives([(p, 1 / (1 + sympy.exp(-z))), (L, -(y * sympy.log(p) + (1 - y) * sympy.log(1 - p)))],
                        [z, y], [L], wrt=[z])
    dz = jac.partials[(L, z)]
    val = float(dz.subs({z: 0.37, y: 1.0}).subs(p, 1 / (1 + math.exp(-0.37))).evalf()) if dz.free_symbols - {z, y} \
        else float(dz.subs({z: 0.37, y: 1.0}))
    assert val == pytest.approx(1 / (1 + math.exp(-0.37)) - 1.0, rel=1e-12)
    assert S.count_ops(dz) <= 3


def test_branch_inside_segment_both_paths():
    for x, y in [(0.9, 0.8), (0.1, 0.2), (-0.5, 1.5)]:
        g = check(P.branchy, (x, y), [0, 1])
    rep = g.report(0.9, 0.8, file=open("/dev/null", "w"))
    # the if/else is inside one segment, differentiated once per path (lines of branchy's body)
    first = P.branchy.__code__.co_firstlineno
    both = [e for e in rep if (e["formula"] or "").startswith("2 paths")]
    assert both, [dict(e) for e in rep]
    assert both[0]["lines"][0] <= first + 1 and both[0]["lines"][1] >= first + 5
    assert both[0]["fallback"] is None and both[0]["ops_after"] < both[0]["ops_before"]


def test_loop_carried_value_used_only_inside_the_loop():
    check(P.carried_inside, (2.5, 0.3, 12), [0, 1])


def test_chain_ops_grow_linearly_while_naive_inlining_explodes():
    after = {}
    for L in (5, 10, 20, 40):
        fn = getattr(chains, f"chain{L}")
        # long chains contract to ~1e-77: finite differences cannot resolve that, so the long
        # ones are checked against the derivative written by hand instead: d/dv [sin(v)*v +
        # cos(v)] = v*cos(v), so the gradient is the product of v_k*cos(v_k) along the chain.
        # Along the float64 trajectory: the chain converges quadratically to its fixed point
        # pi/2 where the factor vanishes, so the exact (mpmath) derivative is 1e-180 at L = 10
        # while float64's v_k sit at fl(pi/2) and any float64 program gives ~1e-77.
        g = check(fn, (0.4,), [0], oracle=L <= 5)
        v, d = 0.4, 1.0
        for _ in range(L):
            d *= v * math.cos(v)
            v = math.sin(v) * v + math.cos(v)
        (got,) = g(0.4)
        assert abs(got - d) <= 1e-12 * abs(d), (L, got, d)
        rep = g.report(0.4, file=open("/dev/null", "w"))
        after[L] = sum(e["ops_after"] for e in rep if e["ops_after"])
    # linear: doubling the chain at most ~doubles the derivative's size
    assert after[40] <= 2.3 * after[20] and after[20] <= 2.3 * after[10]
    # the naive approach (inline everything, then differentiate) grows much faster
    import sympy
    x = sympy.Symbol("x", real=True)
    naive = {}
    for L in (2, 4, 6):
        syms = [sympy.Symbol(f"x{k}", real=True) for k in range(1, L + 1)]
        prev, asg = x, []
        for s in syms:
            asg.append((s, sympy.sin(prev) * prev + sympy.cos(prev)))
            prev = s
        naive[L] = S.naive_derivative_ops(asg, [x], [syms[-1]], S.Budget(max_ops=10 ** 6, seconds=20))
    assert naive[6] / naive[2] > 20 * (6 / 2)


def test_pathological_segment_falls_back_within_budget():
    g = check(P.poly_blowup, (0.3, 0.1), [0, 1])
    rep = g.report(0.3, 0.1, file=open("/dev/null", "w"))
    # the loop x = x*x + c is kept (no closed form, or the budget stopped the symbolic stage):
    # a closed form would be a degree-4096 polynomial
    reasons = [e["fallback"] or e.get("closed_form_fallback") or "" for e in rep]
    assert rep and any("budget" in r or "closed form" in r for r in reasons), reasons
    # and no segment's derivative grew: what is kept is one coarse step per trip
    for e in rep:
        assert e["closed_form"] is None, dict(e)
        assert e["ops_after"] is None or e["ops_after"] <= e["ops_before"], dict(e)


def test_cpu_target_matches_python_target():
    for fn, args in [(P.arith, (1.3, 9)), (P.logistic_map, (3.1, 0.3, 20)), (P.branchy, (0.9, 0.8))]:
        gp = grad(fn, True, "python")
        gc = grad(fn, True, "cpu")
        dp, dc = gp(*args), gc(*args)
        for a, b in zip(dp, dc):
            np.testing.assert_allclose(a, b, rtol=1e-13)
        # and both are right, not merely equal: the oracle (float positions of args)
        pos = float_positions(args)
        exp = fd_grad(fn, args, pos)
        assert_grad_close(list(dp), exp, err_msg=f"{fn.__name__} python")
        assert_grad_close(list(dc), exp, err_msg=f"{fn.__name__} cpu")


def test_element_reread_after_a_write_in_the_same_statement():
    a = np.array([1.5, 2.0])
    check(P.read_write_read, (a, 0.7), [0, 1])
    np.testing.assert_array_equal(a, [1.5, 2.0])


def test_written_array_is_reread_not_taped():
    rng = np.random.default_rng(5)
    W, h0 = rng.normal(size=(3, 3)) * 0.5, rng.normal(size=3)
    g = check(P.rnn_like, (W, h0, 4), [0, 1])
    g(W, h0, 4)
    small = g.tape_bytes
    W6, h6 = rng.normal(size=(6, 6)) * 0.3, rng.normal(size=6)
    check(P.rnn_like, (W6, h6, 4), [0, 1])
    g(W6, h6, 4)
    # the tape grows with the H elements of hs written per step, not with the H*H reads
    assert g.tape_bytes < 2.6 * small


def test_restores_under_a_continue_guard():
    a = np.array([-0.987, -0.884, -0.663, -1.048, 0.814])
    check(P.restore_under_continue, (1.491, a), [0, 1])
    check(P.restore_under_continue, (1.491, a), [0, 1], target="cpu")


@pytest.mark.parametrize("fn", [P.loop_var_reused, P.loop_var_shadowed, P.loop_var_leaks])
def test_loop_variable_reuse(fn):
    w = np.array([0.5, -1.2, 2.0, 0.3])
    g = check(fn, (w, 4), [0])
    if fn is P.loop_var_reused:
        assert loops_in(g.source, "value_and_grad_loop_var_reused") and "while" not in g.source
