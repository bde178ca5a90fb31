"""Metamorphic checks of the reverse pass's tape rules and of scalarized matrix-vector products.

Each program exercises one rule (integer updates undone in place, history rows, whole
overwrites of a scratch array, cheap temporaries recomputed, partials from the result, a
scalarized ``(beta * A.T) @ y``).  Its copy with adversarial names (``x_bar``, ``_t1``, ``u_y``,
``idx_bar``, ``_acc1``, ``_i1``: names coarsen's generated code uses or derives) must give a
bit-identical value, gradient and tape.  Its copy split into helpers, which coarsen inlines,
and its copy with independent statements reordered must agree to rounding: adjoints may sum
in another order, and a split copy's tape may differ (an integer update inside a lifted
segment is still taped; a matrix returned by a helper is read through a copy the reverse sweep
does not re-read).  Other sizes and float32 inputs are checked against the oracle.
"""
import math

import numpy as np
import pytest

import coarsen


# ------------------------------------------------------------------ integer updates undone
def packed(L, x):
    n = x.shape[0]
    s = 0.0
    for r in range(L.shape[0]):
        idx = 0
        for j in range(n):
            for m in range(j + 1, n):
                s += L[r, idx] * x[j] * x[m]
                idx += 1
    return s


def packed_renamed(x_bar, _t1):
    _fpos = _t1.shape[0]
    idx_bar = 0.0
    for _i1 in range(x_bar.shape[0]):
        _ipos = 0
        for _t2 in range(_fpos):
            for u_y in range(_t2 + 1, _fpos):
                idx_bar += x_bar[_i1, _ipos] * _t1[_t2] * _t1[u_y]
                _ipos += 1
    return idx_bar


def _packed_row(L, x, r, s):
    n = x.shape[0]
    idx = 0
    for j in range(n):
        for m in range(j + 1, n):
            s += L[r, idx] * x[j] * x[m]
            idx += 1
    return s


def packed_helpers(L, x):
    s = 0.0
    for r in range(L.shape[0]):
        s = _packed_row(L, x, r, s)
    return s


# ------------------------------------------------------------------ history rows
def history(u0, kappa, nt):
    nx = u0.shape[0]
    u = np.zeros((nt + 1, nx))
    for i in range(nx):
        u[0, i] = u0[i]
    for t in range(nt):
        for i in range(1, nx - 1):
            u[t + 1, i] = u[t, i] + kappa * (u[t, i - 1] - 2.0 * u[t, i] + u[t, i + 1])
    s = 0.0
    for i in range(nx):
        s += math.tanh(u[nt, i]) * u[nt, i]
    return s


def history_renamed(u_y, u_bar, _acc1):
    _t1 = u_y.shape[0]
    _ftape = np.zeros((_acc1 + 1, _t1))
    for _i1 in range(_t1):
        _ftape[0, _i1] = u_y[_i1]
    for _fpos in range(_acc1):
        for _i1 in range(1, _t1 - 1):
            _ftape[_fpos + 1, _i1] = _ftape[_fpos, _i1] + u_bar * (
                _ftape[_fpos, _i1 - 1] - 2.0 * _ftape[_fpos, _i1] + _ftape[_fpos, _i1 + 1])
    _ret = 0.0
    for _i1 in range(_t1):
        _ret += math.tanh(_ftape[_acc1, _i1]) * _ftape[_acc1, _i1]
    return _ret


def _step(u, t, kappa):
    for i in range(1, u.shape[1] - 1):
        u[t + 1, i] = u[t, i] + kappa * (u[t, i - 1] - 2.0 * u[t, i] + u[t, i + 1])


def history_helpers(u0, kappa, nt):
    nx = u0.shape[0]
    u = np.zeros((nt + 1, nx))
    for i in range(nx):
        u[0, i] = u0[i]
    for t in range(nt):
        _step(u, t, kappa)
    s = 0.0
    for i in range(nx):
        s += math.tanh(u[nt, i]) * u[nt, i]
    return s


# ------------------------------------------------------------------ whole overwrite, cheap
# temporaries, partials from the result
def scratch(W, x, beta):
    d = x.shape[0]
    q = np.zeros(d)
    m = np.zeros(W.shape[0])
    for k in range(W.shape[0]):
        for j in range(d):
            q[j] = math.exp(W[k, j]) * x[j]
        for j in range(d):
            for p in range(j + 1, d):
                q[p] += (beta * W[k, p]) * x[j]
        sq = 0.0
        for j in range(d):
            sq += q[j] * q[j]
        m[k] = sq
    s = 0.0
    for k in range(m.shape[0]):
        s += math.sqrt(1.0 + m[k])
    return s


def scratch_renamed(_t1, q_bar, _g1):
    _s1_p1 = q_bar.shape[0]
    x_bar = np.zeros(_s1_p1)
    _ret = np.zeros(_t1.shape[0])
    for tape in range(_t1.shape[0]):
        for pos in range(_s1_p1):
            x_bar[pos] = math.exp(_t1[tape, pos]) * q_bar[pos]
        for pos in range(_s1_p1):
            for _grow in range(pos + 1, _s1_p1):
                x_bar[_grow] += (_g1 * _t1[tape, _grow]) * q_bar[pos]
        _t2 = 0.0
        for pos in range(_s1_p1):
            _t2 += x_bar[pos] * x_bar[pos]
        _ret[tape] = _t2
    _t3 = 0.0
    for tape in range(_ret.shape[0]):
        _t3 += math.sqrt(1.0 + _ret[tape])
    return _t3


