"""derivatives(), naive_derivative_ops(), local_step_jacobian(): numbers against sympy.diff."""
import math
import os
import random
import subprocess
import sys

import pytest
import sympy

from coarsen.symbolic import (Budget, BudgetExceeded, LocalJacobian, count_ops, derivatives,
                              gamma, local_step_jacobian, naive_derivative_ops, stored_per_trip,
                              to_python, assignments_to_python)
from helpers_symbolic import CountingClock, inline, ref_value, run_jacobian

HERE = os.path.dirname(os.path.abspath(__file__))


def check_against_inlined(assignments, inputs, outputs, points, rel=1e-9, **kw):
    """Values and partials of derivatives() equal sympy.diff of the inlined outputs."""
    jac = derivatives(assignments, inputs, outputs, Budget(), **kw)
    inl = inline(assignments)
    for pt in points:
        env = {str(k): v for k, v in pt.items()}
        vals, parts = run_jacobian(jac, env)
        for o in outputs:
            full = inl.get(o, o)
            assert vals[o] == pytest.approx(ref_value(full, pt), rel=rel, abs=1e-12)
            for x in inputs:
                ref = ref_value(sympy.diff(full, x), pt)
                got = parts.get((o, x), 0.0)
                assert got == pytest.approx(ref, rel=rel, abs=1e-10), (o, x, pt)
    return jac


def test_logistic_loss_gives_p_minus_y():
    z, y, p, L = sympy.symbols("z y p L")
    A = [(p, 1 / (1 + sympy.exp(-z))), (L, -(y * sympy.log(p) + (1 - y) * sympy.log(1 - p)))]
    jac = derivatives(A, [z, y], [L], Budget())
    dz = jac.partials[(L, z)]
    assert count_ops(dz) <= 6
    assert dz.free_symbols <= {p, y}          # the caller's symbols, not internal twins
    rng = random.Random(1)
    for _ in range(50):
        zv, yv = rng.uniform(-8, 8), rng.uniform(0, 1)
        vals, parts = run_jacobian(jac, {"z": zv, "y": yv})
        pv = 1 / (1 + math.exp(-zv))
        assert parts[(L, z)] == pytest.approx(pv - yv, rel=1e-12, abs=1e-14)
        assert vals[L] == pytest.approx(-(yv * math.log(pv) + (1 - yv) * math.log(1 - pv)),
                                        rel=1e-12)
    assert jac.ops_after < jac.ops_before


def test_dag_with_reuse_phis_and_functions():
    x, w, b = sympy.symbols("x w b", real=True)
    u, v, s, q, o1, o2 = sympy.symbols("u v s q o1 o2", real=True)
    A = [
        (u, w * x + b),
        (v, sympy.tanh(u)),
        (s, sympy.exp(v) * u + sympy.sqrt(1 + u * u)),
        (q, gamma(u > 0, s * v, -s / (1 + v * v))),
        (o1, q * q + sympy.log(1 + sympy.exp(s)) + sympy.Max(u, v)),
        (o2, sympy.sin(q) * sympy.Abs(v) + sympy.atan2(v, 2)),
    ]
    rng = random.Random(2)
    pts = [{x: rng.uniform(-2, 2), w: rng.uniform(-2, 2), b: rng.uniform(-1, 1)} for _ in range(15)]
    jac = check_against_inlined(A, [x, w, b], [o1, o2], pts)
    assert set(k[0] for k in jac.partials) == {o1, o2}


def test_wrt_subset_and_constants_and_zero_partials():
    x, y, c, s = sympy.symbols("x y c s", real=True)
    A = [(s, x * c + y**2)]
    jac = derivatives(A, [x, y], [s], Budget(), wrt=[x])
    assert set(jac.partials) == {(s, x)}
    assert jac.partials[(s, x)] == c
    # an output that does not depend on an input: no zero entries
    jac2 = derivatives([(s, y**2)], [x, y], [s], Budget())
    assert set(jac2.partials) == {(s, y)}
    # an output that is an input
    jac3 = derivatives([], [x], [x], Budget())
    assert jac3.partials == {(x, x): 1} and jac3.values == {x: x}


