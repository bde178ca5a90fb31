"""Vector exp (coarsen.ad.reverse.vector_exp) and its helper ``_exp``.

The helper against exp computed in 120-bit arithmetic (mpmath): within one ulp everywhere,
overflow, underflow through the subnormals, infinities and NaN; the same bits compiled and as
plain Python.  The rewrite on statements.  Programs through the compiler: the oracle on both
targets, the same bits on both, and metamorphic variants.
"""
import ast
import math

import gast
import mpmath
import numba
import numpy as np
import pytest

import coarsen
from coarsen.ad.reverse.vector_exp import HELPER, vector_exp
from coarsen.codegen.helpers import HELPERS

from tests.oracle import check_against_oracle

_exp = HELPERS[HELPER]
_exp_jit = numba.njit(_exp)


@numba.njit
def _exp_loop(x, out):
    for i in range(x.shape[0]):
        out[i] = _exp_jit(x[i])


SPECIAL = [0.0, -0.0, 1e-300, -1e-300, 5e-324, 1.0, -1.0, 0.5, -0.5, 0.34657359027997264,
           -0.34657359027997264, 0.3465735902799727, 709.782712893384, 709.7827128933841,
           709.79, 709.9, 709.95, 710.0, 1e308, -708.3964185322641, -708.4, -708.39,
           -744.44, -745.1332191019411, -745.1332191019412, -745.14, -746.0, -1e308,
           np.inf, -np.inf, np.nan]


def _points():
    r = np.random.default_rng(11)
    return np.concatenate([r.uniform(-1, 1, 600), r.uniform(-50, 50, 600), r.uniform(-745.2, 709.8, 600),
                           r.uniform(-745.2, -700.0, 300), r.uniform(700.0, 709.8, 300),
                           np.arange(-20, 21) * math.log(2.0), np.array(SPECIAL)])


def _ulps(x, v):
    """|v - exp(x)| in ulps of the exact value (of the smallest subnormal below it)."""
    with mpmath.workprec(120):
        e = mpmath.exp(mpmath.mpf(float(x)))
        ulp = max(float(np.spacing(float(e))) if float(e) != 0.0 else 0.0, 5e-324)
        return float(abs(mpmath.mpf(float(v)) - e) / ulp)


def test_within_one_ulp_compiled():
    xs = _points()
    out = np.empty_like(xs)
    _exp_loop(xs, out)
    worst = 0.0
    for x, v in zip(xs, out):
        if np.isnan(x):
            assert np.isnan(v)
        elif x > 709.782712893384:
            assert v == np.inf, x
        elif x == -np.inf or x < -745.2:
            assert v == 0.0, x
        else:
            worst = max(worst, _ulps(x, v))
    assert worst <= 1.0, worst


def test_plain_python_gives_the_compiled_bits():
    # the python target runs the helper as Python: the same operations, the same bits
    xs = _points()
    out = np.empty_like(xs)
    _exp_loop(xs, out)
    for x, v in zip(xs, out):
        w = _exp(float(x))
        assert (np.isnan(v) and np.isnan(w)) or float(w) == float(v), x


def test_agrees_with_libm_to_one_ulp():
    xs = np.random.default_rng(2).uniform(-30, 30, 2000)
    out = np.empty_like(xs)
    _exp_loop(xs, out)
    ref = np.array([math.exp(x) for x in xs])
    assert np.all(np.abs(out - ref) <= np.spacing(ref))


# ---------------------------------------------------------------- the rewrite

def _text(body):
    return ast.unparse(ast.fix_missing_locations(
        gast.gast_to_ast(gast.Module(body=body, type_ignores=[]))))


def test_every_call_becomes_the_helper():
    body = gast.parse("y = math.exp(a * math.exp(b)) + math.sin(c)\nfor i in range(n):\n"
                      "    z[i] = math.exp(x[i])\nw = np.exp(v)\n").body
    before = _text(body)
    out, used = vector_exp(body)
    assert _text(body) == before                        # the input is not modified
    assert used == {HELPER}
    assert _text(out) == ("y = _exp(a * _exp(b)) + math.sin(c)\nfor i in range(n):\n"
                          "    z[i] = _exp(x[i])\nw = np.exp(v)")
    assert out[2] is body[2]                            # unchanged statements are shared


