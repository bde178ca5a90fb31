"""closed_form_loop(): every closed form checked against actually running the loop."""
import itertools
import math
from fractions import Fraction

import pytest
import sympy

from coarsen.symbolic import Budget, ClosedForm, closed_form_loop, to_python

k, lo, hi, st = sympy.symbols("k lo hi st", integer=True)
a, b, c, s, x, p, q, r = sympy.symbols("a b c s x p q r")

STARTS = [-4, 0, 3]
STOPS = [-5, 0, 3, 8]
STEPS = [1, 2, 3, -1, -3]


def ranges(steps=STEPS):
    return list(itertools.product(STARTS, STOPS, steps))


def run_loop(update, init, start, stop, step, params):
    """Run ``for k in range(start, stop, step): vars = update(vars, k, **params)``."""
    vals = dict(init)
    for kv in range(start, stop, step):
        vals = update(vals, kv, **params)
    return vals


def check(carried, update, init_names, param_grid, step_sym=True, steps=STEPS, exact=True):
    """Closed form (symbolic step, then each numeric step) vs the loop, exact and via to_python."""
    n_checked = 0
    for step in steps:
        cf = closed_form_loop(carried, k, lo, hi, st if step_sym else step, Budget())
        assert isinstance(cf, ClosedForm), (carried, step)
        code = {v: compile(to_python(cf.finals[v]), "<cf>", "eval") for v in carried}
        ncode = compile(to_python(cf.trip_count), "<n>", "eval")
        for start, stop in itertools.product(STARTS, STOPS):
            for params in param_grid:
                init = {name: Fraction(3 + i, 2) for i, name in enumerate(init_names)}
                ref = run_loop(update, init, start, stop, step, params)
                env = {"lo": start, "hi": stop, "st": step, **params, **init}
                assert eval(ncode, {"math": math, **env}) == len(range(start, stop, step))
                # exact: SymPy substitution with rationals
                subs = {sympy.Symbol(n, **({"integer": True} if n in ("lo", "hi", "st") else {})):
                        sympy.Rational(v) if isinstance(v, Fraction) else sympy.nsimplify(v)
                        for n, v in env.items()}
                for v in carried:
                    got = cf.finals[v].xreplace(subs)
                    if exact:
                        assert sympy.nsimplify(got) == sympy.Rational(ref[str(v)]), \
                            (v, start, stop, step, params, got, ref)
                    # printed Python, floats
                    fenv = {kk: float(vv) if isinstance(vv, Fraction) else vv
                            for kk, vv in env.items()}
                    val = eval(code[v], {"math": math, **fenv})
                    assert val == pytest.approx(float(ref[str(v)]), rel=1e-9, abs=1e-9), \
                        (v, start, stop, step, params)
                n_checked += 1
        if step_sym:
            step_sym = True  # the symbolic-step form is checked at every numeric step
    return n_checked


def test_polynomial_sum_symbolic_step():
    upd = lambda v, kv, a, b: {"s": v["s"] + a * kv + b * kv * kv}
    grid = [dict(a=Fraction(2), b=Fraction(-1, 3)), dict(a=Fraction(0), b=Fraction(5))]
    assert check({s: s + a * k + b * k**2}, upd, ["s"], grid) > 100


def test_polynomial_sum_constant_steps():
    upd = lambda v, kv, a: {"s": v["s"] + a * kv**3 - 2}
    grid = [dict(a=Fraction(1, 2))]
    check({s: s + a * k**3 - 2}, upd, ["s"], grid, step_sym=False)


@pytest.mark.parametrize("cv", [Fraction(0), Fraction(1), Fraction(-1), Fraction(2),
                                Fraction(1, 2), Fraction(-3, 2)])
def test_geometric(cv):
    upd = lambda v, kv, c: {"x": v["x"] * c}
    check({x: x * c}, upd, ["x"], [dict(c=cv)])


@pytest.mark.parametrize("av", [Fraction(1), Fraction(-1), Fraction(0), Fraction(2),
                                Fraction(1, 2)])
