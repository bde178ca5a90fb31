"""coarsen.ad.reverse.invariant_sums: an element a loop only adds into, held in a local."""

import numpy as np
import pytest

import coarsen
from coarsen.ad.reverse.invariant_sums import invariant_sums
from tests.helpers_passes import rewrite
from tests.oracle import check_against_oracle


def _rewrite(src, made):
    """The function in ``src`` before and after the pass, compiled; and the new source."""
    return rewrite(src, invariant_sums, made)


SUMS = """
def f(Y, n, m):
    A = np.zeros(n)
    B = np.zeros(n)
    C = np.zeros(n)
    for i in range(n):
        for j in range(m - 1, -1, -1):
            t = Y[i, j] * 0.1
            A[i] += t
            B[i] -= t * t
            C[i] += C[i] * 0.5 + t
        for j in range(m):
            C[i] += Y[i, j]
    return A, B, C
"""


def test_sums_are_held_in_locals_with_the_same_bits():
    before, after, text = _rewrite(SUMS, {"A", "B", "C", "t"})
    # the first loop's A[i] and B[i] (C[i] is read there too), the second loop's C[i]
    assert text.count("_sum") == 9 and "A[i] += t" not in text, text
    assert "C[i] += C[i] * 0.5 + t" in text and "_sum3 += Y[i, j]" in text, text
    r = np.random.default_rng(0)
    for n, m in ((4, 5), (3, 1), (2, 0), (0, 3)):
        Y = r.standard_normal((n, max(m, 1))) * 1e3
        for a, b in zip(before(Y, n, m), after(Y, n, m)):
            assert a.tobytes() == b.tobytes(), (n, m)


def test_a_loop_without_trips_touches_no_element():
    # the index is out of range exactly when the loop has no trips
    src = """
    def f(Y, n):
        A = np.zeros(n)
        for j in range(n):
            A[n - 1] += Y[j]
        return A
    """
    before, after, text = _rewrite(src, {"A"})
    assert "_sum1" in text
    assert after(np.zeros(0), 0).shape == (0,)
    Y = np.arange(4.0)
    assert before(Y, 4).tobytes() == after(Y, 4).tobytes()


PAIRS = """
def f(Y, n):
    A = np.zeros((n, 2))
    for i in range(n):
        for j in range(n - 1, i + 1 - 1, -1):
            t = Y[i, j]
            A[i, 0] += t
            A[j, 0] -= t
            A[i, 1] += t * t
            A[j, 1] -= t * t
            A[i, 0] += 0.5 * t
    return A
"""


def test_pair_loop_holds_the_outer_element():
    # Lennard-Jones' shape: j > i in every trip, so A[i, c] is never A[j, c]
    before, after, text = _rewrite(PAIRS, {"A", "t"})
    assert "_sum1 += t" in text and "_sum1 += 0.5 * t" in text and "_sum2 += t * t" in text, text
    assert "A[j, 0] -= t" in text and "_sum3" not in text, text
    r = np.random.default_rng(2)
    for n in (6, 1, 0):
        Y = r.standard_normal((n, n)) * 1e3
        assert before(Y, n).tobytes() == after(Y, n).tobytes(), n


@pytest.mark.parametrize("bounds", ["range(n)", "range(i, n)", "range(n - 1, i - 1, -1)",
                                    "range(0, i + 1)"])
def test_pair_loop_that_may_meet_the_outer_element_is_left_alone(bounds):
    src = PAIRS.replace("range(n - 1, i + 1 - 1, -1)", bounds)
    before, after, text = _rewrite(src, {"A", "t"})
    assert "_sum" not in text, text


@pytest.mark.parametrize("src", [
    # the index reads a name the loop assigns
    """
    def f(Y, n):
        A = np.zeros(n)
        k = 0
        for j in range(n):
            A[k] += Y[j]
            k = j
        return A
    """,
    # another name reaches the array
    """
    def f(Y, n):
        A = np.zeros(n)
        B = A
        for j in range(n):
            A[0] += Y[j]
            B[0] += 1.0
        return A
    """,
    # a parameter: it may share memory with another
    """
    def f(A, Y, n):
        for j in range(n):
            A[0] += Y[j]
        return A
    """,
    # a step other than 1 or -1
    """
    def f(Y, n):
        A = np.zeros(n)
        for j in range(0, n, 2):
            A[0] += Y[j]
        return A
    """,
    # the loop returns
    """
    def f(Y, n):
        A = np.zeros(n)
        for j in range(n):
            A[0] += Y[j]
            if Y[j] > 1.0:
                return A
        return A
    """,
    # a slice: a view
    """
    def f(Y, n):
        A = np.zeros(n)
        for j in range(n):
            A[0:1] += Y[j]
        return A
    """,
    # the same name and constant at one axis, the loop's variable at the other: X[k, j] is
    # X[k, 0] at j = 0 (k known not negative: the test of the same name and another
    # constant would pass it)
    """
    def f(Y, n):
        A = np.zeros((n, n))
        for k in range(n):
            for j in range(n):
                A[k, 0] += Y[j]
                A[k, j] += 1.0
        return A
    """,
    # fewer axes: A[j] is a row, and row k holds A[k, 0]
    """
    def f(Y, n):
        A = np.zeros((n, n))
        k = n - 1
        for j in range(n):
            A[k, 0] += Y[j]
            A[j] += 1.0
        return A
    """,
    # a gathered index: nothing known of where it points
    """
    def f(Y, I, n):
        A = np.zeros(n)
        for j in range(n):
            A[0] += Y[j]
            A[I[j]] += 1.0
        return A
    """,
])
def test_left_alone(src):
    _, _, text = _rewrite(src, {"A", "B", "k"})
    assert "_sum" not in text, text


