"""Three constructs of ordinary NumPy code: helpers that return tuples, arrays built from
scalars (``np.array([a, b])``), and ``dtype=`` arguments of constructors.

Each accepted case is checked against the function itself (value) and the extended-precision
finite-difference oracle (``tests.oracle``, gradient) through ``tests.zoo.harness``, on the
python target in both modes and, for a few cases that combine the constructs, on the cpu
target (Numba) too.  Each refused case must raise ``CoarsenError`` at the offending line, before
code is generated.
"""
import math

import numpy as np
import pytest

import coarsen
from coarsen import CoarsenError
from tests.zoo.harness import check_value_and_grad


# ------------------------------------------------------------------ helpers returning tuples
def predator_prey(u, v, alpha, beta):
    return alpha * u - u * v, u * v - beta * v


def population(u0, v0, alpha, beta):
    state = np.array([u0, v0])
    for _ in range(15):
        du, dv = predator_prey(state[0], state[1], alpha, beta)
        state = state + 0.02 * np.array([du, dv])
    return state[0] * state[1]


def residual_pair(r, K, q):
    return r @ K, K @ q, np.sum(r * q)        # arrays and a scalar


def bilinear(r, K, q):
    left, right, c = residual_pair(r, K, q)
    return np.sum(left * right) + math.sin(c)


def ordered(p, q):
    if p < q:
        return p * q, q - p
    return q, p * p                           # early return of tuples in branches


def branchy_pairs(x, y):
    tot = 0.0
    for k in range(4):
        lo, hi = ordered(x + 0.3 * k, y)
        tot = tot + lo * math.exp(-hi)
    return tot


def polar(a, b):
    return math.hypot(a, b), math.atan2(b, a)


def polar_scaled(a, b, s):
    return polar(s * a, s * b)                # a tuple helper returning another's tuple


def rotate_back(a, b, s):
    rad, ang = polar_scaled(a, b, s)
    return rad * math.cos(ang), rad * math.sin(2.0 * ang)


def nested_tuples(x, y):
    c, d = rotate_back(x, y, 1.5)
    return c * d


def swap_scale(p, q, k):
    return q * k, p


def swapping(p, q):
    for _ in range(5):
        p, q = swap_scale(p, q, 1.1)          # both read before either is rebound
    return p - 2.0 * q


def indexed_tuple(x, y):
    pair = predator_prey(x, y, 0.7, 1.3)
    first = pair[0]
    last = pair[-1]
    return first * last + polar(x, y)[1]      # t[k] with a constant, and f(...)[k]


def tuple_unpacked_twice(x, y):
    pair = polar(x, y)
    m, n = pair
    return m * n + pair[1]


def moments(w):
    return np.mean(w), np.sum(w * w)


def discard_and_store(w, x):
    out = np.zeros(2)
    out[0], out[1] = moments(w * x)           # unpacking into element writes
    return out[0] * out[1]


# ------------------------------------------------------------------ arrays built from scalars
def state_vector(a, b, c):
    v = np.array([a, 1, b * c])               # floats and an int: a float array
    return np.sum(v * v) + v[1]


def small_matrix(a, b, c, d, z):
    M = np.array([[a, b], [c, d]])
    w = np.array((z, 2.0 * z))                # a tuple works too
    return np.sum(M @ w) + M[1, 0] * M[0, 1]


def int_literal_indexes(w):
    order = np.array([2, 0, 1])               # ints: an int array, usable as indices
    s = 0.0
    for k in range(3):
        s = s + w[order[k]] * (k + 1)
    return s + order[0]


def rebuild_from_self(a, b):
    a = np.array([a, b * a])                  # the target is one of the elements
    return a[0] * a[1]


def array_copy(x):
    y = np.array(x)                           # a copy: writes do not reach x
    y[0] = 3.0 * y[0]
    return np.sum(x * y)


def asarray_alias(x):
    z = x * 2.0
    y = np.asarray(z)                         # z itself: writes through y are seen by z
    y[1] = y[1] * y[0]
    return np.sum(z * x)


def literal_with_dtype(a, b):
    v = np.array([1, 2, 3], dtype=np.float64)
    v[0] = a
    u = np.array([a, b], dtype=np.float64)
    return np.sum(v * v) * u[1]


# ------------------------------------------------------------------ dtype= arguments
def gram_like(data, s):
    M = data.shape[0]
    G = np.zeros((M, M), dtype=data.dtype)
    for i in range(M):
        for j in range(M):
            G[i, j] = data[i] * data[j] * s
    return np.sum(G * G)


