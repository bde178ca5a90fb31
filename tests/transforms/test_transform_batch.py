"""Batches of ``coarsen.jvp``, ``coarsen.hvp`` and ``coarsen.hessian`` (``coarsen.transforms.batching.sweeps``).

Per set, a batched call equals the unbatched transform on that set bit for bit (cpu and python
targets); shared and batched parameters and directions; a scalar function with a loop and a
branch (checked against its Hessian by hand and, once, against central differences), one of
array code (its Hessian by hand), an array-valued JVP; JAX's ``vmap`` layouts; refusals with
``CoarsenError``.  Each compiled batch is a module-scope fixture (one Numba compile each).
One thread and the default count give the same numbers (in process, ``numba.set_num_threads``).
"""
from __future__ import annotations

import math
import warnings

import numba
import numpy as np
import pytest
from numba.core.errors import NumbaPerformanceWarning

import coarsen
from coarsen import CoarsenError

B, N = 5, 3
R = np.random.default_rng(13)


def zoo_like(x, a):
    """A loop and a branch: per element ``a sin(x) x`` above zero, ``a x^2`` below."""
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0.0:
            s += a * math.sin(x[i]) * x[i]
        else:
            s += a * x[i] * x[i]
    return s


def zoo_like_hessian(x, a):
    """``zoo_like``'s Hessian with respect to ``(x, a)``, by hand: ``(n + 1, n + 1)``."""
    n = x.shape[0]
    H = np.zeros((n + 1, n + 1))
    for i in range(n):
        if x[i] > 0.0:
            H[i, i] = a * (2.0 * math.cos(x[i]) - x[i] * math.sin(x[i]))
            H[i, n] = H[n, i] = math.sin(x[i]) + x[i] * math.cos(x[i])
        else:
            H[i, i] = 2.0 * a
            H[i, n] = H[n, i] = 2.0 * x[i]
    return H


def least_squares(w, X, y):
    """Array code: a residual's squared norm and a quartic penalty."""
    r = np.sum(X * w, axis=1) - y
    return 0.5 * np.sum(r * r) + 0.25 * np.sum(w * w * w * w)


def vec_out(x, a, n):
    """An array-valued function (for the JVP), whose shape depends on the data (``n``)."""
    y = np.sin(x) * a + x * x
    return y[:n]


@pytest.fixture(scope="module")
def data():
    X = R.normal(size=(B, N))
    X[:, 0] = np.abs(X[:, 0]) + 0.1          # both branches in every set
    X[:, 1] = -np.abs(X[:, 1]) - 0.1
    return X, R.normal(size=B) + 1.5, R.normal(size=N), 0.8


@pytest.fixture(scope="module")
def jvp_xa():
    return coarsen.jvp(zoo_like, wrt=("x", "a"))


@pytest.fixture(scope="module")
def bj_batched_x(jvp_xa):
    return jvp_xa.batch((0, None))


@pytest.fixture(scope="module")
def hvp_xa():
    return coarsen.hvp(zoo_like, wrt=("x", "a"))


@pytest.fixture(scope="module")
def hessian_xa():
    # the same wrt as hvp_xa: the same generated gradient, built and compiled once for both;
    # batches are reverse over forward, bit for bit the unbatched call of that method
    return coarsen.hessian(zoo_like, wrt=("x", "a"), method="reverse-over-forward")


