"""coarsen.ad.reverse.rematerialize: a rank-one matrix adjoint recomputed where it is read."""
import textwrap

import numpy as np
import pytest

import coarsen
from coarsen.ad.reverse.rematerialize import rematerialize
from tests.helpers_passes import rewrite
from tests.oracle import check_against_oracle

RANKS = {"X": 2, "x": 1, "w": 1, "X0": 2, "out": 2, "acc": 1, "P": 1}
FLOATS = {"s", "t", "c"}
MADE = {"X", "out", "acc"}


def _rewrite(src):
    return rewrite(textwrap.dedent(src), lambda body, made: rematerialize(body, made, RANKS, FLOATS)[0],
                   MADE)


SRC = """
def f(X0, x, w, n, m, c):
    X = np.empty((n, m))
    out = np.zeros((n, m))
    acc = np.zeros(m)
    s = 0.0
    for i in range(n - 1, -1, -1):
        s += w[i] * 2.0
        for j in range(m):
            t = s * x[j]
            acc[j] += t * X0[i, j]
            u = t - c
            X[i, j] = u
        s = 0.0
    for p in range(n):
        for q in range(m):
            X[p, q] += X0[p, q]
            out[p, q] = X[p, q] * 3.0
    return out, acc
"""


def _args(n, m, seed=0):
    r = np.random.default_rng(seed)
    return r.standard_normal((n, m)), r.standard_normal(m), r.standard_normal(n), n, m, 0.3


def test_the_element_is_computed_where_it_is_read_with_the_same_bits():
    before, after, text = _rewrite(SRC)
    assert "X" not in text.replace("X0", ""), text
    assert "_row1 = np.empty((n, m)[0])" not in text and "_row1 = np.empty(n)" in text, text
    assert "_row1[i] = s" in text, text
    assert "_rm1 = _row1[p] * x[q] - c" in text, text
    assert "u = t - c" not in text, text          # read only by the store: gone with it
    assert "t = s * x[j]" in text, text           # read by acc too: kept
    for n, m in ((3, 4), (1, 1), (0, 3), (3, 0), (5, 2)):
        for a, b in zip(before(*_args(n, m)), after(*_args(n, m))):
            assert a.tobytes() == b.tobytes(), (n, m)


def _variant(old, new, src=SRC):
    assert old in src
    return src.replace(old, new)


@pytest.mark.parametrize("src, why", [
    (_variant("    return out, acc", "    acc[0] += X[0, 0]\n    return out, acc"),
     "X read after the reader"),
    (_variant("            X[p, q] += X0[p, q]", "            X[p, q] = X0[p, q]"),
     "the reader assigns X whole: elements it did not read first"),
    (_variant("    for p in range(n):", "    x[0] = 1.0\n    for p in range(n):"),
     "x written between: the element would read the new value"),
    (_variant("    for p in range(n):", "    x[0] += 1.0\n    for p in range(n):"),
     "x added into between (an augmented store): the element would read the new value"),
    (_variant("    for p in range(n):", "    w[1] -= c\n    for p in range(n):",
              _variant("            t = s * x[j]", "            t = s * x[j] * w[i]")),
     "w subtracted from between (an augmented store)"),
    (_variant("            t = s * x[j]", "            s = s + 1.0\n            t = s * x[j]"),
     "the row value changes within the row"),
    (_variant("            out[p, q] = X[p, q] * 3.0", "            out[p, q] = X[q, p] * 3.0"),
     "the reader reads two elements"),
    (_variant("    for p in range(n):\n        for q in range(m):",
              "    for k in range(2):\n      for p in range(n):\n        for q in range(m):"),
     "the reader adds into each element twice (a third loop)"),
    (_variant("            u = t - c", "            u = t * t * t * t * c"),
     "more than MAX_OPS operations"),
    (_variant("    for p in range(n):", "    P = np.sin(x)\n    for p in range(n):"),
     "a call between writer and reader"),
    (_variant("    for p in range(n):", "    k = len(sorted(x))\n    for p in range(n):"),
     "a call of a builtin that is not pure between writer and reader"),
    (_variant("        for j in range(m):\n", "        j = 0\n        while j < m:\n",
              _variant("            X[i, j] = u\n", "            X[i, j] = u\n            j += 1\n")),
     "the writer's inner loop is no for loop (a while loop, which has no range to read)"),
    (_variant("            u = t - c", "            u = t - X0[i, j]"),
     "a 2-D read: a matrix's worth to keep"),
    (_variant("            X[i, j] = u", "            if c > 0:\n                X[i, j] = u"),
     "a store under a branch"),
    (_variant("    for p in range(n):\n        for q in range(m):\n            X[p, q] += X0[p, q]\n"
              "            out[p, q] = X[p, q] * 3.0",
              "    for c in range(n):\n        for q in range(m):\n            X[c, q] += X0[c, q]\n"
              "            out[c, q] = X[c, q] * 3.0"),
     "the reader's row index is a scalar the element reads (c)"),
    (_variant("    for p in range(n):\n        for q in range(m):\n            X[p, q] += X0[p, q]\n"
              "            out[p, q] = X[p, q] * 3.0",
              "    for p in range(n):\n        for c in range(m):\n            X[p, c] += X0[p, c]\n"
              "            out[p, c] = X[p, c] * 3.0"),
     "the reader's column index is a scalar the element reads (c)"),
])
def test_left_alone(src, why):
    before, after, text = _rewrite(src)
    assert "_rm1" not in text and "X[i, j] = u" in text, why


