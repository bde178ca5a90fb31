"""Names and live ranges: user names that look like the compiler's, names reused by later
loops, and names that change type between live ranges (issue 9, items 1, 5 and 8).

Every case is checked against the plain-Python value and the extended-precision oracle
(``tests/zoo/harness.py``), on both targets, coarse and fine.  The small cases also pin the
exact value and gradient worked out by hand, so a compiler name leaking into a user's name
cannot pass by agreeing with itself.
"""
import math

import numpy as np
import pytest

import coarsen
from tests.zoo.harness import check_value_and_grad

TARGETS = ["python", "cpu"]
MODES = [pytest.param(True, id="coarse"), pytest.param(False, id="fine")]


# ---------------------------------------------------------------- names that look compiled
def underscore_names(x):
    _y = x * x
    u_y = 3 * x
    return _y + u_y


def bar_names(x):
    x_bar = x * x
    x_bar_v = x_bar * x_bar
    return x_bar_v + x_bar


def huber(w, X, y):
    _n = X.shape[0]
    _n_bar = 0.0
    for _t3 in range(_n):
        _t1 = 0.0
        for _g1 in range(X.shape[1]):
            _t1 += w[_g1] * X[_t3, _g1]
        r = _t1 - y[_t3]
        if abs(r) <= 1.0:
            _n_bar += 0.5 * r * r
        else:
            _n_bar += abs(r) - 0.5
    return _n_bar / _n


def module_names(x, w):
    np = 0.0          # a local named like the module the generated code imports
    tape = 1.0
    pos = 2.0
    _ftape = 0.5
    _ret = 0.25
    for i in range(w.shape[0]):
        np += w[i] * x
        tape *= 1.0 + 0.1 * w[i]
    math = np * tape + pos * _ftape
    return math * _ret + x


def builtin_names(x, a):
    sum = 0.0
    max = -1e300
    for len in range(a.shape[0]):
        sum += a[len] * x
        if a[len] * x > max:
            max = a[len] * x
    float = sum * max
    return float


def _helper_bar(v, v_bar):
    v_bar_v = v * v_bar
    return v_bar_v + v


def helper_names(x, y):
    x_bar = _helper_bar(x, y)
    return _helper_bar(x_bar, x)


SMALL = [
    (underscore_names, lambda: (2.0,), None, 10.0, (7.0,)),
    (bar_names, lambda: (2.0,), None, 20.0, (36.0,)),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("coarse", MODES)
@pytest.mark.parametrize("case", SMALL, ids=lambda c: c[0].__name__)
def test_hand_values(case, target, coarse):
    fn, factory, wrt, value, grad = case
    v, g = coarsen.differentiate(fn, wrt, coarsen=coarse, target=target).value_and_grad(*factory())
    assert v == value and tuple(g) == grad


def _huber_args():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(6, 3))
    return (np.array([0.4, -0.7, 1.3]), X, rng.normal(size=6))