# ------------------------------------------------------------------ jvp
def test_jvp_batched_x_shared_a_bit_identical(jvp_xa, bj_batched_x, data):
    X, _, _, a = data
    TX, ta = R.normal(size=(B, N)), 0.3
    with warnings.catch_warnings():     # the sets' loop is parallel (when Numba compiles it)
        warnings.simplefilter("error", NumbaPerformanceWarning)
        values, tangents = bj_batched_x(X, a, tangents=(TX, ta))
    assert values.shape == (B,) and tangents.shape == (B,)
    assert values.dtype == np.float64 and tangents.dtype == np.float64
    assert bj_batched_x.parallel is True
    for b in range(B):
        v, t = jvp_xa(X[b], a, tangents=(TX[b], ta))
        assert values[b] == v and tangents[b] == t
        assert math.isclose(values[b], zoo_like(X[b], a), rel_tol=1e-14)
    # against central differences of the function itself, once
    h = 1e-6
    for b in range(B):
        fd = (zoo_like(X[b] + h * TX[b], a + h * ta) - zoo_like(X[b] - h * TX[b], a - h * ta)) / (2 * h)
        assert math.isclose(tangents[b], fd, rel_tol=1e-7, abs_tol=1e-8)
    assert "numba.prange" in bj_batched_x.source and "_batch_jvp" in bj_batched_x.source
    # one thread gives the same numbers (the sets are independent)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        v1, t1 = bj_batched_x(X, a, tangents=(TX, ta))
    finally:
        numba.set_num_threads(threads)
    assert np.array_equal(v1, values) and np.array_equal(t1, tangents)


def test_jvp_shared_x_batched_a(jvp_xa, data):
    _, avec, x, _ = data
    tx, TA = R.normal(size=N), R.normal(size=B)
    values, tangents = jvp_xa.batch((None, 0))(x, avec, tangents=(tx, TA))
    assert values.shape == (B,) and tangents.shape == (B,)
    for b in range(B):
        v, t = jvp_xa(x, float(avec[b]), tangents=(tx, float(TA[b])))
        assert values[b] == v and tangents[b] == t


def test_jvp_array_valued(data):
    X, avec, _, _ = data
    j = coarsen.jvp(vec_out, wrt="x")
    bj = j.batch(0)
    TX = R.normal(size=(B, N))
    ns = np.full(B, N)
    values, tangents = bj(X, avec, ns, tangents=TX)
    assert values.shape == (B, N) and tangents.shape == (B, N)
    for b in range(B):
        v, t = j(X[b], float(avec[b]), N, tangents=TX[b])
        assert np.array_equal(values[b], v) and np.array_equal(tangents[b], t)
    assert np.allclose(tangents, (np.cos(X) * avec[:, None] + 2 * X) * TX, rtol=1e-14, atol=0)
    # a set whose result has another shape than set 0's: refused (inside the parallel loop,
    # by the serial pass after it)
    ns[3] = N - 1
    with pytest.raises(ValueError, match="set 3 gives a result of another shape"):
        bj(X, avec, ns, tangents=TX)


# ------------------------------------------------------------------ hvp and hessian
def test_hvp_batched_x_shared_a(hvp_xa, data):
    X, _, _, a = data
    VX, va = R.normal(size=(B, N)), -0.4
    hx, ha = hvp_xa.batch((0, None))(X, a, v=(VX, va))
    assert hx.shape == (B, N) and ha.shape == (B,)        # per set, not summed (JAX's vmap)
    for b in range(B):
        rx, ra = hvp_xa(X[b], a, (VX[b], va))
        assert np.array_equal(hx[b], rx) and ha[b] == ra
        Hv = zoo_like_hessian(X[b], a) @ np.append(VX[b], va)
        assert np.allclose(np.append(hx[b], ha[b]), Hv, rtol=1e-13, atol=1e-13)


def test_hessian_batched_x_shared_a(hessian_xa, data):
    X, _, _, a = data
    H = hessian_xa.batch((0, None))(X, a)                 # JAX's vmap(hessian) layout
    assert [[blk.shape for blk in row] for row in H] == [[(B, N, N), (B, N)], [(B, N), (B,)]]
    for b in range(B):
        ref = hessian_xa(X[b], a)
        for p in range(2):
            for q in range(2):
                assert np.array_equal(np.asarray(H[p][q][b]), np.asarray(ref[p][q]))
        dense = np.block([[H[0][0][b], H[0][1][b][:, None]], [H[1][0][b][None, :], H[1][1][b]]])
        assert np.allclose(dense, zoo_like_hessian(X[b], a), rtol=1e-13, atol=1e-13)


