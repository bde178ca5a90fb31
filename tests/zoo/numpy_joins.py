"""Programs of issue 44b (joining, splitting and building arrays, lists passed to NumPy,
``assert``, nested ``def``s) for ``tests/endtoend/test_numpy_joins.py``: in a module of their
own, since pytest rewrites the ``assert`` statements of test modules (coarsen reads the source
and checks that it is the code Python runs).

Each puts many functions on 1-D, 2-D and 3-D inputs into one differentiated function;
``CASES`` holds ``(fn, args_factory, wrt)`` as the zoo's modules do.
"""
import numpy as np

RNG = np.random.default_rng(44)
A1, B1 = RNG.normal(size=5), RNG.normal(size=4)
A2, B2 = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))
T3 = RNG.normal(size=(2, 3, 4))
S = 0.7


# ------------------------------------------------------------------ joining
def joins(a, b, A, B, T):
    c1 = np.concatenate([a, b])                          # 1-D, a list
    c2 = np.concatenate((A, B), axis=1)[:, 2:6] * np.concatenate((A, B), axis=-2)[:3]
    c3 = np.concatenate([A, B], axis=None)               # flattened
    c4 = np.concatenate([T, T * T], axis=-2)             # 3-D, a negative axis
    c5 = np.concatenate((a, a > 0.0))                    # NumPy's dtype: float
    s1 = np.stack([a, 2.0 * a], axis=-1)                 # (5, 2)
    s2 = np.stack((A, B, A * B), axis=1)                 # (3, 3, 4)
    v = np.vstack([a[:4], b]) @ np.row_stack((B, A)).T[:, :2]
    h = np.hstack((a, b)) + np.hstack([A, B])[0, 1]
    cs = np.column_stack([A[:, 0], B, A[:, 1:3]])        # 1-D columns and a 2-D block
    ap = np.append(a, A) + np.append(A, B, axis=0).sum()
    ar = np.array([A, B * 2.0])                           # np.array of arrays: stacked
    return (np.sum(np.sin(c1) * c1) + np.sum(c2) + np.sum(c3 ** 3) + np.sum(np.cos(c4))
            + np.sum(c5 * c5) + np.sum(s1[:, 0] * s1[:, 1]) + np.sum(s2[:, 2] * s2[:, 0])
            + np.sum(v) + np.sum(h ** 2) + np.sum(cs * cs) + np.sum(ap * ap)
            + np.sum(ar[1] * ar[0]) + np.mean([a[0], b[1], 3.0]) * np.mean([A, B]))


# the same program, every variable renamed (the gradient is the same, bit for bit)
def joins_renamed(p, q, P, Q, R):
    c1 = np.concatenate([p, q])
    c2 = np.concatenate((P, Q), axis=1)[:, 2:6] * np.concatenate((P, Q), axis=-2)[:3]
    c3 = np.concatenate([P, Q], axis=None)
    c4 = np.concatenate([R, R * R], axis=-2)
    c5 = np.concatenate((p, p > 0.0))
    s1 = np.stack([p, 2.0 * p], axis=-1)
    s2 = np.stack((P, Q, P * Q), axis=1)
    v = np.vstack([p[:4], q]) @ np.row_stack((Q, P)).T[:, :2]
    h = np.hstack((p, q)) + np.hstack([P, Q])[0, 1]
    cs = np.column_stack([P[:, 0], Q, P[:, 1:3]])
    ap = np.append(p, P) + np.append(P, Q, axis=0).sum()
    ar = np.array([P, Q * 2.0])
    return (np.sum(np.sin(c1) * c1) + np.sum(c2) + np.sum(c3 ** 3) + np.sum(np.cos(c4))
            + np.sum(c5 * c5) + np.sum(s1[:, 0] * s1[:, 1]) + np.sum(s2[:, 2] * s2[:, 0])
            + np.sum(v) + np.sum(h ** 2) + np.sum(cs * cs) + np.sum(ap * ap)
            + np.sum(ar[1] * ar[0]) + np.mean([p[0], q[1], 3.0]) * np.mean([P, Q]))


# ------------------------------------------------------------------ splitting
def splits(a, A, T):
    p, q = np.split(a[:4], 2)                            # sections
    r = np.array_split(a, 3)                             # uneven: 2, 2, 1
    u = np.split(a, [1, -2])                             # indices, one negative
    top, rest = np.vsplit(A, [1])
    left, right = np.hsplit(A, 2)
    h1 = np.hsplit(a[:4], [3])[1]                        # hsplit of 1-D: axis 0
    d0, d1 = np.dsplit(T, [3])                           # 3-D, axis 2
    t0, t1 = np.split(T, 2, axis=-1)
    again = np.concatenate(np.array_split(A, 2, axis=1), axis=1)   # a tuple value passed on
    return (np.sum(p * q) + np.sum(r[0] * r[1]) * np.sum(r[2] ** 2) + np.sum(u[1] ** 3)
            + np.sum(top) * np.sum(rest ** 2) + np.sum(left * right) + np.sum(h1)
            + np.sum(d0 ** 2) * np.sum(d1) + np.sum(t0 * t1) + np.sum(again * A)
            + np.sum(np.split(a[:4], 2)) + u[0][0] + np.sum(np.array(np.split(T, 2, axis=2)) ** 2))


