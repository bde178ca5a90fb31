"""Index checks (coarsen.analysis.bounds): an index out of range raises IndexError naming the
source line, on every target, before the access; in-range indices (negative ones included)
give the gradients they gave before; boundscheck=False generates no checks.

Numba compiles are slow: the cpu target is exercised by a handful of functions only, each
compiled once (the good and the bad calls share one signature)."""
import inspect
import math
import re

import numpy as np
import pytest

import coarsen


def _where(fn, snippet):
    """'test_bounds.py:<line>' of the line of ``fn`` containing ``snippet``, and that line."""
    lines, first = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if snippet in line:
            return f"test_bounds.py:{first + k}", line.strip()
    raise AssertionError(snippet)


def _raises_at(g, args, fn, snippet):
    with pytest.raises(IndexError) as info:
        g(*args)
    where, text = _where(fn, snippet)
    msg = str(info.value)
    assert where in msg and text in msg, msg
    return msg


# ---------------------------------------------------------------------------- programs
def logreg(w, b, X, y):
    total = 0.0
    for i in range(X.shape[0]):
        z = b
        for j in range(X.shape[1]):
            z += w[j] * X[i, j]
        p = 1.0 / (1.0 + math.exp(-z))
        total -= y[i] * math.log(p) + (1.0 - y[i]) * math.log(1.0 - p)
    return total / X.shape[0]


def write_elem(x, n):
    a = np.zeros(4)
    for i in range(n):
        a[i] = x[i] * x[i]
    return np.sum(a)


def augwrite_elem(x, k):
    a = x * 2.0
    a[k] += 3.0 * x[0]
    return np.sum(a * a)


def read2d(A, r, c):
    return A[r, c] * A[0, 0]


def negatives(w, k):
    s = 0.0
    for i in range(3):
        s += w[-1 - i] * w[i - 3]
    w2 = w * 2.0
    w2[-1] += 3.0
    return s + w2[-2] * w[k]


def gathered(w, idx):
    s = 0.0
    for i in range(idx.shape[0]):
        k = idx[i] + 1
        s += w[k] * w[k]
    return s


def stencil(u, m):
    s = 0.0
    for i in range(1, m):
        s += (u[i + 1] - u[i - 1]) ** 2
    return s


def stencil_ok(u):
    s = 0.0
    for i in range(1, u.shape[0] - 1):
        s += (u[i + 1] - u[i - 1]) ** 2
    return s


def _pick(v, j):
    return v[j] * v[j]


def via_helper(w, j):
    return _pick(w, j) + w[0]


def while_index(w, n):
    s = 0.0
    i = 0
    while i < n:
        s += w[i]
        i += 1
    return s


def slices(w, lo, hi):
    return np.sum(w[lo:hi] * w[lo:hi])


def slice_set(w, v):
    a = w * 1.0
    a[1:3] = v
    return np.sum(a * a)


def slice_add(w, v):
    a = w * 1.0
    a[1:4] += v
    return np.sum(a * a)


def varying(x):
    s = 0.0
    for k in range(x.shape[0]):
        a = x[:k + 1] * 2.0
        s += a[k] * a[0]
    return s


def matvec(A, x):
    return np.sum(A @ x)


# ---------------------------------------------------------------------------- both targets
@pytest.fixture(params=["python", "cpu"])
def target(request):
    return request.param


