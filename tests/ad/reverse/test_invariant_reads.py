"""coarsen.ad.reverse.invariant_reads: what a loop reads that no trip changes, read once."""

import numpy as np
import pytest

import coarsen
from coarsen.ad.reverse.invariant_reads import HOISTED, invariant_reads
from tests.helpers_passes import rewrite
from tests.oracle import check_against_oracle

TAPES = ("_ftape", "_itape")


def _rewrite(src, made=()):
    return rewrite(src, lambda body, made: invariant_reads(body, made, TAPES), made)


TRIANGLE = """
def f(X, M, n, d):
    A = np.zeros((n, d))
    B = np.zeros(d * d)
    for i in range(n):
        for j in range(d - 1, -1, -1):
            for l in range(d - 1, j, -1):
                s = X[i, j] - M[0, j]
                t = s * X[i, l]
                A[i, l] += t
                B[j * d + l] += s
    return A, B
"""


def test_a_read_no_trip_changes_moves_before_the_loop_with_the_same_bits():
    before, after, text = _rewrite(TRIANGLE)
    assert "if d - 1 > j:\n" in text and text.index("s = X[i, j] - M[0, j]") < text.index("for l in"), text
    assert "t = s * X[i, l]" in text.split("for l in")[1], text     # reads l: stays
    r = np.random.default_rng(0)
    for n, d in ((3, 5), (2, 1), (0, 4), (4, 0)):
        X, M = r.standard_normal((n, max(d, 1))), r.standard_normal((1, max(d, 1)))
        for a, b in zip(before(X, M, n, d), after(X, M, n, d)):
            assert a.tobytes() == b.tobytes(), (n, d)


def test_the_comment_stays_with_the_loop_and_the_moved_statement_says_why():
    import gast

    fn = gast.parse(TRIANGLE.strip()).body[0]
    inner = fn.body[2].body[0].body[0]
    inner.body[0].coarsen_comment = "s = ...  (line 7)"
    out = invariant_reads(fn.body, set(), TAPES)
    guard = out[2].body[0].body[0]
    moved, loop = guard.body
    assert moved.coarsen_comment == HOISTED
    assert loop.body[0].coarsen_comment == "s = ...  (line 7)"
    # the input is not modified
    assert fn.body[2].body[0].body[0] is inner and inner.body[0].coarsen_comment == "s = ...  (line 7)"
    assert not hasattr(inner.body[1], "coarsen_comment")


def test_a_loop_without_trips_reads_nothing():
    # the read is out of range exactly when the loop has no trips
    src = """
    def f(Y, n):
        A = np.zeros(n + 1)
        for j in range(n - 1, n):
            for l in range(j + 1, n):
                s = Y[j + 1]
                A[l] += s
        return A
    """
    before, after, text = _rewrite(src)
    assert "if n > j + 1:" in text, text
    Y = np.arange(3.0)
    assert before(Y, 3).tobytes() == after(Y, 3).tobytes()


@pytest.mark.parametrize("body, why", [
    ("s = Y[j]\n            Y[l] += s", "the loop stores into the array it reads"),
    ("s = Y[j]\n            P[l] += s", "P is a parameter: it may share memory with Y"),
    ("A[l] += s\n            s = Y[j]", "s is read before it is assigned in the trip"),
    ("s = Y[j]\n            s = s + Y[l]\n            A[l] += s", "s is assigned twice"),
    ("s = Y[l]\n            A[l] += s", "the read depends on the loop's variable"),
    ("s = g(Y[j])\n            A[l] += s", "g is not a pure call"),
])
def test_what_stays_in_the_loop(body, why):
    src = f"""
    def f(Y, P, n):
        A = np.zeros(n)
        for j in range(n):
          for l in range(n):
            {body}
        return A, Y, P
    """
    _, _, text = _rewrite_scope(src, {"g": abs})
    assert "if n > 0" not in text.split("for j")[1], (why, text)


def _rewrite_scope(src, scope):
    return rewrite(src, lambda body, made: invariant_reads(body, made, TAPES), (), scope)


def test_a_check_of_the_array_in_the_loop_keeps_the_read_there():
    # as the bounds plan writes them: each read checked before the loop or in the trip
    src = """
    def f(Y, Z, n, m):
        A = np.zeros(n)
        if m >= Z.shape[0]:
            raise IndexError('Z')
        for l in range(n):
            if m >= Y.shape[0]:
                raise IndexError('Y')
            s = Y[m]
            u = Z[m]
            A[l] += s + u
        return A
    """
    before, after, text = _rewrite(src)
    head = text.split("for l in")[0]
    assert "u = Z[m]" in head and "s = Y[m]" not in head, text
    for f in (before, after):
        with pytest.raises(IndexError, match="Y"):
            f(np.zeros(2), np.zeros(9), 2, 5)
    assert before(np.ones(9), np.ones(9), 3, 5).tobytes() == after(np.ones(9), np.ones(9), 3, 5).tobytes()


