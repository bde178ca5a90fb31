"""Unroll and jam (``coarsen.ad.forward.jam``): trips of a loop that meet only through
accumulations run four at a time, and the results are the loop's as written, bit for bit
(every float operation on the same values, each accumulation's adds in trip order); a loop of
any other shape is left as written.  Checked on plain Python (the pass is run on a function's
statements and both versions executed on random data, for trip counts that leave every
remainder) and on the Hessian of logistic regression, whose SIMD form it speeds up."""
import ast
import io
import math
import textwrap

import gast
import numpy as np
import pytest

import coarsen
from apps.bench.hessians import logreg_hessian
from apps.logreg import objective as loop_logreg
from coarsen.ad.forward import jam


def _jammed(fn_src, factor=4):
    """The function of ``fn_src`` with ``jam_loops`` applied to its body, and the plans."""
    mod = gast.parse(textwrap.dedent(fn_src))
    fdef = mod.body[0]
    taken = {n.id for n in gast.walk(fdef) if isinstance(n, gast.Name)}
    body, plans = jam.jam_loops(fdef.body, taken | {a.id for a in fdef.args.args}, factor)
    fdef.body = body
    code = ast.unparse(ast.fix_missing_locations(gast.gast_to_ast(mod)))
    space = {"np": np, "math": math}
    exec(compile(code, "<jammed>", "exec"), space)
    return space[fdef.name], plans, code


def _plain(fn_src):
    space = {"np": np, "math": math}
    exec(textwrap.dedent(fn_src), space)
    return [v for k, v in space.items() if callable(v) and k not in ("np", "math")][0]


LOGISTIC = """
def f(X, w, y):
    n = X.shape[0]
    d = X.shape[1]
    loss = 0.0
    g = np.zeros(d)
    for i in range(n):
        z = 0.1
        for j in range(d):
            z = z + X[i, j] * w[j]
        c = z > 0.0
        if c:
            p = 1.0 / (1.0 + math.exp(-z))
        else:
            e = math.exp(z)
            p = e / (1.0 + e)
        if c:
            loss = loss + (p - y[i]) * z
            loss -= p * 1e-3
        else:
            loss += e
        r = p - y[i]
        for j2 in range(d):
            g[j2] += r * X[i, j2]
    return loss, g
"""

TWO_COLUMNS = """
def f(X, w):
    n = X.shape[0]
    d = X.shape[1]
    G = np.zeros((d, 2))
    s = 0.0
    for i in range(1, n):
        a = X[i, 0] * w[0]
        for j in range(d):
            t = X[i, j] * a
            G[j, 0] += t
            G[j, 1] -= t * t
            G[j, 0] += 0.5 * t
        s += a
    return s, G
"""

SUBSCRIPTS = """
def f(X, w):
    n = X.shape[0]
    d = X.shape[1]
    G = np.zeros((n, d))
    for i in range(n):
        k = i % 3
        for j in range(d):
            G[k, j] = G[k, j] + X[i, j] * w[j]
    return G
"""


READ_SHARED = """
def f(X, w):
    s = 0.0
    g = np.zeros(X.shape[1])
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            g[j] += X[i, j] * w[j]
        if s > 1.0:
            s = s * 0.5
        s = s + X[i, 0] * X[i, 0]
    return g, s
"""

CHAIN = """
def f(X, w):
    d = X.shape[1]
    loss = 0.0
    g = np.zeros(d)
    last = 0.0
    for i in range(X.shape[0]):
        z = 0.0
        for j in range(d):
            z = z + X[i, j] * w[j]
        if z > 0.0:
            loss_2 = loss + math.exp(-z)
        else:
            loss_2 = loss + z * z
        loss = loss_2 - 0.25 * z
        tmp = np.zeros(d)
        for j in range(d):
            tmp[j] = z * X[i, j]
        for j in range(d):
            g[j] = g[j] + tmp[j] * w[j]
        last = z
    return loss, g, last
"""


# p is assigned under the old value of t and read under the new one: carried from trip to
# trip (a branch on t tells a later one nothing once t is assigned in between)
RETESTED = """
def f(X, w):
    g = np.zeros(3)
    p = 0.5
    t = False
    for i in range(X.shape[0]):
        if t:
            p = X[i, 1]
        t = X[i, 0] > 0.0
        if t:
            q = p
        else:
            q = 1.0
        for j in range(3):
            g[j] += q * w[j] * X[i, j]
    return g
"""


@pytest.mark.parametrize("src", [LOGISTIC, TWO_COLUMNS, SUBSCRIPTS, READ_SHARED, CHAIN,
                                 RETESTED])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 8, 9, 33])
