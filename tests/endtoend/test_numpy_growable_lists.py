"""Issue 44c: growable lists, ``xs = []`` and ``xs.append(v)`` in a loop, then
``np.array(xs)``, NumPy functions of ``xs``, ``sum(xs)``, ``len(xs)``, ``xs[k]``
(``coarsen.frontend.growable``: one buffer of one element type, its capacity doubling).

Lists of scalars, of 1-D and of 2-D arrays, appended in loops and under branches, reset inside
a loop, made in a helper; checked: the value against the function itself (``sum(xs)`` in
Python's order: the same bits), the gradient against the extended-precision oracle, coarse and
fine, ``coarsen.jvp`` against the oracle's gradient along a direction; the python target for
breadth, one combined program on cpu.  Refused with a location and a hint: every use of a list
but those, an element whose dtype or rank changes (its shape: a ``ValueError`` at run time), an
appended array written into elsewhere (a Python list would show the change), a list never
appended to.
"""
import numba
import numpy as np
import pytest

import coarsen
from coarsen import CoarsenError
from tests.endtoend.test_numpy_rank import check_jvp
from tests.oracle import check_against_oracle

R = np.random.default_rng(45)
X3 = R.uniform(0.5, 1.5, 3)
M2 = R.uniform(0.5, 1.5, (2, 3))


def scalars(x0, s):
    x = x0
    xs = []
    for t in range(7):
        x = x * 0.9 + s * np.sin(x)
        xs.append(x)
    return np.sum(np.array(xs) ** 2) + sum(xs) * 0.5 + xs[-1] * xs[2] + len(xs) * s


def vectors(x0, s):
    x = x0.copy()
    xs = []
    for t in range(5):
        x = x * 0.9 + s * np.sin(x)
        if t % 2 == 0:
            xs.append(x * 1.0)
    a = np.array(xs)
    return np.sum(a ** 2) + np.sum(sum(xs) ** 3) + np.sum(xs[1] * xs[-2]) + np.mean(xs) \
        + np.sum(np.array(xs)[:, 0]) + np.sum(np.diff(a, axis=0) ** 2)


def _record(m, n):
    ms = []
    for k in range(n):
        ms.append(m * (k + 1.0))
    return np.sum(np.array(ms) ** 2) + np.sum(ms[0] * ms[n - 1])


def matrices_in_helper(m, s):
    total = 0.0
    for rep in range(2):
        ys = []                     # reset each trip
        for k in range(3 + rep):
            ys.append(np.tanh(m * s + k))
        total += np.sum(np.array(ys)) * len(ys)
    return total + _record(m, 3)


def copies_and_counters(x0, s):
    x = x0.copy()
    t = 0.0
    xs = []
    ts = []
    for i in range(4):
        x[0] += s * x[1]
        t += s * i
        xs.append(x.copy())
        ts.append(t)
    return np.sum(np.array(xs) ** 2) + sum(ts) + np.std(ts)


def cpu_lists(x0, s):
    x = x0.copy()
    xs = []
    cs = []
    for t in range(6):
        x = x * 0.9 + s * np.sin(x)
        xs.append(x * 1.0)
        cs.append(np.sum(x) * s)
    return np.sum(np.array(xs) ** 2) + np.sum(sum(xs)) + sum(cs) + xs[-1][0] * cs[1] + len(cs)


CASES = [(scalars, lambda: [0.7, 0.3]), (vectors, lambda: [X3.copy(), 0.3]),
         (matrices_in_helper, lambda: [M2.copy(), 0.4]),
         (copies_and_counters, lambda: [X3.copy(), 0.3])]


@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn,args", CASES, ids=lambda v: v.__name__ if callable(v) else None)
def test_python(fn, args, coarse):
    check_against_oracle(fn, args(), "python", None, coarse=coarse)
    check_jvp(fn, args(), None, "python", coarse)


def test_cpu():
    check_against_oracle(cpu_lists, [X3.copy(), 0.3], "cpu", None)
    check_jvp(cpu_lists, [X3.copy(), 0.3], None, "cpu")


def test_sum_is_pythons_order():
    def f(s):
        xs = []
        for k in range(20):
            xs.append(s / (k + 3.0))
        return sum(xs)
    g = coarsen.differentiate(f, target="python")
    assert g.value_and_grad(0.1)[0] == f(0.1)


