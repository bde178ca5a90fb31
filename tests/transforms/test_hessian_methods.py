"""``coarsen.hessian``'s two methods: forward mode over the generated gradient (forward over
reverse, ``method="auto"``'s choice where the gradient is a program forward mode reads) and
reverse mode over the generated JVP (reverse over forward, the fallback).  Both give the
Hessian to rounding; forward over reverse is the same under renaming and helper splitting,
bit for bit; a gradient that tapes falls back, and forcing the method on it is refused."""
import importlib.util
import math

import numba
import numpy as np
import pytest

import coarsen
from apps.logreg import objective as loop_logreg
from coarsen.errors import CoarsenError
from tests.transforms.test_hessian import check_symmetric


def _softplus_minus(z, t):
    if z > 0.0:
        return z + math.log1p(math.exp(-z)) - t * z
    return math.log1p(math.exp(z)) - t * z


def loop_logreg_split(w_bar, _t1, X, y, u_y):
    """``loop_logreg`` renamed (names coarsen uses itself) and split into a helper."""
    n = X.shape[0]
    loss = 0.0
    for _g1 in range(n):
        z_bar = _t1
        for j in range(X.shape[1]):
            xij = X[_g1, j]
            z_bar += xij * w_bar[j]
        loss += _softplus_minus(z_bar, y[_g1])
    reg = 0.0
    for j in range(X.shape[1]):
        reg += w_bar[j] * w_bar[j]
    return loss / n + 0.5 * u_y * reg


def chain(x, a):
    """A recurrence: its gradient reads a tape (the old values of s)."""
    s = a
    for i in range(x.shape[0]):
        s = math.sin(s) * x[i] + s * s * 0.1
    return s


def _args(d=11, n=17, seed=3):
    r = np.random.default_rng(seed)
    return (r.normal(size=d) * 0.3, 0.2, r.normal(size=(n, d)),
            (r.random(n) < 0.5).astype(np.float64), 0.05)