def triangle(w, v, x):
    # GMM's triangular reverse: v's adjoint element j added into for every trip of the inner loop
    d = w.shape[0]
    s = 0.0
    for i in range(x.shape[0]):
        q = 0.0
        for j in range(d):
            for l in range(j + 1, d):  # noqa: E741 (a user-style name)
                q += w[l] * v[j] * x[i, j]
        s += q * q
    return s


def last(x, n):
    s = 0.0
    for j in range(n):
        s += x[n - 1] * j
    return s


@pytest.mark.parametrize("coarse", [True, False])
def test_gradients_on_both_targets(coarse):
    r = np.random.default_rng(1)
    w, v, x = r.standard_normal(5), r.standard_normal(5), r.standard_normal((4, 5))
    g, _, _ = check_against_oracle(triangle, (w, v, x), wrt=("w", "v"), coarse=coarse)
    assert "_sum1 = " in g.source
    gc = coarsen.differentiate(triangle, wrt=("w", "v"), coarsen=coarse)
    for d in (5, 1, 0):
        args = r.standard_normal(d), r.standard_normal(d), r.standard_normal((3, d))
        for a, b in zip(gc(*args), g(*args)):
            assert a.tobytes() == b.tobytes(), d
    g, _, _ = check_against_oracle(last, (np.arange(1.0, 4.0), 3), wrt="x", coarse=coarse)
    assert "_sum1 = " in g.source
    gc = coarsen.differentiate(last, wrt="x", coarsen=coarse)
    assert gc(np.zeros(0), 0).shape == (0,) and g(np.zeros(0), 0).shape == (0,)
    assert gc(np.arange(1.0, 4.0), 3).tobytes() == g(np.arange(1.0, 4.0), 3).tobytes()


def triangle_renamed(_sum1, x_bar, u_y):
    # triangle with names that look like the compiler's (escaped: u_sum1, x_bar_v, ...)
    _d = _sum1.shape[0]
    _t1 = 0.0
    for _i in range(u_y.shape[0]):
        q_bar = 0.0
        for j in range(_d):
            for _s1 in range(j + 1, _d):
                q_bar += _sum1[_s1] * x_bar[j] * u_y[_i, j]
        _t1 += q_bar * q_bar
    return _t1


def _pair(w, v, x, i, j, l):  # noqa: E741 (a user-style name)
    return w[l] * v[j] * x[i, j]


def triangle_split(w, v, x):
    # triangle with its term in a helper
    d = w.shape[0]
    s = 0.0
    for i in range(x.shape[0]):
        q = 0.0
        for j in range(d):
            for l in range(j + 1, d):  # noqa: E741 (a user-style name)
                q += _pair(w, v, x, i, j, l)
        s += q * q
    return s


@pytest.mark.parametrize("coarse", [True, False])
def test_renamed_and_split_give_the_same_bits(coarse):
    import re
    r = np.random.default_rng(4)
    args = r.standard_normal(6), r.standard_normal(6), r.standard_normal((5, 6))
    ref = coarsen.differentiate(triangle, wrt=(0, 1), coarsen=coarse)
    want = ref(*args)
    sums = len(re.findall(r"_sum\d+ = ", ref.source))
    assert sums >= 1
    # renamed: the same code, the same bits; split into a helper: the inlined helper's
    # temporaries group the adjoint's products differently, the same numbers to rounding
    for fn, same_bits in ((triangle_renamed, True), (triangle_split, False)):
        g = coarsen.differentiate(fn, wrt=(0, 1), coarsen=coarse)
        got = g(*args)
        for a, b in zip(want, got):
            if same_bits:
                assert a.tobytes() == b.tobytes(), fn.__name__
            else:
                np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-13, err_msg=fn.__name__)
        assert len(re.findall(r"_sum\d+ = ", g.source)) == sums, fn.__name__


def test_negated_shape_read_and_returned_arrays_are_still_held():
    # ``-A``, ``A.shape`` and ``return`` reach no element: ``no_alias`` allows them
    src = """
    def f(Y, n):
        A = np.zeros(n)
        m = A.shape[0]
        for j in range(m):
            A[0] += Y[j]
        B = -A
        return A, B
    """
    before, after, text = _rewrite(src, {"A", "B", "m"})
    assert "_sum1" in text, text
    Y = np.arange(4.0) * 0.3
    for a, b in zip(before(Y, 4), after(Y, 4)):
        assert a.tobytes() == b.tobytes()