def test_jammed_loop_gives_the_same_bits(src, n):
    fj, plans, code = _jammed(src)
    assert plans and plans[0].jammed, code
    f = _plain(src)
    r = np.random.default_rng(n)
    d = 6
    X = r.standard_normal((n, d)) * 3.0
    w = r.standard_normal(d)
    args = (X, w, (r.random(n) < 0.5).astype(float)) if "y" in src.split(":")[0] else (X, w)
    want, got = f(*args), fj(*args)
    for a, b in zip(np.atleast_1d(want) if not isinstance(want, tuple) else want,
                    got if isinstance(got, tuple) else np.atleast_1d(got)):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_chained_updates_are_one_load_and_store_in_trip_order():
    _, plans, code = _jammed(LOGISTIC)
    assert "range(_lo_j1, _mid_j1, 4)" in code
    # the second inner loop's four updates of g[j2] are chained: one store
    assert code.count("g[j2] = g[j2] + ") == 1
    (k, arrays), = [c for c in plans[0].chained if c[1]]
    assert arrays == {"g"}
    # G[j, 0] and G[j, 1] updated at two indices: not chained, each copy updates in place
    _, plans2, code2 = _jammed(TWO_COLUMNS)
    assert all(not arrays for _, arrays in plans2[0].chained)
    assert code2.count("G[j, 0] += ") == 4
    # a trip-dependent index (k = i % 3): not chained
    _, plans3, _ = _jammed(SUBSCRIPTS)
    assert all(not arrays for _, arrays in plans3[0].chained)


REFUSED = {
    "a value carried from trip to trip": """
def f(X, w):
    s = 0.0
    g = np.zeros(3)
    for i in range(X.shape[0]):
        s = s * 0.5 + X[i, 0]
        for j in range(3):
            g[j] += s * w[j]
    return g
""",
    "a scratch array written in the loop": """
def f(X, w):
    g = np.zeros(3)
    tmp = np.zeros(3)
    for i in range(X.shape[0]):
        for j in range(3):
            tmp[j] = X[i, j] * w[j]
        for j in range(3):
            g[j] += tmp[j]
    return g
""",
    "an accumulator updated in two places": """
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        for j in range(3):
            g[j] += X[i, j]
        for j in range(3):
            g[j] += w[j]
    return g
""",
    "a private value read after the loop": """
def f(X, w):
    g = np.zeros(3)
    z = 0.0
    for i in range(X.shape[0]):
        z = X[i, 0]
        for j in range(3):
            g[j] += z * w[j]
    return g, z
""",
    "an accumulator that may alias an input": """
def f(X, w, g):
    for i in range(X.shape[0]):
        for j in range(3):
            g[j] += X[i, j] * w[j]
    return g
""",
    # last bound by a call that is not an allocation: ``np.asarray`` hands back its argument,
    # so the accumulator is ``w``, which every trip reads (issue 48: ``_check_fresh``)
    "an accumulator last bound to an array a call may hand back": """
def f(X, w):
    g = np.zeros(3)
    g = np.asarray(w)
    for i in range(X.shape[0]):
        for j in range(3):
            g[j] += X[i, j] * w[j]
    return g
""",
    "a value assigned in one branch only": """
def f(X, w):
    g = np.zeros(3)
    p = 0.0
    for i in range(X.shape[0]):
        if X[i, 0] > 0.0:
            p = X[i, 1]
        for j in range(3):
            g[j] += p * w[j]
    return g
""",
    "a value assigned only in an inner loop": """
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            last = X[i, j]
        for j2 in range(3):
            g[j2] += last * w[j2]
    return g
""",
    "a shared array's element bound to a name (a row of a 2-D array is a view)": """
def f(X, w):
    g = np.zeros((3, 2))
    s = np.zeros(3)
    for i in range(X.shape[0]):
        g[i % 3, 0] += X[i, 0]
        r = g[(i + 1) % 3]
        for j in range(3):
            s[j] += r[0] * w[j]
    return g, s
""",
    "a break": """
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        for j in range(3):
            g[j] += X[i, j]
        if X[i, 0] > 2.0:
            break
    return g
""",
    "a call that may write an array": """
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        for j in range(3):
            g[j] += X[i, j]
        np.copyto(w, X[i, :3])
    return g
""",
    "an inner loop bound that depends on the trip": """
def f(X, w):
    g = np.zeros(X.shape[0])
    for i in range(X.shape[0]):
        for j in range(i):
            g[j] += X[i, j % 3] * w[0]
    return g
""",
}


def _lanes_at(a, idx, k):
    """The lane helpers of the SIMD form, one lane wide, for running the pass's output."""
    return a[idx]


def _lanes_put(a, idx, v):
    a[idx] = v


# an array written only through the lane helper is written all the same: shared by the trips
LANES_CARRIED = """
def f(X, w):
    g = np.zeros(4)
    for i in range(X.shape[0]):
        for j in range(3):
            _lanes_put(g, j, _lanes_at(g, j + 1, 1) * 0.5 + X[i, j] * w[j])
    return g
"""
REFUSED["an array written through _lanes_put, read at another element"] = LANES_CARRIED


def test_an_array_written_through_the_lane_helper_keeps_its_trips_in_order():
    fj, plans, code = _jammed(LANES_CARRIED)
    assert not plans, code
    fj.__globals__.update(_lanes_at=_lanes_at, _lanes_put=_lanes_put)
    f = _plain(LANES_CARRIED)
    f.__globals__.update(_lanes_at=_lanes_at, _lanes_put=_lanes_put)
    r = np.random.default_rng(2)
    for n in (1, 4, 5, 9):
        X, w = r.standard_normal((n, 4)), r.standard_normal(4)
        assert f(X, w).tobytes() == fj(X, w).tobytes(), n