def test_an_int_row_value_is_left_alone():
    src = _variant("            t = s * x[j]", "            t = k * x[j]",
                   _variant("        s += w[i] * 2.0", "        s += w[i] * 2.0\n        k = i + 1"))
    _, _, text = _rewrite(src)
    assert "_rm1" not in text, text


def test_the_input_is_not_modified():
    import gast

    fn = gast.parse(textwrap.dedent(SRC)).body[0]
    dump = gast.dump(fn)
    out, new = rematerialize(fn.body, MADE, RANKS, FLOATS)
    assert new == {"_row1", "_rm1"}
    assert gast.dump(fn) == dump
    assert out is not fn.body


# ---------------------------------------------------------------- end to end


def dense(W0, u, v, x, y):
    """A dense layer whose weights are updated by a rank-one term first (gemver's shape: the
    scaled product is scalarized, a bare ``W @ x`` stays a BLAS call)."""
    W = W0 + np.outer(u, v)
    h = 0.5 * W @ x
    r = h - y
    return 0.5 * np.sum(r * r)


def dense_renamed(_row1, _rm1, A_bar, x, y):
    """The compiler's names (this pass's and the adjoints') as the user's."""
    _t1 = _row1 + np.outer(_rm1, A_bar)
    x_bar = 0.5 * _t1 @ x
    _row2 = x_bar - y
    return 0.5 * np.sum(_row2 * _row2)


def _layer(W, x):
    return 0.5 * W @ x


def dense_helper(W0, u, v, x, y):
    """The product in a helper, the residual's terms reordered."""
    W = np.outer(u, v) + W0
    r = -y + _layer(W, x)
    return 0.5 * np.sum(r * r)


def gemver_like(A0, u, v, y, x0):
    """gemver's shape: the second product reads what the first one made from the matrix, so
    the matrix adjoint's writer and reader stay two nests (its row values are kept)."""
    A = A0 + np.outer(u, v)
    x = x0 + 0.7 * A.T @ y
    w = 0.5 * A @ x
    return 0.5 * np.sum(w * w)


def gemver_renamed(_row1, _rm1, u_bar, y, _t3):
    """gemver_like under the compiler's names, its statements' terms reordered."""
    A_bar = np.outer(_rm1, u_bar) + _row1
    x_bar = 0.7 * A_bar.T @ y + _t3
    _t1 = 0.5 * A_bar @ x_bar
    return np.sum(_t1 * _t1) * 0.5


def _made_name(g, stem):
    """A name this pass made, or None (the user's ``_rm1`` is ``u_rm1`` in generated code)."""
    import re

    found = re.findall(r"(?<![A-Za-z0-9_])(" + stem + r"\d+) = ", g.source)
    return found[0] if found else None


def _inputs(dtype=np.float64, n=5, m=4, seed=1):
    r = np.random.default_rng(seed)
    return (r.standard_normal((n, m)).astype(dtype), r.standard_normal(n).astype(dtype),
            r.standard_normal(m).astype(dtype), r.standard_normal(m).astype(dtype),
            r.standard_normal(n).astype(dtype))


@pytest.mark.parametrize("fn, stem", [(dense, "_rm"), (dense_renamed, "_rm"), (dense_helper, "_rm"),
                                      (gemver_like, "_row"), (gemver_renamed, "_row")],
                         ids=["dense", "renamed", "helper", "gemver_like", "gemver_renamed"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_same_bits_as_without_the_pass(fn, stem, dtype):
    args = _inputs(dtype) if fn.__name__.startswith("dense") else _inputs(dtype, m=5)
    g = coarsen.differentiate(fn, wrt=(0, 1, 2, 3))
    got = g.value_and_grad(*args)
    assert _made_name(g, stem) is not None, g.source
    plain = coarsen.differentiate(fn, wrt=(0, 1, 2, 3), disable={"rematerialize"})
    same = plain.value_and_grad(*args)
    assert _made_name(plain, stem) is None, plain.source
    assert same[0] == got[0]
    for a, b in zip(same[1], got[1]):
        assert a.dtype == dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
def test_the_variants_match_the_oracle(target, coarse):
    args = _inputs()
    ref = coarsen.differentiate(dense, wrt=(0, 1, 2, 3), target=target, coarsen=coarse)(*args)
    for fn in (dense_renamed, dense_helper):
        got = coarsen.differentiate(fn, wrt=(0, 1, 2, 3), target=target, coarsen=coarse)(*args)
        for a, b in zip(got, ref):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
    check_against_oracle(dense, args, wrt=(0, 1, 2, 3), target=target, coarse=coarse)
    args = _inputs(m=5)
    ref = coarsen.differentiate(gemver_like, wrt=(0, 1, 2, 3), target=target, coarsen=coarse)(*args)
    got = coarsen.differentiate(gemver_renamed, wrt=(0, 1, 2, 3), target=target, coarsen=coarse)(*args)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
    check_against_oracle(gemver_like, args, wrt=(0, 1, 2, 3), target=target, coarse=coarse)


def test_other_shapes():
    """A tall and a wide matrix, and one row."""
    for n, m in ((7, 2), (2, 7), (1, 3)):
        check_against_oracle(dense, _inputs(n=n, m=m), wrt=(0, 1, 2, 3), target="cpu")
    for n in (1, 2, 7):
        check_against_oracle(gemver_like, _inputs(n=n, m=n), wrt=(0, 1, 2, 3), target="cpu")