# ------------------------------------------------------------------ building
def building(a, A, T, s):
    r1 = np.repeat(a, 2)
    r2 = np.repeat(A, 3, axis=-1) + np.repeat(A[0], 4)[:12].reshape(1, 12)
    r3 = np.repeat(T, 2, axis=1)
    t1 = np.tile(a, 3)
    t2 = np.tile(A, (2, 1))[:3] * np.tile(A, (2,))[:, 2:6]   # reps shorter than the rank
    t3 = np.tile(A, (2, 1, 2))                           # reps longer: a new axis
    k1 = np.kron(a, a[:3])
    k2 = np.kron(A, A[:2, :3])
    k3 = np.kron(T, T[:1])
    o1 = np.roll(a, 2) * np.roll(a, -7)
    o2 = np.roll(A, 1, axis=-1) + np.roll(A, 5)          # no axis: flattened and back
    o3 = np.roll(T, -1, axis=1)
    f1 = np.flipud(a) * a + np.sum(np.flipud(A) * np.fliplr(A)) + np.fliplr(T)[0, 0, 0]
    q = (np.sum(np.rot90(A) @ A) + np.rot90(A, 2) * A
         + np.sum(np.rot90(A, -1) @ A) * np.rot90(A, 3)[0, 1])
    q3 = np.rot90(T, 1, axes=(1, 2))
    lin = np.linspace(s, 2.0 * s + 1.0, 7) * np.linspace(-s, s, 4, endpoint=False)[1]
    g1 = np.gradient(np.sin(a))
    g2 = np.gradient(A * A, s, axis=-1, edge_order=2)
    g3 = np.gradient(T, 0.25, axis=1)
    return (np.sum(r1 * r1) + np.sum(np.sin(r2)) + np.sum(r3 ** 2) + np.sum(t1 * t1)
            + np.sum(t2) + np.sum(np.cos(t3)) + np.sum(k1 ** 2) + np.sum(k2 * k2)
            + np.sum(np.sin(k3)) + np.sum(o1) + np.sum(o2 * A) + np.sum(o3 * T) + np.sum(f1)
            + np.sum(q) + np.sum(q3 * q3) + np.sum(lin ** 2) + np.sum(g1 * a) + np.sum(g2 * A)
            + np.sum(g3 ** 2))


# ------------------------------------------------------------------ lists, assert, nested def
def _rms(v):
    return np.sqrt(np.mean(v * v))


def lists(x, y, a, A):
    total = sum([x, y, x * y])                           # Python's left-to-right sum
    rows = sum([A, a[:4], 1.5])                          # broadcasting
    c = np.select([A < 0.0, A > 0.5], [A * A, np.sin(A)], y)
    c1 = np.select((a > 0.0,), (a ** 3,))                # default 0
    assert x > -10.0, "x is far too small"
    assert y < 10.0
    scale = 2.0

    def energy(v, k=1.5):                                # closes over A and scale
        t = np.sum(v * A[0]) * scale
        return k * t * t

    acc = 0.0
    for i in range(3):
        acc = acc + energy(A[i]) + _rms(a[i:])
        scale = scale + 0.5                              # the next call sees the new value
    return (total * np.max([x, y]) + np.sum(rows ** 2) + np.sum(c) + np.sum(c1) + acc
            + energy(A[1], 0.5) + np.mean([x, y]))


def nested_scopes(x, c):
    """A nested def inside a nested def, reading a sibling and the outer parameter (lexical
    scope), branches and returns of their own, and an early return of the outer function."""
    def clipped(v):
        if v > 1.0:
            return 1.0 + 0.1 * v
        return v * v

    def twice(v):
        def inner(w):
            return clipped(w) * c
        return inner(v) + inner(2.0 * v)

    if c > 5.0:
        return 0.0
    acc = 0.0
    for i in range(x.shape[0]):
        acc += twice(x[i])
    return acc


# the lists program split across a module-level helper and a nested def: the same gradient
def _helper_energy(v, row, scale, k=1.5):
    t = np.sum(v * row) * scale
    return k * t * t


