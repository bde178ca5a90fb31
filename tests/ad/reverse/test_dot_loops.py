"""Dot products' loops as ``_dot_acc`` calls (``coarsen.ad.reverse.dot_loops``,
``coarsen.codegen.helpers._dot_acc``).

On the cpu target a loop that only sums products of two array elements (a dot the scalarizer
made: ``L[i, :i] @ x[:i]``, a row of ``A @ x``, ``np.sum(a * b)``) becomes one call that sums
them in four partial sums.  Checked: gradients against the extended-precision oracle on both
targets at lengths below and above eight (the lanes) and at every remainder mod 4; the
helper's bits (the loop's own below eight terms, the four lanes' order from eight on, -0.0 kept);
renamed and helper-split variants giving the same bits.  The pass's conditions on hand-written
statements: ``test_dot_loops_guards.py``.
"""
import math

import numpy as np
import pytest

import coarsen
from coarsen.codegen import helpers as H
from tests.oracle import check_against_oracle


def trisolv(L, b):
    n = b.shape[0]
    x = np.zeros(n)
    for i in range(n):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return np.sum(x * x)


def trisolv_renamed(_t1, x_bar):
    _i1 = x_bar.shape[0]
    _acc = np.zeros(_i1)
    for k in range(_i1):
        _acc[k] = (x_bar[k] - _t1[k, :k] @ _acc[:k]) / _t1[k, k]
    return np.sum(_acc * _acc)


def _row(L, x, i):
    return L[i, :i] @ x[:i]


def trisolv_split(L, b):
    n = b.shape[0]
    x = np.zeros(n)
    for i in range(n):
        x[i] = (b[i] - _row(L, x, i)) / L[i, i]
    return np.sum(x * x)


def rows_and_columns(A, B, v):
    """Rows of ``A @ v``, a column of ``B`` against a row of ``A`` (a strided view), an
    integer-constant row."""
    m = A.shape[0]
    s = 0.0
    for j in range(m):
        s += np.sin(A[j, :] @ v) + (A[1, :] @ B[:, j]) * v[j]
    return s


def sums_of_products(a, b):
    return np.sum(a * b) * np.sum(np.cos(a) * a)


def _tri_args(n, seed=0):
    r = np.random.default_rng(seed)
    L = np.tril(r.normal(size=(n, n))) / np.sqrt(n + 1.0)
    L[np.diag_indices(n)] = 1.0 + r.random(n)
    return [L, r.normal(size=n)]


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("n", [3, 9, 14])
def test_trisolv_matches_the_oracle(target, n):
    check_against_oracle(trisolv, _tri_args(n), target=target)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_rows_columns_and_sums_match_the_oracle(target):
    r = np.random.default_rng(3)
    for m, k in ((2, 3), (5, 10), (9, 13)):
        check_against_oracle(rows_and_columns, [r.normal(size=(m, k)), r.normal(size=(k, m)),
                                                r.normal(size=k)], target=target)
    for n in (4, 8, 11):
        check_against_oracle(sums_of_products, [r.normal(size=n), r.normal(size=n)],
                             target=target)


def test_the_cpu_code_calls_the_helper_and_the_python_code_keeps_the_loop():
    args = _tri_args(10)
    src = coarsen.differentiate(trisolv).source_for(*args)
    assert "_dot_acc(_t" in src and ", L[i, :], x, " in src and "def _dot_acc(" in src
    py = coarsen.differentiate(trisolv, target="python").source_for(*args)
    assert "_dot_acc" not in py
    r = np.random.default_rng(1)
    src = coarsen.differentiate(rows_and_columns).source_for(
        r.normal(size=(3, 4)), r.normal(size=(4, 3)), r.normal(size=4))
    assert "A[j, :], v," in src and "A[1, :], B[:, j]," in src


def test_renamed_and_split_variants_give_the_same_bits():
    args = _tri_args(13, seed=2)
    want = coarsen.differentiate(trisolv).value_and_grad(*args)
    for variant in (trisolv_renamed, trisolv_split):
        got = coarsen.differentiate(variant).value_and_grad(*args)
        assert got[0] == want[0]
        assert all(np.array_equal(a, b) for a, b in zip(got[1], want[1]))


# -- the helper's bits ------------------------------------------------------------------------

def _lanes(acc, a, b, n):
    """The four lanes' order, in Python floats."""
    if n < 8:
        for k in range(n):
            acc = acc + a[k] * b[k]
        return acc
    s = [acc, -0.0, -0.0, -0.0]
    m = n - n % 4
    for k in range(m):
        s[k % 4] = s[k % 4] + a[k] * b[k]
    for k in range(m, n):
        s[0] = s[0] + a[k] * b[k]
    return (s[0] + s[1]) + (s[2] + s[3])


@pytest.mark.parametrize("jit", [False, True])
def test_the_helper_sums_in_the_lanes_order(jit):
    import numba
    f = numba.njit(H._dot_acc) if jit else H._dot_acc
    r = np.random.default_rng(7)
    for n in range(0, 19):
        a, b = r.normal(size=n + 2) * 1e3, r.normal(size=2 * n + 3)
        bv = b[::2]                                    # a strided view
        for acc in (0.0, -0.0, 1.5):
            got = f(acc, a, bv, n)
            want = _lanes(acc, [float(v) for v in a], [float(v) for v in bv], n)
            assert got == want and np.signbit(got) == np.signbit(want), (n, acc)
            if n < 8:                                  # the loop's own bits
                seq = acc
                for k in range(n):
                    seq = seq + a[k] * bv[k]
                assert got == seq and np.signbit(got) == np.signbit(seq)
    # the lanes differ from the loop's order from eight terms on (else the helper is the loop)
    a = np.array([1e16, 1.0, -1e16, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    ones = np.ones(9)
    seq = 0.0
    for k in range(9):
        seq = seq + a[k]
    assert f(0.0, a, ones, 9) != seq


def user_rows(W, x):
    # a user's own loop over a row (an RNN cell's): left as written, since the two views and
    # the call cost more than four lanes save on rows of 8 to 16 terms (rnn: 45 -> 104 us)
    s = 0.0
    for i in range(W.shape[0]):
        a = 0.0
        for j in range(W.shape[1]):
            a += W[i, j] * x[j]
        s += math.tanh(a)
    return s


def test_a_users_loop_is_left_as_written():
    r = np.random.default_rng(7)
    args = (r.normal(size=(5, 12)), r.normal(size=12))
    g, _, _ = check_against_oracle(user_rows, args, target="cpu", wrt=(0, 1))
    src = g.source_for(*args)
    assert "_dot_acc" not in src and "for j in range(" in src
    # the scalarizer's dot in the same shape of work is a call
    assert "_dot_acc(" in coarsen.differentiate(array_rows, wrt=(0, 1), target="cpu").source_for(*args)


def array_rows(W, x):
    return np.sum(np.tanh((W * 1.0) @ x))
