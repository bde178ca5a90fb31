"""coarsen.hessian and coarsen.hvp (reverse over the generated JVP): against a 2nd-order
mpmath oracle on a dozen functions, against finite differences of the gradient on realistic
programs, symmetry, hvp = H v, JAX's layout, a renaming-metamorphic test, refusals."""
import math
import types

import mpmath
import numpy as np
import pytest

import coarsen
from tests.zoo import realistic


# ------------------------------------------------------------------ a dozen functions
# written with math.* on scalars and loops over indices, so that they also run on mpmath
# numbers (object arrays of mpf) for the oracle
def rosen(x):
    s = 0.0
    for i in range(x.shape[0] - 1):
        s += (1.0 - x[i]) ** 2 + 100.0 * (x[i + 1] - x[i] * x[i]) ** 2
    return s


def log_sum_exp(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += math.exp(x[i])
    return math.log(s)


def sin_prod(x, a):
    return a * math.sin(x[0] * x[1]) + math.cos(x[1]) * x[2] ** 2 + a * a * x[0]


def rational(x):
    return x[0] / (1.0 + x[1] ** 2) + x[1] * x[2] / (2.0 + x[0] ** 2)


def logistic_chain(r, x0):
    x = x0
    for _ in range(5):
        x = r * x * (1.0 - x)
    return x


def softplus_sum(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += math.log(1.0 + math.exp(0.3 * (i + 1) * x[i]))
    return s


def sqrt_norm(x):
    s = 1.0
    for i in range(x.shape[0]):
        s += x[i] * x[i]
    return math.sqrt(s)


def branchy(x):
    if x[0] > 0.0:
        y = x[0] ** 3 * x[1]
    else:
        y = math.exp(x[0]) * x[1]
    return y + x[1] * x[2]


def newton_cbrt(a):
    x = 1.0
    for _ in range(8):
        x = x - (x * x * x - a) / (3.0 * x * x)
    return x * a


def pow_log(x):
    return x[0] ** x[1] + math.log(x[1] * x[2])


def atan_tanh(x):
    return math.atan(x[0] * x[1]) + math.tanh(x[2] - x[0])


def quartic_mix(w, b):
    s = 0.0
    for i in range(w.shape[0]):
        t = w[i] * b + 0.5 * i
        s += t * t * t * t - t * b
    return s


MP_CASES = [
    (rosen, (np.array([0.3, -0.4, 0.8, 1.1]),), None),
    (log_sum_exp, (np.array([0.2, -0.7, 1.1]),), 0),
    (sin_prod, (np.array([0.5, 1.3, -0.6]), 0.8), None),
    (rational, (np.array([0.7, -0.2, 1.4]),), "x"),
    (logistic_chain, (3.1, 0.27), None),
    (softplus_sum, (np.array([0.5, -1.0, 0.25, 2.0]),), None),
    (sqrt_norm, (np.array([0.5, -1.5, 2.0]),), None),
    (branchy, (np.array([0.6, 1.2, -0.3]),), None),
    (newton_cbrt, (2.7,), "a"),
    (pow_log, (np.array([1.7, 0.6, 2.2]),), None),
    (atan_tanh, (np.array([0.4, -1.1, 0.3]),), None),
    (quartic_mix, (np.array([0.3, -0.5, 0.9]), 1.2), ("w", "b")),
]


class _MPMath(types.SimpleNamespace):
    pass


MP_MATH = _MPMath(exp=mpmath.exp, log=mpmath.log, sin=mpmath.sin, cos=mpmath.cos,
                  sqrt=mpmath.sqrt, atan=mpmath.atan, tanh=mpmath.tanh)


def _mp_clone(fn):
    g = dict(fn.__globals__)
    g["math"] = MP_MATH
    return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__)


def _positions(fn, args, wrt):
    names = list(fn.__code__.co_varnames[:fn.__code__.co_argcount])
    if wrt is None:
        return [k for k, a in enumerate(args) if isinstance(a, (float, np.ndarray))]
    items = wrt if isinstance(wrt, (tuple, list)) else (wrt,)
    return [names.index(w) if isinstance(w, str) else w for w in items]


def mp_hessian(fn, args, pos):
    """The dense Hessian over the flattened ``pos`` parameters, by mpmath.diff at 40 digits."""
    f = _mp_clone(fn)
    shapes = [np.shape(args[p]) for p in pos]
    x0 = np.concatenate([np.ravel(np.asarray(args[p], dtype=np.float64)) for p in pos])
    n = x0.size

    def F(*v):
        call, k = list(args), 0
        for p, s in zip(pos, shapes):
            m = int(np.prod(s))
            if s:
                a = np.empty(m, dtype=object)
                a[:] = v[k:k + m]
                call[p] = a.reshape(s)
            else:
                call[p] = v[k]
            k += m
        return f(*call)

    with mpmath.workdps(40):
        pt = [mpmath.mpf(float(v)) for v in x0]
        H = np.empty((n, n))
        for i in range(n):
            for j in range(i, n):
                order = [0] * n
                order[i] += 1
                order[j] += 1
                H[i, j] = H[j, i] = float(mpmath.diff(F, pt, tuple(order)))
    return H, shapes


def dense(res, shapes, single):
    """The dense matrix of a Hessian in JAX's layout."""
    sizes = [int(np.prod(s)) for s in shapes]
    if single:
        return np.reshape(np.asarray(res, dtype=np.float64), (sizes[0], sizes[0]))
    return np.block([[np.reshape(np.asarray(res[p][q], dtype=np.float64), (sizes[p], sizes[q]))
                      for q in range(len(sizes))] for p in range(len(sizes))])


def _single(wrt):
    return wrt is not None and not isinstance(wrt, (tuple, list))


def check_symmetric(H):
    np.testing.assert_allclose(H, H.T, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(H).max()))