def r_iterate(s):
    xs = []
    xs.append(s)
    t = 0.0
    for x in xs:
        t += x
    return t


def r_slice(s):
    xs = []
    xs.append(s)
    return sum(xs[1:])


def r_alias(s):
    xs = []
    xs.append(s)
    ys = xs
    return ys[0]


def r_types(s):
    xs = []
    xs.append(1)
    xs.append(s)
    return xs[1]


def r_mutated(x):
    y = x.copy()
    xs = []
    for k in range(2):
        y[0] += 1.0
        xs.append(y)
    return np.sum(np.array(xs))


def r_never(s):
    xs = []
    return s + len(xs)


def r_start(s):
    xs = []
    xs.append(s)
    return sum(xs, 1.0)


def r_prange(s):
    xs = []
    for k in numba.prange(3):
        xs.append(s * k)
    return sum(xs)


@pytest.mark.parametrize("fn,args,words", [
    (r_iterate, (0.5,), "this use of the list 'xs'"),
    (r_slice, (0.5,), "this use of the list 'xs'"),
    (r_alias, (0.5,), "this use of the list 'xs'"),
    (r_types, (0.5,), "one type"),
    (r_mutated, (X3,), "append a copy"),
    (r_never, (0.5,), "never appended"),
    (r_start, (0.5,), "sum(xs, start)"),
    (r_prange, (0.5,), "prange"),
], ids=lambda v: v.__name__ if callable(v) else None)
def test_refused(fn, args, words):
    with pytest.raises(CoarsenError) as e:
        coarsen.differentiate(fn, target="python")(*args)
    text = str(e.value) + (e.value.hint or "")
    assert words in text
    assert e.value.filename.endswith("test_numpy_growable_lists.py") and e.value.lineno


def shapes_change(x):
    xs = []
    xs.append(x)
    xs.append(x[:1])
    return np.sum(np.array(xs))


def index_out(s):
    xs = []
    xs.append(s)
    return xs[1]


@pytest.mark.parametrize("fn,args,exc", [(shapes_change, (X3,), ValueError),
                                         (index_out, (0.5,), IndexError)])
def test_run_time_errors(fn, args, exc):
    with pytest.raises(exc):
        coarsen.differentiate(fn, target="python")(*args)


def empty_array_list(x, n):
    xs = []
    for i in range(n):
        xs.append(x * i)
    a = np.array(xs)
    return np.sum(a) + a.ndim


def empty_array_list_sum(x, n):
    xs = []
    for i in range(n):
        xs.append(x * i)
    return np.sum(sum(xs) * x)


def empty_scalar_list(x, n):
    xs = []
    for i in range(n):
        xs.append(x * i)
    a = np.array(xs)
    return np.sum(a) + a.ndim + a.shape[0] + sum(xs)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_an_empty_list_of_arrays_raises_where_numpy_and_python_give_another_rank(target):
    """NumPy makes an array of shape (0,) of an empty list and Python's ``sum([])`` is the
    integer 0: neither has the rank of coarsen's buffer, so an empty list of arrays raises
    (never a value of the wrong shape: ``a.ndim`` was 2 where NumPy's is 1); an empty list of
    scalars is NumPy's ``(0,)`` and Python's 0."""
    for fn in (empty_array_list, empty_array_list_sum):
        g = coarsen.differentiate(fn, wrt="x", target=target)
        np.testing.assert_allclose(g.value_and_grad(X3, 3)[0], fn(X3, 3), rtol=1e-15)
        with pytest.raises(ValueError, match="empty list of arrays"):
            g(X3, 0)
        with pytest.raises(ValueError, match="empty list of arrays"):
            coarsen.jvp(fn, wrt="x", target=target)(X3, 0, tangents=X3)
    g = coarsen.differentiate(empty_scalar_list, wrt="x", target=target)
    value, grad = g.value_and_grad(0.7, 0)
    assert value == empty_scalar_list(0.7, 0) == 1.0 and grad == 0.0
    assert g.value_and_grad(0.7, 3)[0] == empty_scalar_list(0.7, 3)