@pytest.mark.parametrize("why", sorted(REFUSED))
def test_other_loops_are_left_as_written(why):
    src = REFUSED[why]
    fj, plans, code = _jammed(src)
    assert not plans, (why, code)
    assert "_mid_j1" not in code


def test_a_scalar_accumulator_in_an_inner_loop_keeps_that_loop_trip_by_trip():
    src = """
def f(X, w):
    s = 0.0
    g = np.zeros(4)
    for i in range(X.shape[0]):
        for j in range(4):
            s = s + X[i, j] * w[j]
        for j2 in range(4):
            g[j2] += X[i, j2]
    return s, g
"""
    fj, plans, code = _jammed(src)
    assert plans and plans[0].jammed == (1,)      # the g loop, not the s loop
    r = np.random.default_rng(1)
    for n in (0, 3, 4, 6, 13):
        X, w = r.standard_normal((n, 4)) * 1e3, r.standard_normal(4)
        want, got = _plain(src)(X, w), fj(X, w)
        assert want[0] == got[0] and want[1].tobytes() == got[1].tobytes()


def test_factor_one_leaves_every_loop():
    fj, plans, code = _jammed(LOGISTIC, factor=1)
    assert not plans and "_mid_j1" not in code


def _logreg_args(n, d=12, seed=3):
    r = np.random.default_rng(seed)
    return (0.3 * r.standard_normal(d), 0.1, r.standard_normal((n, d)),
            (r.random(n) < 0.5).astype(np.float64), 0.01)


@pytest.mark.parametrize("n", [0, 1, 3, 4, 6, 11])
def test_hessian_with_jammed_trips(n):
    """The SIMD form of logistic regression's Hessian runs its sample loop 4 trips at a time,
    for every remainder; ``test_hessian_simd`` pins it, jammed, to the unrolled lanes (which
    are not jammed) bit for bit."""
    args = _logreg_args(n)
    h = coarsen.hessian(loop_logreg, wrt="w")
    got = h(*args)
    assert f"{jam.JAM} {jam.MARK}" in h.source
    assert h._last[0].jammed == 1
    assert "4 trips at a time" in h.report(file=io.StringIO()).format()
    if n:       # (n = 0: the mean is 0/0)
        np.testing.assert_allclose(got, logreg_hessian(*args), rtol=1e-12, atol=1e-14)


def renamed_logreg(_part_j1, _lo_j1, i_j1, z_j1, _mid_j1):
    """``apps.logreg.objective`` with its names spelt as the pass's own fresh names."""
    _hi_j1 = i_j1.shape[0]
    j_j1 = i_j1.shape[1]
    u_j1 = 0.0
    for _t1 in range(_hi_j1):
        z_j2 = _lo_j1
        for _j_j1 in range(j_j1):
            z_j2 += i_j1[_t1, _j_j1] * _part_j1[_j_j1]
        if z_j2 > 0.0:
            u_j1 += z_j2 + math.log1p(math.exp(-z_j2)) - z_j1[_t1] * z_j2
        else:
            u_j1 += math.log1p(math.exp(z_j2)) - z_j1[_t1] * z_j2
    _part_j2 = 0.0
    for _j_j1 in range(j_j1):
        _part_j2 += _part_j1[_j_j1] * _part_j1[_j_j1]
    return u_j1 / _hi_j1 + 0.5 * _mid_j1 * _part_j2


def _softplus_minus(z, t):
    if z > 0.0:
        return z + math.log1p(math.exp(-z)) - t * z
    return math.log1p(math.exp(z)) - t * z


def _margin(X, w, b, i):
    z = b
    for j in range(X.shape[1]):
        z += X[i, j] * w[j]
    return z


def split_logreg(w, b, X, y, lam):
    """``apps.logreg.objective`` split into helpers."""
    n = X.shape[0]
    loss = 0.0
    for i in range(n):
        loss += _softplus_minus(_margin(X, w, b, i), y[i])
    reg = 0.0
    for j in range(w.shape[0]):
        reg += w[j] * w[j]
    return loss / n + 0.5 * lam * reg


@pytest.mark.parametrize("n, d", [(7, 9), (13, 3)])
def test_jammed_hessian_is_metamorphic(n, d):
    """Renamed to the pass's own spellings: the same bits; split into helpers: the same
    Hessian to rounding; both jammed; other shapes than the tests above."""
    args = _logreg_args(n, d, seed=n)
    want = coarsen.hessian(loop_logreg, wrt="w")(*args)
    r = coarsen.hessian(renamed_logreg, wrt="_part_j1")
    assert r(*args).tobytes() == want.tobytes()
    assert r._last[0].jammed == 1
    s = coarsen.hessian(split_logreg, wrt="w")
    np.testing.assert_allclose(s(*args), want, rtol=1e-13, atol=1e-15)
    assert s._last[0].jammed == 1