def hand(w, b, X, y, lam):
    z = X @ w + b
    s = 1.0 / (1.0 + np.exp(-z))
    return (X.T * (s * (1.0 - s))) @ X / X.shape[0] + lam * np.eye(len(w))


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_forward_over_reverse_is_the_hessian(target, tmp_path):
    args = _args()          # 11 parameters: blocks of 8 lanes, the last one partial
    h = coarsen.hessian(loop_logreg, wrt="w", target=target)
    H = h(*args)
    assert h.method_used == "forward over reverse"
    assert H.shape == (11, 11)
    check_symmetric(H)
    np.testing.assert_allclose(H, hand(*args), rtol=1e-12, atol=1e-14)
    R = coarsen.hessian(loop_logreg, wrt="w", target=target, method="reverse-over-forward")
    np.testing.assert_allclose(H, R(*args), rtol=1e-12, atol=1e-14)
    assert R.method_used == "reverse over forward"
    # the same numbers from wrt=None (the one float array... and b, lam are floats: several)
    assert "jvp_grad_" in h.source and "w_bar" in h.gradient_source
    with pytest.raises(CoarsenError, match="gradient_source"):
        h.jvp_source
    rep = h.report(file=open("/dev/null", "w"))
    assert rep.method == "forward over reverse" and rep.sweeps == 11
    assert "forward over reverse" in rep.format()
    # the last call's signature, and export (reverse over forward's module), after it
    assert h.last_signature == R.last_signature
    if target == "python":
        path = tmp_path / "logreg_hessian.py"
        h.export(path)
        spec = importlib.util.spec_from_file_location("logreg_hessian", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        np.testing.assert_allclose(mod.hessian_objective(*args), H, rtol=1e-12, atol=1e-14)


def test_renamed_and_split_bit_for_bit():
    args = _args()
    a = coarsen.hessian(loop_logreg, wrt="w", target="python")(*args)
    hs = coarsen.hessian(loop_logreg_split, wrt="w_bar", target="python")
    b = hs(*args)
    assert hs.method_used == "forward over reverse"
    np.testing.assert_array_equal(a, b)


def test_taped_gradient_falls_back_and_forcing_is_refused():
    x, a = np.array([0.5, -1.2, 0.8, 1.1]), 0.3
    h = coarsen.hessian(chain, wrt="x", target="python")
    H = h(x, a)
    assert h.method_used == "reverse over forward"
    rep = h.report(file=open("/dev/null", "w"))
    assert "tape" in rep.why and "tape" in rep.format()
    forced = coarsen.hessian(chain, wrt="x", target="python", method="forward-over-reverse")
    with pytest.raises(CoarsenError, match="reads a tape"):
        forced(x, a)
    # the fallback is the Hessian: against differences of the gradient
    g = coarsen.differentiate(chain, wrt="x", target="python")
    eps = 1e-6
    cols = [(g(x + eps * e, a) - g(x - eps * e, a)) / (2 * eps) for e in np.eye(4)]
    np.testing.assert_allclose(H, np.array(cols).T, rtol=1e-6, atol=1e-8)


def test_method_checks():
    with pytest.raises(CoarsenError, match="method must be one of"):
        coarsen.hessian(loop_logreg, method="forward")
    with pytest.raises(CoarsenError, match="parallel=True"):
        coarsen.hessian(loop_logreg, method="forward-over-reverse", parallel=True)
    # parallel=True keeps reverse over forward's parallel columns
    h = coarsen.hessian(loop_logreg, wrt="w", target="python", parallel=True)
    h(*_args(d=3, n=5))
    assert h.method_used == "reverse over forward"


def mat_vec(W, v, c):
    """A matrix, a vector and a float: the gradients packed into one flat array."""
    s = 0.0
    for i in range(W.shape[0]):
        t = c
        for j in range(W.shape[1]):
            t += W[i, j] * v[j]
        s += math.sin(t) * c
    return s


def _blocks_close(a, b):
    assert isinstance(a, tuple) and len(a) == len(b)
    for ra, rb in zip(a, b):
        for x, y in zip(ra, rb):
            assert np.shape(x) == np.shape(y) and type(x) is type(y)
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_several_wrt_are_packed(target):
    args = _args(d=6, n=9)
    h = coarsen.hessian(loop_logreg, wrt=("w", "b"), target=target)
    H = h(*args)
    assert h.method_used == "forward over reverse"
    ref = coarsen.hessian(loop_logreg, wrt=("w", "b"), target=target,
                          method="reverse-over-forward")(*args)
    _blocks_close(H, ref)
    np.testing.assert_allclose(H[0][0], hand(*args), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(H[0][1], H[1][0], rtol=1e-12, atol=1e-15)      # symmetry
    W = np.array([[0.3, -0.8, 1.1], [0.5, 0.2, -0.4]])
    margs = (W, np.array([0.7, -1.3, 0.9]), 0.6)
    hm = coarsen.hessian(mat_vec, target=target)        # wrt=None: W, v and c
    got = hm(*margs)
    assert hm.method_used == "forward over reverse"
    assert np.shape(got[0][0]) == (2, 3, 2, 3) and np.shape(got[0][1]) == (2, 3, 3)
    assert isinstance(got[2][2], float)
    _blocks_close(got, coarsen.hessian(mat_vec, target=target,
                                       method="reverse-over-forward")(*margs))


# generated programs whose gradient tapes nothing (forward over reverse applies), of both fuzz
# families: scalar control flow (kinks, branches, helpers, in-place updates) and reduction
# loops; adversarial names where the seed draws them
FUZZ_CASES = [("mixed", 14), ("mixed", 19), ("mixed", 20), ("reductions", 8), ("reductions", 10),
              ("reductions", 14)]


@pytest.mark.parametrize("family, seed", FUZZ_CASES)
def test_the_two_methods_agree_on_generated_programs(family, seed):
    """Forward over reverse against reverse over forward on code that does not look like the
    examples above (python target): the same Hessian to rounding, symmetric, and not zero."""
    import inspect

    from tests.progen_generate import generate
    from tests.progen_reductions import generate_reductions
    prog = (generate if family == "mixed" else generate_reductions)(seed)
    f = prog.load()
    wrt = tuple(inspect.signature(f).parameters)[:3]       # the two floats and the array
    h = coarsen.hessian(f, wrt=wrt, target="python")
    got = h(*prog.make_args())
    assert h.method_used == "forward over reverse", h.report()
    ref = coarsen.hessian(f, wrt=wrt, target="python",
                          method="reverse-over-forward")(*prog.make_args())
    m = prog.a.shape[0]
    sizes = (1, 1, m)

    def dense(blocks):
        return np.vstack([np.hstack([np.reshape(np.asarray(b, float), (p, q))
                                     for b, q in zip(row, sizes)])
                          for row, p in zip(blocks, sizes)])
    H, R = dense(got), dense(ref)
    scale = max(1.0, np.abs(R).max())
    assert np.abs(R).max() > 0.0, "a zero Hessian checks nothing"
    np.testing.assert_allclose(H, R, rtol=1e-9, atol=1e-11 * scale)
    np.testing.assert_allclose(H, H.T, rtol=1e-9, atol=1e-11 * scale)


def _prange_loss(w, X):
    t = 0.0
    for i in numba.prange(X.shape[0]):
        z = w[0] * X[i, 0] + w[1] * X[i, 1]
        t += math.log(1.0 + math.exp(z))
    return t


def test_parallel_reduction_falls_back():
    """A ``prange`` reduction's gradient keeps per-block partials (outside the input
    language): ``auto`` falls back to reverse over forward instead of failing (found by a
    probe), and forcing forward over reverse says why."""
    w = np.array([0.3, -0.2])
    X = np.random.default_rng(0).normal(size=(10, 2))
    h = coarsen.hessian(_prange_loss, wrt="w")
    H = h(w, X)
    assert h.method_used == "reverse over forward"
    check_symmetric(H)
    s = 1.0 / (1.0 + np.exp(-(X @ w)))
    np.testing.assert_allclose(H, (X.T * (s * (1.0 - s))) @ X, rtol=1e-12, atol=1e-14)
    with pytest.raises(CoarsenError, match="not a program forward mode reads"):
        coarsen.hessian(_prange_loss, wrt="w", method="forward-over-reverse")(w, X)