@pytest.mark.parametrize("case", MP_CASES, ids=[c[0].__name__ for c in MP_CASES])
def test_hessian_against_mpmath(case):
    fn, args, wrt = case
    before = [np.copy(a) for a in args]
    res = coarsen.hessian(fn, wrt, target="python")(*args)
    ref, shapes = mp_hessian(fn, args, _positions(fn, args, wrt))
    got = dense(res, shapes, _single(wrt))
    # JAX's layout: in.shape + in.shape, or H[p][q] of shape p.shape + q.shape
    if _single(wrt):
        assert np.shape(res) == shapes[0] + shapes[0]
    else:
        assert len(res) == len(shapes) and all(len(row) == len(shapes) for row in res)
        for p, row in enumerate(res):
            for q, blk in enumerate(row):
                assert np.shape(blk) == shapes[p] + shapes[q]
    check_symmetric(got)
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(ref).max()))
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------ realistic programs
def _fd_of_gradient(g, args, pos, single):
    """Central differences of coarsen's gradient, one Richardson step (O(h^4))."""
    x0 = [np.array(args[p], dtype=np.float64) for p in pos]
    n = sum(x.size for x in x0)
    cols = []

    def grad_at(k, h):
        call = list(args)
        flat = np.concatenate([x.ravel() for x in x0])
        flat[k] += h
        c = 0
        for p, x in zip(pos, x0):
            call[p] = flat[c:c + x.size].reshape(x.shape) if x.ndim else float(flat[c])
            c += x.size
        out = g(*call)
        out = [out] if single else out
        return np.concatenate([np.ravel(o) for o in out])

    flat0 = np.concatenate([x.ravel() for x in x0])
    for k in range(n):
        h = 1e-3 * max(1.0, abs(flat0[k]))
        d1 = (grad_at(k, h) - grad_at(k, -h)) / (2 * h)
        d2 = (grad_at(k, h / 2) - grad_at(k, -h / 2)) / h
        cols.append((4 * d2 - d1) / 3)
    return np.stack(cols, axis=1)


REALISTIC = [c for c in realistic.CASES if c[0].__name__ in
             ("logreg_loss", "lennard_jones", "rk4_lotka_volterra", "heat_loops", "newton_cbrt")]
REALISTIC = [c for k, c in enumerate(REALISTIC)
             if c[0].__name__ not in [d[0].__name__ for d in REALISTIC[:k]]]


@pytest.mark.parametrize("case", REALISTIC, ids=[c[0].__name__ for c in REALISTIC])
def test_hessian_against_differences_of_the_gradient(case):
    fn, make, wrt = case
    args = make()
    pos = _positions(fn, args, wrt)
    shapes = [np.shape(args[p]) for p in pos]
    res = coarsen.hessian(fn, wrt, target="python")(*args)
    got = dense(res, shapes, _single(wrt))
    check_symmetric(got)
    g = coarsen.differentiate(fn, wrt, target="python")
    ref = _fd_of_gradient(g, args, pos, _single(wrt))
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7 * max(1.0, np.abs(ref).max()))


# ------------------------------------------------------------------ hvp, cpu, layout
def logreg(w, X, y):
    total = 0.0
    for i in range(X.shape[0]):
        z = 0.0
        for j in range(X.shape[1]):
            z += w[j] * X[i, j]
        total += math.log(1.0 + math.exp(-z)) + (1.0 - y[i]) * z
    return total / X.shape[0] + 0.01 * np.sum(w * w)