def test_hessian_of_array_code_shared_w():
    w = R.normal(size=N)
    Xs, ys = R.normal(size=(B, 4, N)), R.normal(size=(B, 4))
    h = coarsen.hessian(least_squares, wrt="w")
    H = h.batch((None, 0, 0))(w, Xs, ys)
    assert H.shape == (B, N, N)
    for b in range(B):
        assert np.array_equal(H[b], h(w, Xs[b], ys[b]))
        assert np.allclose(H[b], Xs[b].T @ Xs[b] + np.diag(3 * w * w), rtol=1e-13, atol=1e-13)


def test_python_target(data):
    X, avec, _, _ = data
    h = coarsen.hessian(zoo_like, wrt="x", target="python")
    H = h.batch(0)(X, avec)
    assert H.shape == (B, N, N)
    for b in range(B):
        assert np.array_equal(H[b], h(X[b], float(avec[b])))
    j = coarsen.jvp(zoo_like, wrt="a", target="python")
    bj = j.batch((0, None))
    assert bj.parallel is None
    values, tangents = bj(X, 0.8, tangents=2.0)
    assert bj.parallel is False and "prange" not in bj.source
    for b in range(B):
        assert (values[b], tangents[b]) == j(X[b], 0.8, tangents=2.0)


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize("axes, what", [
    (1, "leading axis only"), ((0, 1), "leading axis only"), ((True, None), "leading axis only"),
    ((0,), "has 1 entries"), ((None, None), "batches no parameter"), ("0", "must be 0 or a tuple")])
def test_wrong_in_axes(jvp_xa, hvp_xa, hessian_xa, axes, what):
    for t in (jvp_xa, hvp_xa, hessian_xa):
        with pytest.raises(CoarsenError, match=what):
            t.batch(axes)


def test_targets_refused(jvp_xa, hessian_xa):
    with pytest.raises(CoarsenError, match="CPU only") as exc:
        jvp_xa.batch(0, target="cuda")
    assert "target='cpu'" in str(exc.value)
    with pytest.raises(CoarsenError, match="CPU only"):
        hessian_xa.batch(0, target="dask")
    with pytest.raises(CoarsenError, match="target='python'"):
        jvp_xa.batch(0, target="python")
    with pytest.raises(CoarsenError, match="unknown batch target"):
        hessian_xa.batch(0, target="gpu")


def test_wrong_arguments_refused(bj_batched_x, hvp_xa, hessian_xa, data):
    X, avec, x, a = data
    with pytest.raises(CoarsenError, match="different batch sizes"):
        hessian_xa.batch(0)(X, avec[:3])
    with pytest.raises(CoarsenError, match="is batched .* but is a float"):
        hessian_xa.batch(0)(X, a)
    with pytest.raises(CoarsenError, match="empty"):
        hessian_xa.batch((0, None))(X[:0], a)
    with pytest.raises(CoarsenError, match="takes 2 arguments"):
        hessian_xa.batch((0, None))(X)
    with pytest.raises(CoarsenError, match="needs tangents"):
        bj_batched_x(X, a)
    with pytest.raises(CoarsenError, match=r"shape \(3,\); x is batched"):
        bj_batched_x(X, a, tangents=(x, 0.0))       # x is batched: its tangent too
    with pytest.raises(CoarsenError, match=r"a' has shape \(5,\); a is shared"):
        bj_batched_x(X, a, tangents=(X, avec))      # a is shared: one tangent for all sets
    with pytest.raises(CoarsenError, match="1 tangents given for 2"):
        bj_batched_x(X, a, tangents=(X,))
    with pytest.raises(CoarsenError, match="needs v"):
        hvp_xa.batch((0, None))(X, a)
