"""The SIMD form of the vector JVP (``JvpOptions.simd``: each float tangent one ``Lanes(K)``
vector, array tangents lane-last), which forward over reverse uses on the cpu target: lane k
is the single-direction JVP bit for bit, the Hessian is the unrolled lanes' bit for bit, and a
tangent form the rewrite does not know is refused (the Hessian then falls back to the
unrolled lanes)."""
import io
import math

import numpy as np
import pytest

import coarsen
import coarsen.transforms.hessian as hessian_api
from apps.logreg import objective as loop_logreg
from coarsen.ad.forward import jam
from coarsen.errors import CoarsenError
from coarsen.transforms.jacobian import Jacobian


def mat_sin(x, A):
    """Element reads and stores, ``+=`` into an array, a division by a varied value."""
    n, m = A.shape
    y = np.zeros(n)
    for i in range(n):
        for j in range(m):
            y[i] += A[i, j] * x[j]
        y[i] = math.sin(y[i]) / (1.0 + y[i] * y[i]) - y[i]
    return y


def neighbours(x, c):
    """Negative indices, a float parameter, a branch, a loop-carried float."""
    n = x.shape[0]
    out = np.zeros(n)
    s = c
    for i in range(n):
        t = x[i - 1] * x[i] + c
        if t > 0.0:
            s = s * 0.5 + math.exp(-t)
        else:
            s = s - t / (1.0 + c * c)
        out[i] = s + x[-1]
    return out


def grid(W, v):
    """A 2-D parameter read element by element, a 2-D result."""
    out = np.zeros((W.shape[0], v.shape[0]))
    for i in range(W.shape[0]):
        for k in range(v.shape[0]):
            acc = 0.0
            for j in range(W.shape[1]):
                acc += W[i, j] * W[i, j] * v[k]
            out[i, k] = -acc
    return out


def scaled(x):
    """A primal array times a tangent array: outside the rewrite."""
    return x * x * 3.0


def _args():
    r = np.random.default_rng(7)
    return {mat_sin: ((r.normal(size=5), r.normal(size=(4, 5))), 0),
            neighbours: ((r.normal(size=6), 0.3), (0, 1)),
            grid: ((r.normal(size=(3, 4)), r.normal(size=2)), 0)}


@pytest.mark.parametrize("fn", [mat_sin, neighbours, grid])
@pytest.mark.parametrize("lanes", [8, 16])
def test_simd_lanes_are_the_single_direction_jvp_bit_for_bit(fn, lanes):
    args, wrt = _args()[fn]
    one = Jacobian(fn, wrt, "forward", coarsen=False)(*args)
    simd = Jacobian(fn, wrt, "forward", directions=lanes, coarsen=False, simd=True)
    got = simd(*args)
    assert "_lanes_at" in simd.source or "_lanes_zeros" in simd.source
    for a, b in zip(got if isinstance(got, tuple) else (got,),
                    one if isinstance(one, tuple) else (one,)):
        np.testing.assert_array_equal(a, b)


def test_simd_refuses_what_it_does_not_know():
    x = np.array([0.5, -1.5, 2.0])
    j = Jacobian(scaled, 0, "forward", directions=8, coarsen=False, simd=True)
    with pytest.raises(CoarsenError, match="SIMD form"):
        j(x)
    # without simd the same vector JVP is the unrolled lanes
    np.testing.assert_array_equal(
        Jacobian(scaled, 0, "forward", directions=8, coarsen=False)(x),
        Jacobian(scaled, 0, "forward", coarsen=False)(x))


def _logreg_args(d, n=23, seed=5):
    r = np.random.default_rng(seed)
    return (r.normal(size=d) * 0.3, 0.2, r.normal(size=(n, d)),
            (r.random(n) < 0.5).astype(np.float64), 0.05)


def _unrolled(monkeypatch):
    def off(size):
        raise CoarsenError("the SIMD form is off in this test")
    monkeypatch.setattr(hessian_api, "simd_lanes", off)


# one sweep of 8 lanes; three sweeps of 24 (d = 20, one sweep of 24, left out for the CI's time)
@pytest.mark.parametrize("d", [5, 70])
def test_simd_hessian_is_the_unrolled_lanes_bit_for_bit(d, monkeypatch):
    args = _logreg_args(d)
    h = coarsen.hessian(loop_logreg, wrt="w")
    H = h(*args)
    rep = h.report(file=io.StringIO())
    assert h.method_used == "forward over reverse" and "SIMD" in rep.format()
    assert "_lanes_at" in h.source
    # the sample loop runs 4 trips at a time (coarsen.ad.forward.jam): the comparison with the
    # unrolled lanes below pins it, with 23 samples (three left over)
    assert f"{jam.JAM} {jam.MARK}" in h.source
    X = args[2]
    z = X @ args[0] + args[1]
    s = 1.0 / (1.0 + np.exp(-z))
    np.testing.assert_allclose(H, (X.T * (s * (1.0 - s))) @ X / X.shape[0]
                               + args[4] * np.eye(d), rtol=1e-12, atol=1e-14)
    _unrolled(monkeypatch)
    u = coarsen.hessian(loop_logreg, wrt="w")
    np.testing.assert_array_equal(u(*args), H)
    assert "as SIMD vectors" not in u.report(file=io.StringIO()).format()
    assert "_lanes_at" not in u.source


def mat_vec(W, v, c):
    out = 0.0
    for i in range(W.shape[0]):
        t = c
        for j in range(W.shape[1]):
            t += W[i, j] * v[j]
        out += math.log1p(t * t) * c
    return out


def test_simd_hessian_of_several_parameters(monkeypatch):
    """A 2-D, a 1-D and a float parameter, packed into one flat gradient."""
    r = np.random.default_rng(2)
    args = (r.normal(size=(2, 3)), r.normal(size=3), 0.7)
    h = coarsen.hessian(mat_vec)
    got = h(*args)
    assert h.method_used == "forward over reverse"
    _unrolled(monkeypatch)
    ref = coarsen.hessian(mat_vec)(*args)
    for ra, rb in zip(got, ref):
        for a, b in zip(ra, rb):
            assert np.shape(a) == np.shape(b) and type(a) is type(b)
            np.testing.assert_array_equal(a, b)


def pow_sum(w):
    """A power with a varied exponent: its tangent selects 0 where the exponent's tangent is
    0 (``rules``' ``pow``), a form the SIMD rewrite does not know, so the Hessian runs the
    unrolled lanes."""
    t = 0.0
    for j in range(w.shape[0]):
        t += w[j] ** w[0]
    return t


def test_simd_refusal_falls_back_to_unrolled_lanes(monkeypatch):
    w = np.array([1.3, 0.7, 2.1, 1.1])
    h = coarsen.hessian(pow_sum, wrt="w")
    H = h(w)
    assert h.method_used == "forward over reverse"
    text = h.report(file=io.StringIO()).format()
    assert "as SIMD vectors" not in text
    # the report says why the unrolled lanes run (the rewrite's refusal)
    assert "not SIMD vectors: " in text and "grad_value_and_grad" not in text
    np.testing.assert_allclose(H, coarsen.hessian(pow_sum, wrt="w",
                                                  method="reverse-over-forward")(w),
                               rtol=1e-12, atol=1e-13)
    _unrolled(monkeypatch)
    np.testing.assert_array_equal(coarsen.hessian(pow_sum, wrt="w")(w), H)