def test_a_scratch_view_of_the_tape_is_not_read_early_where_the_loop_stores_into_the_tape():
    src = """
    def f(_ftape, n):
        _ftape, W, _wtop = h(_ftape, n)
        A = np.zeros(n)
        for l in range(n):
            s = W[0]
            _ftape[l] = s
            A[l] += s
        return A
    """
    _, _, text = _rewrite_scope(src, {"h": lambda t, n: (t, t[:1], 0)})
    assert "if n > 0" not in text, text


def test_inside_the_guard_of_invariant_sums_no_second_guard():
    src = """
    def f(Y, n, k):
        A = np.zeros(n)
        B = np.zeros(n)
        for j in range(n):
            if n > j:
                _sum1 = B[j]
                for l in range(j, n):
                    s = Y[k]
                    _sum1 += s
                    A[l] += s
                B[j] = _sum1
        return A, B
    """
    before, after, text = _rewrite(src, {"_sum1"})
    assert text.count("if n > j") == 1 and text.index("s = Y[k]") < text.index("for l in"), text
    Y = np.arange(5.0)
    for a, b in zip(before(Y, 5, 3), after(Y, 5, 3)):
        assert a.tobytes() == b.tobytes()


# end to end: the generated gradients, with and without the pass
def tri(mu, L, x):
    """GMM's triangular product, alone."""
    n, d = x.shape
    q = np.zeros(d)
    s = 0.0
    for i in range(n):
        for j in range(d):
            q[j] = mu[j] * x[i, j]
        idx = 0
        for j in range(d):
            for c in range(j + 1, d):
                q[c] += L[idx] * (x[i, j] - mu[j])
                idx += 1
        for j in range(d):
            s += q[j] * q[j]
    return s


def tri_renamed(_s2_t0, x_bar, _t16):
    """``tri`` with the compiler's names as the user's and the product in a helper."""
    n, d = _t16.shape
    _acc7 = np.zeros(d)
    u_y = 0.0
    for i in range(n):
        for j in range(d):
            _acc7[j] = _s2_t0[j] * _t16[i, j]
        _lower(_acc7, x_bar, _t16, _s2_t0, i, d)
        for j in range(d):
            u_y += _acc7[j] * _acc7[j]
    return u_y


def _lower(q, L, x, mu, i, d):
    idx = 0
    for j in range(d):
        for c in range(j + 1, d):
            q[c] += L[idx] * (x[i, j] - mu[j])
            idx += 1


def _inputs(dtype, d=5, n=4, seed=3):
    r = np.random.default_rng(seed)
    return (r.standard_normal(d).astype(dtype), r.standard_normal(d * (d - 1) // 2).astype(dtype),
            r.standard_normal((n, d)).astype(dtype))


@pytest.mark.parametrize("fn", [tri, tri_renamed], ids=["tri", "renamed_helper"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("boundscheck", [True, False])
def test_the_same_bits_as_without_the_pass(fn, dtype, boundscheck):
    args = _inputs(dtype)
    g = coarsen.differentiate(fn, wrt=(0, 1), boundscheck=boundscheck)
    got = g.value_and_grad(*args)
    assert HOISTED in g.source
    plain = coarsen.differentiate(fn, wrt=(0, 1), boundscheck=boundscheck,
                                  disable={"invariant_reads"})
    same = plain.value_and_grad(*args)
    assert HOISTED not in plain.source
    assert same[0] == got[0]
    for a, b in zip(same[1], got[1]):
        assert a.dtype == dtype and a.tobytes() == b.tobytes()


def test_the_variants_agree_and_match_the_oracle():
    args = _inputs(np.float64, d=4, n=3)
    a = coarsen.differentiate(tri, wrt=(0, 1)).value_and_grad(*args)
    b = coarsen.differentiate(tri_renamed, wrt=(0, 1)).value_and_grad(*args)
    assert a[0] == pytest.approx(b[0], rel=1e-14)
    for x, y in zip(a[1], b[1]):
        np.testing.assert_allclose(x, y, rtol=1e-13, atol=0)
    check_against_oracle(tri, args, wrt=(0, 1))