def scratch_reordered(W, x, beta):
    # the two allocations and the per-trip reset swapped with their independent neighbours
    m = np.zeros(W.shape[0])
    d = x.shape[0]
    q = np.zeros(d)
    for k in range(W.shape[0]):
        for j in range(d):
            q[j] = math.exp(W[k, j]) * x[j]
        for j in range(d):
            for p in range(j + 1, d):
                q[p] += (beta * W[k, p]) * x[j]
        sq = 0.0
        for j in range(d):
            sq += q[j] * q[j]
        m[k] = sq
    s = 0.0
    for k in range(m.shape[0]):
        s += math.sqrt(1.0 + m[k])
    return s


# ------------------------------------------------------------------ scalarized matvec (cpu)
def matvec(A, u, v, y, beta):
    B = A + np.outer(u, v)
    x = (beta * B.T) @ y
    w = (B * 0.5 - u[:, np.newaxis]) @ (x + v)
    return 0.5 * np.sum(w * w)


def matvec_renamed(_t1, x_bar, u_y, _i1, _acc1):
    _ftape = _t1 + np.outer(x_bar, u_y)
    _fpos = (_acc1 * _ftape.T) @ _i1
    _t2 = (_ftape * 0.5 - x_bar[:, np.newaxis]) @ (_fpos + u_y)
    return 0.5 * np.sum(_t2 * _t2)


def _update(A, u, v):
    return A + np.outer(u, v)


def matvec_helpers(A, u, v, y, beta):
    B = _update(A, u, v)
    x = (beta * B.T) @ y
    w = (B * 0.5 - u[:, np.newaxis]) @ (x + v)
    return 0.5 * np.sum(w * w)


# ------------------------------------------------------------------ the checks
def _rng(seed):
    return np.random.default_rng(seed)


def _packed_args():
    return (_rng(1).standard_normal((3, 6)), _rng(2).standard_normal(4))


def _history_args():
    return (np.array([0.3, -0.5, 0.9, 0.2, -0.1, 0.4]), 0.3, 4)


def _scratch_args():
    return (0.3 * _rng(3).standard_normal((3, 4)), _rng(4).standard_normal(4), 0.7)


def _matvec_args():
    r = _rng(5)
    return (r.standard_normal((4, 4)), r.standard_normal(4), r.standard_normal(4),
            r.standard_normal(4), 1.3)


def _run(fn, args, target, coarse):
    g = coarsen.differentiate(fn, target=target, coarsen=coarse)
    value, grads = g.value_and_grad(*args)
    return value, grads, g.tape_bytes


def _same_bits(a, b, tape=True):
    va, ga, ta = a
    vb, gb, tb = b
    if not tape:
        return _close(a, b)
    assert np.asarray(va).tobytes() == np.asarray(vb).tobytes(), (va, vb)
    assert len(ga) == len(gb)
    for x, y in zip(ga, gb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), (x, y)
    assert ta == tb


def _close(a, b):
    assert math.isclose(a[0], b[0], rel_tol=1e-14)
    for x, y in zip(a[1], b[1]):
        np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-15)


PAIRS = [(packed, packed_renamed, _packed_args), (packed, packed_helpers, _packed_args),
         (history, history_renamed, _history_args), (history, history_helpers, _history_args),
         (scratch, scratch_renamed, _scratch_args)]


@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn,other,factory", PAIRS,
                         ids=[f"{a.__name__}-{b.__name__}" for a, b, _ in PAIRS])
def test_bit_identical_python(fn, other, factory, coarse):
    _same_bits(_run(fn, factory(), "python", coarse), _run(other, factory(), "python", coarse),
               tape="helpers" not in other.__name__)


@pytest.mark.parametrize("other", [matvec_renamed, matvec_helpers], ids=lambda f: f.__name__)
def test_scalarized_matvec_bit_identical_cpu(other):
    _same_bits(_run(matvec, _matvec_args(), "cpu", True), _run(other, _matvec_args(), "cpu", True),
               tape=other is matvec_renamed)


def test_history_bit_identical_cpu():
    _same_bits(_run(history, _history_args(), "cpu", False),
               _run(history_renamed, _history_args(), "cpu", False))


def test_reordered_agrees():
    _close(_run(scratch, _scratch_args(), "python", True),
           _run(scratch_reordered, _scratch_args(), "python", True))


def test_shapes_and_dtypes():
    """Other sizes and float32 inputs: the same rules, against finite differences of float64."""
    from tests.zoo.harness import check_value_and_grad
    check_value_and_grad(packed, lambda: (_rng(6).standard_normal((2, 10)), _rng(7).standard_normal(5)),
                         None, "python", True, "packed-5")
    check_value_and_grad(history, lambda: (np.linspace(0.0, 1.0, 9), 0.2, 7), None, "python",
                         False, "history-9x7")
    check_value_and_grad(matvec, lambda: tuple(a.astype(np.float32) if isinstance(a, np.ndarray)
                                               else a for a in _matvec_args()),
                         None, "cpu", True, "matvec-float32")