def like_forms(x, c):
    e = np.empty_like(x, dtype=x.dtype)
    f = np.full(x.shape[0], c, dtype=x.dtype)  # the fill value carries the derivative
    g = np.ones(3, dtype=np.float64)
    h = np.full_like(x, c * c, dtype=x.dtype)
    for i in range(x.shape[0]):
        e[i] = x[i] * f[i]
    return np.sum(e * h) + np.sum(g) * c + np.sum(np.array([c, x[0]], dtype=x.dtype))


def int_dtype_from(idx, x):
    counts = np.zeros(3, dtype=idx.dtype)     # an int array, as in NumPy
    for k in range(idx.shape[0]):
        counts[idx[k]] += 1
    return np.sum(counts * x) + counts[0] / 2


def shaped_like(x, idx, M):
    """np.zeros(a.shape) and its kin: a's shape, float64 unless a dtype is given (an int
    array's shape gives a float array; dtype=idx.dtype an int one)."""
    a = np.zeros(x.shape)
    b = np.ones(idx.shape, dtype=np.float64)
    c = np.empty(M.shape, M.dtype)
    k = np.zeros(idx.shape, dtype=idx.dtype)
    for i in range(x.shape[0]):
        a[i] = math.sin(x[i]) * b[idx[i] % 2] + 0.5
        k[i] = idx[i] // 2
    for i in range(M.shape[0]):
        for j in range(M.shape[1]):
            c[i, j] = M[i, j] * a[j] * a[i]
    return np.sum(c * c) + np.sum(a * k) + k[1] / 3


def _r():
    return np.random.default_rng(11)


PY_CASES = [
    (population, lambda: (1.0, 0.5, 1.1, 0.4), None),
    (bilinear, lambda: (_r().uniform(0.5, 1.5, 3), _r().uniform(-1.0, 1.0, (3, 3)),
                        np.array([0.3, -0.8, 1.2])), None),
    (branchy_pairs, lambda: (0.45, 1.3), None),
    (nested_tuples, lambda: (0.8, 0.35), None),
    (swapping, lambda: (0.7, -1.2), None),
    (indexed_tuple, lambda: (0.9, 1.7), None),
    (tuple_unpacked_twice, lambda: (0.6, 1.4), None),
    (discard_and_store, lambda: (np.array([0.5, 1.5, -0.3]), 1.2), None),
    (state_vector, lambda: (0.7, -1.3, 0.4), None),
    (small_matrix, lambda: (0.5, -0.2, 1.1, 0.9, 1.3), None),
    (int_literal_indexes, lambda: (np.array([0.4, -1.1, 2.5]),), None),
    (rebuild_from_self, lambda: (1.3, 0.6), None),
    (array_copy, lambda: (np.array([0.5, -1.5, 2.0]),), None),
    (asarray_alias, lambda: (np.array([0.5, -1.5, 2.0]),), None),
    (literal_with_dtype, lambda: (0.8, -0.6), None),
    (gram_like, lambda: (np.array([0.5, -1.0, 1.5]), 0.7), None),
    (like_forms, lambda: (np.array([0.5, -1.0, 1.5]), 0.7), None),
    (int_dtype_from, lambda: (np.array([0, 2, 2, 1, 2]), np.array([0.5, -1.0, 1.5])), "x"),
    (shaped_like, lambda: (np.array([0.5, -1.0, 1.5]), np.array([3, 0, 5]),
                           np.array([[0.2, -0.4, 1.1], [0.7, 0.3, -0.9]])), ("x", "M")),
]
CPU_CASES = [PY_CASES[0], PY_CASES[1], PY_CASES[17]]   # tuples + np.array, mixed arrays, dtypes
CPU_EXTRA = [(like_forms, PY_CASES[16][1], None), (small_matrix, PY_CASES[9][1], None),
             PY_CASES[18]]


@pytest.mark.parametrize("coarse", [True, False])
@pytest.mark.parametrize("case", PY_CASES, ids=lambda c: c[0].__name__)
def test_python_target(case, coarse):
    fn, factory, wrt = case
    check_value_and_grad(fn, factory, wrt, "python", coarse, f"{fn.__name__}-python-{coarse}")


@pytest.mark.parametrize("coarse", [True, False])
@pytest.mark.parametrize("case", CPU_CASES, ids=lambda c: c[0].__name__)
def test_cpu_target(case, coarse):
    fn, factory, wrt = case
    check_value_and_grad(fn, factory, wrt, "cpu", coarse, f"{fn.__name__}-cpu-{coarse}")


@pytest.mark.parametrize("case", CPU_EXTRA, ids=lambda c: c[0].__name__)
def test_cpu_target_fine(case):
    fn, factory, wrt = case
    check_value_and_grad(fn, factory, wrt, "cpu", False, f"{fn.__name__}-cpu-fine")


