"""Vector exp (coarsen.ad.reverse.vector_exp) and its helper ``_exp``.

The helper against exp computed in 120-bit arithmetic (mpmath): within one ulp everywhere,
overflow, underflow through the subnormals, infinities and NaN; the same bits compiled and as
plain Python.  The rewrite on statements: the loops whose trips are independent, and each
condition that keeps ``math.exp``.  Programs through the compiler: the oracle on both targets,
the same bits on both, and metamorphic variants.
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


def _run(src):
    body = gast.parse(src).body
    before = _text(body)
    out, used = vector_exp(body)
    assert _text(body) == before                        # the input is not modified
    return _text(out), used


#: an innermost loop whose trips are independent, inside an outer loop
LOOP = """
for i in range(n):
    m = x[i, 0]
    for j in range(1, k):
        u = x[i, j] - m
        t = math.exp(u) + math.sqrt(abs(u))
        e[i, j] = max(t, 0.0)
    s = math.exp(m)
"""


def test_an_independent_loop_gets_the_helper():
    out, used = _run(LOOP)
    assert used == {HELPER}
    assert "t = _exp(u) + math.sqrt(abs(u))" in out
    assert "s = math.exp(m)" in out                     # outside the inner loop: libm's


def test_nested_calls_and_unchanged_statements():
    body = gast.parse("y = math.exp(a)\nfor i in range(n):\n    z[i] = math.exp(x[i] * math.exp(c))\n"
                      "w = np.exp(v)\n").body
    out, used = vector_exp(body)
    assert _text(out) == ("y = math.exp(a)\nfor i in range(n):\n    z[i] = _exp(x[i] * _exp(c))\n"
                          "w = np.exp(v)")
    assert out[0] is body[0] and out[2] is body[2]      # unchanged statements are shared


#: each a change of LOOP after which the inner loop keeps math.exp
KEPT = {
    "a sum carried from trip to trip": ("        e[i, j] = max(t, 0.0)\n", "        e[i, j] = max(t, 0.0)\n        s += t\n"),
    "a name read before it is assigned": ("        u = x[i, j] - m\n", "        u = x[i, j] - m + t\n"),
    "a libm call that stays a call": ("math.sqrt(abs(u))", "math.log(abs(u))"),
    "a helper call": ("math.sqrt(abs(u))", "_red(u)"),
    "a method call": ("math.sqrt(abs(u))", "x.sum()"),
    "a branch": ("        e[i, j] = max(t, 0.0)\n", "        if t > 1.0:\n            e[i, j] = t\n"),
    "an inner loop": ("        e[i, j] = max(t, 0.0)\n", "        for q in range(2):\n            e[i, q] = t\n"),
    "a loop with else": ("        e[i, j] = max(t, 0.0)\n", "        e[i, j] = max(t, 0.0)\n    else:\n        pass\n"),
    "a loop over no range": ("for j in range(1, k):", "for j in cols:"),
    "the counter assigned": ("        u = x[i, j] - m\n", "        u = x[i, j] - m\n        j = 0\n"),
    "an expression statement": ("        e[i, j] = max(t, 0.0)\n", "        e[i, j] = max(t, 0.0)\n        t\n"),
}


@pytest.mark.parametrize("case", sorted(KEPT))
def test_kept(case):
    old, new = KEPT[case]
    assert old in LOOP, case
    out, used = _run(LOOP.replace(old, new, 1))
    assert not used and "_exp(" not in out, case


def test_no_call_no_helper():
    out, used = _run("y = math.sin(a)\nz = exp(b)\nfor i in range(n):\n    w[i] = m.exp(c[i])\n")
    assert used == frozenset() and "_exp" not in out


# ---------------------------------------------------------------- through the compiler

def softmax(X, W):
    m = np.max(X, axis=1)
    e = np.exp(X - m[:, None])
    return np.sum(W * (e / np.sum(e, axis=1)[:, None]))


def softmax_renamed(A, B):
    top = np.max(A, axis=1)
    z = np.exp(A - top[:, None])
    return np.sum(B * (z / np.sum(z, axis=1)[:, None]))


def _normalized(e):
    return e / np.sum(e, axis=1)[:, None]


def softmax_helper(X, W):
    e = np.exp(X - np.max(X, axis=1)[:, None])
    return np.sum(W * _normalized(e))


def exp_table(x, w):
    # a user's loop of exps, then a sum over the table from its end (another range: the two
    # loops stay two)
    n = x.shape[0]
    y = np.empty(n)
    for i in range(n):
        y[i] = math.exp(w * x[i])
    s = 0.0
    for i in range(n - 1, -1, -1):
        s += y[i] * x[i]
    return s


def logistic(w, X, y):
    # exp in a sum: one element at a time, libm's exp
    s = 0.0
    for i in range(X.shape[0]):
        z = 0.0
        for j in range(X.shape[1]):
            z += X[i, j] * w[j]
        s += math.log(1.0 + math.exp(-y[i] * z))
    return s


def _calls(src):
    return [n.func for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Call)]


def _uses_helper(src):
    return any(isinstance(f, ast.Name) and f.id == HELPER for f in _calls(src))


def _sm_args(shape=(5, 9), seed=0):
    r = np.random.default_rng(seed)
    return 2.0 * r.standard_normal(shape), r.standard_normal(shape)


@pytest.mark.parametrize("target", ["cpu", "python"])
@pytest.mark.parametrize("fn", [softmax, softmax_renamed, softmax_helper])
def test_softmax_against_the_oracle(fn, target):
    check_against_oracle(fn, _sm_args(), target=target, wrt=(0,))


@pytest.mark.parametrize("target", ["cpu", "python"])
def test_loops_against_the_oracle(target):
    r = np.random.default_rng(1)
    check_against_oracle(exp_table, (r.standard_normal(11), 0.8), target=target, wrt=(0, 1))
    check_against_oracle(logistic, (r.standard_normal(4), r.standard_normal((9, 4)),
                                    np.sign(r.standard_normal(9))), target=target, wrt=(0,))


def test_where_the_helper_goes():
    args = _sm_args()
    for fn, wrt, a, want in ((softmax, (0,), args, True), (exp_table, (0, 1), (np.arange(5.0), 0.3), True),
                             (logistic, (0,), (np.ones(3), np.ones((4, 3)), np.ones(4)), False)):
        src = coarsen.differentiate(fn, wrt=wrt, target="cpu").source_for(*a)
        assert _uses_helper(src) == want, fn.__name__
        off = coarsen.differentiate(fn, wrt=wrt, target="cpu", disable={"vector_exp"}).source_for(*a)
        assert not _uses_helper(off)


def test_variants_give_the_same_bits():
    args = _sm_args((6, 13), seed=4)
    got = {}
    for fn in (softmax, softmax_renamed, softmax_helper):
        g = coarsen.differentiate(fn, wrt=(0,), target="cpu")
        got[fn.__name__] = g.value_and_grad(*args)
        assert _uses_helper(g.source_for(*args)), fn.__name__
    (v, (gx,)), (v1, (gx1,)), (_, (gx2,)) = got["softmax"], got["softmax_renamed"], got["softmax_helper"]
    assert v == v1 and np.array_equal(gx, gx1)
    # through a helper the code may differ in its loops (another order of the same sums)
    np.testing.assert_allclose(gx2, gx, rtol=1e-13, atol=1e-16)


def test_both_targets_give_the_same_bits():
    # the python target runs the array code as NumPy (np.exp), the cpu target as loops: a
    # user's loops are loops on both, and below eight terms no sum is taken in lanes
    x = np.random.default_rng(5).standard_normal(7)
    got = {}
    for target in ("cpu", "python"):
        g = coarsen.differentiate(exp_table, wrt=(0, 1), target=target)
        assert _uses_helper(g.source_for(x, 0.9)), target
        got[target] = g.value_and_grad(x, 0.9)
    (v0, (a0, b0)), (v1, (a1, b1)) = got["cpu"], got["python"]
    assert v0 == v1 and np.array_equal(a0, a1) and b0 == b1


def test_off_it_is_libm():
    args = _sm_args((4, 12), seed=6)
    off = coarsen.differentiate(softmax, wrt=(0,), target="cpu", disable={"vector_exp"})
    on = coarsen.differentiate(softmax, wrt=(0,), target="cpu")
    v0, (g0,) = off.value_and_grad(*args)
    v1, (g1,) = on.value_and_grad(*args)
    assert np.isclose(v0, v1, rtol=1e-15, atol=0.0)
    np.testing.assert_allclose(g1, g0, rtol=1e-13, atol=1e-16)


@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (3, 8), (4, 17)])
def test_other_shapes_and_float32(shape):
    X, W = _sm_args(shape, seed=8)
    g = coarsen.differentiate(softmax, wrt=(0,), target="cpu")
    check_against_oracle(softmax, (X, W), target="cpu", wrt=(0,))
    X32 = X.astype(np.float32)
    v32, (g32,) = g.value_and_grad(X32, W)
    v64, (g64,) = g.value_and_grad(X32.astype(np.float64), W)
    assert v32 == v64 and np.array_equal(g32, g64.astype(np.float32))