def test_unknown_realness_abs_sign():
    x, s = sympy.symbols("x s")           # no assumptions: differentiated as real
    jac = derivatives([(s, sympy.Abs(x) * x)], [x], [s], Budget())
    for xv in (-2.0, 0.5, 3.0):
        _, parts = run_jacobian(jac, {"x": xv})
        assert parts[(s, x)] == pytest.approx(2 * abs(xv))


def chain(n):
    xs = sympy.symbols(f"x0:{n + 1}", real=True)
    return xs, [(xs[i + 1], sympy.sin(xs[i]) * xs[i] + sympy.cos(xs[i])) for i in range(n)]


def test_chain_40_linear_growth_and_correct():
    sizes = {}
    for n in (10, 20, 40):
        xs, A = chain(n)
        jac = derivatives(A, [xs[0]], [xs[n]], Budget())
        sizes[n] = jac.ops_after
        assert jac.ops_after <= jac.ops_before
    inc1, inc2 = sizes[20] - sizes[10], sizes[40] - sizes[20]
    assert inc2 == pytest.approx(2 * inc1, rel=0.1)      # linear: same cost per statement
    assert sizes[40] <= 8 * 40
    xs, A = chain(40)
    jac = derivatives(A, [xs[0]], [xs[40]], Budget())
    # forward-mode numeric oracle of the chain
    for x0 in (0.3, -1.1, 2.0):
        xv, dv = x0, 1.0
        for _ in range(40):
            dv *= xv * math.cos(xv)
            xv = math.sin(xv) * xv + math.cos(xv)
        vals, parts = run_jacobian(jac, {"x0": x0})
        assert vals[xs[40]] == pytest.approx(xv, rel=1e-12)
        assert parts[(xs[40], xs[0])] == pytest.approx(dv, rel=1e-9)


def test_naive_growth_is_exponential_and_guarded():
    ops = []
    for n in range(1, 6):
        xs, A = chain(n)
        ops.append(naive_derivative_ops(A, [xs[0]], [xs[n]], Budget()))
    ratios = [b / a for a, b in zip(ops, ops[1:])]
    assert all(r > 2.5 for r in ratios), ops
    xs, A = chain(5)
    coarse = derivatives(A, [xs[0]], [xs[5]], Budget()).ops_after
    assert coarse * 10 < ops[-1]
    xs, A = chain(12)
    with pytest.raises(BudgetExceeded):
        naive_derivative_ops(A, [xs[0]], [xs[12]], Budget())


def test_pathological_input_raises_within_budget():
    # one assignment holding an inlined 40-deep chain: a tree of ~3**40 nodes (built without
    # evaluation: evaluating constructors may walk the tree themselves)
    x, c, y = sympy.symbols("x c y", real=True)
    e = x
    for _ in range(40):
        e = sympy.Add(sympy.Mul(sympy.sin(e, evaluate=False), e, evaluate=False),
                      sympy.cos(e, evaluate=False), evaluate=False)
    # a frozen clock that fails the test past 50 readings (one per step, one per 4096 nodes
    # a size count visits): the size guard must reject the tree after bounded work
    clock = CountingClock(max_reads=50)
    with pytest.raises(BudgetExceeded) as ei:
        derivatives([(y, e)], [x], [y], Budget(max_ops=4000, seconds=1.0, clock=clock))
    assert ei.value.reason.startswith("size")
    assert clock.reads >= 1
    # repeated squaring plus a reuse, inlined 12 times: ~3*2**12 ops in the tree
    e = x
    for _ in range(12):
        e = sympy.Add(sympy.Mul(e, e, evaluate=False), c, sympy.sin(e, evaluate=False),
                      evaluate=False)
    clock = CountingClock(max_reads=200)
    with pytest.raises(BudgetExceeded) as ei:
        naive_derivative_ops([(y, e)], [x, c], [y], Budget(max_ops=4000, seconds=1.0, clock=clock))
    assert ei.value.reason.startswith("size")
    clock = CountingClock(max_reads=200)
    with pytest.raises(BudgetExceeded):
        derivatives([(y, e)], [x, c], [y], Budget(max_ops=4000, seconds=1.0, clock=clock))


