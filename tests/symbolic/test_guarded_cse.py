"""guarded_cse: shared subexpressions of closed forms, never a guarded division hoisted."""
import math

import sympy

from symbolic import guarded_cse, to_python

r, x, p = sympy.symbols("r x p", real=True)
n = sympy.Symbol("n", integer=True)
N = sympy.Max(0, n)
GEO = sympy.Piecewise((N, sympy.Eq(r, 1)), ((r**N - 1) / (r - 1), True))


def _back(reps, reduced):
    out = list(reduced)
    for s, e in reversed(reps):
        out = [o.xreplace({s: e}) for o in out]
    return out


def _evaluate(reps, reduced, env):
    env = dict(env)
    for s, e in reps:
        env[s.name] = eval(to_python(e), {"math": math, "max": max, "min": min}, env)
    return [eval(to_python(e), {"math": math, "max": max, "min": min}, env) for e in reduced]


def test_shares_powers_and_substitutes_back_exactly():
    exprs = [x * GEO, r**N * p, p * N * r**N / r]
    reps, reduced = guarded_cse(exprs, "_c")
    assert _back(reps, reduced) == exprs
    full = dict(zip([s for s, _ in reps], _back(reps, [s for s, _ in reps])))
    assert r**N in full.values()
    # r**N is evaluated once: it occurs in no reduced expression
    assert not any(e.has(r**N) for e in reduced)


def test_never_hoists_a_guarded_division():
    # 1/(r - 1) occurs twice, both times under the r == 1 guard only
    g1 = sympy.Piecewise((N, sympy.Eq(r, 1)), ((r**N - 1) / (r - 1), True))
    g2 = sympy.Piecewise((0, sympy.Eq(r, 1)), (x / (r - 1), True))
    reps, reduced = guarded_cse([x * g1, p * g2], "_c")
    for _, e in reps:
        assert not (isinstance(e, sympy.Pow) and e.exp.is_negative), e
    # at r == 1 every replacement evaluates without an exception, and the values are right
    got = _evaluate(reps, reduced, {"r": 1.0, "x": 2.0, "p": 3.0, "n": 5})
    assert got == [10.0, 0.0]
    # (a plain CSE hoists it, and fails there)
    plain, _ = sympy.cse([x * g1, p * g2], list=True)
    assert any(isinstance(e, sympy.Pow) and e.exp.is_negative for _, e in plain)


def test_integer_products_stay_in_floating_point():
    big = sympy.Rational(1, 6) * x * N * (N - 1) * (2 * N - 1)
    reps, reduced = guarded_cse([big, x * N * (N - 1)], "_c")
    for s, e in reps:
        if e.is_integer:
            assert not e.has(sympy.Mul), e
    got = _evaluate(reps, reduced, {"x": 1.0, "n": 3_000_000_000})
    want = [float(big.subs({x: 1, n: 3_000_000_000})), float((x * N * (N - 1)).subs({x: 1, n: 3_000_000_000}))]
    assert [abs(g - w) / w < 1e-15 for g, w in zip(got, want)] == [True, True]


def test_names_skip_taken_ones_and_are_deterministic():
    exprs = [r**N * p, r**N * x]
    a = guarded_cse(exprs, "_c", taken={"_c0"})
    b = guarded_cse(exprs, "_c", taken={"_c0"})
    assert a == b
    assert [s.name for s, _ in a[0]] == ["_c1"]


def test_nothing_shared_nothing_changed():
    exprs = [x * r, p + 1]
    assert guarded_cse(exprs, "_c") == ([], exprs)



def test_names_do_not_depend_on_the_order_of_the_expressions():
    # the geometric loop's closed form (tests.zoo.scalar.geometric): its partials came in the
    # order of a set of symbols, which varies with the hash seed, and SymPy's cse numbers the
    # shared values in the order it meets them, so r**n and r - 1 swapped names
    xs, rs, cs = sympy.symbols("_cl1_2 _cl1_3 _cl1_5", real=True)
    M = sympy.Max(0, sympy.Symbol("_t1", integer=True))
    geo = sympy.Piecewise((M, sympy.Eq(rs, 1)), ((rs**M - 1) / (rs - 1), True))
    dgeo = sympy.Piecewise((0, sympy.Eq(rs, 1)),
                           (-(rs**M - 1) / (rs - 1)**2 + rs**M * M / (rs * (rs - 1)), True))
    exprs = [rs**M, xs * rs**M * M / rs + cs * dgeo, geo]
    first = guarded_cse(exprs, "_s1_c")
    assert len(first[0]) >= 2
    for perm in ([2, 1, 0], [1, 0, 2], [0, 2, 1]):
        reps, reduced = guarded_cse([exprs[k] for k in perm], "_s1_c")
        assert reps == first[0]
        assert reduced == [first[1][k] for k in perm]