def test_affine(av):
    upd = lambda v, kv, a, b: {"x": a * v["x"] + b}
    check({x: a * x + b}, upd, ["x"], [dict(a=av, b=Fraction(3, 4))])


def test_affine_numeric_ratio_k_dependent_increment():
    upd = lambda v, kv: {"x": 2 * v["x"] + kv}
    check({x: 2 * x + k}, upd, ["x"], [{}], step_sym=False)
    upd = lambda v, kv: {"x": -v["x"] / 2 + kv * kv}
    check({x: -x / 2 + k**2}, upd, ["x"], [{}])


@pytest.mark.parametrize("av", [Fraction(1), Fraction(-1), Fraction(0), Fraction(3, 2)])
def test_triangular_geometric_then_sum(av):
    # sequential body p = p*a; s = s + p, composed into simultaneous form
    upd = lambda v, kv, a: {"p": v["p"] * a, "s": v["s"] + v["p"] * a}
    check({p: p * a, s: s + p * a}, upd, ["p", "s"], [dict(a=av)])


def test_triangular_unchanged_carried():
    upd = lambda v, kv: {"s": v["s"] + kv * v["x"], "x": v["x"]}
    check({s: s + k * x, x: x}, upd, ["s", "x"], [{}])


@pytest.mark.parametrize("cv", [Fraction(1), Fraction(2), Fraction(-1), Fraction(1, 3)])
def test_geometric_polynomial_terms(cv):
    upd = lambda v, kv, c: {"s": v["s"] + kv * c**kv + 1}
    check({s: s + k * c**k + 1}, upd, ["s"], [dict(c=cv)], steps=[1, 2, -1, 3])


@pytest.mark.parametrize("av", [Fraction(2), Fraction(1), Fraction(-1, 2)])
def test_product_of_exponential(av):
    upd = lambda v, kv, a: {"x": v["x"] * a**kv}
    check({x: x * a**k}, upd, ["x"], [dict(a=av)], steps=[1, 2, -1, -3])


def test_last_value_and_numeric_bounds():
    upd = lambda v, kv, a: {"q": a * kv}
    check({q: a * k}, upd, ["q"], [dict(a=Fraction(5, 2))])
    cf = closed_form_loop({s: s + k}, k, 0, 10, 1, Budget())
    assert cf.finals[s] == s + 45 and cf.trip_count == 10
    cf = closed_form_loop({s: s + k}, k, 10, 0, 1, Budget())
    assert cf.finals[s] == s and cf.trip_count == 0
    cf = closed_form_loop({s: s + k}, k, 10, 0, -3, Budget())
    assert cf.finals[s] == s + 10 + 7 + 4 + 1


def test_ratio_guard_and_description():
    cf = closed_form_loop({x: a * x + b}, k, lo, hi, 1, Budget())
    assert cf.finals[x].has(sympy.Piecewise)
    assert "Eq(a, 1)" in cf.description and "Max(0" in cf.description
    # numeric ratio: no guard needed
    cf = closed_form_loop({x: 3 * x + b}, k, lo, hi, 1, Budget())
    assert not cf.finals[x].has(sympy.Piecewise)
    cf = closed_form_loop({s: s + a}, k, lo, hi, 1, Budget())
    assert cf.description.startswith("s = ")
    assert cf.finals_n[s] == s + a * cf.n_symbol


@pytest.mark.parametrize("carried", [
    {x: r * x * (1 - x)},                # logistic map
    {p: q, q: p + q},                    # Fibonacci: mutually dependent
    {x: x * k},                          # factorial-like: needs rising factorials
    {x: sympy.sin(x)},                   # nonlinear
    {x: x + sympy.sin(k)},               # non-polynomial increment
    {x: x * x + c},                      # repeated squaring
])
def test_unsupported_returns_none(carried):
    assert closed_form_loop(carried, k, lo, hi, st, Budget()) is None


def test_step_zero_raises():
    with pytest.raises(ValueError):
        closed_form_loop({s: s + k}, k, lo, hi, 0, Budget())