def scalar_copies(x, y):
    a = np.array(x)               # a 0-d array: acts as the number
    b = np.copy(y * 2.0)
    return a * b + np.array(3.0)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_copies_of_numbers(target):
    """np.array / np.copy of a number used to emit ``.copy()`` on a float (a crash on both
    targets); they are the number."""
    g = coarsen.differentiate(scalar_copies, target=target)
    value, grad = g.value_and_grad(1.5, 2.0)
    assert value == 9.0 and grad == (4.0, 3.0)


def test_int_dtype_follows_numpy():
    """np.array of ints and dtype=idx.dtype of an int array give int arrays (as NumPy): the
    IR types say so, and the values match NumPy's integer arithmetic."""
    text = coarsen.ir_text(int_dtype_from, np.array([0, 2, 2, 1]), np.array([0.5, -1.0, 1.5]))
    assert "counts: i64[:] = zeros_like(" in text
    text = coarsen.ir_text(int_literal_indexes, np.array([0.4, -1.1, 2.5]))
    assert "order: i64[:] = empty_like(" in text
    text = coarsen.ir_text(shaped_like, *PY_CASES[18][1]())
    assert "a: f64[:] = zeros_like(x, dtype='f64')" in text
    assert "b: f64[:] = ones_like(idx, dtype='f64')" in text
    assert "k: i64[:] = zeros_like(idx, idx, dtype='like')" in text


# ------------------------------------------------------------------ refused, with a location
def returns_helper_tuple(x, y):
    return polar(x, y)


def unpack_too_many(x, y):
    a, b, c = polar(x, y)
    return a + b + c


def lengths_differ(x):
    if x > 0.0:
        return x, x
    return x, x, x


def uses_lengths_differ(x):
    a, b = lengths_differ(x)
    return a + b


def tuple_or_value(x):
    if x > 0.0:
        return x, x
    return x


def uses_tuple_or_value(x):
    a, b = tuple_or_value(x)
    return a * b


def tuple_in_arithmetic(x, y):
    return polar(x, y) * 2.0


def variable_tuple_index(x, y, k):
    t = polar(x, y)
    return t[k]


def tuple_rebound(x, y):
    t = polar(x, y)
    t = polar(y, x)
    return t[0]


def ragged(a, b):
    v = np.array([[a, b], [a]])
    return np.sum(v)


def comprehension(x):
    v = np.array([x * k for k in range(3)])
    return np.sum(v)


def bool_literal(x):
    m = np.array([True, False])
    return x * m[0]


def float32_zeros(x):
    z = np.ones(3, dtype=np.float32)
    return np.sum(z * x)


def float32_cast(x):
    return np.float32(x) * 2.0


def float32_astype(x):
    return np.sum(x.astype(np.float32))


def asarray_dtype(x):
    return np.sum(np.asarray(x, dtype=np.float64))


def plain_list(x):
    v = [x, x]
    return v[0]


REFUSED = [
    (returns_helper_tuple, (0.5, 0.7), "returning a tuple"),
    (unpack_too_many, (0.5, 0.7), "tuple of 2 values, into 3 names"),
    (uses_lengths_differ, (0.5,), "tuples of different lengths"),
    (uses_tuple_or_value, (0.5,), "a tuple on one path and a single value"),
    (tuple_in_arithmetic, (0.5, 0.7), "is a tuple of 2 values, not one value"),
    (variable_tuple_index, (0.5, 0.7, 1), "index it with an integer constant"),
    (tuple_rebound, (0.5, 0.7), "also assigned elsewhere"),
    (ragged, (0.5, 0.7), "ragged"),
    (comprehension, (0.5,), "list comprehensions"),
    (bool_literal, (0.5,), "bool array"),
    (float32_zeros, (0.5,), "float32 is not supported"),
    (float32_cast, (0.5,), "float32 is not supported"),
    (float32_astype, (np.array([0.5, 0.7]),), "float32 is not supported"),
    (asarray_dtype, (np.array([0.5, 0.7]),), "np.asarray(x, dtype=...)"),
    (plain_list, (0.5,), "lists are not supported"),
]


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c[0].__name__)
def test_refused_with_location(case):
    fn, args, words = case
    with pytest.raises(CoarsenError) as info:
        coarsen.differentiate(fn, target="python")(*args)
    msg = str(info.value)
    assert words in msg, msg
    assert __file__.rstrip("c") in msg or "test_constructs.py" in msg, msg
    assert "hint:" in msg, msg