def test_no_call_no_helper():
    body = gast.parse("y = math.sin(a)\nz = exp(b)\nw = m.exp(c)\n").body
    out, used = vector_exp(body)
    assert used == frozenset() and _text(out) == _text(body)


# ---------------------------------------------------------------- through the compiler

def logistic(w, X, y):
    s = 0.0
    for i in range(X.shape[0]):
        z = 0.0
        for j in range(X.shape[1]):
            z += X[i, j] * w[j]
        s += math.log(1.0 + math.exp(-y[i] * z))
    return s


def logistic_renamed(beta, A, lab):
    total = 0.0
    for r in range(A.shape[0]):
        acc = 0.0
        for c in range(A.shape[1]):
            acc += A[r, c] * beta[c]
        total += math.log(1.0 + math.exp(-lab[r] * acc))
    return total


def _margin(x, w, n):
    z = 0.0
    for j in range(n):
        z += x[j] * w[j]
    return z


def logistic_helper(w, X, y):
    s = 0.0
    for i in range(X.shape[0]):
        s += math.log(1.0 + math.exp(-y[i] * _margin(X[i], w, X.shape[1])))
    return s


def gauss(x, mu, s):
    return np.sum(np.exp(-((x - mu) ** 2) / (2.0 * s * s)))


def _logistic_args(n=9, d=4, seed=0):
    r = np.random.default_rng(seed)
    return r.standard_normal(d), r.standard_normal((n, d)), np.sign(r.standard_normal(n))


@pytest.mark.parametrize("target", ["cpu", "python"])
@pytest.mark.parametrize("fn", [logistic, logistic_renamed, logistic_helper])
def test_oracle(fn, target):
    check_against_oracle(fn, _logistic_args(), target=target, wrt=(0,))


@pytest.mark.parametrize("target", ["cpu", "python"])
def test_oracle_array_code(target):
    x = np.linspace(-2.0, 3.0, 13)
    check_against_oracle(gauss, (x, 0.3, 1.7), target=target, wrt=(1, 2))


def test_both_targets_and_variants_give_the_same_bits():
    args = _logistic_args(12, 5, seed=4)
    got = {}
    for fn in (logistic, logistic_renamed, logistic_helper):
        for target in ("cpu", "python"):
            g = coarsen.differentiate(fn, wrt=(0,), target=target)
            v, (gw,) = g.value_and_grad(*args)
            calls = [n.func for n in ast.walk(ast.parse(g.source_for(*args))) if isinstance(n, ast.Call)]
            assert any(isinstance(f, ast.Name) and f.id == HELPER for f in calls)
            assert not any(isinstance(f, ast.Attribute) and f.attr == "exp" for f in calls)
            got[fn.__name__, target] = (v, gw)
    for (name, target), (v, gw) in got.items():
        # the targets alike, and a renamed program alike; through a helper the margin's sum
        # may be another loop (its rounding), so close
        ref = got["logistic", "cpu"] if name != "logistic_helper" else got[name, "cpu"]
        assert v == ref[0] and np.array_equal(gw, ref[1]), (name, target)
        np.testing.assert_allclose(gw, got["logistic", "cpu"][1], rtol=1e-13)


def test_off_it_is_libm():
    args = _logistic_args()
    g = coarsen.differentiate(logistic, wrt=(0,), target="cpu", disable={"vector_exp"})
    assert "_exp(" not in g.source_for(*args)
    on = coarsen.differentiate(logistic, wrt=(0,), target="cpu")
    v0, (g0,) = g.value_and_grad(*args)
    v1, (g1,) = on.value_and_grad(*args)
    assert np.isclose(v0, v1, rtol=4e-16 * len(args[2]), atol=0.0)
    np.testing.assert_allclose(g1, g0, rtol=1e-13)