def test_time_budget_stops_between_steps():
    # every reading of the clock is one "second": a 5-second budget stops the job at the
    # first check after its fifth reading, long before the 400-step chain is done
    xs, A = chain(400)
    clock = CountingClock(tick=1.0)
    b = Budget(max_ops=10**6, seconds=5.0, clock=clock)
    with pytest.raises(BudgetExceeded) as ei:
        derivatives(A, [xs[0]], [xs[400]], b)
    assert ei.value.reason.startswith("time") and b.timed_out
    assert 6 <= clock.reads <= 7          # started once, checked until elapsed > 5, then stopped
    # the same job on a clock that never advances runs to the end
    clock = CountingClock()
    free = Budget(max_ops=10**6, seconds=5.0, clock=clock)
    derivatives(A, [xs[0]], [xs[400]], free)
    assert not free.timed_out and clock.reads > 7


def test_repeated_squaring_inlined_is_cheap_and_exact():
    # x = x*x + c twelve times, inlined (a degree-4096 polynomial, never expanded)
    x, c, y = sympy.symbols("x c y", real=True)
    e = x
    for _ in range(12):
        e = e * e + c
    # cheap: a bounded number of steps and node visits (a frozen clock read at most 100 times)
    jac = derivatives([(y, e)], [x, c], [y], Budget(max_ops=4000, seconds=2.0,
                                                     clock=CountingClock(max_reads=100)))
    xv, cv = 0.3, 0.1
    f, dfx, dfc = xv, 1.0, 0.0
    for _ in range(12):
        f, dfx, dfc = f * f + cv, 2 * f * dfx, 2 * f * dfc + 1
    vals, parts = run_jacobian(jac, {"x": xv, "c": cv})
    assert vals[y] == pytest.approx(f, rel=1e-12)
    assert parts[(y, x)] == pytest.approx(dfx, rel=1e-9, abs=1e-300)
    assert parts[(y, c)] == pytest.approx(dfc, rel=1e-9)


def test_stable_rewrites_improve_accuracy():
    x, y = sympy.symbols("x y", real=True)
    jac = derivatives([(y, sympy.log(1 + x) + sympy.exp(x) - 1)], [x], [y], Budget())
    code = to_python(jac.values[y])
    assert "log1p" in code and "expm1" in code
    vals, _ = run_jacobian(jac, {"x": 1e-12})
    assert vals[y] == pytest.approx(2e-12, rel=1e-9)


def _render(jac):
    return "\n".join(assignments_to_python(jac.replacements)
                     + [f"{o} = {to_python(v)}" for o, v in jac.values.items()]
                     + [f"d{o}_d{x} = {to_python(v)}" for (o, x), v in jac.partials.items()])


SCRIPT = r'''
import sympy
from coarsen.symbolic import derivatives, Budget, gamma, to_python, assignments_to_python
x, w, u, v, o = sympy.symbols("x w u v o", real=True)
A = [(u, w*x + 1), (v, sympy.exp(u) + gamma(u > 0, u*u, -u)), (o, sympy.log(v)*u + v*v)]
jac = derivatives(A, [x, w], [o, v], Budget())
print("\n".join(assignments_to_python(jac.replacements)
      + [f"{k} = {to_python(e)}" for k, e in jac.values.items()]
      + [f"d{a}_d{b} = {to_python(e)}" for (a, b), e in jac.partials.items()]))
'''


def test_deterministic_across_hash_seeds():
    outs = set()
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                           env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        outs.add(r.stdout)
    assert len(outs) == 1
    out = outs.pop()
    assert "t0 = " in out


