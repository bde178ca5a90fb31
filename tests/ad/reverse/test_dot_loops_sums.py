"""Plain sums in ``coarsen.ad.reverse.dot_loops``: a loop that only adds array elements
(``np.sum(e, axis=1)``'s row sums, the scalarizer's) is one ``_sum_acc`` call, the lanes of
``_dot_acc`` with the product by 1; ``acc += p`` reads as ``acc = acc + p``; a local that
``invariant_sums`` made for an adjoint element (``s = a[i]`` of a float64 array before the
loop) counts as float64.

On statements: the rewrites and each near miss.  Through the compiler: the oracle on both
targets, the value of a row sum in the helper's lane order, and renamed and helper-split
variants giving the same bits.
"""
import ast

import gast
import numpy as np
import pytest

import coarsen
from coarsen.ad.reverse.dot_loops import dot_loop_calls
from coarsen.codegen import helpers as H
from coarsen.ir.nodes import Array, Scalar

from tests.oracle import check_against_oracle

F2, F1, I2 = Array("f64", 2), Array("f64", 1), Array("i64", 2)
TYPES = {"e": F2, "t": F1, "x": F1, "ie": I2, "acc": Scalar("f64"), "iacc": Scalar("i64"),
         "i": Scalar("i64"), "n": Scalar("i64")}

ROWS = """
for i in range(n):
    _s = t[i]
    for _k in range(n):
        _u = e[i, _k]
        _s += _u
    t[i] = _s
"""


def _text(body):
    return ast.unparse(ast.fix_missing_locations(gast.gast_to_ast(gast.Module(body=body, type_ignores=[]))))


def _run(text, types=TYPES):
    body = gast.parse(text).body
    before = _text(body)
    new, helpers = dot_loop_calls(body, types)
    assert _text(body) == before                # the input is not modified
    return _text(new), helpers


def test_a_row_sum_into_an_element_local_is_one_call():
    text, helpers = _run(ROWS)
    assert helpers == {"_sum_acc"}
    assert text == ("for i in range(n):\n    _s = t[i]\n    _s = _sum_acc(_s, e[i, :], n)\n"
                    "    t[i] = _s")


def test_augmented_forms():
    text, helpers = _run("for _k in range(n):\n    acc += x[_k]\n")
    assert text == "acc = _sum_acc(acc, x, n)" and helpers == {"_sum_acc"}
    text, helpers = _run("for _k in range(n):\n    acc += e[i, _k] * x[_k]\n")
    assert text == "acc = _dot_acc(acc, e[i, :], x, n)" and helpers == {"_dot_acc"}


@pytest.mark.parametrize("old, new", [
    ("_s = t[i]", "_s = 0"),                                 # an int local
    ("_s = t[i]", "_s = ie[i, 0]"),                          # an element of an int array
    ("_s = t[i]", "_s = e[i]"),                              # a row, not an element
    ("_s = t[i]", "_s = t[i:]"),                             # a view
    ("    _s = t[i]\n", "    _s = t[i]\n    _s = 0\n"),     # reassigned before the loop
    ("    _s = t[i]\n", "    _s = t[i]\n    if n > 2:\n        _s = 1\n"),   # maybe reassigned
    ("_s += _u", "_s -= _u"),                                # not a sum
    ("_s += _u", "_s += _u + 1.0"),                          # not an element
    ("_u = e[i, _k]", "_u = ie[i, _k]"),                     # an int array
    ("_u = e[i, _k]", "_u = e[_k, _k]"),                     # the loop variable twice
])
def test_near_misses_stay_loops(old, new):
    assert old in ROWS
    text, helpers = _run(ROWS.replace(old, new, 1))
    assert helpers == frozenset() or helpers == set(), new
    assert "for _k" in text, new


def test_an_untyped_accumulator_stays_a_loop():
    text, helpers = _run("for _k in range(n):\n    q += x[_k]\n")
    assert not helpers and "for _k" in text


# ---------------------------------------------------------------- through the compiler

def row_softmax(X, W):
    e = np.exp(X - np.max(X, axis=1)[:, None])
    return np.sum(W * (e / np.sum(e, axis=1)[:, None]))


def row_softmax_renamed(A, B):
    z = np.exp(A - np.max(A, axis=1)[:, None])
    return np.sum(B * (z / np.sum(z, axis=1)[:, None]))


def _normalize(e):
    return e / np.sum(e, axis=1)[:, None]


def row_softmax_split(X, W):
    return np.sum(W * _normalize(np.exp(X - np.max(X, axis=1)[:, None])))


def shares(X, W):
    e = X * X
    s = np.sum(e, axis=1)
    return np.sum(W * (e / s[:, None]))


def _args(shape, seed=0):
    r = np.random.default_rng(seed)
    return r.standard_normal(shape), r.standard_normal(shape)


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("shape", [(3, 5), (4, 8), (2, 13), (5, 23)])
def test_row_sums_match_the_oracle(target, shape):
    check_against_oracle(row_softmax, _args(shape), target=target, wrt=(0,))
    check_against_oracle(shares, _args(shape, seed=1), target=target, wrt=(0,))


def test_the_row_sum_is_summed_in_lanes():
    X, W = _args((3, 13), seed=7)
    X = X * 1e3
    g = coarsen.differentiate(shares, wrt=(0,), target="cpu")
    assert "_sum_acc(" in g.source_for(X, W)
    v, _ = g.value_and_grad(X, W)
    e = X * X
    want = 0.0
    for i in range(3):
        s = H._sum_acc(0.0, e[i], 13)         # the row's sum in the helper's lanes
        for j in range(13):
            want = want + W[i, j] * (e[i, j] / s)
    assert v == want


def test_variants_give_the_same_bits():
    X, W = _args((4, 19), seed=2)
    got = []
    for fn in (row_softmax, row_softmax_renamed, row_softmax_split):
        g = coarsen.differentiate(fn, wrt=(0,), target="cpu")
        v, (gx,) = g.value_and_grad(X, W)
        got.append((v, gx))
    # renamed: the same bits; through a helper the code may differ in its loops: close
    assert got[1][0] == got[0][0] and np.array_equal(got[1][1], got[0][1])
    np.testing.assert_allclose(got[2][1], got[0][1], rtol=1e-13, atol=1e-15)
