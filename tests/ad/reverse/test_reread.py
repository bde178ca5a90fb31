"""Primal re-emission edge cases.

Element reads the reverse sweep re-reads instead of taping (``Emitter.find_recomputable``)
must see the value that was read: not when a later loop both uses the value and writes the
array, since a later trip's use follows an earlier trip's write (soak seed 21001631).
``float(bool)`` must compile on the cpu target.

A user's variable assigned once from an element and read only after it in the same block
(``xij = X[i, j]`` then ``z += xij * w[j]``) lives like a temporary: the reverse sweep
re-reads the element, nothing is taped for it.  Where it does not (read after its block, a
value from the previous trip, the array or an index changed before a use) it is taped as
before, and the gradient is the oracle's either way.
"""
import math

import numpy as np
import pytest

from tests.zoo.harness import check_value_and_grad


def _grow(p, q, x):
    for k in range(p.shape[0]):
        p[k] += 0.1 * math.tanh(q) * k * x


def read_then_loop_writes(x, a):
    for i in range(a.shape[0]):
        _grow(a, a[i], x)
    return 0.5 * a[-1] + x


def read_then_while_writes(x, a):
    t = a[1]
    j = 0
    s = 0.0
    while j < a.shape[0]:
        s += math.sin(t) * a[j] * x
        a[j] = a[j] * 0.5 + x
        j += 1
    return s + np.sum(a * a)


def _args():
    return (0.705, np.array([0.743, 1.084, 0.739]))


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn", [read_then_loop_writes, read_then_while_writes],
                         ids=lambda f: f.__name__)
def test_reread_after_loop_write(fn, target, coarse):
    check_value_and_grad(fn, _args, None, target, coarse, f"{fn.__name__}-{target}-{coarse}")


def float_of_comparison(x, y):
    return float(x < y) * 5.0 * x + float(x > 2.0 * y) * y * y


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
def test_float_of_a_comparison(target, coarse):
    """float(bool) works on every target (Numba has no float(bool); the code says float(int(.)))."""
    check_value_and_grad(float_of_comparison, lambda: (0.3, 0.7), None, target, coarse,
                         f"float_of_comparison-{target}-{coarse}")


def dot_rows(w, X):
    s = 0.0
    for i in range(X.shape[0]):
        z = 0.0
        for j in range(X.shape[1]):
            xij = X[i, j]
            z += xij * w[j]
        s += math.sin(z)
    return s


def dot_rows_renamed(_t3, x_bar):
    s_bar = 0.0
    for _g1 in range(x_bar.shape[0]):
        w_bar = 0.0
        for i in range(x_bar.shape[1]):
            _t1 = x_bar[_g1, i]
            w_bar += _t1 * _t3[i]
        s_bar += math.sin(w_bar)
    return s_bar


def read_after_block(w, X):
    """``last`` is read after the inner loop: the last trip's element."""
    s = 0.0
    for i in range(X.shape[0]):
        z = 0.0
        for j in range(X.shape[1]):
            last = X[i, j] * w[j]
            z += math.sin(last)
        s += z * last
    return s


def read_from_previous_trip(w, X):
    """``prev`` is read before it is assigned in the trip: the previous trip's element."""
    s = 0.0
    prev = w[0]
    for j in range(X.shape[1]):
        s += prev * w[j] * X[0, j]
        prev = w[j]
    return s + prev


def array_written_before_use(w, X):
    s = 0.0
    a = w * 1.0
    for j in range(a.shape[0]):
        v = a[j]
        a[j] = v * v + 0.5
        s += math.sin(v) * a[j]
    return s + np.sum(a)


def index_changed_before_use(w, X):
    s = 0.0
    j = 0
    while j < w.shape[0] - 1:
        v = w[j]
        j += 1
        s += v * w[j] * X[0, j]
    return s


def _rows_args():
    return (np.array([0.3, -0.7, 1.1]), np.array([[0.5, -1.2, 0.8], [1.5, 0.25, -0.6],
                                                  [-0.9, 0.4, 1.3], [0.2, 0.9, -1.1]]))


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn", [dot_rows, dot_rows_renamed, read_after_block,
                                read_from_previous_trip, array_written_before_use,
                                index_changed_before_use], ids=lambda f: f.__name__)
def test_user_variable_read_from_an_array(fn, target, coarse):
    check_value_and_grad(fn, _rows_args, None, target, coarse, f"{fn.__name__}-{target}-{coarse}")


@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
def test_block_local_element_reads_tape_nothing(coarse):
    """The element is re-read: no tape, whatever the variable is called; the same gradient
    bit for bit."""
    import coarsen

    outs = []
    for fn in (dot_rows, dot_rows_renamed):
        g = coarsen.differentiate(fn, coarsen=coarse, target="python")
        outs.append(g(*_rows_args()))
        assert "_ftape" not in g.source, fn.__name__
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)