def logreg_renamed(theta, A, labels):
    acc = 0.0
    for r in range(A.shape[0]):
        s = 0.0
        for c in range(A.shape[1]):
            s += theta[c] * A[r, c]
        acc += math.log(1.0 + math.exp(-s)) + (1.0 - labels[r]) * s
    return acc / A.shape[0] + 0.01 * np.sum(theta * theta)


def hand_logreg_hessian(w, X, y):
    z = X @ w
    p = 1.0 / (1.0 + np.exp(-z))
    return (X.T * (p * (1.0 - p))) @ X / X.shape[0] + 0.02 * np.eye(w.shape[0])


def returns_array(x):
    return x * 2.0


def _logreg_args(n=12, d=5, seed=3):
    r = np.random.default_rng(seed)
    return (r.normal(size=d), r.normal(size=(n, d)), (r.random(n) < 0.5).astype(np.float64))


@pytest.fixture(scope="module")
def cpu_logreg():
    return coarsen.hessian(logreg, wrt="w"), coarsen.hvp(logreg, wrt="w")


def test_cpu_hessian_hvp_and_hand_written(cpu_logreg):
    H, hv = cpu_logreg
    args = _logreg_args()
    h = H(*args)
    assert h.shape == (5, 5)
    check_symmetric(h)
    np.testing.assert_allclose(h, hand_logreg_hessian(*args), rtol=1e-12, atol=1e-14)
    v = np.linspace(-1.0, 1.0, 5)
    np.testing.assert_allclose(hv(*args, v), h @ v, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(hv(*args, v=v), h @ v, rtol=1e-12, atol=1e-14)
    # the compiled driver's columns are the Hessian-vector products of unit vectors, bit for bit
    for e in range(5):
        np.testing.assert_array_equal(h[:, e], hv(*args, np.eye(5)[e]))
    assert "value_and_grad" in H.source and "jvp_logreg" in H.jvp_source
    rep = H.report(file=open("/dev/null", "w"))
    assert rep.sweeps == 5 and rep.transform == "hessian"
    # the columns in a prange loop: the same numbers, bit for bit
    np.testing.assert_array_equal(coarsen.hessian(logreg, wrt="w", parallel=True)(*args), h)


def test_python_and_cpu_agree_and_renaming_is_invisible(cpu_logreg):
    args = _logreg_args()
    hp = coarsen.hessian(logreg, wrt="w", target="python")(*args)
    hr = coarsen.hessian(logreg_renamed, wrt="theta", target="python")(*args)
    np.testing.assert_array_equal(hp, hr)
    np.testing.assert_allclose(cpu_logreg[0](*args), hp, rtol=1e-13, atol=1e-15)


def test_hvp_several_wrt():
    x, a = np.array([0.5, 1.3, -0.6]), 0.8
    H = coarsen.hessian(sin_prod, target="python")(x, a)
    v = (np.array([0.2, -0.1, 0.4]), 0.7)
    hx, ha = coarsen.hvp(sin_prod, target="python")(x, a, v)
    check_symmetric(dense(H, [(3,), ()], False))
    np.testing.assert_allclose(hx, H[0][0] @ v[0] + H[0][1] * v[1], rtol=1e-12)
    np.testing.assert_allclose(ha, H[1][0] @ v[0] + H[1][1] * v[1], rtol=1e-12)
    assert isinstance(ha, float) and isinstance(H[1][1], float)


def test_refusals():
    x = np.array([0.5, 1.3, -0.6])
    hv = coarsen.hvp(sin_prod, target="python")
    with pytest.raises(coarsen.CoarsenError, match="tuple of 2"):
        hv(x, 0.8, np.ones(3))
    with pytest.raises(coarsen.CoarsenError, match="2 wrt"):
        hv(x, 0.8, (np.ones(3),))
    with pytest.raises(coarsen.CoarsenError, match="shape"):
        hv(x, 0.8, (np.ones(2), 1.0))
    with pytest.raises(coarsen.CoarsenError, match="dtype"):
        hv(x, 0.8, (np.array(["a", "b", "c"]), 1.0))
    with pytest.raises(coarsen.CoarsenError, match="returns an array") as exc:
        coarsen.hessian(returns_array, target="python")(x)
    assert exc.value.filename.endswith("test_hessian.py") and exc.value.lineno is not None
    with pytest.raises(coarsen.CoarsenError):
        coarsen.hessian(sin_prod, wrt="nope")
    with pytest.raises(coarsen.CoarsenError, match="target"):
        coarsen.hvp(sin_prod, target="tpu")
    with pytest.raises(coarsen.CoarsenError):
        coarsen.hessian(sin_prod).source
    # a JVP whose code reverse mode cannot read is refused at the function, naming the
    # generated line: tests/transforms/test_hessian_linalg.py (matrix products are read back now)