ORACLE = [
    (underscore_names, lambda: (1.3,), None),
    (bar_names, lambda: (0.7,), None),
    (huber, _huber_args, "w"),
    (module_names, lambda: (0.3, np.array([0.5, -0.25, 1.5])), None),
    (builtin_names, lambda: (0.6, np.array([0.5, -0.25, 1.5, 0.75])), None),
    (helper_names, lambda: (0.9, -1.1), None),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("coarse", MODES)
@pytest.mark.parametrize("case", ORACLE, ids=lambda c: c[0].__name__)
def test_compiler_looking_names(case, target, coarse):
    fn, factory, wrt = case
    check_value_and_grad(fn, factory, wrt, target, coarse, f"{fn.__name__}-{target}-{coarse}")


def test_huber_gradient_not_zero():
    g = coarsen.differentiate(huber, "w", target="python")(*_huber_args())
    assert np.all(g != 0.0)


# ------------------------------------------------------ loop variables reused by later loops
def reuse_after_break(M, x):
    m5 = 10.0
    for i in range(2):
        for j in range(3):
            if m5 > 0.0:
                break
        m5 = min(m5, M[i + 1, i])
    s = 0.0
    for i in range(len(x)):
        s += x[i]
    return m5 + s


def reuse_after_continue(M, x):
    acc = 0.0
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            if j == i:
                continue
            acc += M[i, j] * M[j, i]
    for j in range(len(x)):
        acc += x[j] * x[j] * M[j % M.shape[0], 0]
    for i in range(len(x) - 1, -1, -1):
        acc = acc * 0.5 + x[i]
    return acc


def reuse_after_return(M, x):
    t = 0.0
    for i in range(M.shape[0]):
        t += M[i, i] * x[i]
        if t > 100.0:
            return t
    for i in range(len(x)):
        t += math.sin(x[i]) * M[0, i % M.shape[1]]
    return t


def reuse_nested(M, x):
    t = 0.0
    for i in range(M.shape[0]):
        for k in range(M.shape[1]):
            if M[i, k] < -5.0:
                break
            t += M[i, k] * x[k % len(x)]
        for k in range(len(x)):
            t += 0.1 * x[k] * M[i, 0]
    for k in range(M.shape[1]):
        for i in range(len(x)):
            t += M[0, k] * x[i] * x[i]
    return t


def reuse_while(M, x):
    i = 0
    s = 0.0
    while i < M.shape[0]:
        s += M[i, 0] * x[i]
        i += 1
    for i in range(len(x)):
        s += x[i] * s * 0.1
    return s


def _reuse_args():
    return (np.arange(1.0, 10.0).reshape(3, 3) / 7.0, np.array([0.3, -0.2, 0.9, 0.4]))


REUSE = [reuse_after_break, reuse_after_continue, reuse_after_return, reuse_nested, reuse_while]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("coarse", MODES)
@pytest.mark.parametrize("fn", REUSE, ids=lambda f: f.__name__)
def test_loop_variable_reuse(fn, target, coarse):
    check_value_and_grad(fn, _reuse_args, None, target, coarse, f"{fn.__name__}-{target}-{coarse}")


def test_reuse_after_break_exact():
    """The minimized fuzz finding: the first loop's adjoint lands on M[1, 0] (and not on an
    element indexed by the second loop's i)."""
    M, x = _reuse_args()
    v, (dM, dx) = coarsen.differentiate(reuse_after_break, target="python").value_and_grad(M, x)
    expect = np.zeros_like(M)
    expect[1, 0] = 1.0
    assert v == min(10.0, M[1, 0], M[2, 1]) + np.sum(x)
    assert np.array_equal(dM, expect) and np.array_equal(dx, np.ones(4))


# ------------------------------------------------------------ a name that changes its type
def int_then_float(x, d):
    t = 0.0
    for c in range(d):
        t += x[c] * c
    c = 2.0 * math.log(1.0 + x[0] * x[0])
    return t + c * x[1]


def float_then_array(x, a):
    y = a * a
    s = y + x[0]
    y = x * a
    return s * np.sum(y * y)


def array_then_float(x, a):
    y = x * a
    s = np.sum(y)
    y = s * s + a
    return y * x[1]


def gmm_style(alphas, means, xs):
    """ADBench GMM reuses c as a component index and then as a float constant."""
    d = means.shape[1]
    total = 0.0
    for i in range(xs.shape[0]):
        best = -1e300
        for c in range(means.shape[0]):
            q = alphas[c]
            for j in range(d):
                q -= 0.5 * (xs[i, j] - means[c, j]) ** 2
            if q > best:
                best = q
        total += best
    nn = xs.shape[0]
    c = nn * d * math.log(2.0 * math.pi) * 0.5
    return total - c + np.sum(alphas * alphas)


def _type_args():
    return (np.array([0.3, 0.5, 0.7, 1.1]), 0.8)


def _gmm_args():
    rng = np.random.default_rng(5)
    return (rng.normal(size=3), rng.normal(size=(3, 2)), rng.normal(size=(5, 2)))


TYPES = [(int_then_float, lambda: (np.array([0.3, 0.5, 0.7, 1.1]), 3), "x"),
         (float_then_array, _type_args, None),
         (array_then_float, _type_args, None),
         (gmm_style, _gmm_args, None)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("coarse", MODES)
@pytest.mark.parametrize("case", TYPES, ids=lambda c: c[0].__name__)
def test_type_changes_between_live_ranges(case, target, coarse):
    fn, factory, wrt = case
    check_value_and_grad(fn, factory, wrt, target, coarse, f"{fn.__name__}-{target}-{coarse}")


def test_split_names_are_readable():
    """Live ranges keep the user's name; only the later ones get a suffix."""
    g = coarsen.differentiate(int_then_float, "x", target="python")
    src = g.source_for(np.ones(4), 3)
    assert "for c in range(" in src and "c_2 = " in src


def test_user_names_are_escaped_away_from_compiler_names():
    """User locals that look like the compiler's names or shadow the modules the generated code
    imports are escaped; the compiler's own _ret and _ftape stay the compiler's."""
    import ast
    g = coarsen.differentiate(module_names, target="python")
    src = g.source_for(0.3, np.ones(3))
    tree = ast.parse(src)
    entry = next(n for n in tree.body
                 if isinstance(n, ast.FunctionDef) and n.name.startswith("value_and_grad"))
    bound = {n.id for n in ast.walk(entry) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    assert {"np_v", "math_v", "u_ftape", "u_ret", "tape", "pos"} <= bound, sorted(bound)
    assert not {"np", "math", "numba"} & bound, sorted(bound)


# ------------------------------------------------------------------------ parameter kinds
def kwonly(x, *, k=2.0):
    return x * k


def posonly(x, y, /):
    return x * y


@pytest.mark.parametrize("fn, what", [(kwonly, "keyword-only"), (posonly, "positional-only")])
def test_parameter_kinds_refused(fn, what):
    with pytest.raises(coarsen.CoarsenError, match=what) as exc:
        coarsen.differentiate(fn)
    assert "test_names_ssa.py" in str(exc.value) and "line" in str(exc.value)