def test_read_out_of_range_cpu_and_python(target):
    rng = np.random.default_rng(0)
    w, X, y = rng.normal(size=4), rng.normal(size=(3, 5)), rng.random(3)
    g = coarsen.differentiate(logreg, target=target)
    _raises_at(g, (w, 0.1, X, y), logreg, "z += w[j] * X[i, j]")
    # the same signature with matching shapes: the gradient of a plain run
    ref = coarsen.differentiate(logreg, target="python", boundscheck=False)
    for a, b in zip(g(w, 0.1, X[:, :4], y), ref(w, 0.1, X[:, :4], y)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_write_out_of_range_cpu_and_python(target):
    g = coarsen.differentiate(write_elem, wrt="x", target=target)
    x = np.arange(1.0, 7.0)
    np.testing.assert_allclose(g(x, 4), np.r_[2 * x[:4], 0, 0])
    _raises_at(g, (x, 5), write_elem, "a[i] = x[i] * x[i]")


def test_negative_indices_cpu_and_python(target):
    w = np.array([0.5, -1.0, 2.0, 3.0, 0.25])
    g = coarsen.differentiate(negatives, wrt="w", target=target)
    ref = coarsen.differentiate(negatives, wrt="w", target="python", boundscheck=False)
    for k in (-5, -1, 0, 4):
        np.testing.assert_allclose(g(w, k), ref(w, k), rtol=1e-13)
    _raises_at(g, (w, -6), negatives, "w2[-2] * w[k]")
    _raises_at(g, (w, 5), negatives, "w2[-2] * w[k]")


def test_slice_add_shape_mismatch_cpu_and_python(target):
    g = coarsen.differentiate(slice_add, wrt="w", target=target)
    w = np.arange(1.0, 7.0)
    ref = coarsen.differentiate(slice_add, wrt="w", target="python", boundscheck=False)
    np.testing.assert_allclose(g(w, np.ones(3)), ref(w, np.ones(3)))
    with pytest.raises(ValueError):
        g(w, np.ones(2))          # NumPy: operands could not be broadcast together


# ---------------------------------------------------------------------------- python target
def test_aug_write_and_2d_and_while():
    g = coarsen.differentiate(augwrite_elem, wrt="x", target="python")
    x = np.arange(1.0, 5.0)
    g(x, -4)
    _raises_at(g, (x, 4), augwrite_elem, "a[k] += 3.0 * x[0]")
    _raises_at(g, (x, -5), augwrite_elem, "a[k] += 3.0 * x[0]")
    g = coarsen.differentiate(read2d, wrt="A", target="python")
    A = np.ones((2, 3))
    g(A, -2, 2)
    msg = _raises_at(g, (A, 1, 3), read2d, "A[r, c] * A[0, 0]")
    assert "axis 1 of A" in msg
    _raises_at(g, (A, 2, 0), read2d, "A[r, c] * A[0, 0]")
    g = coarsen.differentiate(while_index, wrt="w", target="python")
    np.testing.assert_allclose(g(np.ones(3), 3), np.ones(3))
    _raises_at(g, (np.ones(3), 4), while_index, "s += w[i]")


def test_indices_computed_in_loops_and_helpers():
    g = coarsen.differentiate(gathered, wrt="w", target="python")
    w = np.arange(1.0, 5.0)
    np.testing.assert_allclose(g(w, np.array([0, 2, -5])), [2.0, 4.0, 0.0, 8.0])
    _raises_at(g, (w, np.array([0, 3, 1])), gathered, "s += w[k] * w[k]")
    _raises_at(g, (w, np.array([-6])), gathered, "s += w[k] * w[k]")
    g = coarsen.differentiate(via_helper, wrt="w", target="python")
    np.testing.assert_allclose(g(w, -1), [1.0, 0, 0, 8.0])
    _raises_at(g, (w, 4), _pick, "return v[j] * v[j]")


def test_stencil_hoisted_and_proven():
    u = np.array([1.0, 3.0, 2.0, 5.0, 4.0])
    g = coarsen.differentiate(stencil, target="python")
    ref = coarsen.differentiate(stencil_ok, target="python")
    np.testing.assert_allclose(g(u, 4), ref(u))
    _raises_at(g, (u, 5), stencil, "u[i + 1] - u[i - 1]")
    # range(1, u.shape[0] - 1) proves u[i - 1] and u[i + 1] in range: no check at all
    assert "IndexError" not in ref.source
    # range(1, m): the check runs once, before the loop
    src = g.source
    assert src.count("raise IndexError") == 1
    assert src.index("raise IndexError") < re.search(r"\n +for i in range\(", src).start()


def test_logreg_checks_only_w_once_per_row():
    rng = np.random.default_rng(1)
    g = coarsen.differentiate(logreg, target="python")
    g(rng.normal(size=5), 0.1, rng.normal(size=(3, 5)), rng.random(3))
    src = g.source
    # X[i, j] is proven (the loops run over X's shape); w[j] and y[i] are checked before loops
    assert "axis 1 of X" not in src and "axis 0 of X" not in src
    assert src.count("raise IndexError") == 2
    fwd = src[:src.index("# reverse sweep")]
    inner = fwd[re.search(r"\n +for j in range\(", fwd).start():]
    assert "raise IndexError" not in inner


def test_boundscheck_false_generates_no_checks():
    g = coarsen.differentiate(logreg, target="python", boundscheck=False)
    rng = np.random.default_rng(2)
    g(rng.normal(size=5), 0.1, rng.normal(size=(3, 5)), rng.random(3))
    assert "IndexError" not in g.source
    checked = coarsen.differentiate(logreg, target="python")
    args = (rng.normal(size=5), 0.1, rng.normal(size=(3, 5)), rng.random(3))
    for a, b in zip(g(*args), checked(*args)):
        np.testing.assert_array_equal(a, b)


def test_slices_clip_like_numpy():
    w = np.arange(1.0, 5.0)
    g = coarsen.differentiate(slices, wrt="w", target="python")
    for lo, hi in ((2, 10), (-10, 2), (5, 9), (-2, 100)):
        expect = np.zeros(4)
        expect[lo:hi] = 2 * w[lo:hi]
        np.testing.assert_allclose(g(w, lo, hi), expect)
    g = coarsen.differentiate(slice_set, wrt=("w", "v"), target="python")
    g(w, np.ones(2))
    with pytest.raises(ValueError):
        g(w, np.ones(3))


def test_arrays_reassigned_with_new_shapes():
    x = np.array([1.0, 2.0, 3.0])
    g = coarsen.differentiate(varying, wrt="x", target="python")
    # s = sum_k 4 x[k] x[0]
    np.testing.assert_allclose(g(x), [4 * (x.sum() + x[0]), 4 * x[0], 4 * x[0]])


def test_matmul_shape_mismatch_raises():
    g = coarsen.differentiate(matvec, target="python")
    g(np.ones((2, 3)), np.ones(3))
    with pytest.raises(ValueError):
        g(np.ones((2, 3)), np.ones(4))


def batched_pick(w, x, k):
    return w[k] * x


def test_batched_cpu_raises_for_any_set():
    """Numba drops an exception raised on a worker thread in a prange loop; the batch driver
    re-runs the sets left undone serially, so the IndexError reaches the caller."""
    g = coarsen.differentiate(batched_pick, wrt="w")
    bg = g.batch((None, 0, 0))
    w, x = np.ones(3), np.arange(300.0)
    ks = np.ones(300, np.int64)
    _, dw = bg(w, x, ks)
    np.testing.assert_allclose(dw, [0.0, x.sum(), 0.0])
    for bad in (0, 150, 299):
        ks[bad] = 7
        _raises_at(bg, (w, x, ks), batched_pick, "return w[k] * x")
        ks[bad] = 1


def backwards(w, m):
    s = 0.0
    for i in range(m, 0, -1):
        s += w[i - 1] * w[-i]
    return s


def strided(w, m):
    s = 0.0
    for i in range(0, m, 2):
        s += w[i] * w[i]
    return s


def test_reversed_and_strided_loops():
    w = np.arange(1.0, 6.0)
    g = coarsen.differentiate(backwards, wrt="w", target="python")
    ref = coarsen.differentiate(backwards, wrt="w", target="python", boundscheck=False)
    for m in (0, 1, 5):
        np.testing.assert_allclose(g(w, m), ref(w, m))
    _raises_at(g, (w, 6), backwards, "s += w[i - 1] * w[-i]")
    g = coarsen.differentiate(strided, wrt="w", target="python")
    # range(0, 6, 2) stops at 4: in range for 5 elements (a check of m - 1 would be wrong)
    np.testing.assert_allclose(g(w, 6), [2.0, 0, 6.0, 0, 10.0])
    _raises_at(g, (w, 7), strided, "s += w[i] * w[i]")