def test_prefix_and_name_collisions():
    x, t0, y = sympy.symbols("x t0 y", real=True)
    A = [(t0, sympy.exp(x)), (y, t0 * sympy.sin(x) + sympy.sin(x) * sympy.cos(x))]
    jac = derivatives(A, [x], [y], Budget(), prefix="tmp")
    names = [str(s) for s, _ in jac.replacements]
    assert len(names) == len(set(names))
    assert all(n == "t0" or n.startswith("tmp") for n in names)
    rng = random.Random(3)
    pts = [{x: rng.uniform(-2, 2)} for _ in range(5)]
    check_against_inlined(A, [x], [y], pts)


def test_local_step_jacobian_logistic_map():
    x, r, xn = sympy.symbols("x r x_new", real=True)
    jac = local_step_jacobian({x: xn}, [(xn, r * x * (1 - x))], [r], Budget())
    assert isinstance(jac, LocalJacobian)
    for xv, rv in ((0.2, 3.7), (0.9, 2.5), (0.5, 1.0)):
        _, parts = run_jacobian(jac, {"x": xv, "r": rv})
        assert parts[(xn, x)] == pytest.approx(rv * (1 - 2 * xv))
        assert parts[(xn, r)] == pytest.approx(xv * (1 - xv))
    assert stored_per_trip(jac, [x]) == [x]
    assert count_ops(jac.partials[(xn, x)]) <= 4


def test_local_step_jacobian_two_carried():
    # a, b = b, a + r*b*b  (Fibonacci-like, no closed form with r)
    a, b, r, an, bn = sympy.symbols("a b r a_n b_n", real=True)
    jac = local_step_jacobian({a: an, b: bn}, [(an, b), (bn, a + r * b * b)], [r], Budget())
    _, parts = run_jacobian(jac, {"a": 0.3, "b": 1.5, "r": 2.0})
    assert parts[(an, b)] == 1 and (an, a) not in parts
    assert parts[(bn, a)] == 1 and parts[(bn, b)] == pytest.approx(2 * 2.0 * 1.5)
    assert parts[(bn, r)] == pytest.approx(1.5**2)
    assert stored_per_trip(jac, [a, b]) == [b]


def _random_dag(rng, n_inputs, n_stmts):
    ins = list(sympy.symbols(f"i0:{n_inputs}", real=True))
    pool = list(ins)
    A = []
    unary = [sympy.exp, sympy.sin, sympy.tanh, lambda u: sympy.log(1 + u * u),
             lambda u: sympy.sqrt(1 + u * u), lambda u: 1 / (1 + sympy.exp(-u))]
    for idx in range(n_stmts):
        u, v = rng.choice(pool), rng.choice(pool)
        kind = rng.randrange(6)
        if kind == 0:
            e = u * v + rng.choice([1, -2, sympy.Rational(1, 3)]) * u
        elif kind == 1:
            e = u / (1 + v * v) - v
        elif kind == 2:
            e = rng.choice(unary)(u) * v
        elif kind == 3:
            e = gamma(u > v, u * u, sympy.cos(v))
        elif kind == 4:
            e = rng.choice(unary)(u - v) + u
        else:
            e = sympy.Max(u, v) * u + sympy.Abs(v)
        s = sympy.Symbol(f"s{idx}", real=True)
        A.append((s, e))
        pool.append(s)
    outs = [s for s, _ in A[-2:]]
    return ins, A, outs


@pytest.mark.parametrize("seed", range(8))
def test_random_dags_against_inlined_diff(seed):
    rng = random.Random(100 + seed)
    ins, A, outs = _random_dag(rng, 3, 7)
    pts = [{x: rng.uniform(-1.5, 1.5) for x in ins} for _ in range(4)]
    jac = check_against_inlined(A, ins, outs, pts, rel=1e-8)
    assert jac.ops_after <= jac.ops_before