def lists_split(x, y, a, A):
    def pieces():
        return sum([x, y, x * y]), sum([A, a[:4], 1.5])

    total, rows = pieces()
    c = np.select([A < 0.0, A > 0.5], [A * A, np.sin(A)], y)
    c1 = np.select((a > 0.0,), (a ** 3,))
    scale = 2.0
    acc = 0.0
    for i in range(3):
        acc = acc + _helper_energy(A[i], A[0], scale) + _rms(a[i:])
        scale = scale + 0.5
    return (total * np.max([x, y]) + np.sum(rows ** 2) + np.sum(c) + np.sum(c1) + acc
            + _helper_energy(A[1], A[0], scale, 0.5) + np.mean([x, y]))


# ------------------------------------------------------------------ the cpu target (Numba)
def on_cpu(a, A, T, s):
    parts = np.array_split(a, 2)
    j = np.concatenate([parts[1], parts[0], np.stack((a[0], s))])
    v = np.vstack([A[0], A[1] * s]) + np.hstack([A[:2, :2], A[1:, :2]])
    r = np.repeat(A, 2, axis=0) + np.tile(A, (2, 1))
    k = np.kron(a[:2], A[0])
    o = np.roll(a, 1) * np.flipud(a) + np.roll(T, 1, axis=-1)[1, 2, 3]
    q = np.rot90(A[:, :3]) @ A[:3]
    g = np.gradient(a, s) + np.linspace(s, 1.0, 5)
    assert s > 0.0, "s must be positive"

    def total(x):
        return np.sum(x * x) * s

    return (total(j) + np.sum(np.sin(v)) + np.sum(r * r) + np.sum(k) + np.sum(o)
            + np.sum(q) + total(g) + sum([s, a[0]]) * np.mean([s, a[1]]))


# ------------------------------------------------------------------ refused, and NumPy's errors
def r_sections(x, n):
    return np.sum(np.split(x, n)[0])


def r_tile_reps(x, n):
    return np.sum(np.tile(x, (n, 2)))


def r_roll_shifts(x, n):
    return np.sum(np.roll(x, (1, 2), axis=(0, 0)))


def r_repeat_counts(x, n):
    return np.sum(np.repeat(x, np.ones(3, dtype=np.int64)))


def r_gradient_axes(x, n):
    return np.sum(np.gradient(x)[0])


def r_gradient_coords(x, n):
    return np.sum(np.gradient(x[0], x[1]))


def r_concat_scalars(x, n):
    return np.sum(np.concatenate([x[0, 0], x[0, 1]]))


def r_concat_ranks(x, n):
    return np.sum(np.concatenate([x, x[0]]))


def r_sum_array(x, n):
    return sum(x[0])


def r_assert_message(x, n):
    assert x[0, 0] > 0, x
    return np.sum(x)


def r_def_in_branch(x, n):
    if n > 0:
        def h(v):
            return v * 2.0
        return np.sum(h(x))
    return 0.0


def r_def_as_value(x, n):
    def h(v):
        return v * 2.0
    g = h
    return np.sum(g(x))


def r_def_recursive(x, n):
    def h(v):
        return h(v * 0.5)
    return np.sum(h(x))


def r_concat_dtype(x, n):
    return np.sum(np.concatenate([x, x], dtype=np.float64))


def r_def_called_early(x, n):
    y = h(x)  # noqa: F821 (called before its def: refused)

    def h(v):
        return v * 2.0
    return np.sum(y)


def r_select_condition(x, n):
    return np.sum(np.select([x, x > 0.5], [x * x, x], 0.1))


def hessian_of_joins(x):
    assert x[0] > 0.0, "x[0] must be positive"
    a, b = np.split(x, 2)
    y = np.concatenate([a, np.repeat(b[:1], 2), np.kron(a, b)])
    return (np.sum(y ** 3) + np.sum(np.gradient(x, 0.5) ** 2 * x)
            + np.sum(np.roll(np.tile(x, 2), 1) * np.tile(x, 2)) + np.sum(np.stack([x, x * x]) ** 2))


def e_split_unequal(x):
    return np.sum(np.split(x, 2)[0])


def e_gradient_short(x):
    return np.sum(np.gradient(x[:2], edge_order=2))


def e_concat_shapes(x):
    return np.sum(np.concatenate([x[:2], x[:3]], axis=1))

CASES = [
    (joins, lambda: tuple(a.copy() for a in (A1, B1, A2, B2, T3)), None),
    (splits, lambda: (A1.copy(), A2.copy(), T3.copy()), None),
    (building, lambda: (A1.copy(), A2.copy(), T3.copy(), S), None),
    (lists, lambda: (S, 0.3, A1.copy(), A2.copy()), None),
    (on_cpu, lambda: (A1.copy(), A2.copy(), T3.copy(), S), None),
]
