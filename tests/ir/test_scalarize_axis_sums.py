"""Sums along one axis as loop nests (``coarsen.ir.scalarize``, sink ``axsum``).

``std = np.sqrt(np.sum(d * d, axis=0) / n)`` allocated ``d * d``, summed it with Numba's
``np.sum(axis=)`` and, in the reverse sweep, broadcast the adjoint into a new array of the
operand's shape and multiplied it twice.  The sum is now a nest ``out[j] += v[i, j]`` over the
operand's broadcast shape, whose reverse reads ``out_bar[j]`` per element: no temporaries in
either sweep.  Each element of the result adds its terms in the order of the summed axis from
0.0, as Numba's ``np.sum(axis=)`` does, so the cpu target's value is the bits it was.

Checked against the extended-precision oracle on the cpu target and the python target (NumPy's
pairwise sums), both modes; the cpu target's value and gradient bit for bit against the same
program with ``scalarize=False``; near misses that stay calls (``keepdims``, a 1-D operand, a
target assigned twice); metamorphic variants (renamed, split into a helper).
"""
import re

import numpy as np
import pytest

import coarsen
from tests.helpers_passes import scalarized_ir
from tests.oracle import check_against_oracle, fd_directional


# ----------------------------------------------------------------------------- programs
def columns(data, W):
    """correlation's two column sums, one of a product (and the loss of a matrix product)."""
    n = data.shape[0]
    mean = np.sum(data, axis=0) / n
    d = data - mean
    std = np.sqrt(np.sum(d * d, axis=0) / n)
    z = d / (np.sqrt(n) * std)
    return np.sum(W * (z.T @ z))


def rows(X, W):
    """softmax: a row sum of an array made before (no element-wise tree) and a max."""
    m = np.max(X, axis=1)
    e = np.exp(X - m[:, None])
    p = e / np.sum(e, axis=1)[:, None]
    return np.sum(W * p)


def three_d(T, v):
    """The middle and the last axis (negative) of a 3-D product with broadcasting."""
    a = np.sum(T * v[None, :, None], axis=1)
    b = np.sum(np.sin(T) * T, axis=-1)
    return np.sum(a * a) + np.sum(b * np.cos(b))


def in_a_loop(A, x):
    """An axis sum assigned once, in a loop (a new array each trip)."""
    s = 0.0
    for k in range(3):
        r = np.sum(A * x[k], axis=1)
        s = s + np.sum(r * r) * x[k]
    return s


def stays_a_call(A, B):
    """keepdims, and a target assigned twice in one web (loop-carried): no nest."""
    a = np.sum(A * B, axis=0, keepdims=True)
    c = A[:, 0] * 1.0
    s = 0.0
    for k in range(2):
        s = s + np.sum(c * c)
        c = np.sum(A * B * (k + 1.0), axis=1)
    return np.sum(a * a) + s + np.sum(c * A[:, 1])


def columns_renamed(_t1, mean_bar):
    _i1 = _t1.shape[0]
    _acc1 = np.sum(_t1, axis=0) / _i1
    n = _t1 - _acc1
    _s = np.sqrt(np.sum(n * n, axis=0) / _i1)
    _t2 = n / (np.sqrt(_i1) * _s)
    return np.sum(mean_bar * (_t2.T @ _t2))


def _spread(d, n):
    return np.sqrt(np.sum(d * d, axis=0) / n)


def columns_split(data, W):
    n = data.shape[0]
    mean = np.sum(data, axis=0) / n
    d = data - mean
    z = d / (np.sqrt(n) * _spread(d, n))
    return np.sum(W * (z.T @ z))


def _rng(seed=0):
    return np.random.default_rng(seed)


CASES = {
    columns: lambda: (_rng(1).standard_normal((6, 4)), _rng(2).standard_normal((4, 4))),
    rows: lambda: (2.0 * _rng(3).standard_normal((4, 5)), _rng(4).standard_normal((4, 5))),
    three_d: lambda: (_rng(5).standard_normal((2, 3, 4)), _rng(6).standard_normal(3)),
    in_a_loop: lambda: (_rng(7).standard_normal((3, 4)), np.array([0.4, -0.9, 1.3])),
    stays_a_call: lambda: (_rng(8).standard_normal((3, 4)), _rng(9).standard_normal((3, 4))),
}

#: the axis sums each program's scalarized IR computes as nests
NESTS = {columns: 2, rows: 1, three_d: 2, in_a_loop: 1, stays_a_call: 0}


def _copies(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("target", ["cpu", "python"])
@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_oracle(fn, target):
    check_against_oracle(fn, CASES[fn](), target)


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_which_sums_become_nests(fn):
    text = scalarized_ir(fn, CASES[fn]())
    sums = re.findall(r"\w+: f64\[[:,]*\] = sum\(", text)
    nests = re.findall(r"\w+: f64\[[:,]*\] = zeros\(", text)
    assert len(nests) == NESTS[fn], text
    assert len(sums) + len(nests) >= NESTS[fn], text


@pytest.mark.parametrize("fn", [columns, three_d], ids=lambda f: f.__name__)
def test_tangents_against_finite_differences(fn):
    args = CASES[fn]()
    d = _rng(11).standard_normal(args[0].shape)
    value, tangent = coarsen.jvp(fn, wrt=0, target="cpu")(*_copies(args), tangents=d)
    (expected,) = fd_directional(fn, _copies(args), [0], [(d,)])
    assert value == pytest.approx(fn(*_copies(args)), rel=1e-13)
    assert tangent == pytest.approx(float(expected), rel=1e-8, abs=1e-12)


def test_the_value_is_numbas_sum_bit_for_bit():
    """Each element sums in the order of the summed axis, as Numba's np.sum(axis=) does: the
    cpu target's value with and without scalarization is the same float (rows of five: below
    the eight terms from which dot_loops sums in lanes; the scalarized exps are math.exp's, as
    Numba's np.exp of an array, with vector_exp off)."""
    args = CASES[rows]()
    nest = coarsen.differentiate(rows, target="cpu", disable={"vector_exp"}).value_and_grad(*_copies(args))
    calls = coarsen.differentiate(rows, target="cpu", scalarize=False).value_and_grad(*_copies(args))
    assert nest[0] == calls[0]
    np.testing.assert_allclose(nest[1], calls[1], rtol=1e-13, atol=1e-15)


def test_metamorphic_variants_give_the_same_bits():
    args = CASES[columns]()
    want = coarsen.differentiate(columns, target="cpu").value_and_grad(*_copies(args))
    for fn in (columns_renamed, columns_split):
        got = coarsen.differentiate(fn, target="cpu").value_and_grad(*_copies(args))
        assert got[0] == want[0], fn.__name__
        for a, b in zip(got[1], want[1]):
            assert np.array_equal(a, b), fn.__name__


# ----------------------------------------------------------------------------- guards (issue 48)
def param_summed_into_itself(A, x):
    """``x = np.sum(A * x, axis=1)``: the target is a parameter's web, assigned once, read by
    its own tree.  A nest into ``x`` would zero it before reading it: stays a call."""
    for k in range(2):
        x = np.sum(A * x, axis=1)
    return np.sum(x * x)


def test_a_parameter_summed_into_itself_stays_a_call():
    args = (_rng(12).standard_normal((3, 3)) * 0.5, _rng(13).standard_normal(3))
    text = scalarized_ir(param_summed_into_itself, args)
    assert not re.findall(r"\w+: f64\[[:,]*\] = zeros\(", text), text
    check_against_oracle(param_summed_into_itself, args, "python")
